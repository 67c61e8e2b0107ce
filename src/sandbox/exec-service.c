/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec-service.h"
#include "io-util.h"
#include "json-util.h"
#include "macro.h"
#include "sandbox.h"
#include "string-util.h"
#include "time-util.h"

static void send_all(int fd, const char *s, size_t n) {
        if (loop_write(fd, s, n) < 0)
                _exit(0); /* the other side is gone: so are we */
}

static void send_json(int fd, json_object *j) {
        const char *line = json_to_line(j);
        send_all(fd, line, strlen(line));
        send_all(fd, "\n", 1);
}

static void send_simple(int fd, const char *type, int64_t id, const char *key, const char *value) {
        _cleanup_json_ json_object *j = json_object_new_object();
        if (!j)
                _exit(127);
        json_object_object_add(j, "type", json_object_new_string(type));
        json_object_object_add(j, "id", json_object_new_int64(id));
        if (key)
                json_object_object_add(j, key, json_object_new_string(value));
        send_json(fd, j);
}

static void send_output(int fd, int64_t id, const char *stream, char *data, size_t n) {
        _cleanup_json_ json_object *j = json_object_new_object();
        utf8_sanitize(data, n);
        if (!j)
                _exit(127);
        json_object_object_add(j, "type", json_object_new_string("output"));
        json_object_object_add(j, "id", json_object_new_int64(id));
        json_object_object_add(j, "stream", json_object_new_string(stream));
        json_object_object_add(j, "data", json_object_new_string_len(data, (int) n));
        send_json(fd, j);
}

/* Kills every process of the sandbox but us, and reaps those already gone. */
static void kill_all_but_us(void) {
        (void) kill(-1, SIGKILL);
        while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
}

/* The same, but returns only when they are all gone: SIGKILL takes effect
 * asynchronously, so a process killed just now may still be listed (by
 * the next command's ps, say). Every one is ours to reap, as
 * PID 1 of the namespace; what a fork in flight made is killed in the next
 * round. Only once the command's own status is collected. */
static void kill_all_and_wait(void) {
        for (;;) {
                (void) kill(-1, SIGKILL);
                if (waitpid(-1, NULL, 0) < 0 && errno != EINTR)
                        return; /* ECHILD: nobody left */
        }
}

typedef struct Request {
        int64_t id;
        char **argv;
        char **env;
        const char *cwd;
        uint64_t timeout_usec;
        bool output_fd;            /* stdout and stderr go to the fd that came with the request */
} Request;

static void request_done(Request *r) {
        strv_free(r->argv);
        strv_free(r->env);
        *r = (Request) {};
}

/* Validates a request completely before anything runs. Returns NULL or an error message. */
static const char *parse_request(json_object *j, char **base_env, Request *ret) {
        json_object *v;

        if (!json_object_is_type(j, json_type_object))
                return "request is not an object";
        if (!json_object_object_get_ex(j, "type", &v) || !json_object_is_type(v, json_type_string) ||
            !streq(json_object_get_string(v), "exec"))
                return "unknown request type";
        if (!json_object_object_get_ex(j, "id", &v) || !json_object_is_type(v, json_type_int))
                return "'id' missing";
        ret->id = json_object_get_int64(v);

        if (!json_object_object_get_ex(j, "argv", &v) || !json_object_is_type(v, json_type_array) ||
            json_object_array_length(v) == 0 || json_object_array_length(v) > EXEC_ARGV_MAX)
                return "'argv' must be an array of 1 to 4096 strings";
        for (size_t i = 0; i < json_object_array_length(v); i++) {
                json_object *a = json_object_array_get_idx(v, i);
                if (!json_object_is_type(a, json_type_string) || memchr(json_object_get_string(a), 0, (size_t) json_object_get_string_len(a)))
                        return "'argv' must be an array of strings";
                if (strv_extend(&ret->argv, json_object_get_string(a)) < 0)
                        return "out of memory";
        }
        if (isempty(ret->argv[0]))
                return "empty command";

        ret->cwd = SANDBOX_WORKSPACE;
        if (json_object_object_get_ex(j, "cwd", &v)) {
                if (!json_object_is_type(v, json_type_string) || json_object_get_string(v)[0] != '/')
                        return "'cwd' must be an absolute path";
                ret->cwd = json_object_get_string(v);
        }

        for (char **e = base_env; e && *e; e++)
                if (strv_extend(&ret->env, *e) < 0)
                        return "out of memory";
        if (json_object_object_get_ex(j, "env", &v)) {
                if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) > EXEC_ENV_MAX)
                        return "'env' must be an object of at most 1024 strings";
                json_object_object_foreach(v, name, value) {
                        _cleanup_free_ char *entry = NULL;
                        if (!json_object_is_type(value, json_type_string) || isempty(name) || strchr(name, '=') ||
                            asprintf(&entry, "%s=%s", name, json_object_get_string(value)) < 0)
                                return "'env' must map names to strings";
                        if (strv_env_set(&ret->env, entry) < 0)
                                return "out of memory";
                }
        }

        if (json_object_object_get_ex(j, "output_fd", &v)) {
                if (!json_object_is_type(v, json_type_boolean))
                        return "'output_fd' must be a boolean";
                ret->output_fd = json_object_get_boolean(v);
        }

        ret->timeout_usec = UINT64_MAX;
        if (json_object_object_get_ex(j, "timeout_ms", &v)) {
                if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) <= 0)
                        return "'timeout_ms' must be a positive integer";
                ret->timeout_usec = (uint64_t) json_object_get_int64(v) * USEC_PER_MSEC;
        }
        return NULL;
}

