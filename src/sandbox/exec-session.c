/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "exec-output.h"
#include "exec-session.h"
#include "json-util.h"
#include "launcher-client.h"
#include "macro.h"
#include "session-check.h"
#include "socket-util.h"
#include "string-util.h"
#include "time-util.h"

struct SandboxSession {
        sd_event *event;
        sd_event_source *io;
        sd_event_source *timer;
        int fd;
        char task[AGENTFAB_TASK_ID_LEN + 1];
        char *unit;
        pid_t pid;
        int pidfd;                 /* of the sandbox's PID 1, for the launcher's freezer */
        uid_t uid;                 /* what the task's commands run as */
        char *memory_cgroup;

        /* Replies read but not yet parsed, at most one line. */
        char *rbuf;
        size_t rlen;
        /* The request not yet written. */
        char *wbuf;
        size_t wlen, wpos;

        bool ready;                /* the launcher said "ready" */

        bool busy;
        uint64_t last_pid;         /* as the last command's end said; UINT64_MAX: never said */
        int64_t next_id;
        int64_t current_id;        /* of the command in flight */

        /* Frozen: no io, and the command's deadline moved on by the time
         * it stood frozen once thawed. */
        bool frozen;
        uint64_t frozen_since;     /* CLOCK_MONOTONIC */
        uint64_t extended_usec;    /* told to the sandbox during this freeze */
        uint64_t timer_left;       /* of the deadline, when frozen; UINT64_MAX: no timer */
        ExecCollector collector;

        /* The command's output pipe (output_fd requests), while it runs. */
        ExecOutput output;
        exec_done_handler_t done;
        void *userdata;

        /* Told before each command goes out (sandbox_session_set_exec_hook()). */
        session_exec_hook_t exec_hook;
        void *exec_hook_userdata;

        /* While the launcher makes the sandbox (sandbox_session_open_async()). */
        session_open_handler_t open_done;
        void *open_userdata;
};

SandboxSession *sandbox_session_free(SandboxSession *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->io);
        sd_event_source_disable_unref(s->timer);
        exec_output_close(&s->output);
        safe_close(s->fd);
        safe_close(s->pidfd);
        if (s->busy)
                exec_collector_done(&s->collector);
        free(s->unit);
        free(s->memory_cgroup);
        free(s->rbuf);
        free(s->wbuf);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

/* The sandbox is gone or lied: stop talking to it. Closing our end is what
 * ends the sandbox, if it still lives. */
static void session_disconnect(SandboxSession *s) {
        s->io = sd_event_source_disable_unref(s->io);
        s->fd = safe_close(s->fd);
}

/* Hands the result to the handler, last: the handler may free s or start
 * the next command, so nothing here touches s after the call. */
static void session_finish(SandboxSession *s, int error) {
        exec_done_handler_t done = s->done;
        void *userdata = s->userdata;
        ExecResult result = {};
        int r;

        r = exec_collector_end(&s->collector, &result);
        exec_collector_done(&s->collector);
        if (error == 0 && r < 0)
                error = r;
        if (s->output.log_fd >= 0) {
                r = exec_output_finish(&s->output, &result);
                if (error == 0 && r < 0)
                        error = r;
        }
        s->busy = false;
        if (result.last_pid != UINT64_MAX)
                s->last_pid = result.last_pid;
        s->done = NULL;
        s->userdata = NULL;
        s->timer = sd_event_source_disable_unref(s->timer);
        s->wbuf = mfree_ptr(s->wbuf);
        s->wlen = s->wpos = 0;

        if (done)
                done(s, error, &result, userdata);
        exec_result_done(&result);
}

static void session_fail(SandboxSession *s, int error) {
        session_disconnect(s);
        if (s->busy)
                session_finish(s, error);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        SandboxSession *s = userdata;

        /* The sandbox enforces each command's timeout itself; a sandbox
         * that does not is broken or subverted, and ends here. */
        session_fail(s, -ETIMEDOUT);
        return 0;
}

