/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "proxy.h"
#include "time-util.h"

/* One connection of a task's commands: its request head is read and
 * judged, the destination resolved (in a worker thread) and every address
 * judged, one judged address connected to, and then bytes relayed both
 * ways until either side is done. Each connection is one journal entry. */

#define RELAY_BUFFER 65536
/* The client-to-upstream buffer also holds the rewritten head of a
 * forwarded request and whatever followed the head in the first reads. */
#define IN_BUFFER (HTTP_FORWARD_HEAD_MAX + HTTP_HEAD_MAX)
#define RESOLVED_MAX 16

typedef enum ConnState {
        CONN_HEAD,
        CONN_RESOLVING,
        CONN_CONNECTING,
        CONN_RELAY,
} ConnState;

typedef struct ResolveJob {
        Proxy *proxy;
        char name[256];
        ProxyAddress addresses[RESOLVED_MAX];
        size_t n_addresses;
        int gai_error;
} ResolveJob;

struct ProxyConn {
        ProxyTask *task;
        ProxyConn *prev, *next;
        ConnState state;

        int client_fd, upstream_fd;
        sd_event_source *client_source, *upstream_source, *timer_source;
        Worker *resolver;

        HttpRequest request;
        ProxyHost host;
        char host_text[HTTP_HOST_MAX + 3];      /* what the journal and the Host line name */
        ProxyAddress addresses[RESOLVED_MAX];
        size_t n_addresses, next_address;
        char address_text[INET6_ADDRSTRLEN];

        char *in;                               /* client to upstream */
        size_t in_off, in_len;
        char *out;                              /* upstream to client */
        size_t out_off, out_len;
        uint64_t body_left;                     /* forwarded request: body bytes still to pass on */
        bool client_eof, upstream_eof, upstream_shut, client_shut, client_done_reading;

        uint64_t start_usec, last_activity_usec;
        uint64_t bytes_up, bytes_down;
        bool allowed;                           /* was connected: journaled when it ends */
        bool over_limit;                        /* accepted past the task's connection limit */
        const char *end_reason;
};

static void conn_journal(ProxyConn *c, bool allowed, const char *reason) {
        ProxyTask *t = c->task;
        uint64_t duration = clock_now_usec(CLOCK_MONOTONIC) - c->start_usec;
        const char *method = c->request.method[0] ? c->request.method : "-";

        (void) sd_journal_send("MESSAGE=Task %s: %s %s:%u%s%s%s %s%s%s (%llu bytes up, %llu down).",
                               t->id, method, c->host_text[0] ? c->host_text : "?", (unsigned) c->request.port,
                               c->address_text[0] ? " (" : "", c->address_text, c->address_text[0] ? ")" : "",
                               allowed ? "allowed" : "refused", reason ? ": " : "", strempty(reason),
                               (unsigned long long) c->bytes_up, (unsigned long long) c->bytes_down,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_NETWORK_STR,
                               "PRIORITY=%i", allowed ? LOG_INFO : LOG_NOTICE,
                               "AGENTFAB_EVENT=network",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_NETWORK_MODE=%s", proxy_mode_to_string(t->policy.mode),
                               "AGENTFAB_METHOD=%s", method,
                               "AGENTFAB_HOST=%s", c->host_text,
                               "AGENTFAB_PORT=%u", (unsigned) c->request.port,
                               "AGENTFAB_ADDRESS=%s", c->address_text,
                               "AGENTFAB_VERDICT=%s", allowed ? "allowed" : "refused",
                               "AGENTFAB_REASON=%s", strempty(reason),
                               "AGENTFAB_BYTES_UP=%llu", (unsigned long long) c->bytes_up,
                               "AGENTFAB_BYTES_DOWN=%llu", (unsigned long long) c->bytes_down,
                               "AGENTFAB_DURATION_USEC=%llu", (unsigned long long) duration,
                               NULL);
}