/* In the vfork() child: no stdio, no allocation, only write() and _exit(). */
__attribute__((noreturn))
static void vfork_child_fail(const char *what, const char *arg, int error) {
        const char *e = strerror(error);
        (void) !write(2, what, strlen(what));
        (void) !write(2, arg, strlen(arg));
        (void) !write(2, "': ", 3);
        (void) !write(2, e, strlen(e));
        (void) !write(2, "\n", 1);
        _exit(127);
}

/* {"type":"extend","id":N,"usec":U}: the sandbox was frozen for U
 * microseconds while command N ran (the daemon writes it before it has
 * the sandbox thawed, so it is read before any deadline is looked at):
 * frozen time does not count towards the command's timeout. Returns the
 * extension, 0 for anything else. */
static uint64_t parse_extend(const char *line, size_t n, int64_t id) {
        _cleanup_json_ json_object *j = NULL;
        json_object *v;

        if (json_parse_strict(line, n, &j) < 0 || !json_object_is_type(j, json_type_object) ||
            !json_object_object_get_ex(j, "type", &v) || !json_object_is_type(v, json_type_string) ||
            !streq(json_object_get_string(v), "extend") ||
            !json_object_object_get_ex(j, "id", &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) != id ||
            !json_object_object_get_ex(j, "usec", &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) <= 0)
                return 0;
        return (uint64_t) json_object_get_int64(v);
}

static bool line_is_extend(const char *line, size_t n) {
        _cleanup_json_ json_object *j = NULL;
        json_object *v;

        return json_parse_strict(line, n, &j) >= 0 && json_object_is_type(j, json_type_object) &&
                json_object_object_get_ex(j, "type", &v) && json_object_is_type(v, json_type_string) &&
                streq(json_object_get_string(v), "extend");
}

/* What came on the connection while command id ran: extensions are used
 * up; anything else stays in buf for the main loop (the daemon sends
 * nothing else while a command runs). Returns false when the buffer holds
 * something that is not for us, so that the connection is no longer polled. */
static bool take_extensions(char *buf, size_t *len, int64_t id, uint64_t *extended) {
        char *nl;

        while ((nl = memchr(buf, '\n', *len))) {
                size_t n = (size_t) (nl - buf);
                if (!line_is_extend(buf, n))
                        return false;
                uint64_t u = parse_extend(buf, n, id);
                if (u > 0 && *extended <= UINT64_MAX - u)
                        *extended += u;
                *len -= n + 1;
                memmove(buf, nl + 1, *len);
        }
        return *len < EXEC_REQUEST_MAX;
}

/* buf holds what came on the connection after the request (len bytes):
 * extensions are taken from it while the command runs. output_fd is the fd
 * that came with the request, if any; it is used up. */
