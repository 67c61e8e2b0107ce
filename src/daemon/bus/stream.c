/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "access.h"
#include "agentfab-bus.h"
#include "audit.h"
#include "bus-polkit.h"
#include "bus-server.h"
#include "exec-client.h"
#include "fs-util.h"
#include "json-util.h"
#include "log.h"
#include "stream.h"
#include "string-util.h"
#include "task-store.h"

typedef enum StreamKind {
        STREAM_EVENTS,
        STREAM_OUTPUT,
} StreamKind;

typedef struct StreamClient StreamClient;

struct StreamClient {
        StreamServer *server;
        StreamClient *next;

        int fd;
        sd_event_source *io;
        sd_event_source *timeout;
        struct ucred cred;

        char request[STREAM_REQUEST_MAX + 1];
        size_t request_len;
        bool have_request;

        char task_id[AGENTFAB_TASK_ID_LEN + 1];
        StreamKind kind;
        bool follow;
        bool watching;
        bool close_after_flush;
        sd_bus_slot *polkit_slot;

        char *out;
        size_t out_len;
        size_t out_allocated;
};

struct StreamServer {
        BusServer *bus;
        Manager *manager;
        int fd;
        char *bound_path;      /* set when we bound the socket ourselves */
        sd_event_source *source;
        StreamClient *clients;
        unsigned n_clients;
        uint64_t queued;        /* the sum of the clients' out_len */
        uint64_t queued_high;   /* the most ever */
};

static void client_free(StreamClient *c) {
        StreamServer *s = c->server;

        for (StreamClient **i = &s->clients; *i; i = &(*i)->next)
                if (*i == c) {
                        *i = c->next;
                        s->n_clients--;
                        break;
                }

        sd_bus_slot_unref(c->polkit_slot);
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timeout);
        safe_close(c->fd);
        s->queued -= c->out_len;
        free(c->out);
        free(c);
        manager_touch(s->manager);
}

static void client_update_events(StreamClient *c) {
        uint32_t events = EPOLLIN | EPOLLRDHUP;
        if (c->out_len > 0)
                events |= EPOLLOUT;
        (void) sd_event_source_set_io_events(c->io, events);
}

