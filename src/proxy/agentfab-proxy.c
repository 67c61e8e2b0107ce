/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "json-util.h"
#include "log.h"
#include "proxy.h"
#include "socket-util.h"
#include "time-util.h"

/* agentfab-proxy: the egress proxy of task sandboxes. It runs in its own
 * hardened unit, unprivileged, outside every sandbox and outside agentfabd,
 * because it parses what sandboxed code sends. agentfabd registers tasks
 * over the control socket; each task's sandbox hands its forwarder's
 * listening socket over the task's channel; the commands' connections are
 * accepted, judged, journaled and relayed here. See agentfab-proxy(8). */

static const char *arg_control = NULL;
static const char *arg_control_user = "agentfab";

void proxy_refresh_own_addresses(Proxy *p) {
        struct ifaddrs *ifa = NULL;
        uint64_t now = clock_now_usec(CLOCK_MONOTONIC);

        /* Interfaces come and go (a VPN, DHCP); a few seconds old is fresh
         * enough, and getifaddrs() is not free. */
        if (p->own_read_usec != 0 && now - p->own_read_usec < 5 * USEC_PER_SEC)
                return;
        if (getifaddrs(&ifa) < 0) {
                log_warning_errno(errno, "Failed to read the host's addresses, keeping the last ones: %m");
                return;
        }
        p->n_own = 0;
        for (struct ifaddrs *i = ifa; i && p->n_own < PROXY_OWN_ADDRESSES_MAX; i = i->ifa_next) {
                if (!i->ifa_addr)
                        continue;
                if (i->ifa_addr->sa_family == AF_INET)
                        p->own[p->n_own++] = (ProxyAddress) {
                                .family = AF_INET, .addr.in = ((struct sockaddr_in *) i->ifa_addr)->sin_addr };
                else if (i->ifa_addr->sa_family == AF_INET6)
                        p->own[p->n_own++] = (ProxyAddress) {
                                .family = AF_INET6, .addr.in6 = ((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr };
        }
        freeifaddrs(ifa);
        p->own_read_usec = now;
}

static int control_send(ProxyControl *c, json_object *m, int fd) {
        const char *s = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN);
        ssize_t k = socket_send_fds(c->fd, s, strlen(s), &fd, fd >= 0 ? 1 : 0, MSG_DONTWAIT);

        return k < 0 ? (int) k : 0;
}

void proxy_task_send_refusal(ProxyTask *t, ProxyRefusalKind kind, const char *host, uint16_t port,
                             const char *address, const char *reason) {
        _cleanup_json_ json_object *m = json_object_new_object();

        if (!m || !t->control)
                return;
        if (json_add_string(m, "type", "refused") < 0 || json_add_string(m, "task", t->id) < 0 ||
            json_add_string(m, "mode", proxy_mode_to_string(t->policy.mode)) < 0 ||
            json_add_string(m, "kind", proxy_refusal_kind_to_string(kind)) < 0 ||
            json_add_string(m, "host", host) < 0 || json_add_uint64(m, "port", port) < 0 ||
            json_add_string(m, "address", address) < 0 || json_add_string(m, "reason", reason) < 0)
                return;
        /* SECURITY: never blocks: a daemon that does not read its events
         * must not stall the proxy; the journal has every refusal. */
        if (control_send(t->control, m, -EBADF) < 0 && t->control->events_dropped++ % 100 == 0)
                log_warning("Task %s: the control connection does not take events, dropping them.", t->id);
}

static ProxyTask *proxy_task_free(ProxyTask *t) {
        if (!t)
                return NULL;
        while (t->conns)
                proxy_conn_free(t->conns);

        Proxy *p = t->proxy;
        if (t->prev)
                t->prev->next = t->next;
        else
                p->tasks = t->next;
        if (t->next)
                t->next->prev = t->prev;
        p->n_tasks--;

        sd_event_source_disable_unref(t->channel_source);
        sd_event_source_disable_unref(t->listen_source);
        sd_event_source_disable_unref(t->retry_source);
        safe_close(t->channel_fd);
        safe_close(t->listen_fd);
        proxy_policy_done(&t->policy);
        log_debug("Task %s: ended.", t->id);
        free(t);
        return NULL;
}

static ProxyTask *proxy_find_task(Proxy *p, const char *id) {
        for (ProxyTask *t = p->tasks; t; t = t->next)
                if (streq(t->id, id))
                        return t;
        return NULL;
}

static int on_retry_accept(sd_event_source *s, uint64_t usec, void *userdata) {
        ProxyTask *t = userdata;
        (void) sd_event_source_set_enabled(t->listen_source, SD_EVENT_ON);
        return 0;
}

static int on_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyTask *t = userdata;

        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
                if (IN_SET(errno, EAGAIN, EINTR, ECONNABORTED))
                        return 0;
                /* Out of fds or memory: pause a moment instead of spinning. */
                log_warning_errno(errno, "Task %s: failed to accept a connection, pausing: %m", t->id);
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
                uint64_t when = clock_now_usec(CLOCK_MONOTONIC) + USEC_PER_SEC;
                if (t->retry_source) {
                        (void) sd_event_source_set_time(t->retry_source, when);
                        (void) sd_event_source_set_enabled(t->retry_source, SD_EVENT_ONESHOT);
                } else
                        (void) sd_event_add_time(t->proxy->event, &t->retry_source, CLOCK_MONOTONIC, when, 0,
                                                 on_retry_accept, t);
                return 0;
        }
        (void) proxy_conn_new(t, cfd);
        return 0;
}