static void run_request(int fd, const Request *r, char *buf, size_t *len, int *output_fd) {
        int out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };

        if (r->output_fd) {
                /* Both streams into the other side's pipe: we never see the bytes. */
                struct stat st;
                if (*output_fd < 0 || fstat(*output_fd, &st) < 0 || !S_ISFIFO(st.st_mode))
                        return send_simple(fd, "error", r->id, "message", "'output_fd' needs a pipe sent with the request");
                out[1] = fcntl(*output_fd, F_DUPFD_CLOEXEC, 3);
                err[1] = fcntl(*output_fd, F_DUPFD_CLOEXEC, 3);
                /* Only the command's copies stay: the other side sees the end
                 * of output when the last of them closes. */
                *output_fd = safe_close(*output_fd);
                if (out[1] < 0 || err[1] < 0) {
                        safe_close(out[1]), safe_close(err[1]);
                        return send_simple(fd, "error", r->id, "message", "cannot duplicate the output pipe");
                }
        } else if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
                return send_simple(fd, "error", r->id, "message", "cannot create pipes");

        /* vfork(): the child only makes syscalls before execve(), and a
         * shared address space spares copying PID 1's page tables for every
         * command. */
        uint64_t start = clock_now_usec(CLOCK_MONOTONIC);
        pid_t pid = vfork();
        if (pid < 0) {
                safe_close(out[0]), safe_close(out[1]), safe_close(err[0]), safe_close(err[1]);
                return send_simple(fd, "error", r->id, "message", "cannot fork");
        }
        if (pid == 0) {
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                (void) setsid();
                if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
                        _exit(127);
                if (chdir(r->cwd) < 0)
                        vfork_child_fail("Cannot change to the working directory '", r->cwd, errno);
                sandbox_exec_command(r->argv, r->env);
                vfork_child_fail("Cannot execute '", r->argv[0], errno);
        }
        safe_close(out[1]);
        safe_close(err[1]);
        send_simple(fd, "started", r->id, NULL, NULL);

        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        uint64_t extended = 0;
        bool exited = false, timed_out = false, listen = take_extensions(buf, len, r->id, &extended);
        int status = 0;
        char chunk[EXEC_OUTPUT_CHUNK];

        while (out[0] >= 0 || err[0] >= 0 || !exited) {
                struct pollfd p[4] = {
                        { .fd = out[0], .events = POLLIN },
                        { .fd = err[0], .events = POLLIN },
                        { .fd = exited ? -1 : pidfd, .events = POLLIN },
                        { .fd = listen ? fd : -1, .events = POLLIN },
                };
                /* The connection first: an extension written while we were
                 * frozen must count before the deadline is looked at. */
                if (listen && poll(p + 3, 1, 0) > 0) {
                        ssize_t k = read(fd, buf + *len, EXEC_REQUEST_MAX - *len);
                        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
                                /* The daemon let go of the sandbox: it ends now, not when the command does. */
                                kill_all_but_us();
                                _exit(0);
                        }
                        if (k > 0)
                                *len += (size_t) k;
                        listen = take_extensions(buf, len, r->id, &extended);
                        p[3].fd = listen ? fd : -1;
                }
                int timeout = -1;
                if (r->timeout_usec != UINT64_MAX && !timed_out) {
                        uint64_t now = clock_now_usec(CLOCK_MONOTONIC), deadline = start + r->timeout_usec;
                        deadline = deadline > UINT64_MAX - extended ? UINT64_MAX : deadline + extended;
                        timeout = now >= deadline ? 0 : (int) MIN((deadline - now + 999) / 1000, (uint64_t) INT32_MAX);
                }
                int n = poll(p, 4, timeout);
                if (n < 0 && errno != EINTR)
                        break;
                if (n > 0 && p[3].revents)
                        continue;   /* read at the top of the loop */
                if (n == 0) {
                        /* The timeout: the command and everything it started. */
                        timed_out = true;
                        kill_all_but_us();
                        continue;
                }
                for (int i = 0; i < 2; i++) {
                        if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        ssize_t k = read(p[i].fd, chunk, sizeof(chunk));
                        if (k > 0)
                                send_output(fd, r->id, i == 0 ? "stdout" : "stderr", chunk, (size_t) k);
                        else if (k == 0 || errno != EINTR) {
                                if (i == 0)
                                        out[0] = safe_close(out[0]);
                                else
                                        err[0] = safe_close(err[0]);
                        }
                }
                if (!exited && (pidfd < 0 || (p[2].revents & POLLIN))) {
                        if (waitpid(pid, &status, pidfd < 0 ? 0 : WNOHANG) == pid) {
                                exited = true;
                                /* Whatever it left running would hold the pipes open: end it. */
                                kill_all_but_us();
                        }
                }
        }
        safe_close(pidfd);
        kill_all_and_wait();

        _cleanup_json_ json_object *j = json_object_new_object();
        if (!j)
                _exit(127);
        json_object_object_add(j, "type", json_object_new_string("exit"));
        json_object_object_add(j, "id", json_object_new_int64(r->id));
        json_object_object_add(j, "status", json_object_new_int(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
        json_object_object_add(j, "signal", json_object_new_int(WIFSIGNALED(status) ? WTERMSIG(status) : 0));
        json_object_object_add(j, "timed_out", json_object_new_boolean(timed_out));
        /* Time frozen is no time the command ran. */
        uint64_t duration = clock_now_usec(CLOCK_MONOTONIC) - start;
        duration = duration > extended ? duration - extended : 0;
        json_object_object_add(j, "duration_usec", json_object_new_int64((int64_t) duration));
        /* The sandbox's PID namespace hands out its ids in order from 1:
         * the last one given is how many processes and threads were
         * started in it so far, this command's with the rest. */
        char last[32] = "";
        int lfd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
        if (lfd >= 0) {
                ssize_t k = read(lfd, last, sizeof(last) - 1);
                uint64_t v;
                last[k > 0 ? k : 0] = '\0';
                last[strcspn(last, "\n")] = '\0';
                if (safe_atou64(last, &v) >= 0)
                        json_object_object_add(j, "last_pid", json_object_new_int64((int64_t) v));
                safe_close(lfd);
        }
        send_json(fd, j);
}

/* read() that also takes the fds sent with the bytes: the last one is kept
 * in *pending (for the next request that asks for it), others closed. */
static ssize_t recv_request(int fd, char *buf, size_t n, int *pending) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } control = {};
        struct iovec iov = { .iov_base = buf, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
        ssize_t k;

        k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (k < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < m; i++) {
                        int got;
                        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        safe_close(*pending);
                        *pending = got;
                }
        }
        return k;
}