/* Writes what can be written now. Returns <0 when the client is gone. */
static int client_flush(StreamClient *c) {
        while (c->out_len > 0) {
                ssize_t n = send(c->fd, c->out, c->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                memmove(c->out, c->out + n, c->out_len - (size_t) n);
                c->out_len -= (size_t) n;
                c->server->queued -= (size_t) n;
        }
        client_update_events(c);
        if (c->out_len == 0 && c->close_after_flush)
                return -ECONNRESET;
        return 0;
}

/* Makes room for size more bytes to the client, or says why not. What
 * the daemon holds for its viewers is bounded twice: STREAM_OUTBUF_MAX for
 * one, [Daemon] MaxQueuedBytes= for all. Past the whole, a viewer with
 * bytes still queued is the one dropped; one that has taken everything
 * may still be sent an event, so that viewers that read are never dropped
 * for those that do not. A history is sent at once, so it must fit in the
 * whole (-EBUSY: the caller is told to come back). A live viewer that
 * does not keep up is dropped rather than letting it make us buffer
 * without bound. */
static int client_reserve(StreamClient *c, size_t size) {
        StreamServer *s = c->server;
        uint64_t max_total = s->manager->factory.config.max_queued_bytes;
        bool per_client = c->out_len + size > STREAM_OUTBUF_MAX;
        bool total = s->queued + size > max_total && (c->out_len > 0 || !c->watching);

        if (per_client || total) {
                if (!c->watching)
                        return per_client ? -ENOBUFS : -EBUSY;
                char peer[32];
                snprintf(peer, sizeof(peer), "pid %i", (int) c->cred.pid);
                audit_client_dropped("stream", peer, c->cred.uid,
                                     per_client ? c->out_len + size : s->queued + size,
                                     per_client ? STREAM_OUTBUF_MAX : max_total,
                                     per_client ? "the stream's per-viewer buffer" : "MaxQueuedBytes");
                c->watching = false;
                return -ENOBUFS;
        }
        if (c->out_len + size > c->out_allocated) {
                /* Doubling, but never past the bound: a full buffer is
                 * STREAM_OUTBUF_MAX, not twice that. */
                size_t n = MIN(MAX(c->out_len + size, c->out_allocated * 2), (size_t) STREAM_OUTBUF_MAX);
                char *p = realloc(c->out, n);
                if (!p)
                        return -ENOMEM;
                c->out = p;
                c->out_allocated = n;
        }
        return 0;
}

/* Queues one line. */
static int client_queue(StreamClient *c, const char *line) {
        size_t l = strlen(line);
        int r;

        r = client_reserve(c, l + 1);
        if (r < 0)
                return r;
        memcpy(c->out + c->out_len, line, l);
        c->out[c->out_len + l] = '\n';
        c->out_len += l + 1;
        c->server->queued += l + 1;
        c->server->queued_high = MAX(c->server->queued_high, c->server->queued);
        return 0;
}

static int client_queue_json(StreamClient *c, json_object *j) {
        return client_queue(c, json_to_line(j));
}

static void client_fail(StreamClient *c, const char *error, const char *message) {
        _cleanup_json_ json_object *j = json_object_new_object();

        if (j && json_add_string(j, "type", "error") >= 0 &&
            json_add_string(j, "error", error) >= 0 &&
            json_add_string(j, "message", message) >= 0)
                (void) client_queue_json(c, j);
        c->watching = false;
        c->close_after_flush = true;
        if (client_flush(c) < 0)
                client_free(c);
}

static int client_queue_end(StreamClient *c, Task *t) {
        _cleanup_json_ json_object *j = json_object_new_object();

        if (!j || json_add_string(j, "type", "end") < 0 ||
            json_add_string(j, "task", t->id) < 0 ||
            json_add_string(j, "state", task_state_to_string(t->state)) < 0)
                return -ENOMEM;
        c->watching = false;
        c->close_after_flush = true;
        return client_queue_json(c, j);
}

/* The last max bytes of a command log that grew larger, from a line start,
 * with a first line that says how much was left out: a command's output
 * is bounded only by the disk, what a client is sent is not. */
static int read_log_tail(int dir_fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        ssize_t n;
        int k;

        fd = openat(dir_fd, TASK_LOG_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADF;
        buf = malloc(max + 128);
        if (!buf)
                return -ENOMEM;
        k = snprintf(buf, 128, "[... %llu bytes of earlier output left out ...]\n",
                     (unsigned long long) ((uint64_t) st.st_size - max));
        n = pread(fd, buf + k, max, st.st_size - (off_t) max);
        if (n < 0)
                return -errno;
        /* Start at a line: the cut one would be half a line. */
        char *nl = memchr(buf + k, '\n', (size_t) n);
        size_t skip = nl ? (size_t) (nl + 1 - (buf + k)) : 0;
        memmove(buf + k, buf + k + skip, (size_t) n - skip);
        *ret_size = (size_t) k + (size_t) n - skip;
        buf[*ret_size] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Queues text as it is, whole lines ending in newlines. */
static int client_queue_raw(StreamClient *c, const char *text, size_t size) {
        int r;

        if (size == 0)
                return 0;
        r = client_reserve(c, size);
        if (r < 0)
                return r;
        memcpy(c->out + c->out_len, text, size);
        c->out_len += size;
        c->server->queued += size;
        c->server->queued_high = MAX(c->server->queued_high, c->server->queued);
        return 0;
}

/* A task's history of events: the lines of its events file that are JSON.
 * Each line is checked, since a torn write after a crash must not reach
 * clients; what is checked is remembered with the task (the file is only
 * appended to, task_append_event()), so that a watch of a long history is
 * a read and a copy, not a parse of every event for every client. */
static int client_queue_events(StreamClient *c, Task *t, int dir_fd) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        json_tokener *tok = NULL;
        struct stat st;
        size_t size = 0, allocated, from = 0;
        bool whole = true;
        int r = 0;

        fd = openat(dir_fd, TASK_EVENTS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > STREAM_HISTORY_MAX)
                return -EFBIG;

        /* It may grow while we read: read up to what fstat() said, the rest
         * is sent live or by the next watch. */
        allocated = (size_t) st.st_size;
        text = malloc(allocated + 1);
        if (!text)
                return -ENOMEM;
        while (size < allocated) {
                ssize_t k = pread(fd, text + size, allocated - size, (off_t) size);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                size += (size_t) k;
        }

        if (t->events_dev == st.st_dev && t->events_ino == st.st_ino && t->events_checked <= size)
                from = (size_t) t->events_checked;
        else
                t->events_checked = 0;
        r = client_queue_raw(c, text, from);
        if (r < 0)
                return r;

        for (char *p = text + from, *nl; p < text + size; p = nl + 1) {
                _cleanup_json_ json_object *j = NULL;

                nl = memchr(p, '\n', (size_t) (text + size - p));
                if (!nl) {
                        /* A last line without newline: being written, or torn. */
                        nl = text + size;
                        whole = false;
                }
                if (!tok) {
                        tok = json_tokener_new_ex(JSON_PARSE_DEPTH);
                        if (!tok)
                                return -ENOMEM;
                }
                if (json_parse_strict_with(tok, p, (size_t) (nl - p), &j) < 0) {
                        whole = false;
                        continue;
                }
                r = client_queue_raw(c, p, (size_t) (nl - p));
                if (r >= 0)
                        r = client_queue_raw(c, "\n", 1);
                if (r < 0)
                        break;
                if (whole) {
                        t->events_checked = (uint64_t) (nl + 1 - text);
                        t->events_dev = st.st_dev;
                        t->events_ino = st.st_ino;
                }
        }
        if (tok)
                json_tokener_free(tok);
        return r;
}

static int client_send_history(StreamClient *c, Task *t) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        size_t size = 0;
        int r;

        dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;
        if (c->kind == STREAM_EVENTS)
                return client_queue_events(c, t, dir_fd);

        r = read_file_at(dir_fd, TASK_LOG_FILE, STREAM_LOG_TAIL_MAX, &text, &size);
        if (r == -EFBIG)
                r = read_log_tail(dir_fd, STREAM_LOG_TAIL_MAX, &text, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;

        for (char *p = text, *nl; p < text + size; p = nl + 1) {
                nl = memchr(p, '\n', (size_t) (text + size - p));
                if (!nl)
                        nl = text + size; /* a last line without newline */
                *nl = '\0';

                /* A command's bytes, as it wrote them: escaped for a terminal. */
                _cleanup_json_ json_object *j = json_object_new_object();
                _cleanup_free_ char *line = exec_output_escape(p, (size_t) (nl - p));
                if (!j || !line || json_add_string(j, "type", "output") < 0 || json_add_string(j, "data", line) < 0)
                        return -ENOMEM;
                r = client_queue_json(c, j);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void client_start(StreamClient *c) {
        Task *t = manager_find_task(c->server->manager, c->task_id);
        int r;

        if (!t)
                return client_fail(c, AGENTFAB_ERROR_NO_SUCH_TASK, "The task does not exist any more.");

        r = client_send_history(c, t);
        if (r == -EBUSY) {
                /* What was queued of it goes: the error line must fit. */
                c->server->queued -= c->out_len;
                c->out_len = 0;
                return client_fail(c, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                   "Too much is queued for stream clients; try again when they have read it.");
        }
        if (r < 0)
                return client_fail(c, "org.freedesktop.DBus.Error.Failed", "Failed to read the task's history.");

        if (!c->follow || task_state_is_final(t->state))
                r = client_queue_end(c, t);
        else
                c->watching = true;
        if (r < 0 || client_flush(c) < 0)
                client_free(c);
}

static void on_polkit_answer(int result, void *userdata) {
        StreamClient *c = userdata;

        c->polkit_slot = sd_bus_slot_unref(c->polkit_slot);
        if (result <= 0)
                return client_fail(c, "org.freedesktop.DBus.Error.AccessDenied",
                                   "Access denied: following another user's task needs org.agentfab.manage.");
        client_start(c);
}

static void client_handle_request(StreamClient *c) {
        _cleanup_json_ json_object *j = NULL;
        BusServer *bs = c->server->bus;
        Manager *m = bs->manager;
        const char *id, *stream = "events";
        json_object *v;
        Task *t;
        int r;

        c->have_request = true;
        c->timeout = sd_event_source_disable_unref(c->timeout);

        if (json_parse_strict(c->request, c->request_len, &j) < 0 || !json_object_is_type(j, json_type_object))
                return client_fail(c, SD_BUS_ERROR_INVALID_ARGS, "The request is not a JSON object.");
        if (json_get_string(j, "task", &id) < 0)
                return client_fail(c, SD_BUS_ERROR_INVALID_ARGS, "The request has no string 'task'.");
        if (json_object_object_get_ex(j, "stream", &v) && json_get_string(j, "stream", &stream) < 0)
                return client_fail(c, SD_BUS_ERROR_INVALID_ARGS, "'stream' must be a string.");
        if (json_object_object_get_ex(j, "follow", &v)) {
                if (!json_object_is_type(v, json_type_boolean))
                        return client_fail(c, SD_BUS_ERROR_INVALID_ARGS, "'follow' must be a boolean.");
                c->follow = json_object_get_boolean(v);
        }
        json_object_object_foreach(j, key, val) {
                (void) val;
                if (!streq(key, "task") && !streq(key, "stream") && !streq(key, "follow"))
                        return client_fail(c, SD_BUS_ERROR_INVALID_ARGS, "Unknown key in request.");
        }

        if (streq(stream, "events"))
                c->kind = STREAM_EVENTS;
        else if (streq(stream, "output"))
                c->kind = STREAM_OUTPUT;
        else
                return client_fail(c, SD_BUS_ERROR_INVALID_ARGS, "'stream' must be \"events\" or \"output\".");

        t = manager_find_task(m, id);
        if (!t)
                return client_fail(c, AGENTFAB_ERROR_NO_SUCH_TASK, "No such task.");
        strcpy(c->task_id, t->id);

        /* Asked as on the bus, but never interactively: a client of
         * this socket has no bus name that polkit could prompt for. */
        if (access_uid_may_view(bs, c->cred.uid, NULL, t))
                return client_start(c);
        if (bs->kind != BUS_SYSTEM || !bs->bus)
                return client_fail(c, SD_BUS_ERROR_ACCESS_DENIED, "Access denied.");

        r = polkit_check_process_async(bs->bus, c->cred.pid, c->cred.uid, "org.agentfab.manage",
                                       on_polkit_answer, c, &c->polkit_slot);
        if (r < 0)
                return client_fail(c, SD_BUS_ERROR_ACCESS_DENIED, "Access denied: authorization service not available.");
}

static int on_client_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        StreamClient *c = userdata;

        (void) source;
        manager_touch(c->server->manager);

        if (revents & EPOLLOUT) {
                if (client_flush(c) < 0) {
                        client_free(c);
                        return 0;
                }
        }

        if (revents & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR)) {
                char buf[4096];
                ssize_t n;

                if (c->have_request) {
                        /* Nothing more is expected from the client: read only to notice it left. */
                        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                                client_free(c);
                        return 0;
                }

                n = recv(fd, c->request + c->request_len, STREAM_REQUEST_MAX - c->request_len, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                client_free(c);
                        return 0;
                }
                if (n == 0) {
                        client_free(c);
                        return 0;
                }
                c->request_len += (size_t) n;
                c->request[c->request_len] = '\0';

                char *nl = memchr(c->request, '\n', c->request_len);
                if (nl) {
                        c->request_len = (size_t) (nl - c->request);
                        *nl = '\0';
                        client_handle_request(c);
                } else if (c->request_len >= STREAM_REQUEST_MAX) {
                        c->have_request = true;
                        client_fail(c, SD_BUS_ERROR_INVALID_ARGS, "Request line too long.");
                }
        }
        return 0;
}

static int on_client_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        StreamClient *c = userdata;
        (void) source, (void) usec;
        c->have_request = true;
        client_fail(c, SD_BUS_ERROR_TIMEOUT, "No request received in time.");
        return 0;
}

static int on_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        StreamServer *s = userdata;
        socklen_t l = sizeof(struct ucred);
        uint64_t now;
        int r;

        (void) source, (void) revents;

        _cleanup_close_ int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        manager_touch(s->manager);

        if (s->n_clients >= s->manager->factory.config.max_stream_clients) {
                static const char busy[] = "{\"type\":\"error\",\"error\":\"org.freedesktop.DBus.Error.LimitsExceeded\","
                                           "\"message\":\"Too many stream clients.\"}\n";
                (void) send(cfd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                return 0;
        }

        StreamClient *c = calloc(1, sizeof(StreamClient));
        if (!c)
                return 0;
        c->server = s;
        c->fd = -EBADF;
        c->next = s->clients;
        s->clients = c;
        s->n_clients++;

        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &c->cred, &l) < 0) {
                client_free(c);
                return 0;
        }

        /* One user may not take every slot: a quarter of them at most. */
        unsigned same = 0;
        for (StreamClient *i = s->clients; i; i = i->next)
                if (i->cred.uid == c->cred.uid)
                        same++;
        if (c->cred.uid != 0 && same > MAX(1u, s->manager->factory.config.max_stream_clients / 4)) {
                static const char busy[] = "{\"type\":\"error\",\"error\":\"org.freedesktop.DBus.Error.LimitsExceeded\","
                                           "\"message\":\"Too many stream clients of this user.\"}\n";
                (void) send(cfd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                client_free(c);
                return 0;
        }
        c->fd = TAKE_FD(cfd);

        r = sd_event_add_io(s->manager->factory.event, &c->io, c->fd, EPOLLIN | EPOLLRDHUP, on_client_io, c);
        if (r >= 0) {
                (void) sd_event_now(s->manager->factory.event, CLOCK_MONOTONIC, &now);
                r = sd_event_add_time(s->manager->factory.event, &c->timeout, CLOCK_MONOTONIC,
                                      now + 10 * USEC_PER_SEC, 0, on_client_timeout, c);
        }
        if (r < 0)
                client_free(c);
        return 0;
}