ProxyConn *proxy_conn_free(ProxyConn *c) {
        if (!c)
                return NULL;

        if (c->allowed)
                conn_journal(c, true, c->end_reason);

        ProxyTask *t = c->task;
        if (c->prev)
                c->prev->next = c->next;
        else
                t->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        t->n_conns--;
        t->proxy->n_conns--;

        /* A resolution in flight finishes on its own and frees its job. */
        worker_detach(c->resolver);
        sd_event_source_disable_unref(c->client_source);
        sd_event_source_disable_unref(c->upstream_source);
        sd_event_source_disable_unref(c->timer_source);
        safe_close(c->client_fd);
        safe_close(c->upstream_fd);
        free(c->in);
        free(c->out);
        free(c);
        return NULL;
}

/* Refuses: a short HTTP reply to the client (best effort: the socket's
 * buffer is empty at this point), a journal entry, the control connection
 * told, and the connection freed. */
static void conn_reply_error(ProxyConn *c, int status, const char *reason) {
        char reply[768];
        const char *text = status == 400 ? "Bad Request" : status == 403 ? "Forbidden" :
                           status == 414 ? "URI Too Long" : status == 429 ? "Too Many Requests" :
                           status == 431 ? "Request Header Fields Too Large" : status == 501 ? "Not Implemented" :
                           status == 502 ? "Bad Gateway" : status == 503 ? "Service Unavailable" :
                           status == 504 ? "Gateway Timeout" : status == 505 ? "HTTP Version Not Supported" : "Error";
        int n = snprintf(reply, sizeof(reply),
                         "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         "Content-Length: %zu\r\n\r\nagentfab-proxy: %s\n",
                         status, text, strlen(reason) + 17, reason);
        if (n > 0 && (size_t) n < sizeof(reply))
                (void) send(c->client_fd, reply, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL);

        /* Closing a socket with unread bytes makes the kernel send a reset,
         * which may destroy the reply before the client read it: end our
         * side first and drop what is there. */
        (void) shutdown(c->client_fd, SHUT_WR);
        char drain[4096];
        for (unsigned i = 0; i < 16 && recv(c->client_fd, drain, sizeof(drain), MSG_DONTWAIT) > 0; i++)
                ;
}

static void conn_refuse(ProxyConn *c, int status, ProxyRefusalKind kind, const char *reason) {
        /* agentfabd hears of it before the client does: when the command
         * that met the refusal ends, the event is in the daemon's socket
         * already, and counts in the step that caused it. */
        proxy_task_send_refusal(c->task, kind, c->host_text, c->request.port,
                                c->address_text[0] ? c->address_text : NULL, reason);
        conn_reply_error(c, status, reason);
        conn_journal(c, false, reason);
        c->allowed = false;
        proxy_conn_free(c);
}

/* An allowed destination that could not be reached: the client gets an
 * HTTP error, the journal an allowed entry with the reason; no refusal. */
static void conn_fail(ProxyConn *c, int status, const char *reason) {
        conn_reply_error(c, status, reason);
        c->allowed = true;
        c->end_reason = reason;
        proxy_conn_free(c);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata);
static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static int conn_arm_timer(ProxyConn *c, uint64_t after_usec) {
        uint64_t when = clock_now_usec(CLOCK_MONOTONIC) + after_usec;
        if (!c->timer_source)
                return sd_event_add_time(c->task->proxy->event, &c->timer_source, CLOCK_MONOTONIC, when,
                                         USEC_PER_SEC / 10, on_timer, c);
        (void) sd_event_source_set_time(c->timer_source, when);
        return sd_event_source_set_enabled(c->timer_source, SD_EVENT_ONESHOT);
}