/* Whether fd is what a sandbox is to send: a listening TCP socket. */
static int check_listener(int fd) {
        int v;
        socklen_t l = sizeof(v);
        struct stat st;

        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || !IN_SET(v, AF_INET, AF_INET6))
                return -EAFNOSUPPORT;
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_STREAM)
                return -ESOCKTNOSUPPORT;
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || v != 1)
                return -EINVAL;

        /* Bound to a loopback address: a listener on any other would let
         * others than the task's commands speak as the task. */
        union {
                struct sockaddr sa;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } sa = {};
        l = sizeof(sa);
        if (getsockname(fd, &sa.sa, &l) < 0)
                return -errno;
        if (sa.sa.sa_family == AF_INET && (ntohl(sa.in.sin_addr.s_addr) >> 24) == 127)
                return 0;
        if (sa.sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&sa.in6.sin6_addr))
                return 0;
        return -EADDRNOTAVAIL;
}

/* The channel: the sandbox's one message (its listener), then nothing
 * until it closes, which ends the task. */
static int on_channel(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyTask *t = userdata;
        char buf[64];
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 8)];
        } control = {};
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
        int received = -EBADF;

        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) {
                if (IN_SET(errno, EAGAIN, EINTR))
                        return 0;
                n = 0;
        }
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
                if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
                        int *fds = (int *) CMSG_DATA(h);
                        for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                                if (received < 0)
                                        received = fds[i];
                                else
                                        safe_close(fds[i]);
                        }
                }
        if (n == 0 && received < 0) {
                log_debug("Task %s: its sandbox closed the channel.", t->id);
                proxy_task_free(t);
                return 0;
        }
        if (received < 0)
                return 0; /* a message without a socket: nothing to do with it */

        /* SECURITY: only a listening TCP socket; anything else (a file,
         * a connected socket) is closed unused. Only PID 1 of a sandbox,
         * at its set-up, and agentfabd hold the channel. */
        int r = check_listener(received);
        if (r < 0) {
                log_warning_errno(r, "Task %s: refusing what its channel sent: %m", t->id);
                safe_close(received);
                return 0;
        }
        /* A new sandbox of the same registration (the daemon kept its
         * copy of the channel): its listener replaces the last one, whose
         * sandbox is gone or going. */
        if (t->listen_fd >= 0) {
                t->listen_source = sd_event_source_disable_unref(t->listen_source);
                t->retry_source = sd_event_source_disable_unref(t->retry_source);
                t->listen_fd = safe_close(t->listen_fd);
        }
        int flags = fcntl(received, F_GETFL);
        if (flags < 0 || fcntl(received, F_SETFL, flags | O_NONBLOCK) < 0 ||
            sd_event_add_io(t->proxy->event, &t->listen_source, received, EPOLLIN, on_listen, t) < 0) {
                log_warning("Task %s: cannot watch its listener.", t->id);
                safe_close(received);
                return 0;
        }
        t->listen_fd = received;
        log_debug("Task %s: listening for its sandbox.", t->id);
        return 0;
}

static int reply(ProxyControl *c, int error, const char *message, int fd) {
        _cleanup_json_ json_object *m = json_object_new_object();

        if (!m || json_add_string(m, "type", "reply") < 0 ||
            json_object_object_add(m, "ok", json_object_new_boolean(error == 0)) < 0 ||
            (error != 0 && (json_add_uint64(m, "errno", (uint64_t) -error) < 0 || json_add_string(m, "error", message) < 0)))
                return -ENOMEM;
        return control_send(c, m, fd);
}

