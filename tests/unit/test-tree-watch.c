/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What changed below a walked tree, from inotify (src/git/tree-watch.c):
 * every changed path once and sorted, directories the walk did not read
 * not watched, and "stale" whenever the events cannot name it all. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "string-util.h"
#include "tap.h"
#include "tree-scan.h"
#include "tree-watch.h"

static char root[] = "/tmp/test-tree-watch-XXXXXX";

static int sh(const char *cmd) {
        char buf[4096];
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) >/dev/null 2>&1", root, cmd);
        return system(buf);
}

static int on_dir(TreeScan *scan, TreeScanDir *parent, TreeScanDir *sub, const char *path, void *userdata) {
        return !streq(sub->name, "ignored");
}

static int on_entry(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path, const struct statx *x,
                    void *userdata) {
        return 0;
}

static int on_opened(TreeScan *scan, TreeScanDir *dir, void *userdata) {
        return tree_watch_add(userdata, dir->fd, dir->path);
}

static int walk(TreeWatch *w, int fd) {
        static const TreeScanOps ops = { .dir = on_dir, .entry = on_entry, .dir_opened = on_opened };
        static const TreeScanLimits limits = { .depth_max = 16, .entries_max = 1000, .ring_entries = 8 };

        tree_watch_walk_begin(w);
        int r = tree_scan_run(fd, true, &limits, &ops, w, NULL);
        if (r >= 0)
                tree_watch_walk_done(w);
        return r;
}

/* The changes as one line, "a b c", or "stale". */
static char *changes(TreeWatch *w) {
        char **paths = NULL, *line = NULL;
        size_t n = 0, len = 0;

        if (tree_watch_changes(w, &paths, &n) < 0)
                return strdup("stale");
        FILE *f = open_memstream(&line, &len);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i ? " " : "", paths[i]);
        fclose(f);
        strv_free(paths);
        return line;
}

#define EXPECT(w, want, what)                                                     \
        do {                                                                      \
                char *_got = changes(w);                                          \
                CHECK_STR_EQ(_got, want, "%s: '%s' (want '%s')", what, _got, want); \
                free(_got);                                                       \
        } while (0)

int main(void) {
        _cleanup_(tree_watch_freep) TreeWatch *w = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (!mkdtemp(root))
                return 1;
        CHECK_INT_EQ(sh("mkdir -p t/a/b t/c t/ignored && echo 1 > t/a/b/f && echo 2 > t/c/g && echo 3 > t/h"), 0, "a tree");
        char top[4096];
        (void) snprintf(top, sizeof(top), "%s/t", root);
        fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(tree_watch_new(&w) == 0 && fd >= 0, "a watch");
        if (!w)
                return tap_done();
        CHECK(!tree_watch_complete(w), "incomplete before a walk");
        EXPECT(w, "stale", "no walk yet");
        CHECK(walk(w, fd) == 0 && tree_watch_complete(w), "walked");
        CHECK_INT_EQ(tree_watch_size(w), 4, "the top, a, a/b and c watched, not ignored/ (%zu)", tree_watch_size(w));
        EXPECT(w, "", "nothing changed");

        CHECK_INT_EQ(sh("cd t && echo x >> a/b/f && echo y > new && rm h && chmod +x c/g && mv c/g c/g2 && "
                        "echo z > ignored/z && mkdir d && rmdir d"), 0, "changes");
        EXPECT(w, "a/b/f c/g c/g2 d h new", "each path once, sorted; nothing from ignored/");
        EXPECT(w, "", "read once");

        CHECK_INT_EQ(sh("cd t && rm -r a/b"), 0, "a directory removed");
        EXPECT(w, "a/b a/b/f", "the directory and what was in it");
        CHECK_INT_EQ(tree_watch_size(w), 3, "its watch went with it (%zu)", tree_watch_size(w));

        CHECK_INT_EQ(sh("cd t && mkdir c/sub && echo s > c/sub/s"), 0, "a directory made");
        EXPECT(w, "c/sub", "named once: what is in it is the caller's to walk");
        CHECK_INT_EQ(sh("cd t && mv c c2"), 0, "a directory renamed");
        EXPECT(w, "c c2", "the old path and the new");
        CHECK(tree_watch_complete(w), "still complete: the caller walks the new path");
        CHECK_INT_EQ(sh("cd t && echo 4 > c2/g2"), 0, "written below it before the walk");
        EXPECT(w, "c/g2", "named by the old path, which is gone");
        CHECK(walk(w, fd) == 0 && tree_watch_complete(w), "walked again");
        CHECK_INT_EQ(sh("cd t && echo 5 > c2/g2"), 0, "written below it after");
        EXPECT(w, "c2/g2", "named by its new path");

        CHECK(sh("cd t && mv ignored watched") == 0 && walk(w, fd) == 0 && tree_watch_size(w) == 5,
              "a directory the walk reads now is watched (%zu)", tree_watch_size(w));
        CHECK_INT_EQ(sh("cd t && mv watched ignored"), 0, "and not any more");
        EXPECT(w, "ignored watched", "renamed");
        CHECK(walk(w, fd) == 0 && tree_watch_size(w) == 4, "the walk drops its watch (%zu)", tree_watch_size(w));
        CHECK_INT_EQ(sh("cd t && echo 5 > ignored/z"), 0, "written in it");
        EXPECT(w, "", "not seen");

        tree_watch_invalidate(w);
        EXPECT(w, "stale", "invalidated");
        CHECK_ERRNO(walk(w, fd), 0, "walked again");
        /* The ledger holds the top open (and the sandbox has it as a mount
         * point): it goes only with what is in it. */
        CHECK_INT_EQ(sh("rm -r t"), 0, "the top removed while open");
        EXPECT(w, "a c2 c2/g2 c2/sub c2/sub/s ignored new", "all that was in it");


        char cmd[4200];
        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        (void) system(cmd);
        return tap_done();
}