static int flush_request(SandboxSession *s) {
        while (s->wpos < s->wlen) {
                /* The output pipe goes with the request's first byte. */
                bool pass = s->output.pass_fd >= 0;
                ssize_t k = socket_send_fds(s->fd, s->wbuf + s->wpos, s->wlen - s->wpos, &s->output.pass_fd,
                                            pass ? 1 : 0, MSG_DONTWAIT);
                if (k == -EAGAIN)
                        return sd_event_source_set_io_events(s->io, EPOLLIN | EPOLLOUT);
                if (k < 0)
                        return (int) k;
                if (k > 0)
                        /* Ours no more: the end of output is when the sandbox's copies close. */
                        s->output.pass_fd = safe_close(s->output.pass_fd);
                s->wpos += (size_t) k;
        }
        s->wbuf = mfree_ptr(s->wbuf);
        s->wlen = s->wpos = 0;
        return sd_event_source_set_io_events(s->io, EPOLLIN);
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        SandboxSession *s = userdata;
        int r;

        if ((revents & EPOLLOUT) && s->wbuf) {
                r = flush_request(s);
                if (r < 0) {
                        session_fail(s, r == -EPIPE ? -ECONNRESET : r);
                        return 0;
                }
        }
        if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return 0;

        ssize_t k = recv(s->fd, s->rbuf + s->rlen, EXEC_REPLY_LINE_MAX - s->rlen, MSG_DONTWAIT);
        if (k < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return 0;
                session_fail(s, -errno);
                return 0;
        }
        if (k == 0) {
                session_fail(s, -ECONNRESET);
                return 0;
        }
        if (!s->busy) {
                /* Between commands the sandbox has nothing to say. */
                s->rlen = 0;
                return 0;
        }
        s->rlen += (size_t) k;

        for (;;) {
                char *nl = memchr(s->rbuf, '\n', s->rlen);
                if (!nl) {
                        if (s->rlen >= EXEC_REPLY_LINE_MAX)
                                session_fail(s, -EBADMSG);
                        return 0;
                }
                *nl = '\0';
                r = exec_collector_feed(&s->collector, s->rbuf, (size_t) (nl - s->rbuf));
                size_t used = (size_t) (nl + 1 - s->rbuf);
                s->rlen -= used;
                memmove(s->rbuf, s->rbuf + used, s->rlen);

                if (r == -EINVAL) {
                        /* Refused (a bad request): the sandbox lives on. */
                        session_finish(s, r);
                        return 0;
                }
                if (r < 0) {
                        session_fail(s, r);
                        return 0;
                }
                if (r > 0) {
                        session_finish(s, 0);
                        return 0;
                }
        }
}

