/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's asynchronous sandbox client against a fake launcher that
 * lies: everything that comes over the connection is the sandbox's, so no
 * reply may crash, hang or grow the client. No root, no systemd. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-session.h"
#include "tap.h"

#define TASK "0123456789ab"
#define UNIT "agentfab-task-" TASK ".scope"

enum {
        S_NORMAL, S_REFUSED, S_WRONG_UNIT, S_PID_ONE, S_CLOSED, S_GIANT_LINE, S_EOF_MID, S_GARBAGE, S_REAP,
        _S_MAX,
};

static char sock_path[108];

static void put(int fd, const char *s) {
        (void) !send(fd, s, strlen(s), MSG_NOSIGNAL);
}

/* One request line; returns its "id" or 0. */
static int get_request(int fd) {
        char buf[4096];
        size_t n = 0;

        while (n < sizeof(buf) - 1) {
                ssize_t k = recv(fd, buf + n, 1, 0);
                if (k <= 0)
                        return -1;
                if (buf[n++] == '\n')
                        break;
        }
        buf[n] = '\0';
        const char *id = strstr(buf, "\"id\":");
        return id ? atoi(id + 5) : 0;
}

static void ready(int fd, int pid) {
        char line[256];
        snprintf(line, sizeof(line), "{\"type\":\"ready\",\"unit\":\"" UNIT "\",\"pid\":%i}\n", pid);
        put(fd, line);
}

static void fake_launcher(int listen_fd) {
        char line[512];

        for (int scenario = 0; scenario < _S_MAX; scenario++) {
                int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC), id;
                if (fd < 0)
                        _exit(1);
                (void) get_request(fd);
                switch (scenario) {
                case S_NORMAL:
                        ready(fd, getpid());
                        while ((id = get_request(fd)) > 0) {
                                snprintf(line, sizeof(line),
                                         "{\"type\":\"started\",\"id\":%i}\n"
                                         "{\"type\":\"output\",\"id\":%i,\"stream\":\"stdout\",\"data\":\"NOT OURS\"}\n"
                                         "{\"type\":\"output\",\"id\":%i,\"stream\":\"stdout\",\"data\":\"hello \"}\n"
                                         "{\"type\":\"output\",\"id\":%i,\"stream\":\"evil\",\"data\":\"world\"}\n"
                                         "{\"type\":\"exit\",\"id\":%i,\"status\":7,\"signal\":0,\"timed_out\":false,\"duration_usec\":5}\n",
                                         id, id + 100, id, id, id);
                                put(fd, line);
                        }
                        break;
                case S_REFUSED:
                        put(fd, "{\"type\":\"error\",\"message\":\"no\\nsecond line \\u001b[31m\"}\n");
                        break;
                case S_WRONG_UNIT:
                        put(fd, "{\"type\":\"ready\",\"unit\":\"sshd.service\",\"pid\":42}\n");
                        break;
                case S_PID_ONE:
                        ready(fd, 1);
                        break;
                case S_CLOSED:
                        break;
                case S_GIANT_LINE: {
                        ready(fd, getpid());
                        (void) get_request(fd);
                        static char big[512 * 1024];
                        memset(big, 'x', sizeof(big));
                        (void) !send(fd, big, sizeof(big), MSG_NOSIGNAL);
                        (void) get_request(fd); /* until the client hangs up */
                        break;
                }
                case S_EOF_MID:
                        ready(fd, getpid());
                        id = get_request(fd);
                        snprintf(line, sizeof(line), "{\"type\":\"output\",\"id\":%i,\"stream\":\"stdout\",\"data\":\"partial\"}\n", id);
                        put(fd, line);
                        break;
                case S_GARBAGE:
                        ready(fd, getpid());
                        (void) get_request(fd);
                        put(fd, "{\"type\":\"exit\",\"id\":\n");
                        (void) get_request(fd);
                        break;
                case S_REAP:
                        put(fd, "{\"type\":\"reaped\",\"units\":[\"agentfab-task-000000000001.scope\",\"agentfab-task-000000000002.scope\"]}\n");
                        break;
                }
                close(fd);
        }
        _exit(0);
}

typedef struct Outcome {
        int error;
        int status;
        char *output;
        uint64_t output_bytes;
        unsigned chunks;
        bool bad_stream;
} Outcome;

static void on_output(const char *stream, const char *data, size_t n, void *userdata) {
        Outcome *o = userdata;
        o->chunks++;
        if (!streq(stream, "stdout") && !streq(stream, "stderr"))
                o->bad_stream = true;
}

static void on_done(SandboxSession *s, int error, const ExecResult *r, void *userdata) {
        Outcome *o = userdata;
        o->error = error;
        o->status = r->status;
        o->output = r->output ? strdup(r->output) : NULL;
        o->output_bytes = r->output_bytes;
}

static sd_event *event;

static void on_done_exit(SandboxSession *s, int error, const ExecResult *r, void *userdata) {
        on_done(s, error, r, userdata);
}

static int run(SandboxSession *s, Outcome *o) {
        char *argv[] = { "true", NULL };
        ExecRequest req = { .argv = argv, .timeout_usec = UINT64_MAX };
        int r;

        *o = (Outcome) { .error = 1 };
        r = sandbox_session_exec(s, &req, -EBADF, 64, on_output, on_done_exit, o);
        if (r < 0)
                return r;
        /* A second command while one runs: refused, the first unharmed. */
        CHECK_ERRNO(sandbox_session_exec(s, &req, -EBADF, 64, NULL, on_done_exit, o), -EBUSY, "busy session refuses a second command");
        /* Until the handler ran; bounded, so a hang is a failure, not a stuck test. */
        for (int i = 0; i < 1000 && o->error == 1; i++) {
                r = sd_event_run(event, 5 * USEC_PER_SEC);
                if (r <= 0)
                        return r < 0 ? r : -ETIMEDOUT;
        }
        return 0;
}

