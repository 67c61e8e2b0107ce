/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The workspace's tree in the system prompt (workspace_tree()): breadth
 * first, a level's directories before its files, each directory with the
 * files below it, so that a crowded directory or a dot-directory sorted
 * first cannot push another directory out of the prompt; what the budget
 * leaves out is counted. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "string-util.h"
#include "tap.h"
#include "tools.h"

static char root[] = "/tmp/test-tools-tree-XXXXXX";
static int ws_fd = -1;

static void put(const char *path, const char *text) {
        char p[4096];
        (void) snprintf(p, sizeof(p), "mkdir -p \"$(dirname '%s/%s')\" && printf '%%s' '%s' > '%s/%s'", root, path, text,
                        root, path);
        if (system(p) != 0)
                abort();
}

static bool has(const char *s, const char *needle) {
        return s && strstr(s, needle);
}

int main(void) {
        char *t = NULL;

        if (!mkdtemp(root))
                return 1;
        ws_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        /* A crowded dot-directory and a crowded test directory sort before src/. */
        for (int i = 0; i < 400; i++) {
                char p[64];
                (void) snprintf(p, sizeof(p), ".github/workflows/w%03d.yml", i);
                put(p, "on: push\n");
                (void) snprintf(p, sizeof(p), "a-tests/t%03d.py", i);
                put(p, "pass\n");
        }
        put("src/app/main.py", "print(1)\n");
        put("src/app/util.py", "x = 1\n");
        put("src/lib/deep/er/est.py", "y = 2\n");
        put("README.md", "# x\n");
        put("node_modules/left-pad/index.js", "x\n");

        CHECK(workspace_tree(ws_fd, 40, &t) == 0, "a tree of 40 entries");
        printf("%s", t);
        CHECK(has(t, "src/ (3 files)\n") && has(t, "  app/ (2 files)\n") && has(t, "  lib/ (1 file)\n"),
              "src/ and its directories are shown with their counts, crowded neighbours notwithstanding");
        CHECK(has(t, "a-tests/ (400 files)\n") && has(t, ".github/ (400 files)\n"),
              "a crowded directory is shown with its count");
        CHECK(has(t, "node_modules/ (not shown)\n"), "build output is named, not walked");
        CHECK(has(t, "... ") && has(t, " more\n"), "what the budget leaves out of a directory is counted");
        CHECK(has(t, "[... 23 of 813 entries shown"), "and the cut is said: %s", strrchr(t, '[') ?: "-");
        CHECK(strstr(t, "README.md\n") != NULL, "the top's files are there");
        const char *src = strstr(t, "src/"), *gh = strstr(t, ".github/");
        CHECK(src && gh && src < gh, "dot-entries come after the others");
        free(t);

        CHECK(workspace_tree(ws_fd, 1000, &t) == 0 && has(t, "        est.py\n") && has(t, "  t099.py\n") &&
              !has(t, "  t100.py\n"), "with room, four levels down, and a hundred files of a crowded directory");
        free(t);

        close(ws_fd);
        (void) rm_rf_at(AT_FDCWD, root);
        return tap_done();
}