static int bind_socket(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;

        /* Replace a stale socket of an earlier run, nothing else. */
        if (lstat(path, &st) >= 0 && S_ISSOCK(st.st_mode))
                (void) unlink(path);

        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        (void) chmod(path, 0666); /* SECURITY: anyone may connect; peer credentials decide. */
        if (listen(fd, SOMAXCONN) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int stream_server_new(StreamServer **ret, BusServer *bs, const char *socket_path, int listen_fd) {
        Manager *m = bs->manager;
        StreamServer *s;
        int r;

        s = calloc(1, sizeof(StreamServer));
        if (!s)
                return -ENOMEM;
        s->bus = bs;
        s->manager = m;
        s->fd = -EBADF;

        if (listen_fd >= 0) {
                if (sd_is_socket_unix(listen_fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
                        stream_server_free(s);
                        return log_error_errno(EINVAL, "The socket from systemd is not a listening Unix stream socket.");
                }
                s->fd = listen_fd;
                (void) fcntl(s->fd, F_SETFD, FD_CLOEXEC);
        } else {
                s->fd = bind_socket(socket_path);
                if (s->fd < 0) {
                        r = s->fd;
                        stream_server_free(s);
                        return log_error_errno(r, "Failed to listen on '%s': %m", socket_path);
                }
                s->bound_path = strdup(socket_path);
                log_info("Listening on '%s'.", socket_path);
        }

        r = sd_event_add_io(m->factory.event, &s->source, s->fd, EPOLLIN, on_accept, s);
        if (r < 0) {
                stream_server_free(s);
                return r;
        }

        *ret = s;
        return 0;
}

StreamServer *stream_server_free(StreamServer *s) {
        if (!s)
                return NULL;
        while (s->clients)
                client_free(s->clients);
        sd_event_source_disable_unref(s->source);
        safe_close(s->fd);
        if (s->bound_path) {
                (void) unlink(s->bound_path);
                free(s->bound_path);
        }
        free(s);
        return NULL;
}

unsigned stream_server_clients(StreamServer *s) {
        return s ? s->n_clients : 0;
}

void stream_server_task_event(StreamServer *s, Task *t, json_object *event) {
        StreamClient *next;

        for (StreamClient *c = s->clients; c; c = next) {
                int r;

                next = c->next;
                if (!c->watching || !streq(c->task_id, t->id))
                        continue;

                r = c->kind == STREAM_EVENTS ? client_queue_json(c, event) : 0;
                if (r >= 0 && task_state_is_final(t->state))
                        r = client_queue_end(c, t);
                if (r < 0 || client_flush(c) < 0)
                        client_free(c);
        }
}

void stream_server_task_output(StreamServer *s, Task *t, const char *data, size_t size) {
        _cleanup_json_ json_object *j = NULL;
        _cleanup_free_ char *text = NULL;
        StreamClient *next;

        if (!s || size == 0)
                return;

        /* Output comes from inside the sandbox: any bytes at all. */
        text = malloc(size + 1);
        if (!text)
                return;
        memcpy(text, data, size);
        text[size] = '\0';
        utf8_sanitize(text, size);   /* NUL bytes too */
        j = json_object_new_object();
        if (!j || json_add_string(j, "type", "output") < 0 || json_add_string(j, "data", text) < 0)
                return;

        for (StreamClient *c = s->clients; c; c = next) {
                next = c->next;
                if (!c->watching || c->kind != STREAM_OUTPUT || !streq(c->task_id, t->id))
                        continue;
                if (client_queue_json(c, j) < 0 || client_flush(c) < 0)
                        client_free(c);
        }
}
