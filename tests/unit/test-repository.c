/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "agentfab-bus.h"
#include "fs-util.h"
#include "repository.h"
#include "tap.h"
#include "task-spec.h"

static char root[] = "/tmp/test-repository-XXXXXX";

static int run(const char *cmd) {
        char buf[2048];
        snprintf(buf, sizeof(buf), "cd '%s' && %s >/dev/null 2>&1", root, cmd);
        return system(buf);
}

int main(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Caller me = { .uid = getuid(), .gid = getgid() };
        Caller stranger = { .uid = 54321, .gid = 54321 };
        char path[256], *canonical = NULL;

        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (run("git init -q repo && cd repo && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m one && git tag v1 && "
                "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m two") != 0 ||
            run("git init -q empty && mkdir plain && ln -s repo link && git init -q --bare bare.git && "
                "git -C repo push -q ../bare.git HEAD:refs/heads/main") != 0) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }

        snprintf(path, sizeof(path), "%s/repo", root);
        CHECK_ERRNO(repository_check(path, NULL, &me, &canonical, &e), 0, "repository accepted");
        CHECK_STR_EQ(canonical, path, "canonical path returned");
        free(canonical);
        canonical = NULL;
        CHECK_ERRNO(repository_check(path, "v1", &me, NULL, &e), 0, "tag as base");
        /* A revision expression is not a base a spec may give (refused by
         * its syntax before any repository is opened), but the check here
         * resolves whatever it is given: HEAD~1 is the first commit... */
        CHECK(!task_base_is_valid("HEAD~1"), "a revision expression is not a valid base by syntax");
        CHECK_ERRNO(repository_check(path, "HEAD~1", &me, NULL, &e), 0, "revision expression resolved if given: %s",
                    strempty(e.message));
        sd_bus_error_free(&e);
        /* ...and HEAD~2, before the first commit, names none. */
        CHECK(repository_check(path, "HEAD~2", &me, NULL, &e) < 0 && sd_bus_error_has_name(&e, AGENTFAB_ERROR_INVALID_SPEC) &&
              strstr(e.message, "does not name a commit"), "revision expression past the history refused: %s", strempty(e.message));
        sd_bus_error_free(&e);
        CHECK(repository_check(path, "no-such-branch", &me, NULL, &e) < 0 && sd_bus_error_has_name(&e, AGENTFAB_ERROR_INVALID_SPEC) &&
              strstr(e.message, "does not name a commit"), "unknown base refused: %s", e.message);
        sd_bus_error_free(&e);

        /* Symlinks are resolved: what is stored is what was checked. */
        snprintf(path, sizeof(path), "%s/link", root);
        CHECK(repository_check(path, NULL, &me, &canonical, &e) == 0 && strstr(canonical, "/repo") && !strstr(canonical, "link"),
              "symlink resolved to the repository");
        free(canonical);

        snprintf(path, sizeof(path), "%s/bare.git", root);
        CHECK_ERRNO(repository_check(path, "main", &me, NULL, &e), 0, "bare repository accepted");
        sd_bus_error_free(&e);

        snprintf(path, sizeof(path), "%s/empty", root);
        CHECK(repository_check(path, NULL, &me, NULL, &e) < 0 && strstr(e.message, "has no commit yet"), "empty repository refused: %s", e.message);
        sd_bus_error_free(&e);

        snprintf(path, sizeof(path), "%s/plain", root);
        CHECK(repository_check(path, NULL, &me, NULL, &e) < 0 && strstr(e.message, "not a git repository"), "plain directory refused: %s", e.message);
        sd_bus_error_free(&e);

        /* A directory inside a repository is not the repository: no search upwards. */
        run("mkdir repo/sub");
        snprintf(path, sizeof(path), "%s/repo/sub", root);
        CHECK(repository_check(path, NULL, &me, NULL, &e) < 0, "subdirectory of a repository refused");
        sd_bus_error_free(&e);

        snprintf(path, sizeof(path), "%s/missing", root);
        CHECK(repository_check(path, NULL, &me, NULL, &e) < 0 && strstr(e.message, "no such directory"), "missing path refused: %s", e.message);
        sd_bus_error_free(&e);

        CHECK(repository_check("relative/repo", NULL, &me, NULL, &e) < 0 && sd_bus_error_has_name(&e, AGENTFAB_ERROR_INVALID_SPEC),
              "relative path refused");
        sd_bus_error_free(&e);

        snprintf(path, sizeof(path), "%s/repo/.git/HEAD", root);
        CHECK(repository_check(path, NULL, &me, NULL, &e) < 0 && strstr(e.message, "not a directory"), "file refused: %s", e.message);
        sd_bus_error_free(&e);

        /* The caller must be able to read the repository themselves: the
         * daemon's own rights must never let one user read another's code. */
        snprintf(path, sizeof(path), "%s/repo", root);
        chmod(path, 0700);
        if (getuid() == 0 || getuid() != 54321) {
                CHECK(repository_check(path, NULL, &stranger, NULL, &e) < 0 && strstr(e.message, "not readable by the caller"),
                      "repository of mode 0700 refused for another uid: %s", e.message);
                sd_bus_error_free(&e);
        }
        chmod(path, 0755);
        chmod(root, 0700);
        CHECK(repository_check(path, NULL, &stranger, NULL, &e) < 0, "unsearchable parent directory refused for another uid");
        sd_bus_error_free(&e);
        chmod(root, 0755);
        CHECK_ERRNO(repository_check(path, NULL, &stranger, NULL, &e), 0, "world-readable repository accepted for another uid");
        sd_bus_error_free(&e);
        Caller group_member = { .uid = 54321, .gid = 1, .gids = (gid_t[]) { getgid() }, .n_gids = 1 };
        chmod(path, 0750);
        CHECK_ERRNO(repository_check(path, NULL, &group_member, NULL, &e), 0, "group access through a supplementary group");
        sd_bus_error_free(&e);
        chmod(path, 0755);

        /* A malicious hook does not run: we only read. */
        run("printf '#!/bin/sh\\ntouch %s/hook-ran\\n' > repo/.git/hooks/post-checkout && chmod +x repo/.git/hooks/post-checkout");
        CHECK_ERRNO(repository_check(path, NULL, &me, NULL, &e), 0, "repository with hook accepted");
        struct stat st;
        char ran[300];
        snprintf(ran, sizeof(ran), "%s/hook-ran", root);
        CHECK(stat(ran, &st) < 0, "hook did not run");

        rm_rf_at(AT_FDCWD, root);
        return tap_done();
}
