/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "io-util.h"
#include "json-util.h"
#include "socket-util.h"
#include "string-util.h"
#include "time-util.h"
#include "tap.h"

/* A record of a JSON lines file is whole or absent: a write that the file
 * system refuses half-way (full, over quota; here: the file size limit, which
 * lets part of the write through and refuses the rest) leaves the file as it
 * was, so that no reader finds a torn last line. */
static void test_append_whole(void) {
        char path[] = "/tmp/test-util-append.XXXXXX", buf[256];
        struct rlimit old, small = { .rlim_cur = 64, .rlim_max = RLIM_INFINITY };
        const char *first = "{\"n\":1}\n";
        char big[100];
        struct stat st;
        int fd, r;

        memset(big, 'x', sizeof(big));
        big[sizeof(big) - 1] = '\n';
        fd = mkstemp(path);
        if (fd < 0) {
                CHECK(false, "mkstemp: %s", strerror(errno));
                return;
        }
        close(fd);
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        CHECK_ERRNO(append_whole(fd, first, strlen(first)), 0, "a record appended");

        signal(SIGXFSZ, SIG_IGN);
        getrlimit(RLIMIT_FSIZE, &old);
        small.rlim_max = old.rlim_max;
        setrlimit(RLIMIT_FSIZE, &small);
        r = append_whole(fd, big, sizeof(big));
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK_ERRNO(r, -EFBIG, "a record past the limit refused: %s", strerror(-r));
        CHECK(fstat(fd, &st) == 0 && st.st_size == (off_t) strlen(first),
              "the part that was written is cut off again (size %lld)", (long long) st.st_size);
        CHECK_ERRNO(append_whole(fd, first, strlen(first)), 0, "the next record goes on as before");
        close(fd);

        fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        buf[k > 0 ? k : 0] = '\0';
        CHECK_STR_EQ(buf, "{\"n\":1}\n{\"n\":1}\n", "the file holds the two whole records only");
        close(fd);
        unlink(path);
}

/* fds go with the first byte of a message, all of them, in order; more
 * than the bound is refused before anything is sent. */
static void test_send_fds(void) {
        int sv[2], pipe_fds[2], fds[SOCKET_FDS_MAX + 1];
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * SOCKET_FDS_MAX)];
        } control = {};
        char buf[16];
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(pipe_fds, O_CLOEXEC) < 0) {
                CHECK(false, "socketpair/pipe: %s", strerror(errno));
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = pipe_fds[i % 2];
        CHECK_ERRNO(socket_send_fds(sv[0], "x", 1, fds, SOCKET_FDS_MAX + 1, 0), -EINVAL, "too many fds refused");
        CHECK_ERRNO(socket_send_fds(sv[0], "", 0, fds, 1, 0), -EINVAL, "fds without a byte to carry them refused");
        CHECK_INT_EQ(socket_send_fds(sv[0], "hello", 5, fds, 2, 0), 5, "sent with two fds");

        ssize_t k = recvmsg(sv[1], &mh, MSG_CMSG_CLOEXEC);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        CHECK(k == 5 && memcmp(buf, "hello", 5) == 0, "the bytes arrived");
        CHECK(c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(2 * sizeof(int)), "two fds arrived");
        if (c && c->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
                int got[2];
                struct stat a, b;

                memcpy(got, CMSG_DATA(c), sizeof(got));
                CHECK(fstat(got[0], &a) == 0 && fstat(pipe_fds[0], &b) == 0 && a.st_ino == b.st_ino,
                      "the first is the pipe's read end");
                CHECK_INT_EQ(write(got[1], "y", 1), 1, "the second is its write end");
                close(got[0]);
                close(got[1]);
        }

        /* Readable: a byte, or the other end gone. */
        uint64_t t0 = clock_now_usec(CLOCK_MONOTONIC);
        CHECK_ERRNO(fd_wait_readable(pipe_fds[0], t0 + USEC_PER_SEC), 1, "a pipe with a byte is readable");
        CHECK_INT_EQ(read(pipe_fds[0], buf, 1), 1, "and the byte is there");
        CHECK(fd_wait_readable(pipe_fds[0], t0 + 20 * USEC_PER_MSEC) == -ETIMEDOUT &&
              clock_now_usec(CLOCK_MONOTONIC) - t0 >= 20 * USEC_PER_MSEC, "an empty pipe times out at the deadline");
        CHECK_ERRNO(fd_wait_readable(pipe_fds[0], t0), -ETIMEDOUT, "a deadline past is a timeout at once");
        close(pipe_fds[1]);
        CHECK_ERRNO(fd_wait_readable(pipe_fds[0], clock_now_usec(CLOCK_MONOTONIC) + USEC_PER_SEC), 1,
                    "the end of file is readable");
        close(pipe_fds[0]);
        close(sv[0]);
        close(sv[1]);
}

