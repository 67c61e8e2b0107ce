/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ledger_publish(), ledger_adopt() and ledger_open_published(): a fleet's
 * checkpoints through its Remote=, here a file:// one, and an ssh:// one
 * refused before any connection when there are no known hosts to check the
 * server against. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger.h"
#include "string-util.h"
#include "tap.h"

#define GIT "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "

static char root[] = "/tmp/test-ledger-publish-XXXXXX";

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

/* The first line a shell command run in root prints. */
static void capture(char *out, size_t size, const char *fmt, ...) _printf_(3, 4);
static void capture(char *out, size_t size, const char *fmt, ...) {
        char cmd[4096], buf[4300];
        va_list ap;
        FILE *f;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) 2>/dev/null", root, cmd);
        out[0] = '\0';
        f = popen(buf, "r");
        if (!f)
                return;
        if (!fgets(out, (int) size, f))
                out[0] = '\0';
        pclose(f);
        out[strcspn(out, "\n")] = '\0';
}

static int open_dir(const char *name) {
        char path[4096];

        (void) snprintf(path, sizeof(path), "%s/%s", root, name);
        (void) mkdir(path, 0755);
        return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int main(void) {
        _cleanup_(ledger_freep) Ledger *l = NULL, *taken = NULL, *view = NULL;
        LedgerOptions o = { .max_bytes = 64 * 1024 * 1024 };
        char path[4096], url[4200], c1[41], head[41], got[128];
        char *error = NULL;
        int r;

        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (run(GIT "init -q src && cd src && echo one > a.txt && " GIT "add a.txt && " GIT "commit -q -m base") != 0 ||
            run("git init -q --bare fleet.git") != 0) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }
        (void) snprintf(path, sizeof(path), "%s/src", root);
        (void) snprintf(url, sizeof(url), "file://%s/fleet.git", root);

        /* The host that works on the task: one step, published under the
         * task's epoch with its base, as fleet-ack.c does. */
        _cleanup_close_ int task1 = open_dir("task1");
        r = ledger_create(task1, path, -EBADF, NULL, "agentfab/t1", &o, &error, &l);
        CHECK(r == 0 && l, "ledger made: %d %s", r, strempty(error));
        if (!l)
                return tap_done();
        CHECK_INT_EQ(run("echo two > task1/workspace/b.txt"), 0, "the step changes the workspace");
        Checkpoint cp = { .task_id = "t1", .step = 1, .subject = "Step 1", .tests = "not-run", .uid = 1000, .user_name = "alice" };
        r = ledger_checkpoint(l, &cp, c1, &error);
        CHECK(r == 1, "checkpoint of step 1 commits (1): %d %s", r, strempty(error));

        /* A file:// Remote= goes without any ssh setting, as before. */
        r = ledger_publish(l, url, NULL, c1, "refs/agentfab/t1/1", "refs/agentfab/t1/base", &error);
        CHECK(r == 0, "published to a file:// Remote=: %d %s", r, strempty(error));
        capture(got, sizeof(got), "git --git-dir=fleet.git rev-parse refs/agentfab/t1/1");
        CHECK_STR_EQ(got, c1, "Remote= has the checkpoint under the task's epoch");
        capture(got, sizeof(got), "git --git-dir=fleet.git rev-parse refs/agentfab/t1/base");
        CHECK(strlen(got) == 40, "and its base: '%s'", got);

        /* SECURITY: an ssh:// Remote= without known hosts is refused
         * before any connection (a connection to port 1 would fail with
         * another error), whether or not a key is given, for every way
         * the fleet reaches it, with the reason in the error. */
        static const char ssh_url[] = "ssh://git@127.0.0.1:1/srv/fleet.git";
        LedgerOptions key_only = { .ssh_key = "not a key", .ssh_key_setting = "[Fleet] RemoteSSHKeyCredential=" };
        const LedgerOptions *refusing[] = { NULL, &key_only };
        for (size_t i = 0; i < ELEMENTSOF(refusing); i++) {
                error = mfree_ptr(error);
                r = ledger_publish(l, ssh_url, refusing[i], c1, "refs/agentfab/t1/1", NULL, &error);
                CHECK(r == -EPERM && error && strstr(error, "known hosts") && strstr(error, "SSHKnownHostsCredential="),
                      "publish to ssh:// without known hosts refused (%s): %d %s", i == 0 ? "no options" : "a key only", r,
                      strempty(error));
                error = mfree_ptr(error);
                r = ledger_adopt(l, ssh_url, refusing[i], "refs/agentfab/t1", c1, &error);
                CHECK(r == -EPERM && error && strstr(error, "known hosts"),
                      "takeover fetch from ssh:// without known hosts refused: %d %s", r, strempty(error));
                error = mfree_ptr(error);
                _cleanup_close_ int dir = open_dir(i == 0 ? "view-refused-0" : "view-refused-1");
                r = ledger_open_published(dir, ssh_url, refusing[i], "refs/agentfab/t1", "refs/agentfab/t1/1", "agentfab/t1",
                                          &view, &error);
                CHECK(r == -EPERM && error && strstr(error, "known hosts") && !view,
                      "export fetch from ssh:// without known hosts refused: %d %s", r, strempty(error));
        }
        /* With known hosts the connection is tried: the error is then the
         * connection's, not the refusal's. */
        LedgerOptions with_hosts = { .ssh_known_hosts = "127.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+y1tSnxkSJrK8YEeYfKX\n" };
        error = mfree_ptr(error);
        r = ledger_publish(l, ssh_url, &with_hosts, c1, "refs/agentfab/t1/1", NULL, &error);
        CHECK(r < 0 && r != -EPERM && error && strstr(error, "Cannot publish to 'ssh://git@127.0.0.1:1/srv/fleet.git'"),
              "with known hosts, an ssh:// Remote= is connected to (port 1: refused): %d %s", r, strempty(error));
        capture(got, sizeof(got), "git --git-dir=fleet.git rev-parse refs/agentfab/t1/1");
        CHECK_STR_EQ(got, c1, "nothing of the refused pushes changed Remote=");

        /* Another host takes the task over from Remote=: its branch is the
         * published checkpoint. */
        error = mfree_ptr(error);
        _cleanup_close_ int task2 = open_dir("task2");
        r = ledger_create(task2, path, -EBADF, NULL, "agentfab/t1", &o, &error, &taken);
        if (r >= 0)
                r = ledger_adopt(taken, url, NULL, "refs/agentfab/t1", c1, &error);
        CHECK(r == 0 && taken && ledger_head(taken, head) == 0 && streq(head, c1),
              "taken over from a file:// Remote= at the checkpoint: %d %s", r, strempty(error));

        /* A third host shows the task's branch from Remote=. */
        error = mfree_ptr(error);
        _cleanup_close_ int task3 = open_dir("task3");
        r = ledger_open_published(task3, url, NULL, "refs/agentfab/t1", "refs/agentfab/t1/1", "agentfab/t1", &view, &error);
        CHECK(r == 0 && view && ledger_head(view, head) == 0 && streq(head, c1),
              "the branch read from a file:// Remote=: %d %s", r, strempty(error));

        free(error);
        l = ledger_free(l);
        taken = ledger_free(taken);
        view = ledger_free(view);
        (void) run("rm -rf '%s'", root);
        return tap_done();
}
