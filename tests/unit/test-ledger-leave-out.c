/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a checkpoint leaves out (src/git/ledger-leave-out.c): the branch
 * carries the change, not what the build and the tests left in the
 * workspace. Build output by name, new binaries by content, and whatever
 * the test command wrote (by the inode's change time) stay in the
 * workspace and out of the tree, each named with its reason; what the
 * agent wrote, or keeps on purpose, goes in. Both ways of finding changes
 * are checked: a full scan, and the watch that follows a command. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger.h"
#include "string-util.h"
#include "tap.h"

static char root[] = "/tmp/test-ledger-leave-out-XXXXXX";
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

#define GIT "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "
#define TIP "GIT_OPTIONAL_LOCKS=0 git --git-dir=task/ledger.git "

/* Whether the branch's tip has path. */
static bool at_tip(const char *path) {
        return run(TIP "cat-file -e 'agentfab/t:%s'", path) == 0;
}

/* What the tip holds at path, its first line. */
static bool tip_says(const char *path, const char *text) {
        return run(TIP "cat-file -p 'agentfab/t:%s' | head -1 | grep -qxF '%s'", path, text) == 0;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000U;
}

static int checkpoint(Ledger *l, char ***ret_left_out, size_t *ret_n) {
        _cleanup_free_ char *error = NULL;
        char commit[41];
        Checkpoint c = { .task_id = "t", .step = step++, .subject = "step", .tests = "not-run" };
        int r;

        r = ledger_checkpoint(l, &c, commit, &error);
        if (r < 0)
                printf("# checkpoint: %s\n", strempty(error));
        *ret_n = ledger_take_left_out(l, ret_left_out);
        return r;
}

static bool strneq_prefix(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_leave_out(bool watch) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_free_ char *error = NULL;
        _cleanup_close_ int task = -EBADF;
        _cleanup_strv_free_ char **left = NULL;
        char path[4096];
        size_t n = 0;
        int r;

        printf("# changes found by %s\n", watch ? "the watch after a command" : "a scan");
        ledger_set_watch(watch);
        step = 1;
        (void) run("rm -rf src task");
        CHECK_INT_EQ(run("mkdir src && cd src && " GIT "init -q && printf 'int main(void) { return 1; }\\n' > main.c && "
                         "printf 'snapshot 1\\n' > snap.txt && mkdir -p dist && echo tracked > dist/README && "
                         GIT "add . && " GIT "commit -q -m base"), 0, "a repository without a .gitignore");

        (void) snprintf(path, sizeof(path), "%s/task", root);
        (void) mkdir(path, 0755);
        task = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/src", root);
        r = ledger_create(task, path, -EBADF, NULL, "agentfab/t", &(LedgerOptions) { .max_bytes = 16 * 1024 * 1024 },
                          &error, &l);
        CHECK_ERRNO(r, 0, "ledger made: %s", strempty(error));
        if (r < 0)
                return;
        ledger_track_changes(l, true);
        CHECK(checkpoint(l, &left, &n) >= 0, "a first stage starts the watch");
        strv_free(left);
        left = NULL;

        /* The agent's change, through its tools. */
        CHECK_INT_EQ(run("printf 'int main(void) { return 0; }\\n' > task/workspace/main.c"), 0, "the agent fixes main.c");
        ledger_note_path(l, "main.c");

        /* Then the test command: a build in the tree, its bytecode, its
         * modules, a report it writes, and a snapshot it rewrites. */
        usleep(20 * 1000);
        uint64_t start = now_usec();
        usleep(20 * 1000);
        CHECK_INT_EQ(run("cd task/workspace && cp /bin/true prog && mkdir -p __pycache__ lib && "
                         "printf '\\xa7\\x0d\\x0d\\x0a0123456789abcdef' > __pycache__/m.cpython-311.pyc && "
                         "mkdir -p node_modules/left-pad && echo 'module.exports=1' > node_modules/left-pad/index.js && "
                         "echo 'report: 3 passed' > report.txt && printf 'snapshot 2\\n' > snap.txt && "
                         "echo 'new dist file' > dist/extra.txt && "
                         "mkdir -p build && echo obj > build/out.txt"), 0, "the tests leave their output");
        usleep(20 * 1000);
        uint64_t end = now_usec();
        usleep(20 * 1000);
        ledger_note_all(l);

        /* Later the agent's own command writes a file, outside the window. */
        CHECK_INT_EQ(run("echo 'generated by the agent' > task/workspace/notes.txt && "
                         "cp /bin/true task/workspace/tool.bin"), 0, "the agent's own command writes after the tests");
        ledger_note_all(l);

        char *patterns[] = { (char *) "__pycache__/", (char *) "node_modules/", (char *) "build/",
                             (char *) "dist/", (char *) "*.pyc", NULL };
        uint64_t windows[2] = { start, end };
        LedgerLeaveOut o = { .patterns = patterns, .binaries = true, .windows = windows, .n_windows = 1 };
        CHECK_ERRNO(ledger_set_leave_out(l, &o), 0, "the leave-out rules set");

        r = checkpoint(l, &left, &n);
        CHECK_ERRNO(r, 1, "a checkpoint: %d", r);
        CHECK(at_tip("main.c") && tip_says("main.c", "int main(void) { return 0; }"), "the agent's change is committed");
        CHECK(!at_tip("prog"), "the binary the tests built is not");
        CHECK(!at_tip("__pycache__") && !at_tip("node_modules"), "nor bytecode or installed modules");
        CHECK(!at_tip("report.txt"), "nor the report the tests wrote");
        CHECK(tip_says("snap.txt", "snapshot 1"), "a tracked file the tests rewrote keeps the tree's version");
        CHECK(!at_tip("build") && !at_tip("dist/extra.txt"), "build output the tests made goes nowhere");
        CHECK(at_tip("dist/README"), "what the base tracks in an output directory stays tracked");
        CHECK(at_tip("notes.txt"), "a text file the agent's own command wrote is committed");
        CHECK(!at_tip("tool.bin"), "a binary it made is not, by default");
        CHECK_INT_EQ(run("test -x task/workspace/prog && test -f task/workspace/report.txt && "
                         "grep -q 'snapshot 2' task/workspace/snap.txt"), 0, "the workspace keeps all of it");
        bool prog = false, report = false, snap = false, mods = false, tool = false;
        for (char **p = left; p && *p; p++) {
                printf("# left out: %s\n", *p);
                prog = prog || strneq_prefix(*p, "prog (made by the tests");
                report = report || streq(*p, "report.txt (made by the tests)");
                snap = snap || streq(*p, "snap.txt (made by the tests)");
                mods = mods || streq(*p, "node_modules/ (build output)") || strneq_prefix(*p, "node_modules/");
                tool = tool || strneq_prefix(*p, "tool.bin (binary, ");
        }
        CHECK(prog && report && snap && mods && tool, "each is named with its reason (%zu in all)", n);
        strv_free(left);
        left = NULL;

        /* On purpose: kept; and a file the agent rewrites after the tests. */
        char *kept[] = { (char *) "tool.bin", NULL };
        char *written[] = { (char *) "snap.txt", NULL };
        o.kept = kept;
        o.written = written;
        CHECK_ERRNO(ledger_set_leave_out(l, &o), 0, "tool.bin kept on purpose, snap.txt written by the agent");
        ledger_note_path(l, "tool.bin");
        ledger_note_path(l, "snap.txt");
        r = checkpoint(l, &left, &n);
        CHECK(r == 1 && at_tip("tool.bin"), "a binary kept on purpose is committed: %d", r);
        CHECK(tip_says("snap.txt", "snapshot 2"), "a file the agent wrote is committed whoever touched it last");
        CHECK(!at_tip("prog") && !at_tip("report.txt"), "the rest stays out");
}

int main(void) {
        if (!mkdtemp(root))
                return 1;
        test_leave_out(false);
        test_leave_out(true);
        (void) rm_rf_at(AT_FDCWD, root);
        return tap_done();
}
