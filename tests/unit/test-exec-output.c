/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's output on the daemon's side: the session asks for it through
 * a pipe of its own (exec-service.h, "output_fd") and moves it into the log
 * by splice(). Against a fake launcher and exec service that behave as a
 * subverted sandbox could: the bytes are arbitrary (NUL, escapes, no
 * newline), and the service keeps its copy of the pipe open after "exit".
 * The log must hold every byte, the model's text must be bounded and
 * escaped, and the end must come without waiting for the pipe to close.
 * Then the mover thread (exec-output.h) alone, with writers of our own:
 * small writes, a quiet spell, a writer that never stops, a full log.
 * No root, no systemd. */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec-output.h"
#include "exec-session.h"
#include "tap.h"

#define TASK "0123456789ab"
#define UNIT "agentfab-task-" TASK ".scope"
#define TOTAL (6u * 1024u * 1024u + 7u)

static char sock_path[108];
static sd_event *event;
static int log_fd = -EBADF;
static unsigned samples;
static size_t sample_bytes;
static bool sample_raw;

static void put(int fd, const char *s) {
        (void) !send(fd, s, strlen(s), MSG_NOSIGNAL);
}

/* One request line, and the fd that came with it (or -1). */
static int get_request(int fd, char *buf, size_t size, int *ret_fd) {
        size_t n = 0;

        *ret_fd = -1;
        while (n < size - 1) {
                union {
                        struct cmsghdr h;
                        char buf[CMSG_SPACE(sizeof(int))];
                } control = {};
                struct iovec iov = { .iov_base = buf + n, .iov_len = 1 };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
                ssize_t k = recvmsg(fd, &mh, 0);
                if (k <= 0)
                        return -1;
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                if (c && c->cmsg_type == SCM_RIGHTS)
                        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
                if (buf[n++] == '\n')
                        break;
        }
        buf[n] = '\0';
        return 0;
}

static void fake_launcher(int listen_fd) {
        char line[4096];
        int fd, out;

        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 || get_request(fd, line, sizeof(line), &out) < 0)
                _exit(1);
        snprintf(line, sizeof(line), "{\"type\":\"ready\",\"unit\":\"" UNIT "\",\"pid\":%i}\n", (int) getpid());
        put(fd, line);

        if (get_request(fd, line, sizeof(line), &out) < 0 || !strstr(line, "\"output_fd\":true") || out < 0)
                _exit(2);
        const char *id = strstr(line, "\"id\":");
        int n = id ? atoi(id + 5) : 0;
        snprintf(line, sizeof(line), "{\"type\":\"started\",\"id\":%i}\n", n);
        put(fd, line);

        /* Escapes, NUL and bytes that are not UTF-8, never a newline. */
        static const char unit[17] = "\x1b[31m\x1b]0;x\x07\x00\xff\xfe" "abc";
        char chunk[64 * 1024];
        for (size_t i = 0; i < sizeof(chunk); i++)
                chunk[i] = unit[i % sizeof(unit)];
        size_t left = TOTAL;
        while (left > 0) {
                size_t k = left < sizeof(chunk) ? left : sizeof(chunk);
                if (write(out, chunk, k) != (ssize_t) k)
                        _exit(3);
                left -= k;
        }
        /* "exit" while our copy of the pipe stays open: the other side must
         * not wait for its end. */
        snprintf(line, sizeof(line),
                 "{\"type\":\"exit\",\"id\":%i,\"status\":0,\"signal\":0,\"timed_out\":false,\"duration_usec\":5}\n", n);
        put(fd, line);
        char c;
        (void) !read(fd, &c, 1);   /* until the client closes */
        _exit(0);
}

static void on_output(const char *stream, const char *data, size_t n, void *userdata) {
        samples++;
        sample_bytes += n;
        if (memchr(data, '\x1b', n) || memchr(data, '\0', n))
                sample_raw = true;
}