/* A session of task_id on e, not connected yet. */
static int session_new(sd_event *e, const char *task_id, SandboxSession **ret) {
        _cleanup_(sandbox_session_freep) SandboxSession *s = calloc(1, sizeof(SandboxSession));

        if (!s)
                return -ENOMEM;
        s->fd = s->pidfd = -EBADF;
        exec_output_init(&s->output);
        s->next_id = 1;
        s->last_pid = UINT64_MAX;
        s->event = sd_event_ref(e);
        memcpy(s->task, task_id, sizeof(s->task));
        s->rbuf = malloc(EXEC_REPLY_LINE_MAX + 1);
        if (!s->rbuf || asprintf(&s->unit, "agentfab-task-%s.scope", task_id) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(s);
        return 0;
}

/* Connects to the launcher and sends request, with the fds of pass (those
 * >= 0). */
static int launcher_request(const char *launcher_socket, json_object *request, const int pass[static LAUNCHER_FDS_MAX],
                            int *ret_fd) {
        _cleanup_free_ char *line = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (asprintf(&line, "%s\n", json_to_line(request)) < 0)
                return -ENOMEM;
        r = launcher_connect(launcher_socket ?: SANDBOX_LAUNCHER_SOCKET, SANDBOX_SESSION_OPEN_TIMEOUT_USEC, &fd);
        if (r < 0)
                return r;
        r = launcher_send(fd, line, pass);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* A reply of the launcher, the line text[0..n): an object whose "type" (in
 * *ret_type, valid as long as the reply) is not "error". An error reply's
 * message goes to *ret_error (when not NULL), and -EREMOTEIO is returned. */
static int launcher_reply_parse(const char *text, size_t n, json_object **ret_reply, const char **ret_type,
                                char **ret_error) {
        _cleanup_json_ json_object *reply = NULL;
        const char *type;

        if (json_parse_strict(text, n, &reply) < 0 || !json_object_is_type(reply, json_type_object) ||
            json_get_string(reply, "type", &type) < 0)
                return -EBADMSG;
        if (streq(type, "error"))
                return launcher_reply_error(reply, ret_error);
        *ret_type = type;
        *ret_reply = TAKE_PTR(reply);
        return 0;
}

/* One request to the launcher on a connection of its own, and its reply
 * within timeout_usec (as launcher_reply_parse() takes it). */
static int launcher_call(const char *launcher_socket, json_object *request, const int pass[static LAUNCHER_FDS_MAX],
                         uint64_t timeout_usec, json_object **ret_reply, const char **ret_type, char **ret_error) {
        _cleanup_free_ char *buf = malloc(LAUNCHER_REPLY_MAX + 1);
        _cleanup_close_ int fd = -EBADF;
        size_t len = 0;
        int r;

        if (!buf)
                return -ENOMEM;
        r = launcher_request(launcher_socket, request, pass, &fd);
        if (r < 0)
                return r;
        r = launcher_read_line(fd, buf, LAUNCHER_REPLY_MAX, &len, clock_now_usec(CLOCK_MONOTONIC) + timeout_usec);
        if (r < 0)
                return r;
        return launcher_reply_parse(buf, (size_t) r, ret_reply, ret_type, ret_error);
}

/* Connects to the launcher and sends the request; the reply is read by the
 * caller. */
static int session_start(sd_event *e, const char *launcher_socket, const char *task_id, int workspace_fd,
                         const SandboxLimits *limits, char **env, const char *environment, int cache_fd,
                         int history_fd, int proxy_fd, SandboxSession **ret) {
        _cleanup_(sandbox_session_freep) SandboxSession *s = NULL;
        _cleanup_json_ json_object *j = NULL, *l = NULL, *en = NULL;
        int r;

        if (!e || !task_id || strlen(task_id) != AGENTFAB_TASK_ID_LEN || workspace_fd < 0 || !ret)
                return -EINVAL;

        j = json_object_new_object();
        l = json_object_new_object();
        en = json_object_new_object();
        if (!j || !l || !en || json_add_string(j, "type", "sandbox") < 0 || json_add_string(j, "task", task_id) < 0)
                return -ENOMEM;
        if (limits) {
                const struct { const char *name; uint64_t value; } fields[] = {
                        { "memory_max", limits->memory_max },
                        { "tasks_max", limits->tasks_max },
                        { "cpu_quota_percent", limits->cpu_quota_percent },
                        { "runtime_max_sec", limits->runtime_max_sec },
                };
                for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                        if (fields[i].value > 0 && json_add_uint64(l, fields[i].name, fields[i].value) < 0)
                                return -ENOMEM;
        }
        for (char **v = env; v && *v; v++) {
                _cleanup_free_ char *name = strndup(*v, strcspn(*v, "="));
                const char *eq = strchr(*v, '=');
                if (!name || !eq)
                        return -EINVAL;
                if (json_add_string(en, name, eq + 1) < 0)
                        return -ENOMEM;
        }
        if (json_object_object_add(j, "limits", json_object_get(l)) < 0 ||
            json_object_object_add(j, "env", json_object_get(en)) < 0 ||
            (environment && json_add_string(j, "environment", environment) < 0) ||
            (cache_fd >= 0 && json_object_object_add(j, "cache", json_object_new_boolean(true)) < 0) ||
            (history_fd >= 0 && json_object_object_add(j, "history", json_object_new_boolean(true)) < 0) ||
            (proxy_fd >= 0 && json_object_object_add(j, "proxy", json_object_new_boolean(true)) < 0))
                return -ENOMEM;

        r = session_new(e, task_id, &s);
        if (r < 0)
                return r;

        r = launcher_request(launcher_socket, j, (const int[LAUNCHER_FDS_MAX]) { workspace_fd, cache_fd, history_fd, proxy_fd },
                             &s->fd);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

/* The launcher's reply, the line of length n at the start of rbuf: "ready",
 * and the session is ready for commands, or why not. */
static int session_take_reply(SandboxSession *s, size_t n, char **ret_error) {
        _cleanup_json_ json_object *reply = NULL;
        const char *type, *unit;
        uint64_t pid;
        int r;

        r = launcher_reply_parse(s->rbuf, n, &reply, &type, ret_error);
        if (r < 0)
                return r;
        if (!streq(type, "ready") || json_get_string(reply, "unit", &unit) < 0 || !streq(unit, s->unit) ||
            json_get_uint64(reply, "pid", &pid) < 0 || pid <= 1 || pid > INT32_MAX)
                return -EBADMSG;
        s->pid = (pid_t) pid;
        uint64_t uid;
        s->uid = json_get_uint64(reply, "uid", &uid) >= 0 && uid > 0 && uid < UINT32_MAX ? (uid_t) uid : UID_INVALID;
        /* Anything after "ready" came from the sandbox before it was asked: dropped. */
        s->rlen = 0;
        /* Taken now, while the connection proves the sandbox lives: the
         * freezer needs the process itself, not a number that may be reused. */
        s->pidfd = (int) syscall(SYS_pidfd_open, s->pid, 0);
        if (s->pidfd < 0)
                s->pidfd = -EBADF;

        /* Figures of the scope's memory cgroup, where there is a v1 one. */
        (void) exec_client_memory_cgroup(s->pid, &s->memory_cgroup);

        if (fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK) < 0)
                return -errno;
        r = sd_event_add_io(s->event, &s->io, s->fd, EPOLLIN, on_io, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->io, "sandbox-session");
        s->ready = true;
        return 0;
}

int sandbox_session_open(sd_event *e, const char *launcher_socket, const char *task_id, int workspace_fd,
                         const SandboxLimits *limits, char **env, char **ret_error, SandboxSession **ret) {
        return sandbox_session_open_in(e, launcher_socket, task_id, workspace_fd, limits, env, NULL, -EBADF, -EBADF,
                                       ret_error, ret);
}

int sandbox_session_open_in(sd_event *e, const char *launcher_socket, const char *task_id, int workspace_fd,
                            const SandboxLimits *limits, char **env, const char *environment, int cache_fd,
                            int proxy_fd, char **ret_error, SandboxSession **ret) {
        _cleanup_(sandbox_session_freep) SandboxSession *s = NULL;
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + SANDBOX_SESSION_OPEN_TIMEOUT_USEC;
        size_t len = 0;
        int r;

        r = session_start(e, launcher_socket, task_id, workspace_fd, limits, env, environment, cache_fd, -EBADF, proxy_fd,
                          &s);
        if (r < 0)
                return r;
        r = launcher_read_line(s->fd, s->rbuf, LAUNCHER_REPLY_MAX, &len, deadline);
        if (r < 0)
                return r;
        r = session_take_reply(s, (size_t) r, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

/* The asynchronous open: the launcher's reply is waited for on the event
 * loop, so that the caller's loop serves everything else meanwhile (the
 * launcher's work, making a scope through systemd, takes from milliseconds
 * to a second on a busy machine, and a daemon that resumes many tasks at
 * once would otherwise answer nobody until every sandbox is made). */
static void session_open_finish(SandboxSession *s, int r, char *error_message) {
        session_open_handler_t done = s->open_done;

        s->open_done = NULL;
        s->io = sd_event_source_disable_unref(s->io);
        s->timer = sd_event_source_disable_unref(s->timer);
        if (r >= 0)
                r = session_take_reply(s, s->rlen, &error_message);
        /* The handler may free the session: nothing after it. */
        done(s, r < 0 ? r : 0, error_message, s->open_userdata);
        free(error_message);
}

static int on_open_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        SandboxSession *s = userdata;
        char *nl;
        ssize_t k;

        (void) source;
        (void) revents;
        k = recv(fd, s->rbuf + s->rlen, LAUNCHER_REPLY_MAX - s->rlen, MSG_DONTWAIT);
        if (k < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return 0;
                session_open_finish(s, -errno, NULL);
                return 0;
        }
        if (k == 0) {
                session_open_finish(s, -ECONNRESET, NULL);
                return 0;
        }
        s->rlen += (size_t) k;
        nl = memchr(s->rbuf, '\n', s->rlen);
        if (nl) {
                *nl = '\0';
                s->rlen = (size_t) (nl - s->rbuf);
                session_open_finish(s, 0, NULL);
        } else if (s->rlen >= LAUNCHER_REPLY_MAX)
                session_open_finish(s, -EBADMSG, NULL);
        return 0;
}

static int on_open_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        (void) source;
        (void) usec;
        session_open_finish(userdata, -ETIMEDOUT, NULL);
        return 0;
}

int sandbox_session_open_async(sd_event *e, const char *launcher_socket, const char *task_id, int workspace_fd,
                               const SandboxLimits *limits, char **env, const char *environment, int cache_fd,
                               int history_fd, int proxy_fd, session_open_handler_t done, void *userdata,
                               SandboxSession **ret) {
        _cleanup_(sandbox_session_freep) SandboxSession *s = NULL;
        uint64_t now;
        int r;

        if (!done)
                return -EINVAL;
        r = session_start(e, launcher_socket, task_id, workspace_fd, limits, env, environment, cache_fd, history_fd,
                          proxy_fd, &s);
        if (r < 0)
                return r;
        s->open_done = done;
        s->open_userdata = userdata;
        if (fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK) < 0)
                return -errno;
        r = sd_event_add_io(e, &s->io, s->fd, EPOLLIN, on_open_io, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->io, "sandbox-session-open");
        r = sd_event_now(e, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return r;
        r = sd_event_add_time(e, &s->timer, CLOCK_MONOTONIC, now + SANDBOX_SESSION_OPEN_TIMEOUT_USEC, 0,
                              on_open_timer, s);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

bool sandbox_session_is_ready(const SandboxSession *s) {
        return s && s->ready && s->fd >= 0;
}

int sandbox_session_exec(SandboxSession *s, const ExecRequest *req, int log_fd, size_t keep,
                         exec_output_handler_t on_output, exec_done_handler_t done, void *userdata) {
        _cleanup_free_ char *line = NULL;
        int r;

        if (!s || !req || !req->argv || !req->argv[0] || !done)
                return -EINVAL;
        if (s->fd < 0 || !s->ready)
                return -ENOTCONN;
        if (s->busy)
                return -EBUSY;

        if (s->frozen)
                return -EAGAIN;

        /* With a log, the output goes into a pipe of ours and from there
         * to the log by splice(): the sandbox never sends it as JSON, we
         * never copy it. */
        ExecRequest fd_req = *req;
        fd_req.output_fd = log_fd >= 0;

        int64_t id = s->next_id++;
        r = exec_request_format(&fd_req, id, &line);
        if (r < 0)
                return r;
        if (strlen(line) > EXEC_REQUEST_MAX)
                return -E2BIG;
        if (log_fd >= 0) {
                r = exec_output_open(&s->output, s->event, log_fd, keep, on_output, userdata);
                if (r < 0) {
                        exec_output_close(&s->output);
                        return r;
                }
        }
        r = exec_collector_begin(&s->collector, id, log_fd >= 0 ? -EBADF : log_fd, keep, s->memory_cgroup,
                                 log_fd >= 0 ? NULL : on_output, userdata);
        if (r < 0) {
                exec_collector_done(&s->collector);
                exec_output_close(&s->output);
                return r;
        }

        if (req->timeout_usec != UINT64_MAX) {
                uint64_t now;
                r = sd_event_now(s->event, CLOCK_MONOTONIC, &now);
                if (r >= 0)
                        r = sd_event_add_time(s->event, &s->timer, CLOCK_MONOTONIC,
                                              now + req->timeout_usec + SANDBOX_SESSION_EXEC_GRACE_USEC, 0, on_timer, s);
                if (r < 0) {
                        exec_collector_done(&s->collector);
                        exec_output_close(&s->output);
                        return r;
                }
        }

        if (s->exec_hook)
                s->exec_hook(s, s->exec_hook_userdata);

        s->rlen = 0;
        s->wlen = strlen(line);
        s->wpos = 0;
        s->wbuf = TAKE_PTR(line);
        s->busy = true;
        s->current_id = id;
        s->done = done;
        s->userdata = userdata;

        r = flush_request(s);
        if (r < 0) {
                /* Not called back: the caller learns it from the return value. */
                s->done = NULL;
                session_fail(s, r);
                return r == -EPIPE ? -ECONNRESET : r;
        }
        return 0;
}

void sandbox_session_set_exec_hook(SandboxSession *s, session_exec_hook_t hook, void *userdata) {
        if (!s)
                return;
        s->exec_hook = hook;
        s->exec_hook_userdata = userdata;
}

const char *sandbox_session_get_unit(const SandboxSession *s) {
        return s ? s->unit : NULL;
}

pid_t sandbox_session_get_pid(const SandboxSession *s) {
        return s ? s->pid : 0;
}

uint64_t sandbox_session_get_last_pid(const SandboxSession *s) {
        return s ? s->last_pid : UINT64_MAX;
}

uid_t sandbox_session_get_uid(const SandboxSession *s) {
        return s ? s->uid : UID_INVALID;
}

bool sandbox_session_is_busy(const SandboxSession *s) {
        return s && s->busy;
}

/* One freeze or thaw request to the launcher, with the sandbox's pidfd. */
static int session_freezer_request(SandboxSession *s, const char *launcher_socket, bool freeze, const char **ret_method,
                                   uint64_t *ret_usec, char **ret_error) {
        _cleanup_json_ json_object *j = json_object_new_object(), *reply = NULL;
        const char *type, *method;
        uint64_t usec = 0;
        int r;

        if (!j)
                return -ENOMEM;
        if (s->pidfd < 0)
                return -ESRCH;
        if (json_add_string(j, "type", freeze ? "freeze" : "thaw") < 0 || json_add_string(j, "task", s->task) < 0)
                return -ENOMEM;

        r = launcher_call(launcher_socket, j, (const int[LAUNCHER_FDS_MAX]) { s->pidfd, -EBADF, -EBADF, -EBADF },
                          SANDBOX_SESSION_FREEZE_TIMEOUT_USEC, &reply, &type, ret_error);
        if (r < 0)
                return r;
        if (!streq(type, freeze ? "frozen" : "thawed") || json_get_string(reply, "method", &method) < 0)
                return -EBADMSG;
        (void) json_get_uint64(reply, "usec", &usec);
        if (ret_method)
                *ret_method = streq(method, "systemd") ? "systemd" : "cgroup";
        if (ret_usec)
                *ret_usec = usec;
        return 0;
}

int sandbox_session_freeze(SandboxSession *s, const char *launcher_socket, const char **ret_method, uint64_t *ret_usec,
                           char **ret_error) {
        uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
        int r;

        if (!s)
                return -EINVAL;
        if (s->fd < 0)
                return -ENOTCONN;
        if (s->frozen)
                return 0;
        r = session_freezer_request(s, launcher_socket, true, ret_method, ret_usec, ret_error);
        if (r < 0)
                return r;

        s->frozen = true;
        s->frozen_since = now;
        s->extended_usec = 0;
        s->timer_left = UINT64_MAX;
        /* What the sandbox wrote before it stood still stays in the socket
         * until the thaw: the task is paused, its output too. */
        (void) sd_event_source_set_enabled(s->io, SD_EVENT_OFF);
        if (s->timer) {
                uint64_t deadline = 0;
                (void) sd_event_source_get_time(s->timer, &deadline);
                s->timer_left = deadline > now ? deadline - now : 0;
                (void) sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
        }
        return 0;
}

/* Writes line now, or after the request still being written. */
static int session_send_now(SandboxSession *s, const char *line) {
        size_t n = strlen(line);

        if (s->wbuf) {
                char *b = realloc(s->wbuf, s->wlen + n);
                if (!b)
                        return -ENOMEM;
                memcpy(b + s->wlen, line, n);
                s->wbuf = b;
                s->wlen += n;
                return 0;
        }
        for (size_t done = 0; done < n;) {
                ssize_t k = send(s->fd, line + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -ENOBUFS : -errno;
                }
                done += (size_t) k;
        }
        return 0;
}

int sandbox_session_thaw(SandboxSession *s, const char *launcher_socket, char **ret_error) {
        uint64_t now, frozen;
        int r;

        if (!s)
                return -EINVAL;
        if (!s->frozen)
                return 0;
        if (s->fd < 0)
                return -ENOTCONN;

        now = clock_now_usec(CLOCK_MONOTONIC);
        frozen = now > s->frozen_since ? now - s->frozen_since : 0;

        /* The command in flight is told first how long it stood still: the
         * sandbox reads it before it looks at its deadline again. */
        if (s->busy && frozen > s->extended_usec) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "{\"type\":\"extend\",\"id\":%" PRIi64 ",\"usec\":%" PRIu64 "}\n",
                             s->current_id, frozen - s->extended_usec) < 0)
                        return -ENOMEM;
                r = session_send_now(s, line);
                if (r < 0)
                        return r;
                s->extended_usec = frozen;
        }

        r = session_freezer_request(s, launcher_socket, false, NULL, NULL, ret_error);
        if (r < 0)
                return r;

        s->frozen = false;
        (void) sd_event_source_set_enabled(s->io, SD_EVENT_ON);
        if (s->wbuf)
                (void) sd_event_source_set_io_events(s->io, EPOLLIN | EPOLLOUT);
        if (s->timer && s->timer_left != UINT64_MAX) {
                (void) sd_event_source_set_time(s->timer, clock_now_usec(CLOCK_MONOTONIC) + s->timer_left);
                (void) sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
        }
        return 0;
}