static int open_session(SandboxSession **ret, char **ret_error) {
        _cleanup_close_ int ws = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return sandbox_session_open(event, sock_path, TASK, ws, NULL, NULL, ret_error, ret);
}

typedef struct OpenOutcome {
        bool done;
        int error;
        char *message;
} OpenOutcome;

static void on_open(SandboxSession *s, int error, const char *message, void *userdata) {
        OpenOutcome *o = userdata;
        o->done = true;
        o->error = error;
        o->message = message ? strdup(message) : NULL;
}

/* The same through sandbox_session_open_async(): it returns before the
 * launcher answers, and the answer comes on the event loop. */
static int open_session_async(SandboxSession **ret, char **ret_error) {
        _cleanup_close_ int ws = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        OpenOutcome o = {};
        SandboxSession *s = NULL;
        int r;

        r = sandbox_session_open_async(event, sock_path, TASK, ws, NULL, NULL, NULL, -EBADF, -EBADF, -EBADF, on_open, &o, &s);
        if (r < 0)
                return r;
        for (int i = 0; i < 1000 && !o.done; i++) {
                r = sd_event_run(event, 5 * USEC_PER_SEC);
                if (r <= 0)
                        break;
        }
        if (!o.done) {
                sandbox_session_free(s);
                return -ETIMEDOUT;
        }
        if (o.error < 0) {
                sandbox_session_free(s);
                *ret_error = o.message;
                return o.error;
        }
        free(o.message);
        *ret = s;
        return 0;
}

int main(void) {
        SandboxSession *s = NULL;
        char *error = NULL, dir[] = "/tmp/test-exec-session-XXXXXX";
        Outcome o;
        int r;

        if (!mkdtemp(dir))
                return 1;
        snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strcpy(sa.sun_path, sock_path);
        int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(listen_fd, 8) < 0)
                return 1;
        pid_t pid = fork();
        if (pid == 0)
                fake_launcher(listen_fd);
        close(listen_fd);
        if (sd_event_new(&event) < 0)
                return 1;

        /* A well-behaved sandbox: output of other ids ignored, a stream
         * name it made up never reaches the handler, two commands in a row. */
        r = open_session_async(&s, &error);
        CHECK(r == 0 && streq_ptr(sandbox_session_get_unit(s), UNIT) && sandbox_session_get_pid(s) == pid,
              "ready on the event loop: unit and pid taken (%i)", r);
        r = run(s, &o);
        CHECK(r == 0 && o.error == 0 && o.status == 7 && streq_ptr(o.output, "hello world") && o.output_bytes == 11 &&
              o.chunks == 2 && !o.bad_stream, "command done: status %i, output '%s', %u chunks", o.status, strempty(o.output), o.chunks);
        free(o.output);
        r = run(s, &o);
        CHECK(r == 0 && o.error == 0 && o.status == 7, "a second command on the same session");
        free(o.output);
        s = sandbox_session_free(s);

        /* The launcher's reason reaches the caller as one safe line. */
        r = open_session_async(&s, &error);
        CHECK(r == -EREMOTEIO && error && strneq(error, "no", 2) && !strchr(error, '\n') && !strchr(error, '\033'),
              "refusal on the event loop: %s, '%s'", strerror(-r), strempty(error));
        error = mfree_ptr(error);

        /* A "ready" for another unit, or for pid 1, is not believed. */
        r = open_session(&s, &error);
        CHECK(r == -EBADMSG && !s, "ready for another unit refused: %s", strerror(-r));
        r = open_session(&s, &error);
        CHECK(r == -EBADMSG && !s, "ready with pid 1 refused: %s", strerror(-r));
        s = NULL;
        r = open_session_async(&s, &error);
        CHECK(r == -ECONNRESET && !s, "launcher hung up, on the event loop: %s", strerror(-r));

        /* A line longer than any reply can be: the client stops listening,
         * memory stays bounded, the session is dead. */
        r = open_session(&s, &error);
        CHECK_ERRNO(r, 0, "ready (giant line)");
        r = run(s, &o);
        CHECK_ERRNO(o.error, -EBADMSG, "giant line: %s", strerror(-o.error));
        free(o.output);
        char *argv[] = { "true", NULL };
        ExecRequest req = { .argv = argv, .timeout_usec = UINT64_MAX };
        CHECK_ERRNO(sandbox_session_exec(s, &req, -EBADF, 64, NULL, on_done_exit, &o), -ENOTCONN, "dead session refuses commands");
        s = sandbox_session_free(s);

        /* The sandbox goes away in the middle of a command: the output so far comes with the error. */
        r = open_session(&s, &error);
        r = run(s, &o);
        CHECK(o.error == -ECONNRESET && streq_ptr(o.output, "partial"), "EOF mid-command: %s, '%s'", strerror(-o.error), strempty(o.output));
        free(o.output);
        s = sandbox_session_free(s);

        /* Not JSON. */
        r = open_session(&s, &error);
        r = run(s, &o);
        CHECK_ERRNO(o.error, -EBADMSG, "truncated JSON: %s", strerror(-o.error));
        free(o.output);
        s = sandbox_session_free(s);

        /* Reap counts what the launcher stopped. */
        r = sandbox_session_reap(sock_path, NULL);
        CHECK_INT_EQ(r, 2, "reap: %i", r);

        int status;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "fake launcher served every scenario");
        sd_event_unref(event);
        unlink(sock_path);
        rmdir(dir);
        return tap_done();
}
