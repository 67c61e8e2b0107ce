/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Change detection of checkpoints (src/git/ledger-stage.c): the stat index
 * decides what is read, so every way a file can change without its content
 * being read again is a way to lose work. */
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger-internal.h"
#include "ledger.h"
#include "string-util.h"
#include "tap.h"
#include "trace.h"

static char root[] = "/tmp/test-ledger-stage-XXXXXX";
static unsigned step = 1;

static int run(const char *fmt, ...) _printf_(1, 2);
static int run(const char *fmt, ...) {
        char cmd[4096], buf[4300];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) >/dev/null 2>&1", root, cmd);
        return system(buf);
}

static char *capture(const char *fmt, ...) _printf_(1, 2);
static char *capture(const char *fmt, ...) {
        char cmd[4096], buf[4300];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) 2>/dev/null", root, cmd);

        FILE *f = popen(buf, "r");
        if (!f)
                return strdup("");
        char *out = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&out, &n);
        char chunk[4096];
        size_t k;
        while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, k, m);
        pclose(f);
        fclose(m);
        while (n > 0 && out[n - 1] == '\n')
                out[--n] = '\0';
        return out;
}

#define GIT "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "
#define TIP "GIT_OPTIONAL_LOCKS=0 git --git-dir=task/ledger.git "

/* What the branch's tip holds at path: "mode type content" (a tree lists
 * its entries' names). */
static char *at_tip(const char *path) {
        return capture(TIP "ls-tree agentfab/t -- '%s' | awk '{print $1, $2}' | tr '\\n' ' '; "
                       TIP "cat-file -p 'agentfab/t:%s' | awk '{print $NF}' | tr '\\n' ' '", path, path);
}

/* A workspace file, written directly (as the sandbox would). */
static int ws_write(const char *name, const char *text) {
        char path[4096];
        (void) snprintf(path, sizeof(path), "%s/task/workspace/%s", root, name);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        return write(fd, text, strlen(text)) == (ssize_t) strlen(text) ? 0 : -EIO;
}