void exec_service_run(const SandboxConfig *c, int fd) {
        _cleanup_free_ char *line = malloc(EXEC_REQUEST_MAX + 1);
        int pending_fd = -EBADF;
        size_t len = 0;

        if (!line)
                _exit(127);

        for (;;) {
                ssize_t k = recv_request(fd, line + len, EXEC_REQUEST_MAX - len, &pending_fd);
                if (k == -EINTR)
                        continue;
                if (k <= 0) {
                        kill_all_but_us();
                        _exit(0); /* the connection closed: the sandbox ends */
                }
                len += (size_t) k;

                char *nl;
                while ((nl = memchr(line, '\n', len))) {
                        _cleanup_json_ json_object *j = NULL;
                        Request r = {};
                        const char *error;

                        *nl = '\0';
                        size_t n = (size_t) (nl - line);
                        len -= n + 1;
                        /* The request leaves the buffer before it runs: what
                         * comes while it runs is appended (run_request()). */
                        _cleanup_free_ char *req = strndup(line, n);
                        memmove(line, nl + 1, len);
                        if (!req)
                                _exit(127);
                        /* An extension for a command that ended before it came: nothing to do. */
                        if (line_is_extend(req, n))
                                continue;
                        if (json_parse_strict(req, n, &j) < 0)
                                error = "request is not JSON";
                        else
                                error = parse_request(j, c->envp, &r);
                        if (error)
                                send_simple(fd, "error", r.id, "message", error);
                        else
                                run_request(fd, &r, line, &len, &pending_fd);
                        /* An fd goes with one request only. */
                        pending_fd = safe_close(pending_fd);
                        request_done(&r);
                }
                if (len >= EXEC_REQUEST_MAX) {
                        send_simple(fd, "error", 0, "message", "request too long");
                        _exit(0);
                }
        }
}
