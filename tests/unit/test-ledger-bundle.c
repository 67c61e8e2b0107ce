/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A repository sent as a bundle: what agentfabctl makes for a repository
 * agentfabd cannot read, and the ledger the daemon makes from it. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger.h"
#include "tap.h"

static char root[] = "/tmp/test-ledger-bundle-XXXXXX";

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

static void capture(char *out, size_t size, const char *fmt, ...) _printf_(3, 4);
static void capture(char *out, size_t size, const char *fmt, ...) {
        char cmd[4096], buf[4300];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) 2>/dev/null", root, cmd);
        out[0] = '\0';
        FILE *f = popen(buf, "r");
        if (!f)
                return;
        if (!fgets(out, (int) size, f))
                out[0] = '\0';
        pclose(f);
        out[strcspn(out, "\n")] = '\0';
}

static bool exists_at(int dir_fd, const char *name) {
        return faccessat(dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}

static int task_dir(const char *name) {
        char path[4096];
        (void) snprintf(path, sizeof(path), "%s/%s", root, name);
        (void) mkdir(path, 0700);
        return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* A bundle of the repository at rev, in a memfd rewound to its start. */
static int bundle(const char *rev, char tip[static 41], char **error) {
        char path[4096];
        int fd = memfd_create("bundle", MFD_CLOEXEC), r;

        if (fd < 0)
                return -errno;
        (void) snprintf(path, sizeof(path), "%s/src", root);
        r = ledger_bundle_repository(path, rev, fd, tip, error);
        if (r < 0 || lseek(fd, 0, SEEK_SET) < 0) {
                close(fd);
                return r < 0 ? r : -errno;
        }
        return fd;
}

static bool nothing_left(int dir_fd) {
        return !exists_at(dir_fd, "ledger.git") && !exists_at(dir_fd, "workspace") && !exists_at(dir_fd, "source.git");
}

#define GIT "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "

int main(void) {
        char tip[41], expect[64], base[41], path[4096];
        char *error = NULL;
        int r;

        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (run(GIT "init -q src && cd src && echo one > a.txt && mkdir d && echo two > d/b.txt && " GIT "add . && "
                GIT "commit -q -m one && echo three >> a.txt && " GIT "commit -q -am two && "
                GIT "checkout -q -b side && echo side > side.txt && " GIT "add side.txt && " GIT "commit -q -m side && "
                GIT "checkout -q main && " GIT "tag -a -m release v1 HEAD~1 && "
                "printf '#!/bin/sh\\ntouch %s/marker-hook\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && "
                "echo uncommitted >> a.txt", root) != 0) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }

        /* The client side: a bundle of HEAD that git itself accepts. */
        _cleanup_close_ int fd = bundle(NULL, tip, &error);
        capture(expect, sizeof(expect), "git -C src rev-parse HEAD");
        CHECK(fd >= 0 && streq(tip, expect), "bundle of HEAD: %d %s tip %s", fd, strempty(error), tip);
        /* (The memfd is close-on-exec: git reads it through our /proc.) */
        (void) snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int) getpid(), fd);
        CHECK_INT_EQ(run("cp '%s' head.bundle && git init -q --bare verify.git && git -C verify.git bundle verify ../head.bundle && "
                         "git bundle list-heads head.bundle | grep -q ' refs/heads/agentfab-source$'", path), 0,
                     "git bundle verify accepts it, its one head is agentfab-source");

        /* The daemon side: a ledger based on the bundle's commit, nothing else. */
        _cleanup_close_ int t1 = task_dir("t1");
        _cleanup_(ledger_freep) Ledger *l = NULL;
        LedgerOptions o = { .max_bytes = 64 * 1024 * 1024 };
        (void) lseek(fd, 0, SEEK_SET);
        r = ledger_create_from_bundle(t1, fd, "agentfab/t1", &o, &error, &l);
        CHECK(r == 0 && l, "ledger from a bundle: %d %s", r, strempty(error));
        if (!l)
                return tap_done();
        CHECK(ledger_base(l, base) >= 0 && streq(base, tip), "based on the bundle's commit: %s", base);
        CHECK(!exists_at(t1, "source.git"), "the unpacked bundle is gone");
        CHECK_INT_EQ(run("cmp t1/workspace/d/b.txt src/d/b.txt && printf 'one\\nthree\\n' | cmp - t1/workspace/a.txt"), 0,
                     "the workspace is the committed tree, not the owner's uncommitted work");
        CHECK(!exists_at(t1, "workspace/side.txt") && !exists_at(t1, "workspace/.git"), "no other branch's file, no .git");
        capture(expect, sizeof(expect), "git -C src rev-parse side");
        CHECK(run("git --git-dir=t1/ledger.git cat-file -e %s", expect) != 0, "the other branch's commit was not sent");
        CHECK_INT_EQ(run("test ! -e marker-hook"), 0, "no hook ran");
        l = ledger_free(l);

        /* base names what the client resolves: a branch, a tag. */
        _cleanup_close_ int fd2 = bundle("side", tip, &error);
        capture(expect, sizeof(expect), "git -C src rev-parse side");
        CHECK(fd2 >= 0 && streq(tip, expect), "bundle of a branch");
        _cleanup_close_ int fd3 = bundle("v1", tip, &error);
        capture(expect, sizeof(expect), "git -C src rev-parse 'v1^{commit}'");
        CHECK(fd3 >= 0 && streq(tip, expect), "bundle of an annotated tag is its commit");
        error = mfree_ptr(error);
        r = bundle("no-such-ref", tip, &error);
        CHECK(r == -ENOENT && error && strstr(error, "no-such-ref"), "an unknown base: %d %s", r, strempty(error));
        error = mfree_ptr(error);
        (void) snprintf(path, sizeof(path), "%s/nothing", root);
        r = ledger_bundle_repository(path, NULL, fd, tip, &error);
        CHECK(r == -ENOTDIR && error, "not a repository: %d %s", r, strempty(error));
        error = mfree_ptr(error);

        /* What the submitter sends is untrusted: each of these is refused
         * with a message, and nothing stays in the task directory. */
