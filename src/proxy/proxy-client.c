/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "json-util.h"
#include "proxy-client.h"
#include "string-table.h"

/* Events kept while a request waits for its reply; beyond that the oldest
 * are dropped (the journal has every connection anyway). */
#define PROXY_EVENTS_QUEUED_MAX 256
/* A request's reply is immediate; a proxy that takes longer is stuck. */
#define PROXY_REPLY_TIMEOUT_MS 10000

struct ProxyClient {
        int fd;
        json_object **queue;            /* events read while waiting for a reply */
        size_t n_queue;
};

static const char *const proxy_refusal_kind_table[_PROXY_EVENT_MAX] = {
        [PROXY_EVENT_NOT_ALLOWED] = "not-allowed",
        [PROXY_EVENT_ADDRESS]     = "address",
        [PROXY_EVENT_LIMIT]       = "limit",
        [PROXY_EVENT_RESOLVE]     = "resolve",
        [PROXY_EVENT_BAD_REQUEST] = "bad-request",
};

DEFINE_STRING_TABLE_LOOKUP(proxy_refusal_kind, ProxyRefusalKind);

int proxy_client_connect(const char *path, ProxyClient **ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        path = path ?: AGENTFAB_PROXY_CONTROL;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A local SEQPACKET connect completes at once or fails. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;

        ProxyClient *c = calloc(1, sizeof(ProxyClient));
        if (!c)
                return -ENOMEM;
        c->fd = TAKE_FD(fd);
        *ret = c;
        return 0;
}

ProxyClient *proxy_client_free(ProxyClient *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_queue; i++)
                json_object_put(c->queue[i]);
        free(c->queue);
        safe_close(c->fd);
        free(c);
        return NULL;
}

int proxy_client_fd(ProxyClient *c) {
        return c->fd;
}

/* Reads one message: 1 with *ret (and *ret_fd, the one fd it carried, or
 * -EBADF), 0 if none is there, -ECONNRESET at hang-up. */
static int receive_message(ProxyClient *c, json_object **ret, int *ret_fd) {
        _cleanup_free_ char *buf = malloc(PROXY_MESSAGE_MAX);
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } control = {};
        struct iovec iov = { .iov_base = buf, .iov_len = PROXY_MESSAGE_MAX };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
        _cleanup_close_ int fd = -EBADF;

        if (!buf)
                return -ENOMEM;
        ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;

        for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
                if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
                        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int *fds = (int *) CMSG_DATA(h);
                        for (size_t i = 0; i < k; i++) {
                                if (fd < 0 && ret_fd)
                                        fd = fds[i];
                                else
                                        safe_close(fds[i]);
                        }
                }
        if (n == 0)
                return -ECONNRESET;
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
                return -EBADMSG;

        int r = json_parse_strict(buf, (size_t) n, ret);
        if (r < 0)
                return r;
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 1;
}