static void set_events(sd_event_source *s, uint32_t events) {
        if (!s)
                return;
        if (events == 0) {
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_io_events(s, events);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
}

/* Which way each socket is to be watched in the relay. */
static void conn_update_events(ProxyConn *c) {
        uint32_t ce = 0, ue = 0;

        if (c->in_off < c->in_len)
                ue |= EPOLLOUT;
        else if (!c->client_eof && !c->client_done_reading)
                ce |= EPOLLIN;
        if (c->out_off < c->out_len)
                ce |= EPOLLOUT;
        else if (!c->upstream_eof)
                ue |= EPOLLIN;
        set_events(c->client_source, ce);
        set_events(c->upstream_source, ue);
}

/* Whether the relay is over; half-closes what is finished on the way. */
static bool conn_relay_finished(ProxyConn *c) {
        bool up_done = (c->client_eof || c->client_done_reading) && c->in_off == c->in_len;
        bool down_done = c->upstream_eof && c->out_off == c->out_len;

        if (c->request.kind == HTTP_REQUEST_FORWARD)
                /* One request, "Connection: close": the upstream's end of
                 * its reply is the end. */
                return down_done;

        if (up_done && !c->upstream_shut) {
                (void) shutdown(c->upstream_fd, SHUT_WR);
                c->upstream_shut = true;
        }
        if (down_done && !c->client_shut) {
                (void) shutdown(c->client_fd, SHUT_WR);
                c->client_shut = true;
        }
        return up_done && down_done;
}

static void conn_account(ProxyConn *c, size_t n, bool up) {
        if (up) {
                c->bytes_up += n;
                c->task->bytes_up += n;
        } else {
                c->bytes_down += n;
                c->task->bytes_down += n;
        }
        c->task->bytes += n;
        c->last_activity_usec = clock_now_usec(CLOCK_MONOTONIC);
}

/* Bytes to pass and none left of the task's limit: the connection is cut. */
static bool conn_limit_reached(ProxyConn *c) {
        c->end_reason = "byte limit of the task reached";
        proxy_task_send_refusal(c->task, PROXY_EVENT_LIMIT, c->host_text, c->request.port, c->address_text,
                                c->end_reason);
        return false;
}

/* How many more bytes the task may pass: a write never goes past its limit. */
static size_t conn_budget(ProxyConn *c, size_t want) {
        ProxyTask *t = c->task;
        return t->bytes >= t->max_bytes ? 0 : (size_t) MIN((uint64_t) want, t->max_bytes - t->bytes);
}

/* One step of the relay on whichever side is ready. false: the connection
 * is to be freed. */
static bool conn_relay(ProxyConn *c) {
        ssize_t n;
        size_t k;

        /* Client to upstream. */
        if (c->in_off < c->in_len) {
                k = conn_budget(c, c->in_len - c->in_off);
                if (k == 0)
                        return conn_limit_reached(c);
                n = send(c->upstream_fd, c->in + c->in_off, k, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        c->end_reason = "upstream connection failed";
                        return false;
                }
                if (n > 0) {
                        c->in_off += (size_t) n;
                        conn_account(c, (size_t) n, true);
                }
        }
        if (c->in_off == c->in_len && !c->client_eof && !c->client_done_reading) {
                size_t want = RELAY_BUFFER;
                if (c->request.kind == HTTP_REQUEST_FORWARD)
                        want = (size_t) MIN((uint64_t) want, c->body_left);
                c->in_off = c->in_len = 0;
                if (want == 0)
                        c->client_done_reading = true;
                else {
                        n = recv(c->client_fd, c->in, want, MSG_DONTWAIT);
                        if (n == 0)
                                c->client_eof = true;
                        else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                                c->end_reason = "client connection reset";
                                return false;
                        } else if (n > 0) {
                                c->in_len = (size_t) n;
                                if (c->request.kind == HTTP_REQUEST_FORWARD)
                                        c->body_left -= (uint64_t) n;
                        }
                }
        }

        /* Upstream to client. */
        if (c->out_off < c->out_len) {
                k = conn_budget(c, c->out_len - c->out_off);
                if (k == 0)
                        return conn_limit_reached(c);
                n = send(c->client_fd, c->out + c->out_off, k, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        c->end_reason = "client connection reset";
                        return false;
                }
                if (n > 0) {
                        c->out_off += (size_t) n;
                        conn_account(c, (size_t) n, false);
                }
        }
        if (c->out_off == c->out_len && !c->upstream_eof) {
                c->out_off = c->out_len = 0;
                n = recv(c->upstream_fd, c->out, RELAY_BUFFER, MSG_DONTWAIT);
                if (n == 0)
                        c->upstream_eof = true;
                else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        c->end_reason = "upstream connection reset";
                        return false;
                } else if (n > 0)
                        c->out_len = (size_t) n;
        }

        if (conn_relay_finished(c))
                return false;
        conn_update_events(c);
        return true;
}