/* rm_rf_at() removes a tree of every kind of entry, follows no symlink (what
 * one points to stays), and takes a file or a symlink given as the top. */
static void test_rm_rf_at(void) {
        char top[] = "/tmp/test-util-rm.XXXXXX", p[256];
        struct stat st;
        int fd;

        if (!mkdtemp(top)) {
                CHECK(false, "mkdtemp: %s", strerror(errno));
                return;
        }
        fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0 && mkdirat(fd, "keep", 0755) == 0 && mkdirat(fd, "t", 0755) == 0 && mkdirat(fd, "t/a", 0755) == 0 &&
              mkdirat(fd, "t/a/b", 0755) == 0 && mkdirat(fd, "t/empty", 0755) == 0 && mkfifoat(fd, "t/a/fifo", 0644) == 0 &&
              symlinkat("../../keep", fd, "t/a/up") == 0 && symlinkat(top, fd, "t/abs") == 0 &&
              symlinkat("keep", fd, "link") == 0, "a tree");
        close(openat(fd, "t/a/b/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        close(openat(fd, "keep/k", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        for (int i = 0; i < 100; i++) {
                snprintf(p, sizeof(p), "t/a/f%d", i);
                close(openat(fd, p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        }
        CHECK(rm_rf_at(fd, "t") == 0 && fstatat(fd, "t", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "the tree is gone");
        CHECK_INT_EQ(fstatat(fd, "keep/k", &st, 0), 0, "what its symlinks point to is not");
        CHECK(rm_rf_at(fd, "link") == 0 && fstatat(fd, "link", &st, AT_SYMLINK_NOFOLLOW) < 0 &&
              fstatat(fd, "keep/k", &st, 0) == 0, "a symlink as the top is removed, not followed");
        CHECK_ERRNO(rm_rf_at(fd, "missing"), 0, "nothing to remove");
        CHECK(rm_rf_at(AT_FDCWD, top) == 0 && stat(top, &st) < 0, "the rest");
        close(fd);
}

int main(void) {
        uint64_t u;

        test_rm_rf_at();
        test_send_fds();
        CHECK(parse_sec("30", &u) == 0 && u == 30 * USEC_PER_SEC, "bare number is seconds");
        CHECK(parse_sec("250ms", &u) == 0 && u == 250 * USEC_PER_MSEC, "milliseconds");
        CHECK(parse_sec("2h", &u) == 0 && u == 7200 * USEC_PER_SEC, "hours");
        CHECK(parse_sec("-5", &u) < 0 && parse_sec("5 parsecs", &u) < 0 && parse_sec("", &u) < 0, "garbage refused");
        CHECK(parse_sec("99999999999999999999", &u) < 0, "overflow refused");
        CHECK(safe_atou64("18446744073709551615", &u) == 0 && u == UINT64_MAX, "largest u64");
        CHECK(safe_atou64("-1", &u) < 0 && safe_atou64("1x", &u) < 0, "negative and trailing refused");

        /* A plan's journal line shows what it says, not its "Plan:" heading. */
        CHECK_STR_EQ(skip_heading("Plan:\n1. Read main.c"), "1. Read main.c", "heading skipped");
        CHECK_STR_EQ(skip_heading("\n\nPlan:\r\n\n1. x"), "1. x", "blank lines and CRLF heading skipped");
        CHECK_STR_EQ(skip_heading("1. Read: then fix\n2. y"), "1. Read: then fix\n2. y", "text kept");
        CHECK(streq(skip_heading("Plan:"), "Plan:") && streq(skip_heading(""), "") && streq(skip_heading("\n"), "\n"),
              "a heading alone, or nothing, is kept as it is");

        char *s = strshorten_line("first line\nsecond", 100);
        CHECK_STR_EQ(s, "first line…", "first line kept with a mark");
        free(s);
        s = strshorten_line("ääää", 3);
        CHECK_STR_EQ(s, "ä…", "UTF-8 never cut in half: '%s'", s);
        free(s);

        /* Output of commands goes into JSON: whatever the bytes, the text is UTF-8. */
        char bad[] = { 'o', 'k', (char) 0xff, (char) 0xc3, (char) 0xa9, (char) 0xe2, (char) 0x82, 0, 'x' };
        utf8_sanitize(bad, sizeof(bad));
        {
                char *e = text_escape_controls("a\x1b[2Jb\r\n\tc\x7f\xc2\x9b" "31m\xc3\xa9\xc2\xa0");
                CHECK_STR_EQ(e, "a\\x1b[2Jb\\x0d\n\tc\\x7f\\u009b31m\xc3\xa9\xc2\xa0",
                             "control characters escaped, newline, tab and other UTF-8 kept");
                free(e);
                char c1[] = "a\xc2\x9b" "2J\xc2\xa0\xc2";
                utf8_blank_c1(c1);
                CHECK_STR_EQ(c1, "a  2J\xc2\xa0\xc2", "C1 controls blanked, other UTF-8 kept");
        }
        CHECK_INT_EQ(memcmp(bad, "ok?\xc3\xa9??" "?x", sizeof(bad)), 0, "invalid bytes and NUL replaced, valid sequences kept");

        CHECK(string_is_safe("tab\there", true) && !string_is_safe("tab\there", false), "tabs only where allowed");
        CHECK(!string_is_safe("bell\a", true) && !string_is_safe("del\x7f", true), "control characters refused");

        /* JSON from files and sockets: exactly one value, nothing after it. */
        json_object *j = NULL;
        CHECK_ERRNO(json_parse_strict("{\"a\":1}\n", 8, &j), 0, "object parsed");
        json_object_put(j);
        j = NULL;
        CHECK(json_parse_strict("{\"a\":1}x", 8, &j) < 0, "trailing garbage refused");
        CHECK(json_parse_strict("{\"a\":", 5, &j) < 0, "truncated refused");
        CHECK(json_parse_strict("{\"a\":1}\0{}", 10, &j) < 0, "embedded NUL refused");
        CHECK(json_parse_strict("[1,]", 4, &j) < 0, "non-strict JSON refused");

        /* Atomic writes replace, never mix. */
        char dir[] = "/tmp/test-util-XXXXXX";
        if (!mkdtemp(dir))
                return 1;
        int fd = open(dir, O_RDONLY | O_DIRECTORY);
        char *text = NULL;
        CHECK(write_file_atomic(fd, "f", "old", 3, 0600) == 0 && write_file_atomic(fd, "f", "new!", 4, 0600) == 0, "written twice");
        CHECK(read_file_at(fd, "f", 100, &text, NULL) == 0 && streq(text, "new!"), "latest content read");
        free(text);
        CHECK_ERRNO(read_file_at(fd, "f", 2, &text, NULL), -EFBIG, "size bound enforced");
        CHECK_ERRNO(write_file_atomic(fd, "../escape", "x", 1, 0600), -EINVAL, "no slashes in atomic file names");

        /* The conversation's appends before the state file counts them: a
         * file made by the first append (whose directory entry is then
         * flushed too), added to by the next, and the mode given only to a
         * new file. */
        bool created = true;
        int k = openat_created(fd, "made", O_WRONLY | O_APPEND | O_CLOEXEC, 0600, &created);
        CHECK(k >= 0 && created, "openat_created: the file made, and said so");
        safe_close(k);
        k = openat_created(fd, "made", O_WRONLY | O_APPEND | O_CLOEXEC, 0600, &created);
        CHECK(k >= 0 && !created, "openat_created: the file there, and said so");
        safe_close(k);
        CHECK_ERRNO(append_file_at_sync(fd, "lines", "a\n", 2, 0640), 0, "append_file_at_sync makes the file");
        CHECK_ERRNO(append_file_at_sync(fd, "lines", "b\n", 2, 0600), 0, "append_file_at_sync appends");
        CHECK(read_file_at(fd, "lines", 100, &text, NULL) == 0 && streq(text, "a\nb\n"), "both lines there, in order");
        free(text);
        struct stat lst;
        CHECK(fstatat(fd, "lines", &lst, 0) == 0 && (lst.st_mode & 07777) == (0640 & ~umask(022)),
              "the mode of the first append's file (%o)", lst.st_mode & 07777);
        close(fd);
        rm_rf_at(AT_FDCWD, dir);

        test_append_whole();
        return tap_done();
}