static int send_request(ProxyClient *c, json_object *req, json_object **ret_reply, int *ret_fd) {
        const char *s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
        size_t l = strlen(s);

        if (l > PROXY_MESSAGE_MAX)
                return -E2BIG;
        if (send(c->fd, s, l, MSG_NOSIGNAL) < 0) {
                if (errno != EAGAIN)
                        return -errno;
                /* The socket's buffer is full of nothing but our own
                 * requests, which the proxy reads at once: wait a little. */
                struct pollfd p = { .fd = c->fd, .events = POLLOUT };
                if (poll(&p, 1, PROXY_REPLY_TIMEOUT_MS) <= 0)
                        return -ETIMEDOUT;
                if (send(c->fd, s, l, MSG_NOSIGNAL) < 0)
                        return -errno;
        }

        for (;;) {
                _cleanup_json_ json_object *m = NULL;
                _cleanup_close_ int fd = -EBADF;
                int r = receive_message(c, &m, &fd);
                if (r < 0)
                        return r;
                if (r == 0) {
                        struct pollfd p = { .fd = c->fd, .events = POLLIN };
                        r = poll(&p, 1, PROXY_REPLY_TIMEOUT_MS);
                        if (r < 0 && errno != EINTR)
                                return -errno;
                        if (r == 0)
                                return -ETIMEDOUT;
                        continue;
                }

                const char *type = NULL;
                (void) json_get_string(m, "type", &type);
                if (streq_ptr(type, "reply")) {
                        *ret_reply = TAKE_PTR(m);
                        if (ret_fd)
                                *ret_fd = TAKE_FD(fd);
                        return 0;
                }
                /* An event that came first: kept for next_event(). */
                if (c->n_queue >= PROXY_EVENTS_QUEUED_MAX) {
                        json_object_put(c->queue[0]);
                        memmove(c->queue, c->queue + 1, (c->n_queue - 1) * sizeof(json_object *));
                        c->n_queue--;
                }
                json_object **q = reallocarray(c->queue, c->n_queue + 1, sizeof(json_object *));
                if (!q)
                        return -ENOMEM;
                c->queue = q;
                c->queue[c->n_queue++] = TAKE_PTR(m);
        }
}

/* The reply's verdict: 0, or its negative errno with the reason. */
static int reply_result(json_object *reply, char **ret_error) {
        json_object *ok;
        uint64_t e = EIO;
        const char *error = NULL;

        if (json_object_object_get_ex(reply, "ok", &ok) && json_object_get_boolean(ok))
                return 0;
        (void) json_get_uint64(reply, "errno", &e);
        (void) json_get_string(reply, "error", &error);
        if (ret_error && error)
                *ret_error = strdup(error);
        return e > 0 && e < 4096 ? -(int) e : -EIO;
}