#define BAD(w, c) { w, c, sizeof(c) - 1 }
#define ID "0123456789012345678901234567890123456789"
        struct {
                const char *what, *content;
                size_t n;
        } bad[] = {
                BAD("not a bundle", "hello\n\n"),
                BAD("a v3 bundle", "# v3 git bundle\n@object-format=sha1\n\n"),
                BAD("no branch", "# v2 git bundle\n\nPACK"),
                BAD("a bad id", "# v2 git bundle\nzzzz refs/heads/x\n\nPACK"),
                BAD("a header without end", "# v2 git bundle\n" ID " refs/heads/x\n"),
                BAD("a pack claiming 1.7 billion objects", "# v2 git bundle\n" ID " refs/heads/x\n\nPACK\0\0\0\2garbage"),
                BAD("a corrupt pack", "# v2 git bundle\n" ID " refs/heads/x\n\nPACK\0\0\0\2\0\0\0\3garbage"),
                BAD("not a pack", "# v2 git bundle\n" ID " refs/heads/x\n\nKCAP\0\0\0\2\0\0\0\3garbage"),
                BAD("a prerequisite", "# v2 git bundle\n-" ID "\n" ID " refs/heads/x\n\n"),
        };
        _cleanup_close_ int t2 = task_dir("t2");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_close_ int b = memfd_create("bad", MFD_CLOEXEC);
                CHECK(b >= 0 && write(b, bad[i].content, bad[i].n) == (ssize_t) bad[i].n && lseek(b, 0, SEEK_SET) == 0,
                      "%s written", bad[i].what);
                r = ledger_create_from_bundle(t2, b, "agentfab/t2", &o, &error, &l);
                CHECK(r < 0 && !l && error, "%s: refused: %d %s", bad[i].what, r, strempty(error));
                CHECK(nothing_left(t2), "%s: nothing left behind", bad[i].what);
                error = mfree_ptr(error);
        }

        /* The object count is checked even when the pack's header comes in
         * pieces (a slow writer, a short read): here in three reads. */
        {
                static const char head[] = "# v2 git bundle\n" ID " refs/heads/x\n\nPA";
                static const char mid[] = "CK\0\0\0\2\x10";
                static const char tail[] = "\0\0\0garbage";
                int p[2];
                CHECK_INT_EQ(pipe2(p, O_CLOEXEC), 0, "pipe");
                pid_t pid = fork();
                if (pid == 0) {
                        (void) !write(p[1], head, sizeof(head) - 1);
                        usleep(100 * 1000);
                        (void) !write(p[1], mid, sizeof(mid) - 1);
                        usleep(100 * 1000);
                        (void) !write(p[1], tail, sizeof(tail) - 1);
                        _exit(0);
                }
                safe_close(p[1]);
                r = ledger_create_from_bundle(t2, p[0], "agentfab/t2", &o, &error, &l);
                CHECK(r == -EFBIG && error && strstr(error, "claims"), "a split pack header claiming 2^28 objects: %d %s",
                      r, strempty(error));
                CHECK(nothing_left(t2), "split pack header: nothing left behind");
                error = mfree_ptr(error);
                safe_close(p[0]);
                (void) waitpid(pid, NULL, 0);
        }

        /* The size bound covers the bundle. */
        LedgerOptions small = { .max_bytes = 64 };
        (void) lseek(fd, 0, SEEK_SET);
        r = ledger_create_from_bundle(t2, fd, "agentfab/t2", &small, &error, &l);
        CHECK(r == -EFBIG && error, "over the size bound: %d %s", r, strempty(error));
        CHECK(nothing_left(t2), "over the size bound: nothing left behind");
        error = mfree_ptr(error);

        small.max_bytes = 200;  /* room for the objects the pack claims, not for their bytes */
        (void) lseek(fd, 0, SEEK_SET);
        r = ledger_create_from_bundle(t2, fd, "agentfab/t2", &small, &error, &l);
        CHECK(r == -EFBIG && error && strstr(error, "bigger"), "over the size bound in bytes: %d %s", r, strempty(error));
        CHECK(nothing_left(t2), "over the size bound in bytes: nothing left behind");
        error = mfree_ptr(error);

        /* A ledger exists already: refused, kept. */
        (void) lseek(fd, 0, SEEK_SET);
        r = ledger_create_from_bundle(t1, fd, "agentfab/t1", &o, &error, &l);
        CHECK(r == -EEXIST && exists_at(t1, "ledger.git") && !exists_at(t1, "source.git"),
              "a task directory with a ledger: %d %s", r, strempty(error));
        error = mfree_ptr(error);

        (void) rm_rf_at(AT_FDCWD, root);
        return tap_done();
}