static int conn_connect_next(ProxyConn *c);

static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyConn *c = userdata;

        if (c->state == CONN_CONNECTING) {
                int error = 0;
                socklen_t l = sizeof(error);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &l) < 0)
                        error = errno;
                if (error != 0) {
                        log_debug_errno(error, "Task %s: connecting to %s failed: %m", c->task->id, c->address_text);
                        (void) conn_connect_next(c);
                        return 0;
                }

                c->state = CONN_RELAY;
                c->allowed = true;
                c->last_activity_usec = clock_now_usec(CLOCK_MONOTONIC);
                (void) conn_arm_timer(c, c->task->idle_timeout_usec);
                if (c->request.kind == HTTP_REQUEST_CONNECT) {
                        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                        memcpy(c->out, ok, sizeof(ok) - 1);
                        c->out_off = 0;
                        c->out_len = sizeof(ok) - 1;
                }
                if (sd_event_add_io(c->task->proxy->event, &c->client_source, c->client_fd, EPOLLIN, on_client, c) < 0) {
                        proxy_conn_free(c);
                        return 0;
                }
        }

        if (!conn_relay(c))
                proxy_conn_free(c);
        return 0;
}

static int conn_connect_next(ProxyConn *c) {
        ProxyTask *t = c->task;

        c->upstream_source = sd_event_source_disable_unref(c->upstream_source);
        c->upstream_fd = safe_close(c->upstream_fd);

        for (; c->next_address < c->n_addresses; c->next_address++) {
                const ProxyAddress *a = &c->addresses[c->next_address];
                union {
                        struct sockaddr sa;
                        struct sockaddr_in in;
                        struct sockaddr_in6 in6;
                } sa = {};
                socklen_t len;

                proxy_address_to_string(a, c->address_text, sizeof(c->address_text));
                if (a->family == AF_INET) {
                        sa.in = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(c->request.port),
                                                       .sin_addr = a->addr.in };
                        len = sizeof(sa.in);
                } else {
                        sa.in6 = (struct sockaddr_in6) { .sin6_family = AF_INET6, .sin6_port = htons(c->request.port),
                                                         .sin6_addr = a->addr.in6 };
                        len = sizeof(sa.in6);
                }

                int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (fd < 0)
                        continue;
                /* A relay passes on what it got at once: Nagle's wait for an
                 * ACK (delayed on the other side) would add up to 40 ms to
                 * every reply that comes in two pieces. */
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
                if (connect(fd, &sa.sa, len) < 0 && errno != EINPROGRESS) {
                        log_debug_errno(errno, "Task %s: connecting to %s failed: %m", t->id, c->address_text);
                        safe_close(fd);
                        continue;
                }
                c->upstream_fd = fd;
                c->next_address++;
                c->state = CONN_CONNECTING;
                if (sd_event_add_io(t->proxy->event, &c->upstream_source, fd, EPOLLOUT, on_upstream, c) < 0 ||
                    conn_arm_timer(c, t->connect_timeout_usec) < 0) {
                        conn_fail(c, 502, "out of resources");
                        return -ENOMEM;
                }
                return 0;
        }

        conn_fail(c, 502, "could not connect to the destination");
        return -EHOSTUNREACH;
}

/* Judges every address the destination has; connects if all are allowed.
 * SECURITY: the addresses judged are the addresses connected to, and
 * nothing is resolved twice, so a name that resolves to a public address
 * now and to 127.0.0.1 a moment later gets nowhere. A name with one
 * refused address among others is refused as a whole. */