bool proxy_task_id_is_valid(const char *t) {
        size_t n = t ? strlen(t) : 0;
        if (n == 0 || n > PROXY_TASK_ID_MAX)
                return false;
        return strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int proxy_client_register(ProxyClient *c, const char *task, ProxyMode mode, char **allow, const ProxyLimits *limits,
                          int *ret_channel_fd, char **ret_error) {
        _cleanup_json_ json_object *req = json_object_new_object(), *reply = NULL;
        _cleanup_close_ int fd = -EBADF;
        static const ProxyLimits none = {};
        int r;

        if (!proxy_task_id_is_valid(task) || !proxy_mode_to_string(mode))
                return -EINVAL;
        limits = limits ?: &none;
        if (!req)
                return -ENOMEM;
        if (json_add_string(req, "type", "register") < 0 || json_add_string(req, "task", task) < 0 ||
            json_add_string(req, "mode", proxy_mode_to_string(mode)) < 0 || json_add_strv(req, "allow", allow) < 0 ||
            json_add_uint64(req, "max_connections", limits->max_connections) < 0 ||
            json_add_uint64(req, "max_bytes", limits->max_bytes) < 0 ||
            json_add_uint64(req, "idle_timeout_usec", limits->idle_timeout_usec) < 0 ||
            json_add_uint64(req, "connect_timeout_usec", limits->connect_timeout_usec) < 0)
                return -ENOMEM;

        r = send_request(c, req, &reply, &fd);
        if (r < 0)
                return r;
        r = reply_result(reply, ret_error);
        if (r < 0)
                return r;
        if (fd < 0)
                return -EBADMSG; /* an answer without its channel */
        *ret_channel_fd = TAKE_FD(fd);
        return 0;
}

int proxy_client_allow(ProxyClient *c, const char *task, char **allow, char **ret_error) {
        _cleanup_json_ json_object *req = json_object_new_object(), *reply = NULL;
        int r;

        if (!proxy_task_id_is_valid(task))
                return -EINVAL;
        if (!req || json_add_string(req, "type", "allow") < 0 || json_add_string(req, "task", task) < 0 ||
            json_add_strv(req, "allow", allow) < 0)
                return -ENOMEM;
        r = send_request(c, req, &reply, NULL);
        if (r < 0)
                return r;
        return reply_result(reply, ret_error);
}

int proxy_client_unregister(ProxyClient *c, const char *task) {
        _cleanup_json_ json_object *req = json_object_new_object(), *reply = NULL;
        int r;

        if (!proxy_task_id_is_valid(task))
                return -EINVAL;
        if (!req || json_add_string(req, "type", "unregister") < 0 || json_add_string(req, "task", task) < 0)
                return -ENOMEM;
        r = send_request(c, req, &reply, NULL);
        if (r < 0)
                return r;
        return reply_result(reply, NULL);
}

int proxy_client_usage(ProxyClient *c, const char *task, ProxyUsage *ret) {
        _cleanup_json_ json_object *req = json_object_new_object(), *reply = NULL;
        ProxyUsage u = {};
        int r;

        if (!proxy_task_id_is_valid(task))
                return -EINVAL;
        if (!req || json_add_string(req, "type", "usage") < 0 || json_add_string(req, "task", task) < 0)
                return -ENOMEM;
        r = send_request(c, req, &reply, NULL);
        if (r < 0)
                return r;
        r = reply_result(reply, NULL);
        if (r < 0)
                return r;
        if (json_get_uint64(reply, "bytes_up", &u.bytes_up) < 0 || json_get_uint64(reply, "bytes_down", &u.bytes_down) < 0 ||
            json_get_uint64(reply, "connections", &u.connections) < 0)
                return -EBADMSG;
        *ret = u;
        return 0;
}

void proxy_event_done(ProxyEvent *e) {
        e->task = mfree_ptr(e->task);
        e->host = mfree_ptr(e->host);
        e->address = mfree_ptr(e->address);
        e->reason = mfree_ptr(e->reason);
}

static int event_from_json(json_object *m, ProxyEvent *ret) {
        const char *task = NULL, *host = NULL, *address = NULL, *reason = NULL, *mode = NULL, *kind = NULL;
        uint64_t port = 0;
        ProxyEvent e = {};

        if (json_get_string(m, "task", &task) < 0 || json_get_string(m, "mode", &mode) < 0 ||
            json_get_string(m, "kind", &kind) < 0 || json_get_string(m, "reason", &reason) < 0)
                return -EBADMSG;
        (void) json_get_string(m, "host", &host);
        (void) json_get_string(m, "address", &address);
        (void) json_get_uint64(m, "port", &port);

        e.mode = proxy_mode_from_string(mode);
        e.kind = proxy_refusal_kind_from_string(kind);
        if (e.mode < 0 || e.kind < 0 || port > 65535)
                return -EBADMSG;
        e.port = (uint16_t) port;
        e.task = strdup(task);
        e.host = strdup(host ?: "");
        e.address = address ? strdup(address) : NULL;
        e.reason = strdup(reason);
        if (!e.task || !e.host || (address && !e.address) || !e.reason) {
                proxy_event_done(&e);
                return -ENOMEM;
        }
        *ret = e;
        return 0;
}

int proxy_client_next_event(ProxyClient *c, ProxyEvent *ret) {
        for (;;) {
                _cleanup_json_ json_object *m = NULL;
                int r;

                if (c->n_queue > 0) {
                        m = c->queue[0];
                        memmove(c->queue, c->queue + 1, (c->n_queue - 1) * sizeof(json_object *));
                        c->n_queue--;
                } else {
                        r = receive_message(c, &m, NULL);
                        if (r <= 0)
                                return r;
                }

                const char *type = NULL;
                (void) json_get_string(m, "type", &type);
                if (!streq_ptr(type, "refused"))
                        continue; /* a late reply, or a kind of event this client does not know */
                if (event_from_json(m, ret) < 0)
                        continue;
                return 1;
        }
}
