/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger.h"
#include "string-util.h"
#include "tap.h"

/* What the model reviews before its finish counts: the whole diff against
 * the base, or, when it is long, its diffstat and its first bytes, cut on
 * a line, with a note of what is left out; nothing when the branch has no
 * change; valid UTF-8 whatever the files hold. */

static char root[] = "/tmp/test-ledger-review-diff-XXXXXX";

#define GIT "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "

static int run(const char *cmd) {
        char buf[4096];
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) >/dev/null 2>&1", root, cmd);
        return system(buf);
}

static int write_at(int dir_fd, const char *name, const char *text, size_t n) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        return write(fd, text, n) == (ssize_t) n ? 0 : -EIO;
}

static bool valid_utf8(const char *s) {
        _cleanup_free_ char *c = strdup(s);
        if (!c)
                return false;
        utf8_sanitize(c, strlen(c));
        return streq(c, s);
}

int main(void) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int task = -EBADF;
        LedgerOptions o = { .max_bytes = 64 * 1024 * 1024 };
        char path[4096], commit[41], *error = NULL, *text = NULL;
        Checkpoint cp = { .task_id = "d1", .step = 1, .subject = "Step 1", .model = "m", .tests = "not-run" };
        int ws;

        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (run(GIT "init -q src && cd src && printf 'one\\ntwo\\nthree\\n' > a.txt && echo gone > del.txt && "
                GIT "add . && " GIT "commit -q -m base") != 0) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }
        (void) snprintf(path, sizeof(path), "%s/task", root);
        (void) mkdir(path, 0755);
        task = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/src", root);
        CHECK_ERRNO(ledger_create(task, path, -EBADF, NULL, "agentfab/d1", &o, &error, &l), 0, "ledger: %s", strempty(error));
        if (!l)
                return tap_done();
        ws = ledger_workspace_fd(l);

        CHECK(ledger_review_diff(l, 4096, &text) == 0 && !text, "no change: nothing to review");

        /* A changed line, a deleted file, a new file with a byte that is not UTF-8. */
        CHECK(write_at(ws, "a.txt", "one\nTWO\nthree\n", 14) == 0 && unlinkat(ws, "del.txt", 0) == 0 &&
              write_at(ws, "new.txt", "caf\xe9\n", 5) == 0, "workspace changed");
        CHECK_ERRNO(ledger_checkpoint(l, &cp, commit, &error), 1, "checkpoint: %s", strempty(error));
        CHECK(ledger_review_diff(l, 4096, &text) == 0 && text && strstr(text, "diff --git a/a.txt b/a.txt") &&
              strstr(text, "\n-two\n+TWO\n") && strstr(text, "deleted file mode") && strstr(text, "+caf?\n") &&
              !strstr(text, "not shown") && valid_utf8(text), "a short diff is shown whole, as valid UTF-8: %s", text);
        text = mfree_ptr(text);

        /* A long one: 400 lines of 40 bytes in one file, and a small second one. */
        {
                char big[400 * 40 + 1];
                for (int i = 0; i < 400; i++)
                        snprintf(big + i * 40, 41, "line %03d of a long generated file......\n", i);
                CHECK(write_at(ws, "big.txt", big, 400 * 40) == 0 && write_at(ws, "z.txt", "z\n", 2) == 0, "a long change");
        }
        cp.step = 2;
        cp.subject = "Step 2";
        CHECK_ERRNO(ledger_checkpoint(l, &cp, commit, &error), 1, "checkpoint: %s", strempty(error));
        CHECK(ledger_review_diff(l, 4096, &text) == 0 && text, "a long diff: %.300s", text);
        if (text) {
                const char *tail = strstr(text, "[... ");
                CHECK(strlen(text) <= 4096 + 256, "bounded: %zu bytes for a bound of 4096", strlen(text));
                CHECK(strstr(text, "[The diff is ") == text && strstr(text, "more than the 4096 shown"),
                      "it begins by saying it is cut: %.120s", text);
                CHECK(strstr(text, "big.txt") && strstr(text, "z.txt") && strstr(text, "files changed"),
                      "its diffstat names every file, the one past the cut too");
                CHECK(tail && tail[-1] == '\n' && strstr(tail, "bytes of the diff not shown"),
                      "the patch is cut after a whole line, and says how much is left out");
                CHECK(!strstr(text, "+z\n"), "what is past the cut is not there");
        }
        text = mfree_ptr(text);

        /* A bound smaller than the diffstat: both cut, still bounded. */
        CHECK(ledger_review_diff(l, 64, &text) == 0 && text && strlen(text) <= 64 + 256,
              "a tiny bound still holds: %zu bytes", text ? strlen(text) : 0);
        text = mfree_ptr(text);

        l = ledger_free(l);
        rm_rf_at(AT_FDCWD, root);
        return tap_done();
}