static void on_done(SandboxSession *s, int error, const ExecResult *r, void *userdata) {
        struct stat st;

        CHECK(error == 0 && r->status == 0, "the command's result came: %s", strerror(-error));
        CHECK_UINT_EQ(r->output_bytes, TOTAL, "every byte counted: %llu", (unsigned long long) r->output_bytes);
        CHECK(fstat(log_fd, &st) >= 0 && (uint64_t) st.st_size == 6 + TOTAL, "the log holds the banner and every byte: %lld",
              (long long) st.st_size);
        CHECK(r->output && strlen(r->output) < 4 * 1000 + 100, "the model's text is bounded: %zu bytes",
              r->output ? strlen(r->output) : 0);
        CHECK(r->output && !strchr(r->output, '\x1b') && !strchr(r->output, '\x07') && strstr(r->output, "\\x1b[31m") &&
              strstr(r->output, "\\x00") && strstr(r->output, "\\xff"), "the model's text is escaped");
        CHECK(r->output && strstr(r->output, "bytes of output cut"), "the model is told what was cut");
        CHECK(samples > 0 && !sample_raw && sample_bytes < TOTAL, "a follower got %u escaped samples, %zu bytes", samples,
              sample_bytes);
        (void) sd_event_exit(event, 0);
}

/* ---- The mover alone (exec-output.h), with a writer of our own ---- */

static char followed[1 << 16];
static size_t followed_len;
static bool followed_raw;

static void on_follow(const char *stream, const char *data, size_t n, void *userdata) {
        if (memchr(data, '\x1b', n) || memchr(data, '\0', n))
                followed_raw = true;
        /* Keep the newest bytes: the test looks for the last piece. */
        if (n > sizeof(followed))
                data += n - sizeof(followed), n = sizeof(followed);
        if (followed_len + n > sizeof(followed)) {
                size_t drop = followed_len + n - sizeof(followed);
                memmove(followed, followed + drop, followed_len - drop);
                followed_len -= drop;
        }
        memcpy(followed + followed_len, data, n);
        followed_len += n;
}

static bool followed_has(const char *s) {
        return memmem(followed, followed_len, s, strlen(s)) != NULL;
}

/* Opens o on log with a mover running; false (and o closed) if it cannot. */
static bool mover_start(ExecOutput *o, sd_event *e, int log, size_t keep, exec_output_handler_t handler) {
        int r;

        exec_output_init(o);
        r = exec_output_open(o, e, log, keep, handler, NULL);
        CHECK_ERRNO(r, 0, "the mover starts: %s", strerror(-r));
        if (r < 0)
                exec_output_close(o);
        return r >= 0;
}

static int temp_log(void) {
        char path[] = "/tmp/test-exec-output-log.XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC | O_APPEND);
        if (fd >= 0)
                (void) unlink(path);
        return fd;
}