/* The "allow" array of a request as a NULL-terminated list (pointers into m). */
static int get_allow(json_object *m, const char ***ret) {
        json_object *a;
        size_t n;

        if (!json_object_object_get_ex(m, "allow", &a)) {
                *ret = calloc(1, sizeof(char *));
                return *ret ? 0 : -ENOMEM;
        }
        if (!json_object_is_type(a, json_type_array))
                return -EINVAL;
        n = json_object_array_length(a);
        if (n > 1024)
                return -E2BIG;
        const char **l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (!json_object_is_type(e, json_type_string)) {
                        free(l);
                        return -EINVAL;
                }
                l[i] = json_object_get_string(e);
        }
        *ret = l;
        return 0;
}

static uint64_t get_limit(json_object *m, const char *key, uint64_t def) {
        uint64_t v = 0;
        if (json_get_uint64(m, key, &v) < 0 || v == 0)
                return def;
        return v;
}

static int handle_register(ProxyControl *c, json_object *m, const char *id) {
        Proxy *p = c->proxy;
        _cleanup_free_ const char **allow = NULL;
        const char *mode_s = NULL, *bad = NULL;
        char msg[512];
        int r;

        if (proxy_find_task(p, id))
                return reply(c, -EEXIST, "task is registered already", -EBADF);
        if (p->n_tasks >= PROXY_TASKS_MAX)
                return reply(c, -EUSERS, "too many tasks", -EBADF);
        if (json_get_string(m, "mode", &mode_s) < 0 || proxy_mode_from_string(mode_s) < 0)
                return reply(c, -EINVAL, "mode must be 'allowlist' or 'audited'", -EBADF);
        r = get_allow(m, &allow);
        if (r < 0)
                return reply(c, r, "allow must be a list of strings", -EBADF);

        ProxyTask *t = calloc(1, sizeof(ProxyTask));
        if (!t)
                return reply(c, -ENOMEM, "out of memory", -EBADF);
        *t = (ProxyTask) {
                .proxy = p, .control = c, .channel_fd = -EBADF, .listen_fd = -EBADF,
                .policy.mode = proxy_mode_from_string(mode_s),
                .max_connections = (unsigned) MIN(get_limit(m, "max_connections", PROXY_DEFAULT_MAX_CONNECTIONS),
                                                  (uint64_t) PROXY_CONNS_MAX),
                .max_bytes = get_limit(m, "max_bytes", PROXY_DEFAULT_MAX_BYTES),
                .idle_timeout_usec = get_limit(m, "idle_timeout_usec", PROXY_DEFAULT_IDLE_TIMEOUT_USEC),
                .connect_timeout_usec = get_limit(m, "connect_timeout_usec", PROXY_DEFAULT_CONNECT_TIMEOUT_USEC),
        };
        strcpy(t->id, id);
        t->next = p->tasks;
        if (p->tasks)
                p->tasks->prev = t;
        p->tasks = t;
        p->n_tasks++;

        r = proxy_policy_add(&t->policy, (char **) allow, &bad);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "invalid allow entry '%s'", strempty(bad));
                proxy_task_free(t);
                return reply(c, r, msg, -EBADF);
        }

        int pair[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                r = -errno;
                proxy_task_free(t);
                return reply(c, r, "cannot make the channel", -EBADF);
        }
        t->channel_fd = pair[0];
        _cleanup_close_ int theirs = pair[1];
        r = sd_event_add_io(p->event, &t->channel_source, t->channel_fd, EPOLLIN, on_channel, t);
        if (r < 0) {
                proxy_task_free(t);
                return reply(c, r, "cannot watch the channel", -EBADF);
        }

        r = reply(c, 0, NULL, theirs);
        if (r < 0) {
                proxy_task_free(t);
                return r;
        }
        log_info("Task %s registered (%s, %zu allow entries).", id, mode_s, t->policy.n_entries);
        return 0;
}