static int ws_set_mtime(const char *name, const struct timespec *t) {
        char path[4096];
        struct timespec ts[2] = { *t, *t };
        (void) snprintf(path, sizeof(path), "%s/task/workspace/%s", root, name);
        return utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int ws_stat(const char *name, struct stat *st) {
        char path[4096];
        (void) snprintf(path, sizeof(path), "%s/task/workspace/%s", root, name);
        return lstat(path, st) < 0 ? -errno : 0;
}

/* Counts the reads of each file; optionally changes files while one is read. */
typedef struct Hook {
        char paths[32][128];
        unsigned counts[32];
        size_t n;
        const char *on;         /* while this path is read ... */
        unsigned times;         /* ... (this many times) ... */
        void (*action)(void);   /* ... do this */
} Hook;

static Hook hook;

static void hook_cb(const char *path, void *userdata) {
        Hook *h = userdata;
        size_t i;

        for (i = 0; i < h->n; i++)
                if (streq(h->paths[i], path))
                        break;
        if (i == h->n && h->n < ELEMENTSOF(h->paths)) {
                (void) snprintf(h->paths[h->n], sizeof(h->paths[0]), "%s", path);
                h->counts[h->n++] = 0;
        }
        if (i < ELEMENTSOF(h->paths))
                h->counts[i]++;
        if (h->on && streq(h->on, path) && h->times > 0 && h->action) {
                h->times--;
                h->action();
        }
}

static unsigned reads(const char *path) {
        for (size_t i = 0; i < hook.n; i++)
                if (streq(hook.paths[i], path))
                        return hook.counts[i];
        return 0;
}

static unsigned reads_total(void) {
        unsigned n = 0;
        for (size_t i = 0; i < hook.n; i++)
                n += hook.counts[i];
        return n;
}

static void hook_reset(void) {
        hook = (Hook) {};
}

/* 1: committed, 0: nothing changed, negative: refused (error in *ret_error). */
static int checkpoint(Ledger *l, char **ret_error) {
        char commit[41];
        Checkpoint c = { .task_id = "t", .step = step++, .subject = "step", .tests = "not-run" };
        free(*ret_error);
        *ret_error = NULL;
        return ledger_checkpoint(l, &c, commit, ret_error);
}

/* The change list since base equals the one libgit2's walk of the
 * workspace gives (what every step used before the stat index). */
static bool same_as_walk(Ledger *l) {
        FileChange *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        bool same;

        if (ledger_changes(l, NULL, &a, &na) < 0 || ledger_changes_walk(l, NULL, &b, &nb) < 0)
                return false;
        same = na == nb;
        for (size_t i = 0; same && i < na; i++) {
                size_t j;
                for (j = 0; j < nb; j++)
                        if (streq(a[i].path, b[j].path))
                                break;
                same = j < nb && a[i].status == b[j].status && a[i].added == b[j].added &&
                       a[i].removed == b[j].removed && streq_ptr(a[i].old_path, b[j].old_path);
                if (!same)
                        printf("# differs: %c %s +%u -%u\n", a[i].status, a[i].path, a[i].added, a[i].removed);
        }
        file_changes_free(a, na);
        file_changes_free(b, nb);
        return same;
}

static bool has_change(const FileChange *c, size_t n, const char *path, char status) {
        for (size_t i = 0; i < n; i++)
                if (streq(c[i].path, path) && c[i].status == status)
                        return true;
        return false;
}

/* Lets the coarse clock move on, so that what was written before is older
 * than the next stage (else it counts as racy and is read again, which is
 * right but makes read counts vary). */
static void settle(void) {
        (void) usleep(30 * 1000);
}

static void rewrite_bx(void) {
        (void) ws_write("b.txt/x", "b changed while the scan ran\n");
}

static unsigned k = 0;

static void rewrite_a(void) {
        char text[64];
        (void) snprintf(text, sizeof(text), "a moving %u\n", ++k);
        (void) ws_write("a.txt", text);
}

/* The task's ledger (task/) from the repository in src/. */
static int make_ledger(int *ret_task, Ledger **ret) {
        _cleanup_free_ char *error = NULL;
        char path[4096];
        int r;

        (void) snprintf(path, sizeof(path), "%s/task", root);
        (void) mkdir(path, 0755);
        *ret_task = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/src", root);
        LedgerOptions o = { .max_bytes = 1024 * 1024 };
        r = ledger_create(*ret_task, path, -EBADF, NULL, "agentfab/t", &o, &error, ret);
        CHECK_ERRNO(r, 0, "ledger made: %s", strempty(error));
        return r;
}

static void run_tests(bool ring) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int task = -EBADF;
        FileChange *changes = NULL;
        size_t n = 0;
        char *error = NULL, *s;
        struct stat st;
        int r;

        printf("# statx %s\n", ring ? "through io_uring" : "one call at a time");
        ledger_set_io_uring(ring);
        ledger_set_stage_hook(hook_cb, &hook);
        step = 1;
        k = 0;

        (void) run("rm -rf task src");
        CHECK_INT_EQ(run(GIT "init -q src && cd src && mkdir -p d/e && echo one > a.txt && echo two > b.txt && "
                         "echo three > d/e/c.txt && echo four > d/f.txt && echo link > l.txt && "
                         "printf 'build/\\n*.o\\n' > .gitignore && " GIT "add . && " GIT "commit -q -m base"), 0,
                     "source repository");
        r = make_ledger(&task, &l);
        if (r < 0)
                return;

        /* The first stage after a checkout reads at most everything once;
         * the next reads nothing. */
        settle();
        hook_reset();
        CHECK_ERRNO(checkpoint(l, &error), 0, "fresh workspace: nothing to commit");
        CHECK(reads_total() <= 6, "first stage hashed %u of the 6 files", reads_total());
        hook_reset();
        CHECK(checkpoint(l, &error) == 0 && reads_total() == 0, "second stage read nothing (%u)", reads_total());

        /* Racy: a file changed within the same second as the last scan,
         * same size, its mtime put back to what it was. ctime (which no one
         * sets back) and the racy rule catch it. */
        CHECK_ERRNO(ws_stat("a.txt", &st), 0, "stat a.txt");
        CHECK(ws_write("a.txt", "ONE\n") == 0 && ws_set_mtime("a.txt", &st.st_mtim) == 0, "a.txt changed, same size and mtime");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        s = at_tip("a.txt");
        CHECK_STR_EQ(s, "100644 blob ONE ", "the new content is in the commit: %s", s);
        free(s);
        CHECK(same_as_walk(l), "changes since base as libgit2's walk has them (a modification)");

        /* An mtime in the future: every stage reads the file again until its
         * stat data is older than a stage. */
        struct timespec future = { .tv_sec = time(NULL) + 3600 };
        CHECK_ERRNO(ws_set_mtime("b.txt", &future), 0, "b.txt dated an hour ahead");
        hook_reset();
        CHECK(checkpoint(l, &error) == 0 && reads("b.txt") == 1, "read once (%u), content unchanged", reads("b.txt"));
        CHECK(checkpoint(l, &error) == 0 && reads("b.txt") == 2, "racy: read again (%u)", reads("b.txt"));
        struct timespec past = { .tv_sec = time(NULL) - 3600 };
        CHECK_ERRNO(ws_set_mtime("b.txt", &past), 0, "b.txt dated an hour back");
        settle();
        CHECK(checkpoint(l, &error) == 0 && reads("b.txt") == 3, "read after its stat data moved (%u)", reads("b.txt"));
        CHECK(checkpoint(l, &error) == 0 && reads("b.txt") == 3, "then trusted (%u)", reads("b.txt"));

        /* A file replaced by a symlink, by a directory, by a FIFO. */
        CHECK_INT_EQ(run("cd task/workspace && rm a.txt && ln -s d/f.txt a.txt"), 0, "a.txt now a symlink");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        s = at_tip("a.txt");
        CHECK_STR_EQ(s, "120000 blob d/f.txt ", "recorded as a link, not followed: %s", s);
        free(s);
        CHECK(same_as_walk(l), "changes since base as libgit2's walk has them (a type change)");
        CHECK_INT_EQ(run("cd task/workspace && rm b.txt && mkdir b.txt && echo inner > b.txt/x"), 0, "b.txt now a directory");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        s = at_tip("b.txt/x");
        CHECK_STR_EQ(s, "100644 blob inner ", "its file recorded: %s", s);
        free(s);
        s = capture(TIP "ls-tree agentfab/t b.txt | awk '{print $2}'");
        CHECK_STR_EQ(s, "tree", "b.txt is a tree now: %s", s);
        free(s);
        CHECK(same_as_walk(l), "changes since base as libgit2's walk has them (a file became a directory)");
        CHECK_INT_EQ(run("cd task/workspace && rm l.txt && mkfifo l.txt"), 0, "l.txt now a FIFO");
        char **special = NULL;
        CHECK(ledger_take_left_out(l, &special) == 0 && !special, "no special file met yet");
        alarm(20);
        r = checkpoint(l, &error);
        alarm(0);
        CHECK_ERRNO(r, 1, "committed, the FIFO left out: %d %s", r, strempty(error));
        s = at_tip("l.txt");
        CHECK_STR_EQ(s, "", "l.txt gone from the tree: '%s'", s);
        free(s);
        CHECK(ledger_take_left_out(l, &special) == 1 && special && streq(special[0], "l.txt") && !special[1],
              "the FIFO is named");
        strv_free(special);
        CHECK_ERRNO(ledger_changes(l, NULL, &changes, &n), 0, "changes listed next to the FIFO");
        file_changes_free(changes, n);
        CHECK(same_as_walk(l), "changes since base as libgit2's walk has them (a file became a FIFO)");
        special = NULL;
        CHECK(ledger_take_left_out(l, &special) == 0 && !special, "named once");
        CHECK_INT_EQ(run("cd task/workspace && rm l.txt && echo link > l.txt"), 0, "FIFO gone");
        CHECK_ERRNO(checkpoint(l, &error), 1, "the file again: %s", strempty(error));

        /* Names NTFS takes for .git: git refuses them, they stay out. */
        CHECK_INT_EQ(run("cd task/workspace && echo x > '.GIT. .' && mkdir -p d/git~1 && echo y > d/git~1/config && "
                         "echo z > '.git:x' && echo w > .gitx && echo v > GIT~2"), 0, "names git refuses");
        r = checkpoint(l, &error);
        CHECK_ERRNO(r, 1, "committed beside them: %d %s", r, strempty(error));
        s = capture(TIP "ls-tree -r --name-only agentfab/t | grep -i git | tr '\\n' ' '");
        CHECK_STR_EQ(s, ".gitignore .gitx GIT~2 ", "only the names git takes: '%s'", s);
        free(s);
        special = NULL;
        size_t n_special = ledger_take_left_out(l, &special);
        _cleanup_free_ char *names = special ? strv_join(special, ",") : NULL;
        CHECK(n_special == 3 && names && strlen(names) == strlen(".GIT. .,.git:x,d/git~1") && strstr(names, ".GIT. .") &&
              strstr(names, ".git:x") && strstr(names, "d/git~1"), "named: %zu %s", n_special, strempty(names));
        strv_free(special);
        CHECK(ledger_changes(l, NULL, &changes, &n) == 0 && !has_change(changes, n, "d/git~1/config", 'A'),
              "not among the changes either");
        file_changes_free(changes, n);
        CHECK_INT_EQ(run("cd task/workspace && rm -r '.GIT. .' d/git~1 '.git:x' .gitx GIT~2"), 0, "removed again");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));

        /* A path no reset could write again (longer than PATH_MAX) stays
         * out; what is above it is recorded, and restored by a reset. */
        {
                char level[251], path[PATH_MAX];
                bool made = true;
                memset(level, '0', 250);
                level[250] = '\0';
                (void) snprintf(path, sizeof(path), "%s/task/workspace", root);
                int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                for (int i = 0; made && i <= 20; i++) {
                        const char *name = i == 0 ? "long" : level;
                        made = mkdirat(fd, name, 0755) == 0;
                        int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        safe_close(fd);
                        fd = sub;
                        made = made && fd >= 0 && (i != 10 || write_file_atomic(fd, "mid", "mid\n", 4, 0644) >= 0);
                }
                made = made && write_file_atomic(fd, "f", "deep\n", 5, 0644) >= 0;
                safe_close(fd);
                CHECK(made, "a path of 5,000 bytes");
        }
        char long_tip[41];
        r = checkpoint(l, &error);
        CHECK(r == 1 && ledger_head(l, long_tip) == 0, "committed beside it: %d %s", r, strempty(error));
        s = capture(TIP "ls-tree -r --name-only agentfab/t -- long | awk '{ print length($0) }' | tr '\\n' ' '");
        CHECK_STR_EQ(s, "2518 ", "only the file above the bound recorded: %s", s);
        free(s);
        special = NULL;
        n_special = ledger_take_left_out(l, &special);
        CHECK(n_special == 1 && special && strlen(special[0]) >= PATH_MAX - 1 && strlen(special[0]) < PATH_MAX + 256,
              "the first directory past the bound named (%zu)", special && special[0] ? strlen(special[0]) : 0);
        strv_free(special);
        CHECK_INT_EQ(run("rm -rf task/workspace/long/0*"), 0, "the tree lost");
        alarm(30);
        r = ledger_reset(l, long_tip);
        alarm(0);
        CHECK_ERRNO(r, 0, "reset to it: %d", r);
        s = capture("find task/workspace/long -name mid | wc -l");
        CHECK_STR_EQ(s, "1", "restored: %s", s);
        free(s);
        CHECK_INT_EQ(run("rm -rf task/workspace/long"), 0, "removed");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));

        /* Deeper than a scan goes: left out from there, not a failure. */
        CHECK_INT_EQ(run("cd task/workspace && mkdir -p deep && cd deep && for i in $(seq 140); do mkdir d && cd d || exit 1; "
                         "[ $i = 100 ] && echo mid > mid; done; echo bottom > f"), 0, "a tree 141 directories deep");
        r = checkpoint(l, &error);
        CHECK_ERRNO(r, 1, "committed beside it: %d %s", r, strempty(error));
        s = capture(TIP "ls-tree -r --name-only agentfab/t -- deep | tr '/' '\\n' | grep -c .");
        CHECK_STR_EQ(s, "102", "the file 101 directories down recorded, the bottom not (%s components)", s);
        free(s);
        special = NULL;
        n_special = ledger_take_left_out(l, &special);
        CHECK_INT_EQ(n_special, 1, "the first directory past the bound named (%zu)", n_special);
        strv_free(special);
        char deep_tip[41];
        CHECK(ledger_head(l, deep_tip) == 0 && run("echo changed > task/workspace/a.txt") == 0, "a change after it");
        alarm(30);
        r = ledger_reset(l, deep_tip);
        alarm(0);
        CHECK_ERRNO(r, 0, "reset to it, the deep part still there: %d", r);
        s = capture("(cat task/workspace/a.txt; find task/workspace/deep -name mid | wc -l) | tr '\\n' ' '");
        CHECK(s && !strstr(s, "changed") && strstr(s, " 1 "), "restored: %s", s);
        free(s);
        CHECK_INT_EQ(run("rm -rf task/workspace/deep"), 0, "removed");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));

        /* A directory replaced by a file. */
        CHECK_INT_EQ(run("cd task/workspace && rm -r d/e && echo flat > d/e"), 0, "d/e now a file");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        s = at_tip("d/e");
        CHECK_STR_EQ(s, "100644 blob flat ", "recorded as a file: %s", s);
        free(s);

        /* Mode only. */
        CHECK_INT_EQ(run("chmod +x task/workspace/d/f.txt"), 0, "d/f.txt made executable");
        settle();
        hook_reset();
        CHECK_ERRNO(ledger_changes(l, NULL, &changes, &n), 0, "changes listed");
        CHECK(has_change(changes, n, "d/f.txt", 'M'), "mode change listed");
        file_changes_free(changes, n);
        CHECK(checkpoint(l, &error) == 1 && reads("d/f.txt") == 1, "committed, the file read once: %s", strempty(error));
        s = at_tip("d/f.txt");
        CHECK_STR_EQ(s, "100755 blob four ", "mode recorded: %s", s);
        free(s);
        CHECK(same_as_walk(l), "changes since base as libgit2's walk has them (mode)");
        CHECK(run("chmod -x task/workspace/d/f.txt") == 0 && checkpoint(l, &error) == 1, "and back");

        /* Deleted, then recreated: with the same content in one step (nothing
         * to commit), and over two steps. */
        CHECK_INT_EQ(run("cd task/workspace && rm d/f.txt && echo four > d/f.txt"), 0, "d/f.txt deleted and recreated");
        CHECK_ERRNO(checkpoint(l, &error), 0, "same content: nothing to commit: %s", strempty(error));
        CHECK(run("rm task/workspace/d/f.txt") == 0 && checkpoint(l, &error) == 1, "deleted: committed");
        s = capture(TIP "ls-tree -r agentfab/t --name-only | grep -c f.txt");
        CHECK_STR_EQ(s, "0", "gone from the tip");
        free(s);
        CHECK(same_as_walk(l), "changes since base as libgit2's walk has them (a deletion)");
        CHECK(ws_write("d/f.txt", "four\n") == 0 && checkpoint(l, &error) == 1, "recreated: committed");
        s = at_tip("d/f.txt");
        CHECK_STR_EQ(s, "100644 blob four ", "back: %s", s);
        free(s);
        /* Recreated with other content of the same size, same mtime. */
        CHECK(ws_stat("d/f.txt", &st) == 0 && run("rm task/workspace/d/f.txt") == 0 && ws_write("d/f.txt", "FOUR\n") == 0 &&
              ws_set_mtime("d/f.txt", &st.st_mtim) == 0, "recreated, same size and mtime");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed");
        s = at_tip("d/f.txt");
        CHECK_STR_EQ(s, "100644 blob FOUR ", "the new content: %s", s);
        free(s);

        /* Ignored files stay out, tracked ones that are ignored do not. */
        CHECK_INT_EQ(run("cd task/workspace && mkdir build && echo o > build/x.o && echo o > y.o"), 0, "ignored files");
        CHECK_ERRNO(checkpoint(l, &error), 0, "nothing to commit: %s", strempty(error));

        /* A file changed while the scan reads another: the commit holds a
         * whole version of it, the next step the rest. */
        hook_reset();
        hook.on = "c.txt";
        hook.times = 1;
        hook.action = rewrite_bx;
        CHECK_ERRNO(ws_write("c.txt", "new file\n"), 0, "c.txt added");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        s = at_tip("b.txt/x");
        CHECK(streq(s, "100644 blob inner ") || streq(s, "100644 blob ran "), "b.txt/x committed whole, old or new: %s", s);
        free(s);
        hook_reset();
        r = checkpoint(l, &error);
        s = at_tip("b.txt/x");
        CHECK(r >= 0 && streq(s, "100644 blob ran "), "the next step holds the version written during the scan: %d %s", r, s);
        free(s);

        /* A file that changes while it is read: read again; while it keeps
         * changing, the commit keeps its last whole version, and the next
         * step records it. */
        hook_reset();
        hook.action = rewrite_a;
        hook.on = "a.txt";
        CHECK(run("cd task/workspace && rm a.txt") == 0 && ws_write("a.txt", "a still\n") == 0, "a.txt a file again");
        hook.times = 1;
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        s = at_tip("a.txt");
        CHECK_STR_EQ(s, "100644 blob 1 ", "changed once while read: read again, the later version whole: %s", s);
        free(s);
        CHECK_INT_EQ(reads("a.txt"), 2, "read twice (%u)", reads("a.txt"));
        hook_reset();
        hook.on = "a.txt";
        hook.times = 100;
        hook.action = rewrite_a;
        CHECK_ERRNO(ws_write("a.txt", "a settled\n"), 0, "a.txt changed again");
        r = checkpoint(l, &error);
        s = at_tip("a.txt");
        CHECK(r == 0 && streq(s, "100644 blob 1 "), "always changing while read: the last whole version stays: %d %s", r, s);
        free(s);
        hook_reset();
        CHECK_ERRNO(checkpoint(l, &error), 1, "next step: committed: %s", strempty(error));
        s = at_tip("a.txt");
        CHECK(strstr(s, "100644 blob ") && !strstr(s, "settled"), "it holds what the file has now: %s", s);
        free(s);

        /* Tracking: only what the caller reports is looked at. */
        ledger_track_changes(l, true);
        hook_reset();
        CHECK_ERRNO(checkpoint(l, &error), 0, "tracking on: first stage scans: %s", strempty(error));
        CHECK_ERRNO(ws_write("d/f.txt", "tool wrote this\n"), 0, "a file tool writes d/f.txt");
        ledger_note_path(l, "./d//f.txt");
        hook_reset();
        CHECK(ledger_changes(l, NULL, &changes, &n) == 0 && has_change(changes, n, "d/f.txt", 'M'), "listed as changed");
        file_changes_free(changes, n);
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        CHECK(reads_total() == 1 && reads("d/f.txt") == 1, "only it was read, once for list and commit (%u)", reads_total());
        s = at_tip("d/f.txt");
        CHECK_STR_EQ(s, "100644 blob this ", "recorded: %s", s);
        free(s);
        CHECK(run("mkdir -p task/workspace/new/deep") == 0 && ws_write("new/deep/g.txt", "x\n") == 0 && ws_write("build/z.o", "ignored\n") == 0, "new files, one ignored");
        ledger_note_path(l, "new/deep/g.txt");
        ledger_note_path(l, "build/z.o");
        hook_reset();
        CHECK(checkpoint(l, &error) == 1 && reads_total() == 1, "the new file committed, the ignored one not read (%u)",
              reads_total());
        s = at_tip("new/deep/g.txt");
        CHECK_STR_EQ(s, "100644 blob x ", "recorded: %s", s);
        free(s);
        CHECK(same_as_walk(l), "changes since base as libgit2's walk has them (new files)");
        CHECK_INT_EQ(run("cd task/workspace && mv new/deep/g.txt new/g2.txt && cp d/f.txt d/f2.txt && printf 'a\\nb\\nc\\nd\\n' >> d/f2.txt"), 0,
                     "a rename and a copy");
        ledger_note_all(l);
        CHECK(checkpoint(l, &error) == 1 && same_as_walk(l), "changes since base as libgit2's walk has them (rename)");
        s = capture(TIP "ls-tree -r agentfab/t --name-only | grep -c z.o");
        CHECK_STR_EQ(s, "0", "ignored file stayed out");
        free(s);
        /* A reported path through a symlink: a scan finds what was written. */
        CHECK_INT_EQ(run("cd task/workspace && ln -s new linkdir && echo via > new/v.txt"), 0, "written through a link");
        ledger_note_path(l, "linkdir/v.txt");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed: %s", strempty(error));
        s = at_tip("new/v.txt");
        CHECK_STR_EQ(s, "100644 blob via ", "found by the scan: %s", s);
        free(s);
        /* Nothing reported: nothing looked at, even if something changed. */
        CHECK_ERRNO(ws_write("c.txt", "unreported\n"), 0, "c.txt changed behind the ledger's back");
        hook_reset();
        CHECK(checkpoint(l, &error) == 0 && reads_total() == 0, "nothing reported: nothing read, nothing committed");
        ledger_note_all(l);
        CHECK(checkpoint(l, &error) == 1 && reads("c.txt") == 1, "a command ran: the scan finds it (%u)", reads("c.txt"));

        /* The breakers' counts since base equal git's. */
        CHECK_ERRNO(ledger_changes(l, NULL, &changes, &n), 0, "changes since base");
        unsigned added = 0, removed = 0;
        for (size_t i = 0; i < n; i++)
                added += changes[i].added, removed += changes[i].removed;
        s = capture(TIP "diff --numstat $(" TIP "rev-parse refs/agentfab/base) agentfab/t | awk '{a+=$1; r+=$2; n++} END {print n, a, r}'");
        char expect[64];
        (void) snprintf(expect, sizeof(expect), "%zu %u %u", n, added, removed);
        CHECK_STR_EQ(s, expect, "files, lines added and removed: ours %s, git %s", expect, s);
        free(s);
        file_changes_free(changes, n);

        /* Trees made from the last tree and the edits are what git makes of
         * the index: the index is written when the ledger goes. */
        l = ledger_free(l);
        s = capture(TIP "fsck --strict --no-dangling 2>&1 && " TIP "write-tree && " TIP "rev-parse 'agentfab/t^{tree}'");
        char *nl = strchr(s, '\n');
        if (nl)
                *nl = '\0';
        CHECK(nl && streq(s, nl + 1), "fsck clean, the index's tree is the tip's: %s", s);
        free(s);

        free(error);
        ledger_set_stage_hook(NULL, NULL);
}

