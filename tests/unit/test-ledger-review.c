/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger.h"
#include "tap.h"

/* The review stage reads a task's change through these two calls: what
 * was added, line by line, and whole files at base and at the tip. */

static char root[] = "/tmp/test-ledger-review-XXXXXX";

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

static const LedgerFileLines *find(const LedgerFileLines *f, size_t n, const char *path) {
        for (size_t i = 0; i < n; i++)
                if (streq(f[i].path, path))
                        return &f[i];
        return NULL;
}

int main(void) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int task = -EBADF;
        LedgerOptions o = { .max_bytes = 64 * 1024 * 1024 };
        LedgerFileLines *files = NULL;
        const LedgerFileLines *f;
        char path[4096], commit[41], *error = NULL, *text = NULL;
        size_t n = 0, size = 0;
        int ws;

        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (run(GIT "init -q src && cd src && printf 'one\\ntwo\\nthree\\n' > a.txt && printf 'requests==2.0\\n' > requirements.txt && "
                "echo gone > del.txt && mkdir d && echo x > d/x && ln -s a.txt link && " GIT "add . && " GIT "commit -q -m base") != 0) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }
        (void) snprintf(path, sizeof(path), "%s/task", root);
        (void) mkdir(path, 0755);
        task = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/src", root);
        CHECK_ERRNO(ledger_create(task, path, -EBADF, NULL, "agentfab/r1", &o, &error, &l), 0, "ledger: %s", strempty(error));
        if (!l)
                return tap_done();
        ws = ledger_workspace_fd(l);

        /* A changed line, an added line, a new file, a deleted file, a binary file. */
        CHECK(write_at(ws, "a.txt", "one\nTWO\nthree\nfour\r\n", 20) == 0 &&
              write_at(ws, "requirements.txt", "requests==2.31.0\nPyYAML==5.3.1\n", 31) == 0 &&
              write_at(ws, "new.txt", "alpha\nbeta", 10) == 0 &&
              write_at(ws, "bin.dat", "\0\1\2\3binary\0", 11) == 0 &&
              unlinkat(ws, "del.txt", 0) == 0, "workspace changed");
        Checkpoint cp = { .task_id = "r1", .step = 1, .subject = "Change", .tests = "not-run" };
        CHECK_ERRNO(ledger_checkpoint(l, &cp, commit, &error), 1, "checkpoint: %s", strempty(error));

        CHECK(ledger_added_lines(l, &files, &n) == 0 && n == 4, "4 files with additions: %zu", n);
        f = find(files, n, "a.txt");
        CHECK(f && f->status == 'M' && f->n_lines == 2 && f->lines[0].number == 2 && streq(f->lines[0].text, "TWO") &&
              f->lines[1].number == 4 && streq(f->lines[1].text, "four") && f->lines[1].length == 4,
              "changed and added lines with their numbers, no newline or CR");
        f = find(files, n, "new.txt");
        CHECK(f && f->status == 'A' && f->n_lines == 2 && streq(f->lines[1].text, "beta"), "a new file, last line without newline");
        f = find(files, n, "bin.dat");
        CHECK(f && f->binary && f->n_lines == 0, "a binary file has no lines");
        CHECK(!find(files, n, "del.txt"), "a deleted file adds nothing");
        ledger_file_lines_free(files, n);

        CHECK(ledger_read_file(l, false, "requirements.txt", 1024, &text, &size) == 0 && streq(text, "requests==2.0\n") && size == 14,
              "a manifest at base");
        free(text);
        CHECK(ledger_read_file(l, true, "requirements.txt", 1024, &text, &size) == 0 && size == 31 &&
              strneq(text, "requests==2.31.0", 16), "and at the tip");
        free(text);
        CHECK_ERRNO(ledger_read_file(l, false, "new.txt", 1024, &text, NULL), -ENOENT, "not at base: -ENOENT");
        CHECK_ERRNO(ledger_read_file(l, true, "d", 1024, &text, NULL), -EISDIR, "a directory: -EISDIR");
        CHECK_ERRNO(ledger_read_file(l, true, "link", 1024, &text, NULL), -ELOOP, "a symlink is not followed");
        CHECK_ERRNO(ledger_read_file(l, true, "requirements.txt", 8, &text, NULL), -EFBIG, "bounded");
        CHECK_ERRNO(ledger_read_file(l, true, "/etc/passwd", 8, &text, NULL), -EINVAL, "absolute refused");

        l = ledger_free(l);
        (void) snprintf(path, sizeof(path), "rm -rf '%s'", root);
        (void) system(path);
        free(error);
        return tap_done();
}