bool sandbox_session_is_frozen(const SandboxSession *s) {
        return s && s->frozen;
}

bool sandbox_session_is_alive(const SandboxSession *s) {
        if (!s || s->fd < 0 || s->pidfd < 0)
                return false;
        /* Signal 0 checks only that it exists: EPERM (it runs as the task's
         * uid, not ours) says it does; ESRCH that it is gone. */
        return syscall(SYS_pidfd_send_signal, s->pidfd, 0, NULL, 0) >= 0 || errno == EPERM;
}

uint64_t sandbox_session_frozen_usec(const SandboxSession *s) {
        uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
        return s && s->frozen && now > s->frozen_since ? now - s->frozen_since : 0;
}

int sandbox_session_get_fd(const SandboxSession *s) {
        return s ? s->fd : -EBADF;
}

int sandbox_session_adopt(sd_event *e, int fd, const char *task_id, pid_t pid, uid_t uid, bool frozen,
                          const char **ret_why, SandboxSession **ret) {
        _cleanup_(sandbox_session_freep) SandboxSession *s = NULL;
        int r;

        if (!e || fd < 0 || !task_id || strlen(task_id) != AGENTFAB_TASK_ID_LEN || pid <= 1 || !ret)
                return -EINVAL;

        r = session_new(e, task_id, &s);
        if (r < 0)
                return r;
        s->pid = pid;
        s->uid = uid;
        /* A frozen sandbox may hold the answer of a command it ran when
         * frozen; a running one between commands has nothing to say. */
        r = sandbox_connection_check(fd, task_id, pid, uid, !frozen, &s->pidfd, ret_why);
        if (r < 0)
                return r;
        (void) exec_client_memory_cgroup(s->pid, &s->memory_cgroup);

        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
                return -errno;
        r = sd_event_add_io(e, &s->io, fd, EPOLLIN, on_io, s);
        if (r < 0)
                return r;
        s->fd = fd;
        s->ready = true;
        (void) sd_event_source_set_description(s->io, "sandbox-session");
        if (frozen) {
                s->frozen = true;
                s->frozen_since = clock_now_usec(CLOCK_MONOTONIC);
                s->timer_left = UINT64_MAX;
                (void) sd_event_source_set_enabled(s->io, SD_EVENT_OFF);
        }

        *ret = TAKE_PTR(s);
        return 0;
}

int sandbox_session_reap(const char *launcher_socket, char **keep_ids) {
        _cleanup_json_ json_object *j = json_object_new_object(), *keep = json_object_new_array(), *reply = NULL;
        json_object *units;
        const char *type;
        int r;

        if (!j || !keep)
                return -ENOMEM;
        for (char **k = keep_ids; k && *k; k++)
                if (json_object_array_add(keep, json_object_new_string(*k)) < 0)
                        return -ENOMEM;
        if (json_add_string(j, "type", "reap") < 0 || json_object_object_add(j, "keep", json_object_get(keep)) < 0)
                return -ENOMEM;

        r = launcher_call(launcher_socket, j, (const int[LAUNCHER_FDS_MAX]) { -EBADF, -EBADF, -EBADF, -EBADF }, SANDBOX_SESSION_REAP_TIMEOUT_USEC,
                          &reply, &type, NULL);
        if (r < 0)
                return r;
        if (!streq(type, "reaped") || !json_object_object_get_ex(reply, "units", &units) ||
            !json_object_is_type(units, json_type_array))
                return -EBADMSG;
        return (int) MIN(json_object_array_length(units), (size_t) INT32_MAX);
}