static void conn_judge_and_connect(ProxyConn *c, bool name_allowed) {
        ProxyTask *t = c->task;
        Proxy *p = t->proxy;
        char reason[512];

        proxy_refresh_own_addresses(p);
        for (size_t i = 0; i < c->n_addresses; i++) {
                AddressClass class;
                ProxyRefusal r = proxy_policy_check_address(&t->policy, &c->addresses[i], c->request.port, name_allowed,
                                                            p->own, p->n_own, &class);
                if (r == PROXY_ALLOWED)
                        continue;

                proxy_address_to_string(&c->addresses[i], c->address_text, sizeof(c->address_text));
                if (r == PROXY_REFUSED_ADDRESS) {
                        if (c->host.is_address)
                                snprintf(reason, sizeof(reason), "%s %s is not allowed",
                                         address_class_to_string(class), c->address_text);
                        else
                                snprintf(reason, sizeof(reason), "'%s' resolves to %s %s, which is not allowed",
                                         c->host_text, address_class_to_string(class), c->address_text);
                        conn_refuse(c, 403, PROXY_EVENT_ADDRESS, reason);
                } else {
                        snprintf(reason, sizeof(reason), "%s:%u is not in the task's allowlist",
                                 c->host_text, (unsigned) c->request.port);
                        conn_refuse(c, 403, PROXY_EVENT_NOT_ALLOWED, reason);
                }
                return;
        }

        c->next_address = 0;
        (void) conn_connect_next(c);
}

static int resolve_run(void *userdata) {
        ResolveJob *j = userdata;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;

        j->gai_error = getaddrinfo(j->name, NULL, &hints, &res);
        if (j->gai_error != 0)
                return -EHOSTUNREACH;
        for (struct addrinfo *i = res; i && j->n_addresses < RESOLVED_MAX; i = i->ai_next) {
                ProxyAddress a = { .family = i->ai_family };
                if (i->ai_family == AF_INET)
                        a.addr.in = ((struct sockaddr_in *) i->ai_addr)->sin_addr;
                else if (i->ai_family == AF_INET6)
                        a.addr.in6 = ((struct sockaddr_in6 *) i->ai_addr)->sin6_addr;
                else
                        continue;
                bool dup = false;
                for (size_t k = 0; k < j->n_addresses; k++)
                        dup = dup || proxy_address_equal(&j->addresses[k], &a);
                if (!dup)
                        j->addresses[j->n_addresses++] = a;
        }
        freeaddrinfo(res);
        return j->n_addresses > 0 ? 0 : -EHOSTUNREACH;
}

static void resolve_free(void *userdata) {
        ResolveJob *j = userdata;
        j->proxy->n_resolving--;
        free(j);
}

static void resolve_done(Worker *w, int r, void *job, void *userdata) {
        ProxyConn *c = userdata;
        ResolveJob *j = job;
        char reason[512];

        c->resolver = NULL; /* freed by the worker after this returns */
        if (r < 0) {
                snprintf(reason, sizeof(reason), "'%s' could not be resolved: %s", c->host_text,
                         j->gai_error ? gai_strerror(j->gai_error) : "no address");
                conn_refuse(c, 502, PROXY_EVENT_RESOLVE, reason);
                return;
        }
        memcpy(c->addresses, j->addresses, sizeof(ProxyAddress) * j->n_addresses);
        c->n_addresses = j->n_addresses;
        bool name_allowed = c->task->policy.mode == PROXY_MODE_AUDITED ||
                            proxy_policy_allows_name(&c->task->policy, c->host.name, c->request.port);
        conn_judge_and_connect(c, name_allowed);
}

