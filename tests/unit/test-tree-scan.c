/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tree walk behind checkpoints (src/git/tree-scan.c): every entry once,
 * no symlink followed, nothing named .git, the caller's choices obeyed, the
 * same answer with and without io_uring, and clear errors at the limits. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "string-util.h"
#include "tap.h"
#include "tree-scan.h"

static char root[] = "/tmp/test-tree-scan-XXXXXX";

typedef struct Seen {
        char *list;             /* "path:kind\n" lines, sorted by the test */
        size_t n;
        FILE *f;
        unsigned dirs_refused;
        unsigned descend_x;     /* entry() descends into "x" this many times */
} Seen;

static int on_dir(TreeScan *scan, TreeScanDir *parent, TreeScanDir *sub, const char *path, void *userdata) {
        Seen *seen = userdata;

        fprintf(seen->f, "%s:dir:%u:%s\n", path, sub->depth, parent->path);
        if (streq(sub->name, "skip")) {
                seen->dirs_refused++;
                return 0;
        }
        return 1;
}

static int on_entry(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path, const struct statx *x,
                    void *userdata) {
        Seen *seen = userdata;

        fprintf(seen->f, "%s:%s\n", path,
                S_ISLNK(x->stx_mode) ? "link" : S_ISFIFO(x->stx_mode) ? "fifo" : S_ISREG(x->stx_mode) ? "file" : "other");
        /* The parent's fd is open: the entry can be read relative to it. */
        if (S_ISREG(x->stx_mode) && faccessat(dir->fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                fprintf(seen->f, "%s:not-reachable\n", path);
        if (seen->descend_x > 0 && streq(name, "x")) {
                seen->descend_x--;
                return tree_scan_descend(scan, dir, name, path);
        }
        return 0;
}

/* Prints s as TAP comments. */
static void diag(const char *s) {
        for (const char *p = s; *p;) {
                size_t n = strcspn(p, "\n");
                printf("# %.*s\n", (int) n, p);
                p += n + (p[n] == '\n');
        }
}

static int sort_lines(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Walks root and returns the sorted lines of what was handed out. */
static char *walk(bool ring, const TreeScanLimits *limits, Seen *seen, int *ret, char **error) {
        static const TreeScanOps ops = { .dir = on_dir, .entry = on_entry };
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        seen->list = NULL;
        seen->n = 0;
        seen->f = open_memstream(&seen->list, &seen->n);
        *ret = tree_scan_run(fd, ring, limits, &ops, seen, error);
        fclose(seen->f);

        char *lines[256];
        size_t n = 0;
        for (char *save = NULL, *l = strtok_r(seen->list, "\n", &save); l && n < ELEMENTSOF(lines);
             l = strtok_r(NULL, "\n", &save))
                lines[n++] = l;
        qsort(lines, n, sizeof(char *), sort_lines);
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s\n", lines[i]);
        fclose(f);
        free(seen->list);
        return out;
}

static void make_tree(void) {
        char cmd[1024];

        (void) snprintf(cmd, sizeof(cmd),
                        "cd '%s' && mkdir -p a/b/c skip/inner .git/objects sub/.GIT empty && "
                        "echo 1 > top && echo 2 > a/one && echo 3 > a/b/two && echo 4 > a/b/c/three && "
                        "echo 5 > skip/inner/hidden && echo 6 > .git/HEAD && echo 7 > sub/.GIT/config && "
                        "echo 8 > sub/eight && ln -s /etc a/etc-link && ln -s a dir-link && mkfifo a/pipe",
                        root);
        if (system(cmd) != 0)
                abort();
}

static const char expected[] =
        "a/b/c/three:file\n"
        "a/b/c:dir:3:a/b/\n"
        "a/b/two:file\n"
        "a/b:dir:2:a/\n"
        "a/etc-link:link\n"
        "a/one:file\n"
        "a/pipe:fifo\n"
        "a:dir:1:\n"
        "dir-link:link\n"
        "empty:dir:1:\n"
        "skip:dir:1:\n"
        "sub/eight:file\n"
        "sub:dir:1:\n"
        "top:file\n";

static void test_walk(void) {
        const TreeScanLimits limits = { .depth_max = 128, .entries_max = 1000, .ring_entries = 4, .ring_workers_max = 2 };

        for (int ring = 1; ring >= 0; ring--) {
                _cleanup_free_ char *error = NULL;
                Seen seen = {};
                int r;
                _cleanup_free_ char *got = walk(ring, &limits, &seen, &r, &error);

                CHECK_ERRNO(r, 0, "%s: the walk succeeds (%d, %s)", ring ? "ring" : "no ring", r, strna(error));
                CHECK_STR_EQ(got, expected, "%s: every entry once, no symlink followed, no .git, skip/ not read",
                             ring ? "ring" : "no ring");
                if (!streq(got, expected))
                        diag(got);
                CHECK_INT_EQ(seen.dirs_refused, 1, "the refused directory was offered once");
        }
}

static void test_limits(void) {
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *got1 = NULL, *got2 = NULL;
        TreeScanLimits limits = { .depth_max = 2, .entries_max = 1000, .ring_entries = 8 };
        Seen seen = {};
        int r;

        got1 = walk(true, &limits, &seen, &r, &e1);
        CHECK(r == -ELOOP && e1 && strstr(e1, "'a/b/c' is nested too deeply"), "depth: %d %s", r, strna(e1));

        limits = (TreeScanLimits) { .depth_max = 128, .entries_max = 5, .ring_entries = 8 };
        got2 = walk(true, &limits, &seen, &r, &e2);
        CHECK(r == -E2BIG && e2 && strstr(e2, "more than 5 files"), "entries: %d %s", r, strna(e2));
}

/* A file the caller finds to be a directory after all goes through dir(). */
static void test_descend(void) {
        const TreeScanLimits limits = { .depth_max = 128, .entries_max = 1000, .ring_entries = 8 };
        _cleanup_free_ char *error = NULL, *got = NULL;
        char cmd[512];
        Seen seen = { .descend_x = 1 };
        int r;

        (void) snprintf(cmd, sizeof(cmd), "cd '%s' && rm -rf ./* .git && echo > x", root);
        CHECK_INT_EQ(system(cmd), 0, "a tree with one file");
        got = walk(false, &limits, &seen, &r, &error);
        /* x is a file, so opening it as a directory fails: it comes back
         * as an entry of its parent. */
        CHECK_ERRNO(r, 0, "the walk succeeds (%d %s)", r, strna(error));
        CHECK_STR_EQ(got, "x:dir:1:\nx:file\nx:file\n", "x: a file, a directory, a file again");
        diag(strna(got));
}

int main(void) {
        if (!mkdtemp(root))
                return 1;
        make_tree();
        test_walk();
        test_limits();
        test_descend();

        char cmd[256];
        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        (void) system(cmd);
        return tap_done();
}