static uint64_t now(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

static void run_loop_for(sd_event *e, uint64_t usec) {
        uint64_t end = now(CLOCK_MONOTONIC) + usec;
        while (now(CLOCK_MONOTONIC) < end)
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
}

/* A command that writes in head's 8 KiB pieces, falls quiet and writes
 * once more: the mover batches small writes, so every byte must still be
 * there in order; and a follower must be told of the last piece while the
 * command runs, although the loop stopped sampling when it fell quiet. */
static void test_small_writes_and_quiet(sd_event *e) {
        ExecOutput o;
        ExecResult result = {};
        _cleanup_close_ int log = temp_log();
        const size_t pieces = 400, piece = 8192;
        pid_t pid;
        int r;

        followed_len = 0;
        followed_raw = false;
        CHECK(log >= 0 && write(log, "banner\n", 7) == 7, "a log with a banner");
        if (!mover_start(&o, e, log, 1000, on_follow))
                return;
        fflush(stdout);   /* the child must not print our TAP lines again */
        pid = fork();
        if (pid == 0) {
                char buf[8192];
                for (size_t i = 0; i < pieces; i++) {
                        for (size_t j = 0; j < sizeof(buf); j++)
                                buf[j] = (char) ((i * 31 + j) % 251);   /* NUL and escapes among them */
                        if (write(o.pass_fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf))
                                _exit(1);
                }
                usleep(300 * 1000);
                (void) !write(o.pass_fd, "LAST-PIECE", 10);
                usleep(300 * 1000);
                _exit(0);
        }
        o.pass_fd = safe_close(o.pass_fd);
        /* Before the end (finish): the loop samples for the follower, at
         * most 10 s, however slowly a loaded machine runs the writer. */
        for (uint64_t end = now(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;
             !followed_has("LAST-PIECE") && now(CLOCK_MONOTONIC) < end;)
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
        CHECK(followed_has("LAST-PIECE"), "the follower saw the piece written after a quiet spell, before the end");
        (void) waitpid(pid, NULL, 0);
        CHECK(!followed_raw, "what the follower got is escaped");

        r = exec_output_finish(&o, &result);
        CHECK(r == 0 && result.output_bytes == pieces * piece + 10, "every byte counted: %llu",
              (unsigned long long) result.output_bytes);
        bool same = true;
        char buf[8192];
        for (size_t i = 0; i < pieces && same; i++) {
                same = pread(log, buf, sizeof(buf), (off_t) (7 + i * piece)) == (ssize_t) sizeof(buf);
                for (size_t j = 0; j < sizeof(buf) && same; j++)
                        same = buf[j] == (char) ((i * 31 + j) % 251);
        }
        same = same && pread(log, buf, 10, (off_t) (7 + pieces * piece)) == 10 && memcmp(buf, "LAST-PIECE", 10) == 0;
        CHECK(same && lseek(log, 0, SEEK_END) == (off_t) (7 + pieces * piece + 10),
              "the log holds the banner and every byte in order");
        CHECK(result.output && strlen(result.output) < 4 * 1000 + 100 && strstr(result.output, "LAST-PIECE") &&
              strstr(result.output, "\\x00"), "the model gets a bounded, escaped head and tail");
        exec_result_done(&result);
}

/* A subverted sandbox keeps the pipe and writes on after "exit": finishing
 * must not wait for it (only what the pipe held is moved), and every byte
 * counted is in the log. Closing without finishing (the session freed in
 * the middle of a command) must not wait either. */
static void test_writer_that_never_stops(sd_event *e, bool finish) {
        ExecOutput o;
        ExecResult result = {};
        _cleanup_close_ int log = temp_log();
        pid_t pid;
        int r;

        if (!mover_start(&o, e, log, 100, finish ? on_follow : NULL))
                return;
        fflush(stdout);   /* the child must not print our TAP lines again */
        pid = fork();
        if (pid == 0) {
                static char buf[65536];
                memset(buf, 'y', sizeof(buf));
                for (;;)
                        if (write(o.pass_fd, buf, sizeof(buf)) < 0)
                                _exit(0);
        }
        o.pass_fd = safe_close(o.pass_fd);
        /* Until the writer is at it (bounded: a loaded machine may not run it at once). */
        for (uint64_t end = now(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;
             __atomic_load_n(&o.bytes, __ATOMIC_ACQUIRE) == 0 && now(CLOCK_MONOTONIC) < end;)
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
        run_loop_for(e, 20 * USEC_PER_MSEC);

        uint64_t t0 = now(CLOCK_MONOTONIC);
        if (finish) {
                r = exec_output_finish(&o, &result);
                CHECK(r == 0 && result.output_bytes > 0 &&
                      lseek(log, 0, SEEK_END) == (off_t) result.output_bytes, "finished with %llu bytes, all in the log",
                      (unsigned long long) result.output_bytes);
        } else
                exec_output_close(&o);
        uint64_t took = now(CLOCK_MONOTONIC) - t0;
        CHECK(took < 5 * USEC_PER_SEC, "%s without waiting for the writer: %llu ms", finish ? "finished" : "closed",
              (unsigned long long) (took / USEC_PER_MSEC));
        kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
        exec_result_done(&result);
}

/* A writer child: total bytes of a pattern (each byte its offset modulo
 * 251) into fd, in pieces of small and big bytes by turns. */
static pid_t pattern_writer(int fd, size_t total, size_t small, size_t big) {
        static unsigned char buf[1024 * 1024];
        pid_t pid;

        fflush(stdout);   /* the child must not print our TAP lines again */
        pid = fork();
        if (pid != 0)
                return pid;
        for (size_t done = 0, piece = small; done < total; done += piece, piece = piece == small ? big : small) {
                piece = MIN(MIN(piece, sizeof(buf)), total - done);
                for (size_t i = 0; i < piece; i++)
                        buf[i] = (unsigned char) ((done + i) % 251);
                if (write(fd, buf, piece) != (ssize_t) piece)
                        _exit(1);
        }
        _exit(0);
}

/* Whether the log's first total bytes are pattern_writer()'s. */
static bool log_has_pattern(int log, size_t total) {
        static unsigned char got[1024 * 1024];

        for (size_t off = 0; off < total; off += sizeof(got)) {
                size_t n = MIN(sizeof(got), total - off);
                if (pread(log, got, n, (off_t) off) != (ssize_t) n)
                        return false;
                for (size_t i = 0; i < n; i++)
                        if (got[i] != (unsigned char) ((off + i) % 251))
                                return false;
        }
        return true;
}

/* A flood larger than a few write-behind windows: the log's pages behind
 * the mover are written out and dropped from the page cache as it goes
 * (output_write_behind()), its blocks are allocated ahead of it
 * (output_allocate_ahead()) and what was allocated past the end is freed
 * at the close; every byte is in the log, in order. */
static void test_flood_write_behind(sd_event *e) {
        const size_t total = 160u * 1024 * 1024;
        ExecOutput o;
        ExecResult result = {};
        _cleanup_close_ int log = temp_log();
        int status = -1;
        pid_t pid;
        int r;

        if (!mover_start(&o, e, log, 100, NULL))
                return;
        pid = pattern_writer(o.pass_fd, total, 8192, 8192);
        o.pass_fd = safe_close(o.pass_fd);
        (void) waitpid(pid, &status, 0);
        r = exec_output_finish(&o, &result);
        CHECK(r == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && result.output_bytes == total &&
              lseek(log, 0, SEEK_END) == (off_t) total, "a flood of %zu MiB, all in the log (%llu bytes)", total >> 20,
              (unsigned long long) result.output_bytes);

        CHECK(log_has_pattern(log, total), "every byte as written, in order");
        struct stat st;
        CHECK(fstat(log, &st) >= 0 && st.st_size == (off_t) total &&
              (uint64_t) st.st_blocks * 512 <= total + 1024 * 1024,
              "no blocks allocated past the log's end are kept: %llu bytes allocated for %zu",
              (unsigned long long) st.st_blocks * 512, total);
        exec_result_done(&result);
}

/* The log's file system is full (here: the log may not grow past
 * RLIMIT_FSIZE): the command is not stopped, what it writes beyond is
 * counted and dropped, and the log keeps what it had. */
static void test_log_full(sd_event *e) {
        ExecOutput o;
        ExecResult result = {};
        _cleanup_close_ int log = temp_log();
        struct rlimit old, lim = { .rlim_cur = 100 * 1024, .rlim_max = RLIM_INFINITY };
        const size_t total = 2 * 1024 * 1024;
        int status = -1;
        pid_t pid;
        int r;

        if (!mover_start(&o, e, log, 100, NULL))
                return;
        (void) getrlimit(RLIMIT_FSIZE, &old);
        lim.rlim_max = old.rlim_max;
        (void) setrlimit(RLIMIT_FSIZE, &lim);
        fflush(stdout);   /* the child must not print our TAP lines again */
        pid = fork();
        if (pid == 0) {
                static char buf[65536];
                memset(buf, 'z', sizeof(buf));
                for (size_t left = total; left > 0; left -= sizeof(buf))
                        if (write(o.pass_fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf))
                                _exit(1);
                _exit(0);
        }
        o.pass_fd = safe_close(o.pass_fd);
        (void) waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the command wrote all of its output");
        r = exec_output_finish(&o, &result);
        (void) setrlimit(RLIMIT_FSIZE, &old);
        CHECK(r == 0 && result.output_bytes == total, "every byte counted: %llu", (unsigned long long) result.output_bytes);
        CHECK(lseek(log, 0, SEEK_END) <= 100 * 1024, "the log did not grow past its limit");
        exec_result_done(&result);
}

/* In a child of the test, as nobody with its pipes past
 * fs.pipe-user-pages-soft: 0 when every byte of a mixed flood reached the
 * log in order, 3 when the pipe was not the kernel's smallest (the test
 * would prove nothing), other values for what failed. */
static int spent_quota_child(void) {
        const size_t total = 8u * 1024 * 1024;
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        ExecOutput o;
        ExecResult result = {};
        int spare[2], status = -1, log;
        pid_t pid;

        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                return 2;
        for (unsigned i = 0; i < 4096; i++)
                if (pipe2(spare, O_CLOEXEC) < 0 || fcntl(spare[0], F_SETPIPE_SZ, 1024 * 1024) < 0)
                        break;
        log = temp_log();
        if (log < 0 || sd_event_new(&e) < 0)
                return 2;
        exec_output_init(&o);
        if (exec_output_open(&o, e, log, 100, NULL, NULL) < 0)
                return 4;
        if (fcntl(o.out_fd, F_GETPIPE_SZ) > 16384)
                return 3;
        /* Pieces of 8 KiB and of 1 MiB, as head and a 1 MiB writer make them. */
        pid = pattern_writer(o.pass_fd, total, 8192, 1024 * 1024);
        o.pass_fd = safe_close(o.pass_fd);
        (void) waitpid(pid, &status, 0);
        if (exec_output_finish(&o, &result) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            result.output_bytes != total || lseek(log, 0, SEEK_END) != (off_t) total)
                return 5;
        exec_result_done(&result);
        return log_has_pattern(log, total) ? 0 : 6;
}

/* The agentfab user's pipes past fs.pipe-user-pages-soft (some fifty
 * commands at work at once): the kernel gives the command's pipe and the
 * relay two pages each and will not grow them. Every byte still reaches
 * the log, in order. Only root can be another user with a quota of its own
 * (spending ours would shrink the pipes of tests running beside this one). */
static void test_pipe_quota_spent(void) {
        int status = -1;
        pid_t pid;

        if (geteuid() != 0) {
                SKIP("the pipe quota spent: not root");
                return;
        }
        fflush(stdout);
        pid = fork();
        if (pid == 0)
                _exit(spent_quota_child());
        (void) waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the pipe quota spent (two-page pipes): every byte of 8 MiB in the log, in order (child: %i)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void on_ready(SandboxSession *s, int error, const char *message, void *userdata) {
        static char *argv[] = { (char *) "flood", NULL };
        ExecRequest req = { .argv = argv, .timeout_usec = 60 * USEC_PER_SEC };

        CHECK(error == 0 && sandbox_session_is_ready(s), "asynchronous open: ready (%s)", strerror(-error));
        if (error < 0) {
                (void) sd_event_exit(event, 1);
                return;
        }
        CHECK(sandbox_session_get_pid(s) > 1, "the sandbox's pid is known");
        int r = sandbox_session_exec(s, &req, log_fd, 1000, on_output, on_done, NULL);
        CHECK_ERRNO(r, 0, "exec with a log: %s", strerror(-r));
        if (r < 0)
                (void) sd_event_exit(event, 1);
}

int main(void) {
        _cleanup_(sandbox_session_freep) SandboxSession *s = NULL;
        char log_path[] = "/tmp/test-exec-output.XXXXXX";
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int listen_fd, ws, r;
        pid_t pid;

        signal(SIGPIPE, SIG_IGN);
        signal(SIGXFSZ, SIG_IGN);   /* a log past RLIMIT_FSIZE: EFBIG, as a full disk gives ENOSPC */

        CHECK(sd_event_default(&event) >= 0, "an event loop");
        test_small_writes_and_quiet(event);
        test_writer_that_never_stops(event, true);
        test_writer_that_never_stops(event, false);
        test_log_full(event);
        test_flood_write_behind(event);
        test_pipe_quota_spent();

        snprintf(sock_path, sizeof(sock_path), "/tmp/test-exec-output.%i.sock", (int) getpid());
        strcpy(sa.sun_path, sock_path);
        listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(listen_fd, 4) < 0)
                return 1;
        pid = fork();
        if (pid == 0)
                fake_launcher(listen_fd);
        close(listen_fd);

        /* The log as the agent opens it: append only, a banner in it. */
        log_fd = mkostemp(log_path, O_CLOEXEC | O_APPEND);
        (void) unlink(log_path);
        CHECK(log_fd >= 0 && write(log_fd, "\n$ cm\n", 6) == 6, "a log");
        ws = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        r = sandbox_session_open_async(event, sock_path, TASK, ws, NULL, NULL, NULL, -EBADF, -EBADF, -EBADF, on_ready, NULL, &s);
        CHECK(r == 0 && !sandbox_session_is_ready(s), "asynchronous open started: %s", strerror(-r));
        CHECK_ERRNO(sandbox_session_exec(s, &(ExecRequest) { .argv = (char *[]) { (char *) "x", NULL } }, -EBADF, 10, NULL,
                                         on_done, NULL), -ENOTCONN, "no command before the sandbox is ready");
        if (r == 0) {
                sd_event_source *timeout = NULL;
                (void) sd_event_add_time_relative(event, &timeout, CLOCK_MONOTONIC, 30 * USEC_PER_SEC, 0, NULL,
                                                  (void *) (intptr_t) 2);
                r = sd_event_loop(event);
                CHECK_ERRNO(r, 0, "the loop ended with the result, not the 30 s timeout: %i", r);
                sd_event_source_unref(timeout);
        }
        s = sandbox_session_free(s);
        kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
        (void) unlink(sock_path);
        close(ws);
        close(log_fd);
        sd_event_unref(event);
        return tap_done();
}