/* The head is there: judge what it names. */
static void conn_dispatch(ProxyConn *c) {
        ProxyTask *t = c->task;
        Proxy *p = t->proxy;
        char reason[512];
        int r;

        /* Nothing more is read from the client until the destination is
         * judged and connected. */
        c->client_source = sd_event_source_disable_unref(c->client_source);

        snprintf(c->host_text, sizeof(c->host_text), c->request.host_bracketed ? "[%s]" : "%s", c->request.host);
        if (proxy_host_parse(c->request.host, c->request.host_bracketed, &c->host) < 0) {
                conn_refuse(c, 400, PROXY_EVENT_BAD_REQUEST, "not a valid host name or address");
                return;
        }
        if (t->bytes >= t->max_bytes) {
                conn_refuse(c, 403, PROXY_EVENT_LIMIT, "byte limit of the task reached");
                return;
        }

        /* What goes upstream first: nothing of a CONNECT's head (only what
         * the client sent after it), a forwarded request's head rewritten. */
        size_t rest = c->in_len - c->request.head_len;
        if (c->request.kind == HTTP_REQUEST_FORWARD) {
                char host_text[INET6_ADDRSTRLEN + 2];
                const char *h = c->request.host;
                if (c->host.is_address) {
                        char a[INET6_ADDRSTRLEN];
                        proxy_address_to_string(&c->host.address, a, sizeof(a));
                        snprintf(host_text, sizeof(host_text), c->host.address.family == AF_INET6 ? "[%s]" : "%s", a);
                        h = host_text;
                }
                _cleanup_free_ char *head = malloc(HTTP_FORWARD_HEAD_MAX);
                if (!head) {
                        conn_refuse(c, 503, PROXY_EVENT_LIMIT, "out of memory");
                        return;
                }
                int k = http_request_build_forward(&c->request, h, head, HTTP_FORWARD_HEAD_MAX);
                if (k < 0) {
                        conn_refuse(c, 431, PROXY_EVENT_BAD_REQUEST, "request head too large");
                        return;
                }
                c->body_left = c->request.has_content_length ? c->request.content_length : 0;
                rest = (size_t) MIN((uint64_t) rest, c->body_left);
                /* The head was built from the buffer; now it is replaced. */
                memmove(c->in + k, c->in + c->request.head_len, rest);
                memcpy(c->in, head, (size_t) k);
                c->in_len = (size_t) k + rest;
                c->body_left -= rest;
        } else {
                memmove(c->in, c->in + c->request.head_len, rest);
                c->in_len = rest;
        }
        c->in_off = 0;
        /* The request's pointers pointed into the old head: gone. */
        c->request.path = NULL;
        c->request.path_len = 0;
        c->request.n_headers = 0;

        if (c->host.is_address) {
                c->addresses[0] = c->host.address;
                c->n_addresses = 1;
                conn_judge_and_connect(c, false);
                return;
        }

        bool name_allowed = t->policy.mode == PROXY_MODE_AUDITED ||
                            proxy_policy_allows_name(&t->policy, c->host.name, c->request.port);
        if (!name_allowed) {
                /* SECURITY: not even resolved: a lookup of an arbitrary name
                 * would carry data out through DNS. */
                snprintf(reason, sizeof(reason), "%s:%u is not in the task's allowlist", c->host_text,
                         (unsigned) c->request.port);
                conn_refuse(c, 403, PROXY_EVENT_NOT_ALLOWED, reason);
                return;
        }

        if (p->n_resolving >= PROXY_RESOLVING_MAX) {
                conn_refuse(c, 503, PROXY_EVENT_LIMIT, "too many name look-ups at once");
                return;
        }
        ResolveJob *j = calloc(1, sizeof(ResolveJob));
        if (!j) {
                conn_refuse(c, 503, PROXY_EVENT_LIMIT, "out of memory");
                return;
        }
        j->proxy = p;
        strcpy(j->name, c->host.name);
        r = worker_start(p->event, resolve_run, resolve_done, resolve_free, j, c, &c->resolver);
        if (r < 0) {
                free(j);
                conn_refuse(c, 503, PROXY_EVENT_LIMIT, "could not start a name look-up");
                return;
        }
        p->n_resolving++;
        c->state = CONN_RESOLVING;
}