static int handle_message(ProxyControl *c, const char *buf, size_t n) {
        _cleanup_json_ json_object *m = NULL;
        const char *type = NULL, *id = NULL;
        int r;

        r = json_parse_strict(buf, n, &m);
        if (r < 0 || !json_object_is_type(m, json_type_object))
                return reply(c, -EBADMSG, "not a JSON object", -EBADF);
        if (json_get_string(m, "type", &type) < 0 || json_get_string(m, "task", &id) < 0)
                return reply(c, -EBADMSG, "type and task are required", -EBADF);
        if (!proxy_task_id_is_valid(id))
                return reply(c, -EINVAL, "invalid task id", -EBADF);

        if (streq(type, "register"))
                return handle_register(c, m, id);

        ProxyTask *t = proxy_find_task(c->proxy, id);
        /* A connection sees and changes only the tasks it registered. */
        if (!t || t->control != c)
                return reply(c, -ENOENT, "no such task", -EBADF);

        if (streq(type, "allow")) {
                _cleanup_free_ const char **allow = NULL;
                const char *bad = NULL;
                char msg[512];
                r = get_allow(m, &allow);
                if (r < 0)
                        return reply(c, r, "allow must be a list of strings", -EBADF);
                r = proxy_policy_add(&t->policy, (char **) allow, &bad);
                if (r < 0) {
                        snprintf(msg, sizeof(msg), "invalid allow entry '%s'", strempty(bad));
                        return reply(c, r, msg, -EBADF);
                }
                for (const char **a = allow; *a; a++)
                        log_info("Task %s: '%s' allowed.", t->id, *a);
                return reply(c, 0, NULL, -EBADF);
        }
        if (streq(type, "unregister")) {
                proxy_task_free(t);
                return reply(c, 0, NULL, -EBADF);
        }
        if (streq(type, "usage")) {
                /* What the task's connections used since it was registered. */
                _cleanup_json_ json_object *u = json_object_new_object();
                if (!u || json_add_string(u, "type", "reply") < 0 ||
                    json_object_object_add(u, "ok", json_object_new_boolean(true)) < 0 ||
                    json_add_uint64(u, "bytes_up", t->bytes_up) < 0 || json_add_uint64(u, "bytes_down", t->bytes_down) < 0 ||
                    json_add_uint64(u, "connections", t->connections) < 0)
                        return -ENOMEM;
                return control_send(c, u, -EBADF);
        }
        return reply(c, -EOPNOTSUPP, "unknown request type", -EBADF);
}

static ProxyControl *proxy_control_free(ProxyControl *c) {
        if (!c)
                return NULL;
        Proxy *p = c->proxy;

        /* Every task of this connection ends with it. */
        for (ProxyTask *t = p->tasks, *next; t; t = next) {
                next = t->next;
                if (t->control == c)
                        proxy_task_free(t);
        }
        if (c->prev)
                c->prev->next = c->next;
        else
                p->controls = c->next;
        if (c->next)
                c->next->prev = c->prev;
        p->n_controls--;
        sd_event_source_disable_unref(c->source);
        safe_close(c->fd);
        free(c);
        return NULL;
}

static int on_control(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyControl *c = userdata;
        _cleanup_free_ char *buf = malloc(PROXY_MESSAGE_MAX);
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 8)];
        } control = {};

        if (!buf)
                return 0;
        struct iovec iov = { .iov_base = buf, .iov_len = PROXY_MESSAGE_MAX };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && IN_SET(errno, EAGAIN, EINTR))
                return 0;
        /* No request carries fds: any that came are closed unused. */
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
                if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
                        for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                safe_close(((int *) CMSG_DATA(h))[i]);
        if (n <= 0) {
                log_info("Control connection of uid %u closed; its tasks end.", (unsigned) c->uid);
                proxy_control_free(c);
                return 0;
        }
        if (mh.msg_flags & MSG_TRUNC) {
                (void) reply(c, -EMSGSIZE, "request too large", -EBADF);
                return 0;
        }
        int r = handle_message(c, buf, (size_t) n);
        if (r < 0) {
                log_warning_errno(r, "Control connection of uid %u: cannot reply, closing it: %m", (unsigned) c->uid);
                proxy_control_free(c);
        }
        return 0;
}