/* Whether the last reset went by the stat index (its walk was traced). */
static bool reset_walked(void) {
        TracePhase p[TRACE_PHASES_MAX];
        size_t n = trace_take(p);

        for (size_t i = 0; i < n; i++)
                if (streq(p[i].name, "reset_walk"))
                        return true;
        return false;
}

/* Resets by the stat index (src/git/ledger-reset.c): whatever the sandbox
 * did, the workspace is the checkpoint again, exactly; nothing is written
 * through a link; what still stands as it should is not written; and the
 * stat index is right afterwards. */
static void run_reset_tests(void) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int task = -EBADF;
        char path[4096], c1[41], *error = NULL, *s;
        struct stat before, after;
        int r;

        printf("# resets\n");
        trace_set_enabled(true);
        ledger_set_stage_hook(hook_cb, &hook);
        step = 1;
        (void) run("rm -rf task src outside");
        CHECK(run(GIT "init -q src && cd src && mkdir -p d/e && echo one > a.txt && echo two > b.txt && "
                  "echo three > d/e/c.txt && echo four > d/f.txt && ln -s a.txt l && printf '#!/bin/sh\\n' > x.sh && "
                  "chmod +x x.sh && printf 'build/\\n*.o\\n' > .gitignore && " GIT "add . && " GIT "commit -q -m base") == 0 &&
              run("mkdir outside && echo SECRET > outside/c.txt") == 0,
              "source repository");
        r = make_ledger(&task, &l);
        if (r < 0)
                return;
        ledger_track_changes(l, true);
        CHECK(ws_write("a.txt", "one, then\n") == 0 && ws_write("n.txt", "new\n") == 0, "a step's work");
        ledger_note_all(l);
        CHECK(checkpoint(l, &error) == 1 && ledger_head(l, c1) == 0, "checkpoint 1: %s", strempty(error));

        /* A half-done step of every kind. */
        CHECK_INT_EQ(run("cd task/workspace && echo half > a.txt && rm b.txt && echo u > u.txt && mkdir -p build newdir && "
                         "echo o > build/out.o && echo o > d/x.o && echo f > newdir/f && chmod -x x.sh && mkfifo d/.git && "
                         "mkdir -p .GIT/objects && rm d/f.txt && mkfifo d/f.txt && rm -r d/e && ln -s ../../../outside d/e && "
                         "rm l && echo file > l"), 0,
                     "a half-done step: edits, deletions, untracked and ignored files, a mode, .git entries, a FIFO, links");
        (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
        alarm(20);
        r = ledger_reset(l, c1);
        alarm(0);
        CHECK_ERRNO(r, 0, "reset to checkpoint 1: %d", r);
        CHECK(reset_walked(), "by the stat index");
        s = capture(TIP "--work-tree=task/workspace status --porcelain --ignored --untracked-files=all");
        CHECK_STR_EQ(s, "", "the workspace is the checkpoint exactly, nothing untracked or ignored: '%s'", s);
        free(s);
        s = capture("cat outside/c.txt; ls outside | wc -l; readlink task/workspace/l; test -x task/workspace/x.sh && echo x; "
                    "cat task/workspace/a.txt task/workspace/d/e/c.txt task/workspace/d/f.txt; "
                    "ls -A task/workspace task/workspace/d | tr '\\n' ' '");
        CHECK_STR_EQ(s, "SECRET\n1\na.txt\nx\none, then\nthree\nfour\n"
                              "task/workspace: .gitignore a.txt b.txt d l n.txt x.sh  task/workspace/d: e f.txt ",
                     "nothing written through the link; links, modes, contents back; no .git");
        if (!streq(s, "SECRET\n1\na.txt\nx\none, then\nthree\nfour\n"
                      "task/workspace: .gitignore a.txt b.txt d l n.txt x.sh  task/workspace/d: e f.txt "))
                for (char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                        printf("# %.*s\n", (int) strcspn(p, "\n"), p);
        free(s);
        CHECK(ledger_head(l, path) == 0 && streq(path, c1), "the tip is checkpoint 1");

        /* The stat index is right, and the reset's walk watched the tree:
         * the next stage reads only what the reset wrote (racy), without
         * a scan, then nothing. */
        settle();
        hook_reset();
        ledger_note_all(l);
        CHECK_ERRNO(checkpoint(l, &error), 0, "nothing to commit after the reset: %s", strempty(error));
        CHECK_STR_EQ(ledger_last_stage_kind(l), "watch", "no scan after the reset (%s)", ledger_last_stage_kind(l));
        CHECK(reads_total() <= 10, "the first stage after it hashed %u files, what the reset wrote", reads_total());
        hook_reset();
        ledger_note_all(l);
        CHECK(checkpoint(l, &error) == 0 && reads_total() == 0, "the next hashed nothing (%u)", reads_total());
        CHECK(same_as_walk(l), "changes since base as libgit2's walk finds them");

        /* Nothing changed: nothing written. */
        CHECK_ERRNO(ws_stat("a.txt", &before), 0, "a.txt before");
        (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
        CHECK(ledger_reset(l, c1) == 0 && reset_walked(), "reset with nothing changed");
        CHECK(ws_stat("a.txt", &after) == 0 && after.st_ino == before.st_ino &&
              after.st_ctim.tv_nsec == before.st_ctim.tv_nsec && after.st_ctim.tv_sec == before.st_ctim.tv_sec,
              "a file that stood as it should was not written");

        /* A change that keeps size and mtime is still seen (by its ctime). */
        struct timespec mtime = after.st_mtim;
        CHECK(ws_write("a.txt", "ONE, THEN\n") == 0 && ws_set_mtime("a.txt", &mtime) == 0, "same size, mtime set back");
        CHECK_ERRNO(ledger_reset(l, c1), 0, "reset over it");
        s = capture("cat task/workspace/a.txt");
        CHECK_STR_EQ(s, "one, then", "restored: %s", s);
        free(s);
        /* A command right after a reset: what it changed is recorded. */
        CHECK_INT_EQ(run("cd task/workspace && echo after > a.txt && mkdir -p z && echo z > z/z.txt && rm b.txt"), 0,
                     "a command after the reset");
        hook_reset();
        ledger_note_all(l);
        CHECK(checkpoint(l, &error) == 1 && streq(ledger_last_stage_kind(l), "watch"), "recorded from the watch (%s): %s",
              ledger_last_stage_kind(l), strempty(error));
        s = capture(TIP "ls-tree -r --name-only agentfab/t | tr '\\n' ' '; " TIP "cat-file -p agentfab/t:a.txt");
        CHECK_STR_EQ(s, ".gitignore a.txt d/e/c.txt d/f.txt l n.txt x.sh z/z.txt after", "the branch has it: %s", s);
        free(s);
        CHECK_ERRNO(ledger_reset(l, c1), 0, "reset to checkpoint 1 again");

        /* Back to base: the step's files go, the deleted come back. */
        char base[41];
        CHECK(ledger_base(l, base) == 0 && ledger_reset(l, base) == 0, "reset to base");
        s = capture("ls task/workspace | tr '\\n' ' '; cat task/workspace/a.txt; " TIP
                    "--work-tree=task/workspace status --porcelain --ignored --untracked-files=all");
        CHECK_STR_EQ(s, "a.txt b.txt d l x.sh one", "base again: %s", s);
        free(s);

        l = ledger_free(l);
        free(error);
        ledger_set_stage_hook(NULL, NULL);
        trace_set_enabled(false);
}

/* The step after a command, from the watch (tree-watch.c): what the stage
 * records is what a scan would (git status is clean against the tip, the
 * change list is libgit2's walk's), while only what changed is looked at;
 * what the watch cannot say exactly makes the stage scan. */
static bool ws_clean(void) {
        char *s = capture("rm -f tmp-index && GIT_INDEX_FILE=$PWD/tmp-index " TIP "--work-tree=task/workspace add -A . && "
                          "test \"$(GIT_INDEX_FILE=$PWD/tmp-index " TIP "write-tree)\" = \"$(" TIP "rev-parse 'agentfab/t^{tree}')\" || "
                          "GIT_INDEX_FILE=$PWD/tmp-index " TIP "--work-tree=task/workspace diff --cached --name-status agentfab/t");
        bool clean = streq(s, "");
        if (!clean)
                printf("# not recorded: %s\n", s);
        free(s);
        return clean;
}

static int step_after(Ledger *l, const char *command, char **error) {
        if (command && run("cd task/workspace && %s", command) != 0)
                return -EIO;
        settle();
        hook_reset();
        ledger_note_all(l);
        return checkpoint(l, error);
}

static void run_watch_tests(void) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int task = -EBADF;
        char *error = NULL, *s;
        int r;

        printf("# the watch\n");
        ledger_set_io_uring(true);
        ledger_set_stage_hook(hook_cb, &hook);
        step = 1;
        (void) run("rm -rf task src");
        CHECK_INT_EQ(run(GIT "init -q src && cd src && mkdir -p d/e m && echo one > a.txt && echo two > b.txt && "
                         "echo three > d/e/c.txt && echo four > d/f.txt && echo five > m/g.txt && "
                         "printf 'build/\\n*.o\\n' > .gitignore && " GIT "add . && " GIT "commit -q -m base"), 0,
                     "source repository");
        r = make_ledger(&task, &l);
        if (r < 0)
                return;
        ledger_track_changes(l, true);
        CHECK(step_after(l, NULL, &error) == 0 && streq(ledger_last_stage_kind(l), "scan"), "the first stage scans (%s)",
              ledger_last_stage_kind(l));

        CHECK(step_after(l, "true", &error) == 0 && streq(ledger_last_stage_kind(l), "watch") && reads_total() == 0,
              "a command that touched nothing: nothing looked at (%s, %u)", ledger_last_stage_kind(l), reads_total());

        r = step_after(l, "echo 3 > d/e/c.txt && echo new > d/n.txt && rm b.txt && chmod +x d/f.txt && "
                          "rm a.txt && ln -s d a.txt && mv m/g.txt m/h.txt && mv d/n.txt m/n.txt", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch"), "edits, a new file, a deletion, a mode, a link, renames: "
              "from the watch (%d %s %s)", r, ledger_last_stage_kind(l), strempty(error));
        CHECK(ws_clean() && same_as_walk(l), "recorded as a scan would");
        CHECK(reads("d/e/c.txt") == 1 && reads("m/n.txt") == 1 && reads("m/h.txt") == 1 && reads("a.txt") == 1 &&
              reads("d/f.txt") <= 1 && reads_total() <= 5, "only they were read (%u)", reads_total());

        struct stat st;
        CHECK_ERRNO(ws_stat("d/e/c.txt", &st), 0, "c.txt");
        struct timespec mtime = st.st_mtim;
        CHECK(ws_write("d/e/c.txt", "X\n") == 0 && ws_set_mtime("d/e/c.txt", &mtime) == 0, "same size, mtime set back");
        CHECK(step_after(l, NULL, &error) == 1 && reads("d/e/c.txt") == 1, "seen: the watch does not go by stat data");
        s = at_tip("d/e/c.txt");
        CHECK_STR_EQ(s, "100644 blob X ", "recorded: %s", s);
        free(s);

        r = step_after(l, "mkdir -p build/deep && echo o > build/deep/x && echo o > d/y.o", &error);
        CHECK(r == 0 && streq(ledger_last_stage_kind(l), "watch") && reads_total() == 0,
              "an ignored directory made and an ignored file: nothing recorded, nothing read (%d %s %u)", r,
              ledger_last_stage_kind(l), reads_total());

        r = step_after(l, "rm -r d/e", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch") && ws_clean(), "a directory removed: from the watch (%s)",
              ledger_last_stage_kind(l));
        s = capture(TIP "ls-tree -r --name-only agentfab/t | grep -c '^d/e/'");
        CHECK_STR_EQ(s, "0", "nothing of it is left on the branch (%s)", s);
        free(s);

        r = step_after(l, "mkdir -p p/q && echo p > p/q/r.txt", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch") && ws_clean() && reads_total() == 1,
              "a new directory: read alone (%s, %u)", ledger_last_stage_kind(l), reads_total());
        r = step_after(l, "echo pp > p/q/r.txt", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch") && reads_total() == 1, "watched since (%s %u)",
              ledger_last_stage_kind(l), reads_total());

        r = step_after(l, "mv p p2", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch") && ws_clean() && same_as_walk(l),
              "a directory renamed: from the watch (%s)", ledger_last_stage_kind(l));
        r = step_after(l, "echo moved > p2/q/r.txt", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch") && reads("p2/q/r.txt") == 1 && ws_clean(),
              "below it, watched at its new path (%s)", ledger_last_stage_kind(l));

        r = step_after(l, "mv p2 build/p3 && mkdir -p p2/q && echo again > p2/q/r.txt && echo new > p2/s.txt", &error);
        CHECK(r == 1 && ws_clean() && same_as_walk(l), "renamed into an ignored directory, made anew where it was (%s)",
              ledger_last_stage_kind(l));
        r = step_after(l, "echo ignored > build/p3/q/r.txt && echo more > p2/q/r.txt", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch") && ws_clean() && reads_total() == 1,
              "what moved away is not recorded, what stands at its path is (%s, %u)", ledger_last_stage_kind(l),
              reads_total());
        r = step_after(l, "mkdir -p d/k/l && echo k > d/k/l/m.txt && mkdir build/b2 && echo b > build/b2/x", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "watch") && ws_clean(), "nested new directories (%s)",
              ledger_last_stage_kind(l));

        r = step_after(l, "rm -r m && echo file > m", &error);
        CHECK(r == 1 && ws_clean() && same_as_walk(l), "a directory replaced by a file (%s)", ledger_last_stage_kind(l));
        r = step_after(l, "rm m && mkdir m && echo in > m/i.txt", &error);
        CHECK(r == 1 && ws_clean() && same_as_walk(l), "a file replaced by a directory (%s)", ledger_last_stage_kind(l));

        r = step_after(l, "printf '*.o\\n' > .gitignore", &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "scan") && ws_clean(), ".gitignore changed: a scan (%s)",
              ledger_last_stage_kind(l));
        s = at_tip("build/deep/x");
        CHECK_STR_EQ(s, "100644 blob o ", "what it no longer ignores is recorded: %s", s);
        free(s);

        /* Changes between a step's change list and its checkpoint wait for
         * the next command: both record the same tree. */
        FileChange *changes = NULL;
        size_t n = 0;
        CHECK_INT_EQ(run("cd task/workspace && echo again > a2.txt"), 0, "a command ran");
        ledger_note_all(l);
        CHECK(ledger_changes(l, NULL, &changes, &n) == 0 && has_change(changes, n, "a2.txt", 'A'), "listed");
        file_changes_free(changes, n);
        CHECK_ERRNO(ws_write("late.txt", "late\n"), 0, "written after the list");
        CHECK_ERRNO(checkpoint(l, &error), 1, "committed");
        s = at_tip("late.txt");
        CHECK_STR_EQ(s, "", "not in this step: %s", s);
        free(s);
        CHECK(step_after(l, NULL, &error) == 1 && streq(ledger_last_stage_kind(l), "watch") && ws_clean(),
              "in the next (%s)", ledger_last_stage_kind(l));

        /* More events than the kernel queues: a scan. */
        unsigned max_queued = 16384;
        s = capture("cat /proc/sys/fs/inotify/max_queued_events");
        (void) sscanf(s, "%u", &max_queued);
        free(s);
        /* Two files written in turns: the kernel merges only identical
         * events in a row, so each write is one. */
        char p1[4096], p2[4096];
        (void) snprintf(p1, sizeof(p1), "%s/task/workspace/w1.txt", root);
        (void) snprintf(p2, sizeof(p2), "%s/task/workspace/w2.txt", root);
        _cleanup_close_ int f1 = open(p1, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        _cleanup_close_ int f2 = open(p2, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        unsigned writes = 0;
        for (unsigned i = 0; f1 >= 0 && f2 >= 0 && i < max_queued / 2 + 100; i++)
                writes += (write(f1, "x", 1) == 1) + (write(f2, "y", 1) == 1);
        hook_reset();
        ledger_note_all(l);
        r = checkpoint(l, &error);
        CHECK(r == 1 && streq(ledger_last_stage_kind(l), "scan") && ws_clean(),
              "%u writes in turns: the queue overflowed, a scan (%s)", writes, ledger_last_stage_kind(l));
        CHECK(step_after(l, "echo m > w1.txt", &error) == 1 && streq(ledger_last_stage_kind(l), "watch"),
              "watched again after it (%s)", ledger_last_stage_kind(l));

        ledger_note_rescan(l);
        CHECK_ERRNO(step_after(l, NULL, &error), 0, "nothing changed");
        hook_reset();
        ledger_note_rescan(l);
        CHECK(checkpoint(l, &error) == 0 && streq(ledger_last_stage_kind(l), "scan"), "a rescan asked for: a scan (%s)",
              ledger_last_stage_kind(l));

        /* Without the watch (the benchmarks' baseline): scans. */
        ledger_set_watch(false);
        ledger_track_changes(l, true);
        CHECK(step_after(l, NULL, &error) == 0 && step_after(l, "echo w > a3.txt", &error) == 1 &&
              streq(ledger_last_stage_kind(l), "scan") && ws_clean(), "without the watch: a scan (%s)",
              ledger_last_stage_kind(l));
        ledger_set_watch(true);

        l = ledger_free(l);
        free(error);
        ledger_set_stage_hook(NULL, NULL);
}

/* Permissions a command took away from the workspace's owner (the daemon,
 * on disk): chmod 000 of a file, of a directory, a directory that can be
 * read but not searched or changed. A checkpoint records them all the
 * same, a reset goes over them, and the workspace can be removed. Run
 * without the DAC capabilities, as the daemon runs (as root the kernel
 * would not refuse anything). */
static void run_owner_access_tests(bool ring) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int task = -EBADF;
        char *error = NULL, *s, c1[41];
        int r;

        printf("# owner permissions taken away (%s)\n", ring ? "io_uring" : "no ring");
        ledger_set_io_uring(ring);
        step = 1;
        (void) run("chmod -R u+rwx task 2>/dev/null; rm -rf task src");
        CHECK_INT_EQ(run(GIT "init -q src && cd src && mkdir -p d/e && echo one > a.txt && echo two > d/b.txt && "
                         "echo three > d/e/c.txt && " GIT "add . && " GIT "commit -q -m base"), 0, "source repository");
        r = make_ledger(&task, &l);
        if (r < 0)
                return;
        ledger_track_changes(l, true);
        CHECK_ERRNO(step_after(l, NULL, &error), 0, "the first stage: %s", strempty(error));
        CHECK(step_after(l, "echo new > a.txt && echo new > d/b.txt", &error) == 1 && ledger_head(l, c1) == 0,
              "checkpoint 1: %s", strempty(error));

        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct caps[2] = {};
        bool dropped = syscall(SYS_capget, &h, caps) == 0;
        if (dropped) {
                caps[0].effective = caps[1].effective = 0;
                dropped = syscall(SYS_capset, &h, caps) == 0;
        }
        if (!dropped && geteuid() != 0)
                SKIP("no DAC capabilities from here on: capset() refused, not root anyway");
        else
                CHECK(dropped, "no DAC capabilities from here on");

        const char *cmds[] = {
                "echo locked > locked && chmod 000 locked",
                "mkdir closed && echo x > closed/f && mkdir closed/in && echo y > closed/in/g && chmod 000 closed/in closed",
                "echo z > d/e/z && chmod 500 d/e && chmod 000 a.txt",
                "chmod 700 d/e && echo w > d/e/w && chmod 100 d/e && chmod 000 .",
        };
        for (size_t i = 0; i < ELEMENTSOF(cmds); i++) {
                r = step_after(l, cmds[i], &error);
                CHECK_ERRNO(r, 1, "committed after '%s': %d %s", cmds[i], r, strempty(error));
                (void) run("chmod u+rwx task/workspace");       /* for the shell's cd */
        }
        s = capture(TIP "ls-tree -r --name-only agentfab/t | tr '\\n' ' '; " TIP "cat-file -p agentfab/t:closed/in/g");
        CHECK_STR_EQ(s, "a.txt closed/f closed/in/g d/b.txt d/e/c.txt d/e/w d/e/z locked y", "everything recorded: %s", s);
        free(s);

        /* Taken away again, then a reset over it. */
        CHECK_INT_EQ(run("cd task/workspace && chmod 000 closed/in closed locked && chmod 500 d && chmod 500 ."), 0,
                     "permissions taken away again");
        alarm(30);
        r = ledger_reset(l, c1);
        alarm(0);
        CHECK_ERRNO(r, 0, "reset over them: %d", r);
        (void) run("chmod u+rwx task/workspace");
        s = capture("cd task/workspace && ls -A | tr '\\n' ' '; cat a.txt d/b.txt | tr '\\n' ' '");
        CHECK_STR_EQ(s, "a.txt d new new ", "checkpoint 1 again: %s", s);
        free(s);
        l = ledger_free(l);

        /* Removed whole, as a task's workspace is at its end. */
        CHECK_INT_EQ(run("cd task/workspace && mkdir -p q/r && echo q > q/r/f && chmod 000 q/r q && chmod 500 d"), 0,
                     "unreadable directories again");
        CHECK_ERRNO(rm_rf_at(task, "workspace"), 0, "the workspace removed");
        CHECK(faccessat(task, "workspace", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "nothing left");

        if (dropped) {
                caps[0].effective = caps[0].permitted;
                caps[1].effective = caps[1].permitted;
                (void) syscall(SYS_capset, &h, caps);
        }
        free(error);
}

int main(void) {
        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (system("git --version >/dev/null 2>&1") != 0) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }
        run_tests(true);
        run_tests(false);
        run_reset_tests();
        run_watch_tests();
        run_owner_access_tests(true);
        run_owner_access_tests(false);
        (void) run("rm -rf '%s'", root);
        return tap_done();
}