static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyConn *c = userdata;

        if (c->state == CONN_RELAY) {
                if (!conn_relay(c))
                        proxy_conn_free(c);
                return 0;
        }

        /* Reading the head: at most HTTP_HEAD_MAX bytes in all. */
        ssize_t n = recv(fd, c->in + c->in_len, HTTP_HEAD_MAX - c->in_len, MSG_DONTWAIT);
        if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return 0;
                proxy_conn_free(c); /* nothing asked, nothing to journal */
                return 0;
        }
        if (n == 0) {
                proxy_conn_free(c);
                return 0;
        }
        c->in_len += (size_t) n;

        int status = 0;
        const char *error = NULL;
        int r = http_request_parse(c->in, c->in_len, &c->request, &status, &error);
        if (r < 0) {
                conn_refuse(c, status, PROXY_EVENT_BAD_REQUEST, error);
                return 0;
        }
        if (r == 0)
                return 0;
        if (c->over_limit) {
                snprintf(c->host_text, sizeof(c->host_text), c->request.host_bracketed ? "[%s]" : "%s",
                         c->request.host);
                conn_refuse(c, 429, PROXY_EVENT_LIMIT, "connection limit of the task reached");
                return 0;
        }

        conn_dispatch(c);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ProxyConn *c = userdata;

        switch (c->state) {
        case CONN_HEAD:
                conn_refuse(c, 400, PROXY_EVENT_BAD_REQUEST, "no request within the time allowed");
                return 0;
        case CONN_RESOLVING:
                return 0; /* the resolver's own timeouts apply */
        case CONN_CONNECTING:
                conn_fail(c, 504, "connecting timed out");
                return 0;
        case CONN_RELAY: {
                uint64_t idle = clock_now_usec(CLOCK_MONOTONIC) - c->last_activity_usec;
                if (idle >= c->task->idle_timeout_usec) {
                        c->end_reason = "idle timeout";
                        proxy_conn_free(c);
                        return 0;
                }
                (void) conn_arm_timer(c, c->task->idle_timeout_usec - idle);
                return 0;
        }
        }
        return 0;
}

int proxy_conn_new(ProxyTask *t, int fd) {
        Proxy *p = t->proxy;

        ProxyConn *c = calloc(1, sizeof(ProxyConn));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        *c = (ProxyConn) { .task = t, .client_fd = fd, .upstream_fd = -EBADF, .state = CONN_HEAD };
        c->start_usec = clock_now_usec(CLOCK_MONOTONIC);
        c->next = t->conns;
        if (t->conns)
                t->conns->prev = c;
        t->conns = c;
        t->n_conns++;
        t->connections++;
        p->n_conns++;

        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
        c->in = malloc(IN_BUFFER);
        c->out = malloc(RELAY_BUFFER);
        if (!c->in || !c->out) {
                proxy_conn_free(c);
                return -ENOMEM;
        }

        /* Past the task's limit, the request is still read (briefly), so
         * that the refusal names its destination and reaches the client
         * whole; far past it, or past the proxy's, the connection is
         * refused at once. */
        if (t->n_conns > 2 * t->max_connections + 16 || p->n_conns > PROXY_CONNS_MAX) {
                conn_refuse(c, 429, PROXY_EVENT_LIMIT,
                            p->n_conns > PROXY_CONNS_MAX ? "connection limit of the proxy reached" :
                                                           "connection limit of the task reached");
                return -EBUSY;
        }
        c->over_limit = t->n_conns > t->max_connections;

        if (sd_event_add_io(p->event, &c->client_source, fd, EPOLLIN, on_client, c) < 0 ||
            conn_arm_timer(c, c->over_limit ? PROXY_HEAD_TIMEOUT_USEC / 10 : PROXY_HEAD_TIMEOUT_USEC) < 0) {
                proxy_conn_free(c);
                return -ENOMEM;
        }
        return 0;
}