static int on_control_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Proxy *p = userdata;
        struct ucred cred;
        socklen_t l = sizeof(cred);

        _cleanup_close_ int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        /* SECURITY: only root and the daemon's user register tasks; the
         * socket's mode says so too (agentfab-proxy.socket). */
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0)
                return 0;
        if (cred.uid != 0 && cred.uid != p->control_uid) {
                log_warning("Refusing a control connection of uid %u.", (unsigned) cred.uid);
                return 0;
        }
        if (p->n_controls >= PROXY_CONTROLS_MAX) {
                log_warning("Refusing a control connection of uid %u: too many.", (unsigned) cred.uid);
                return 0;
        }

        ProxyControl *c = calloc(1, sizeof(ProxyControl));
        if (!c)
                return 0;
        *c = (ProxyControl) { .proxy = p, .fd = TAKE_FD(cfd), .uid = cred.uid, .next = p->controls };
        if (p->controls)
                p->controls->prev = c;
        p->controls = c;
        p->n_controls++;
        if (sd_event_add_io(p->event, &c->source, c->fd, EPOLLIN, on_control, c) < 0)
                proxy_control_free(c);
        else
                log_info("Control connection of uid %u.", (unsigned) cred.uid);
        return 0;
}

static int control_listen_fd(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int n = sd_listen_fds(true);

        if (n > 1)
                return log_error_errno(-EINVAL, "Expected one socket from systemd, got %d.", n);
        if (n == 1) {
                if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 1, NULL, 0) <= 0)
                        return log_error_errno(-EINVAL, "The socket from systemd is not a listening SOCK_SEQPACKET one.");
                return SD_LISTEN_FDS_START;
        }

        /* Without socket activation (tests, debugging): bind it ourselves. */
        const char *path = arg_control ?: AGENTFAB_PROXY_CONTROL;
        if (strlen(path) >= sizeof(sa.sun_path))
                return log_error_errno(-ENAMETOOLONG, "Control socket path too long.");
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "Failed to make the control socket: %m");
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
                int r = -errno;
                safe_close(fd);
                return log_error_errno(r, "Failed to listen on '%s': %m", path);
        }
        return fd;
}

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "The egress proxy of agentfab task sandboxes. See agentfab-proxy(8).\n\n"
               "  -h --help               Show this help\n"
               "     --version            Show package version\n"
               "     --control=PATH       Listen on PATH when not socket-activated\n"
               "                          (default: " AGENTFAB_PROXY_CONTROL ")\n"
               "     --control-user=USER  Who besides root may register tasks (default: agentfab)\n",
               program_invocation_short_name);
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_CONTROL, ARG_CONTROL_USER };
        static const struct option options[] = {
                { "help",         no_argument,       NULL, 'h'              },
                { "version",      no_argument,       NULL, ARG_VERSION      },
                { "control",      required_argument, NULL, ARG_CONTROL      },
                { "control-user", required_argument, NULL, ARG_CONTROL_USER },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentfab %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_CONTROL:
                        arg_control = optarg;
                        break;
                case ARG_CONTROL_USER:
                        arg_control_user = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("No arguments expected.");
                return -EINVAL;
        }
        return 1;
}

int main(int argc, char *argv[]) {
        _cleanup_close_ int listen_fd = -EBADF;
        Proxy proxy = { .control_uid = UID_INVALID };
        sigset_t ss;
        int r;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;

        if (getenv("AGENTFAB_PROXY_DEBUG"))
                log_set_max_level(LOG_DEBUG);

        /* SECURITY: this process parses what sandboxed code sends; it must
         * never hold root's powers. */
        if (geteuid() == 0) {
                log_error("agentfab-proxy does not run as root.");
                return EXIT_FAILURE;
        }

        struct passwd *pw = getpwnam(arg_control_user);
        if (!pw) {
                log_error("No user '%s' to take control connections from.", arg_control_user);
                return EXIT_FAILURE;
        }
        proxy.control_uid = pw->pw_uid;

        listen_fd = control_listen_fd();
        if (listen_fd < 0)
                return EXIT_FAILURE;

        r = sd_event_default(&proxy.event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop: %m"), EXIT_FAILURE;
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        signal(SIGPIPE, SIG_IGN);
        (void) sd_event_add_signal(proxy.event, NULL, SIGTERM, NULL, NULL);
        (void) sd_event_add_signal(proxy.event, NULL, SIGINT, NULL, NULL);

        r = sd_event_add_io(proxy.event, NULL, listen_fd, EPOLLIN, on_control_listen, &proxy);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the control socket: %m"), EXIT_FAILURE;

        proxy_refresh_own_addresses(&proxy);
        (void) sd_notify(false, "READY=1\nSTATUS=Waiting for tasks.");
        r = sd_event_loop(proxy.event);
        (void) sd_notify(false, "STOPPING=1");

        while (proxy.controls)
                proxy_control_free(proxy.controls);
        sd_event_unref(proxy.event);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
