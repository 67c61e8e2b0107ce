/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's output on the daemon's side: the session asks for it through
 * a pipe of its own (exec-service.h, "output_fd") and moves it into the log
 * by splice(). Against a fake launcher and exec service that behave as a
 * subverted sandbox could: the bytes are arbitrary (NUL, escapes, no
 * newline), and the service keeps its copy of the pipe open after "exit".
 * The log must hold every byte, the model's text must be bounded and
 * escaped, and the end must come without waiting for the pipe to close.
 * No root, no systemd. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

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
        CHECK(r->output_bytes == TOTAL, "every byte counted: %llu", (unsigned long long) r->output_bytes);
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
        CHECK(r == 0, "exec with a log: %s", strerror(-r));
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

        CHECK(sd_event_default(&event) >= 0, "an event loop");
        r = sandbox_session_open_async(event, sock_path, TASK, ws, NULL, NULL, NULL, -EBADF, -EBADF, on_ready, NULL, &s);
        CHECK(r == 0 && !sandbox_session_is_ready(s), "asynchronous open started: %s", strerror(-r));
        CHECK(sandbox_session_exec(s, &(ExecRequest) { .argv = (char *[]) { (char *) "x", NULL } }, -EBADF, 10, NULL,
                                   on_done, NULL) == -ENOTCONN, "no command before the sandbox is ready");
        if (r == 0) {
                sd_event_source *timeout = NULL;
                (void) sd_event_add_time_relative(event, &timeout, CLOCK_MONOTONIC, 30 * USEC_PER_SEC, 0, NULL,
                                                  (void *) (intptr_t) 2);
                r = sd_event_loop(event);
                CHECK(r == 0, "the loop ended with the result, not the 30 s timeout: %i", r);
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
