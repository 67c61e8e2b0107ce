/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * agentfab-load: drives agentfabd over D-Bus and its stream socket, the way
 * many clients at once would, and prints what it measured. Not installed;
 * bench/load.sh copies it into the test system.
 *
 *   agentfab-load rate --clients=N --rate=CALLS_PER_SEC --seconds=S --repo=PATH [--socket=PATH] [--closed]
 *       N processes, each with its own bus connection, share the rate: the
 *       calls of each are spread evenly over time. The mix: a list,
 *       GetAll of a task's properties, SubmitTask of PATH, Cancel of a task
 *       the client submitted, and a watch of a task's history on the
 *       stream socket. Prints calls, errors and p50/p99/max latency per
 *       kind and in all.
 *       By default each client sends every call when it is due, whether or
 *       not earlier ones were answered (an open loop, the way a busy client
 *       with many callers behaves, or many clients): the rate is the rate
 *       offered, and a slow answer shows in the latency, not as fewer
 *       calls. The client's own lag behind its schedule is printed too.
 *       With --closed, each client waits for an answer before its next call
 *       (a late call goes at once, and the achieved rate says so).
 *       --mix=L,P,S,C,W: the shares of the list, GetAll, SubmitTask, Cancel
 *       and watch out of 100 (default 40,30,5,5,20), e.g. 100,0,0,0,0 for
 *       the cost of one kind alone.
 *       --list=filtered (the default): the list is what "agentfabctl list"
 *       asks, ListTasksFiltered() of the states not finished; --list=full:
 *       ListTasks(), every task ever submitted.
 *   agentfab-load submit --count=N --repo=PATH
 *       Submits N tasks, one after the other; prints the time it took.
 *   agentfab-load list --count=N [--list=filtered|full]
 *       Calls ListTasks (the default here, or with --list=filtered
 *       ListTasksFiltered() of the states not finished) N times; prints
 *       tasks listed and p50/p99/max.
 *   agentfab-load first
 *       One ListTasks call, retried until answered (at most 30 s): prints
 *       the milliseconds to the first answer, e.g. while the daemon starts.
 *   agentfab-load script --repo=PATH      (commands on stdin, see run_script())
 *   agentfab-load burst --count=N --repo=PATH
 *       N connections each send one SubmitTask at the same moment.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"

#define BUS_NAME  "org.agentfab.Factory1"
#define BUS_PATH  "/org/agentfab/Factory1"
#define BUS_IFACE "org.agentfab.Factory1"
#define TASK_IFACE "org.agentfab.Task1"

enum { OP_LIST, OP_PROPS, OP_SUBMIT, OP_CANCEL, OP_WATCH, _OP_MAX };
static const char *op_name[_OP_MAX] = { "ListFiltered", "GetAll", "SubmitTask", "Cancel", "watch" };
/* Out of every 100 calls. Submissions and cancels are few: each submission
 * copies a repository, which is the daemon's real work, not the bus's. */
static unsigned op_share[_OP_MAX] = { 40, 30, 5, 5, 20 };

static const char *arg_repo = NULL;
static const char *arg_socket = "/run/agentfab/agentfab.sock";
static unsigned arg_clients = 8, arg_rate = 1000, arg_seconds = 60, arg_count = 1000;
static bool arg_closed = false;
/* The list call of the mix: what "agentfabctl list" calls by default, the
 * tasks not finished (ListTasksFiltered()), or with --list=full every task
 * (ListTasks()), the cost of which grows with every task ever submitted. */
static bool arg_list_full = false, arg_list_set = false;
static const char *const unfinished_states[] = {
        "queued", "preparing", "running", "awaiting-approval", "delivering", "paused", NULL
};

static const char *list_method(void) {
        return arg_list_full ? "ListTasks" : "ListTasksFiltered";
}

static int list_call_async(sd_bus *bus, sd_bus_message_handler_t callback, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        if (arg_list_full)
                return sd_bus_call_method_async(bus, NULL, BUS_NAME, BUS_PATH, BUS_IFACE, "ListTasks", callback, userdata, NULL);
        r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, BUS_PATH, BUS_IFACE, "ListTasksFiltered");
        if (r >= 0)
                r = sd_bus_message_append_strv(m, (char **) unfinished_states);
        if (r >= 0)
                r = sd_bus_call_async(bus, NULL, m, callback, userdata, 0);
        return r;
}

/* The same, waiting for the answer, whose entries are read as a client
 * would; *ret_n (if given) says how many there were. */
static int list_call(sd_bus *bus, unsigned *ret_n, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *id, *state, *path;
        unsigned n = 0;
        int r;

        if (arg_list_full)
                r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_IFACE, "ListTasks", error, &reply, NULL);
        else {
                r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, BUS_PATH, BUS_IFACE, "ListTasksFiltered");
                if (r >= 0)
                        r = sd_bus_message_append_strv(m, (char **) unfinished_states);
                if (r >= 0)
                        r = sd_bus_call(bus, m, 0, error, &reply);
        }
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "(sso)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sso)", &id, &state, &path)) > 0)
                n++;
        if (ret_n)
                *ret_n = n;
        /* What the daemon asked meanwhile is answered, as by any client
         * with a main loop: its Peer.Ping() after a list tells it the list
         * was read, and a client that never answers is taken for one that
         * never reads (MaxQueuedBytesPerClient=). */
        while (sd_bus_process(bus, NULL) > 0)
                ;
        return r;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

static void print_latencies(const char *what, uint32_t *v, size_t n, unsigned errors) {
        if (n == 0) {
                printf("  %-12s %8zu %8u\n", what, n, errors);
                return;
        }
        qsort(v, n, sizeof(*v), cmp_u32);
        printf("  %-12s %8zu %8u %9.2f %9.2f %9.2f\n", what, n, errors, v[n / 2] / 1000.0,
               v[n * 99 / 100 < n ? n * 99 / 100 : n - 1] / 1000.0, v[n - 1] / 1000.0);
}

static int submit_task(sd_bus *bus, char **ret_id, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *id, *path;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_IFACE, "SubmitTask", error, &reply, "a{sv}", 3,
                               "repository", "s", arg_repo, "goal", "s", "load", "test_command", "s", "true");
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "so", &id, &path);
        if (r < 0)
                return r;
        if (ret_id) {
                *ret_id = strdup(id);
                if (!*ret_id)
                        return -ENOMEM;
        }
        return 0;
}

/* ListTasks; with ret_ids, the first id seen is returned too. */
static int list_tasks(sd_bus *bus, unsigned *ret_n, char **ret_id, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *id, *state, *path;
        unsigned n = 0;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_IFACE, "ListTasks", error, &reply, NULL);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(sso)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(sso)", &id, &state, &path)) > 0) {
                if (n == 0 && ret_id && !*ret_id)
                        *ret_id = strdup(id);
                n++;
        }
        if (r < 0)
                return r;
        if (ret_n)
                *ret_n = n;
        return 0;
}

static int task_path(const char *id, char *buf, size_t size) {
        return snprintf(buf, size, BUS_PATH "/task/%s", id) < (int) size ? 0 : -ENAMETOOLONG;
}

/* Reads a task's history from the stream socket, to its end. */
static int watch_task(const char *id) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char req[128], buf[65536];
        int fd, r = 0;
        bool end = false;

        if (strlen(arg_socket) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, arg_socket);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                goto out;
        }
        snprintf(req, sizeof(req), "{\"task\":\"%s\",\"follow\":false}\n", id);
        if (write(fd, req, strlen(req)) != (ssize_t) strlen(req)) {
                r = -EIO;
                goto out;
        }
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;

                if (poll(&p, 1, 10000) <= 0) {
                        r = -ETIMEDOUT;
                        break;
                }
                k = read(fd, buf, sizeof(buf) - 1);
                if (k < 0) {
                        r = -errno;
                        break;
                }
                if (k == 0)
                        break;
                buf[k] = '\0';
                if (strstr(buf, "\"type\":\"error\"")) {
                        r = -EPROTO;
                        break;
                }
                if (strstr(buf, "\"type\":\"end\""))
                        end = true;
        }
        if (r == 0 && !end)
                r = -EPROTO;
out:
        close(fd);
        return r;
}

typedef struct Result {
        uint32_t n[_OP_MAX];
        uint32_t errors[_OP_MAX];
        uint32_t lag_max;          /* usec: the latest a call was sent after it was due */
        uint32_t late;             /* calls sent more than 10 ms after they were due */
        uint32_t unanswered;       /* open loop: calls not answered (or not sent) 30 s after the last was due */
} Result;

static unsigned op_pick(uint64_t i, unsigned index) {
        unsigned pick = (unsigned) ((i * 37 + index * 11) % 100), op, acc = 0;

        for (op = 0; op < _OP_MAX; op++) {
                acc += op_share[op];
                if (pick < acc)
                        break;
        }
        return op;
}

static int write_result(int fd, const Result *res, uint32_t *const lat[_OP_MAX]) {
        if (write(fd, res, sizeof(*res)) != sizeof(*res))
                return 1;
        for (int i = 0; i < _OP_MAX; i++)
                if (write(fd, lat[i], res->n[i] * sizeof(uint32_t)) != (ssize_t) (res->n[i] * sizeof(uint32_t)))
                        return 1;
        return 0;
}

/* ---- The open loop: every call sent when due, answers taken as they come. ---- */

typedef struct OpenClient {
        unsigned index;
        sd_event *event;
        sd_bus *bus;
        uint64_t calls, sent, answered, start, interval;
        uint32_t *lat[_OP_MAX];
        Result res;
        char *known;
        char *mine[4096];
        size_t n_mine;
        unsigned printed;
} OpenClient;

typedef struct Call {
        OpenClient *c;
        unsigned op;
        uint64_t t0;
        int fd;                    /* a watch's socket */
        sd_event_source *source;
        bool end, failed;
} Call;

static void call_finish(Call *k, int r, const char *message) {
        OpenClient *c = k->c;

        c->lat[k->op][c->res.n[k->op]++] = (uint32_t) (now_usec() - k->t0);
        if (r < 0) {
                c->res.errors[k->op]++;
                if (c->printed++ < 5)
                        fprintf(stderr, "client %u: %s: %s\n", c->index, op_name[k->op], message ?: strerror(-r));
        }
        c->answered++;
        sd_event_source_disable_unref(k->source);
        if (k->fd >= 0)
                close(k->fd);
        free(k);
        if (c->sent == c->calls && c->answered == c->sent)
                (void) sd_event_exit(c->event, 0);
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Call *k = userdata;
        OpenClient *c = k->c;
        const sd_bus_error *e = sd_bus_message_get_error(m);
        int r = 0;

        (void) ret_error;
        if (e)
                return call_finish(k, -sd_bus_message_get_errno(m) ?: -EIO, e->message), 0;
        if (k->op == OP_SUBMIT) {
                const char *id, *path;
                r = sd_bus_message_read(m, "so", &id, &path);
                if (r >= 0 && c->n_mine < sizeof(c->mine) / sizeof(c->mine[0]))
                        c->mine[c->n_mine++] = strdup(id);
        } else if (k->op == OP_LIST) {
                const char *id, *state, *path;
                r = sd_bus_message_enter_container(m, 'a', "(sso)");
                while (r >= 0 && (r = sd_bus_message_read(m, "(sso)", &id, &state, &path)) > 0)
                        ;
        }
        call_finish(k, r < 0 ? r : 0, NULL);
        return 0;
}

static int on_watch_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Call *k = userdata;
        char buf[65536];

        (void) s, (void) revents;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n < 0)
                        return call_finish(k, -errno, NULL), 0;
                if (n == 0)
                        return call_finish(k, k->failed ? -EPROTO : k->end ? 0 : -EPROTO, NULL), 0;
                buf[n] = '\0';
                if (strstr(buf, "\"type\":\"error\""))
                        k->failed = true;
                if (strstr(buf, "\"type\":\"end\""))
                        k->end = true;
        }
}

static int watch_start(Call *k) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char req[128];

        if (strlen(arg_socket) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, arg_socket);
        k->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (k->fd < 0)
                return -errno;
        if (connect(k->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        snprintf(req, sizeof(req), "{\"task\":\"%s\",\"follow\":false}\n", k->c->known);
        if (write(k->fd, req, strlen(req)) != (ssize_t) strlen(req))
                return -EIO;
        if (fcntl(k->fd, F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        return sd_event_add_io(k->c->event, &k->source, k->fd, EPOLLIN, on_watch_io, k);
}

static int call_start(OpenClient *c, unsigned op) {
        Call *k = calloc(1, sizeof(Call));
        char path[128];
        int r;

        if (!k)
                return -ENOMEM;
        if (op == OP_CANCEL && c->n_mine == 0)
                op = OP_LIST;
        *k = (Call) { .c = c, .op = op, .t0 = now_usec(), .fd = -EBADF };
        switch (op) {
        case OP_LIST:
                r = list_call_async(c->bus, on_reply, k);
                break;
        case OP_PROPS:
                r = task_path(c->known, path, sizeof(path));
                if (r >= 0)
                        r = sd_bus_call_method_async(c->bus, NULL, BUS_NAME, path, "org.freedesktop.DBus.Properties",
                                                     "GetAll", on_reply, k, "s", TASK_IFACE);
                break;
        case OP_SUBMIT:
                r = sd_bus_call_method_async(c->bus, NULL, BUS_NAME, BUS_PATH, BUS_IFACE, "SubmitTask", on_reply, k,
                                             "a{sv}", 3, "repository", "s", arg_repo, "goal", "s", "load",
                                             "test_command", "s", "true");
                break;
        case OP_CANCEL: {
                char *id = c->mine[--c->n_mine];
                r = task_path(id, path, sizeof(path));
                free(id);
                if (r >= 0)
                        r = sd_bus_call_method_async(c->bus, NULL, BUS_NAME, path, TASK_IFACE, "Cancel", on_reply, k, NULL);
                break;
        }
        default:
                r = watch_start(k);
        }
        c->sent++;
        if (r < 0)
                call_finish(k, r, NULL);
        return 0;
}

static int on_due(sd_event_source *s, uint64_t usec, void *userdata) {
        OpenClient *c = userdata;
        uint64_t now = now_usec(), due = c->start + c->sent * c->interval;

        (void) usec;
        /* Everything due by now goes now, in order. */
        while (c->sent < c->calls && due <= now) {
                uint64_t lag = now - due;
                if (lag > c->res.lag_max)
                        c->res.lag_max = (uint32_t) MIN(lag, (uint64_t) UINT32_MAX);
                if (lag > 10000)
                        c->res.late++;
                (void) call_start(c, op_pick(c->sent, c->index));
                due = c->start + c->sent * c->interval;
        }
        if (c->sent == c->calls)
                return sd_event_source_set_enabled(s, SD_EVENT_OFF);
        if (sd_event_source_set_time(s, due) < 0)
                return sd_event_exit(c->event, -EIO);
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        OpenClient *c = userdata;

        (void) s, (void) usec;
        fprintf(stderr, "client %u: %" PRIu64 " calls unanswered 30 s after the last was due\n", c->index,
                c->calls - c->answered);
        return sd_event_exit(c->event, 0);
}

static int client_run_open(unsigned index, int fd) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_event_source *due = NULL, *deadline = NULL;
        OpenClient c = { .index = index };
        int r;

        c.calls = (uint64_t) arg_rate * arg_seconds / arg_clients;
        c.interval = 1000000u * arg_clients / arg_rate;
        if (sd_event_new(&c.event) < 0 || sd_bus_open_system(&c.bus) < 0 ||
            sd_bus_attach_event(c.bus, c.event, SD_EVENT_PRIORITY_NORMAL) < 0) {
                fprintf(stderr, "client %u: cannot connect to the bus\n", index);
                return 1;
        }
        for (int i = 0; i < _OP_MAX; i++)
                if (!(c.lat[i] = calloc(c.calls + 1, sizeof(uint32_t))))
                        return 1;
        r = list_tasks(c.bus, NULL, &c.known, &error);
        sd_bus_error_free(&error);
        if (r < 0 || !c.known) {
                fprintf(stderr, "client %u: no task to look at\n", index);
                return 1;
        }

        c.start = now_usec() + index * c.interval / arg_clients;   /* clients interleaved */
        if (sd_event_add_time(c.event, &due, CLOCK_MONOTONIC, c.start, 0, on_due, &c) < 0 ||
            sd_event_add_time(c.event, &deadline, CLOCK_MONOTONIC, c.start + c.calls * c.interval + 30000000u, 0,
                              on_deadline, &c) < 0)
                return 1;
        if (c.calls == 0)
                (void) sd_event_exit(c.event, 0);
        r = sd_event_loop(c.event);
        if (r < 0)
                return 1;
        c.res.unanswered = (uint32_t) (c.calls - c.answered);   /* never sent, or never answered */
        return write_result(fd, &c.res, c.lat);
}

/* One client: its share of the rate, for the given time; latencies and
 * counts go to fd. */
static int client_run(unsigned index, int fd) {
        sd_bus *bus = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        uint64_t calls = (uint64_t) arg_rate * arg_seconds / arg_clients, interval, start;
        uint32_t *lat[_OP_MAX];
        Result res = {};
        char *known = NULL, *mine[4096];
        size_t n_mine = 0, printed = 0;
        int r;

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "client %u: cannot connect to the bus: %s\n", index, strerror(-r));
                return 1;
        }
        for (int i = 0; i < _OP_MAX; i++) {
                lat[i] = calloc(calls + 1, sizeof(uint32_t));
                if (!lat[i])
                        return 1;
        }
        /* A task to look at and watch: the first the list shows. */
        r = list_tasks(bus, NULL, &known, &error);
        sd_bus_error_free(&error);
        if (r < 0 || !known) {
                fprintf(stderr, "client %u: no task to look at\n", index);
                return 1;
        }

        interval = 1000000u * arg_clients / arg_rate;
        start = now_usec() + index * interval / arg_clients;   /* clients interleaved */
        for (uint64_t i = 0; i < calls; i++) {
                uint64_t due = start + i * interval, t0, now = now_usec();
                unsigned op = op_pick(i, index);
                char path[128];

                if (due > now)
                        usleep((useconds_t) (due - now));
                else if (now - due > res.lag_max)
                        res.lag_max = (uint32_t) MIN(now - due, (uint64_t) UINT32_MAX);
                if (now > due + 10000)
                        res.late++;
                if (op == OP_CANCEL && n_mine == 0)
                        op = OP_LIST;

                t0 = now_usec();
                switch (op) {
                case OP_LIST:
                        r = list_call(bus, NULL, &error);
                        break;
                case OP_PROPS: {
                        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                        r = task_path(known, path, sizeof(path));
                        if (r >= 0)
                                r = sd_bus_call_method(bus, BUS_NAME, path, "org.freedesktop.DBus.Properties", "GetAll",
                                                       &error, &reply, "s", TASK_IFACE);
                        break;
                }
                case OP_SUBMIT: {
                        char *id = NULL;
                        r = submit_task(bus, &id, &error);
                        if (r >= 0 && n_mine < sizeof(mine) / sizeof(mine[0]))
                                mine[n_mine++] = id;
                        else
                                free(id);
                        break;
                }
                case OP_CANCEL: {
                        char *id = mine[--n_mine];
                        r = task_path(id, path, sizeof(path));
                        if (r >= 0)
                                r = sd_bus_call_method(bus, BUS_NAME, path, TASK_IFACE, "Cancel", &error, NULL, NULL);
                        free(id);
                        break;
                }
                default:
                        r = watch_task(known);
                }
                lat[op][res.n[op]++] = (uint32_t) (now_usec() - t0);
                if (r < 0) {
                        res.errors[op]++;
                        if (printed++ < 5)
                                fprintf(stderr, "client %u: %s: %s\n", index, op_name[op],
                                        error.message ?: strerror(-r));
                }
                sd_bus_error_free(&error);
        }

        sd_bus_flush_close_unref(bus);
        return write_result(fd, &res, lat);
}

static int read_all(int fd, void *buf, size_t size) {
        char *p = buf;
        while (size > 0) {
                ssize_t k = read(fd, p, size);
                if (k <= 0)
                        return -EIO;
                p += k;
                size -= (size_t) k;
        }
        return 0;
}

static int run_rate(void) {
        uint32_t *lat[_OP_MAX] = {}, *all;
        size_t n[_OP_MAX] = {}, total = 0, cap = (size_t) arg_rate * arg_seconds + arg_clients;
        unsigned errors[_OP_MAX] = {}, total_errors = 0, late = 0;
        uint32_t lag_max = 0;
        int fds[64];
        pid_t pids[64];
        uint64_t t0 = now_usec(), elapsed;
        int failed = 0;

        if (!arg_repo || arg_clients == 0 || arg_clients > 64 || arg_rate == 0) {
                fprintf(stderr, "rate needs --repo=, 1-64 --clients=, --rate= > 0\n");
                return 2;
        }
        for (int i = 0; i < _OP_MAX; i++)
                if (!(lat[i] = calloc(cap, sizeof(uint32_t))))
                        return 1;
        for (unsigned c = 0; c < arg_clients; c++) {
                int p[2];
                if (pipe(p) < 0)
                        return 1;
                pids[c] = fork();
                if (pids[c] < 0)
                        return 1;
                if (pids[c] == 0) {
                        close(p[0]);
                        _exit(arg_closed ? client_run(c, p[1]) : client_run_open(c, p[1]));
                }
                close(p[1]);
                fds[c] = p[0];
        }
        for (unsigned c = 0; c < arg_clients; c++) {
                Result res;
                int status;
                if (read_all(fds[c], &res, sizeof(res)) < 0) {
                        fprintf(stderr, "client %u gave no result\n", c);
                        failed = 1;
                } else {
                        lag_max = MAX(lag_max, res.lag_max);
                        late += res.late;
                        total_errors += res.unanswered;   /* errors of no kind */
                        if (res.unanswered > 0)
                                failed = 1;
                        for (int i = 0; i < _OP_MAX; i++) {
                                if (n[i] + res.n[i] > cap || read_all(fds[c], lat[i] + n[i], res.n[i] * sizeof(uint32_t)) < 0) {
                                        failed = 1;
                                        break;
                                }
                                n[i] += res.n[i];
                                errors[i] += res.errors[i];
                        }
                }
                close(fds[c]);
                if (waitpid(pids[c], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        failed = 1;
        }
        elapsed = now_usec() - t0;

        all = calloc(cap, sizeof(uint32_t));
        if (!all)
                return 1;
        for (int i = 0; i < _OP_MAX; i++) {
                memcpy(all + total, lat[i], n[i] * sizeof(uint32_t));
                total += n[i];
                total_errors += errors[i];
        }
        printf("load: %u clients (%s loop), target %u calls/s for %u s: %zu calls in %.1f s (%.0f calls/s), %u errors\n",
               arg_clients, arg_closed ? "closed" : "open", arg_rate, arg_seconds, total, elapsed / 1e6,
               total / (elapsed / 1e6), total_errors);
        printf("  the clients' lag behind their schedule: max %.1f ms, %u calls sent more than 10 ms late\n",
               lag_max / 1000.0, late);
        printf("  %-12s %8s %8s %9s %9s %9s\n", "call", "n", "errors", "p50 ms", "p99 ms", "max ms");
        for (int i = 0; i < _OP_MAX; i++)
                print_latencies(op_name[i], lat[i], n[i], errors[i]);
        print_latencies("all", all, total, total_errors);
        return failed ? 1 : 0;
}

static int run_submit(void) {
        sd_bus *bus = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        uint64_t t0;
        int r;

        if (!arg_repo)
                return fprintf(stderr, "submit needs --repo=\n"), 2;
        r = sd_bus_open_system(&bus);
        if (r < 0)
                return fprintf(stderr, "cannot connect to the bus: %s\n", strerror(-r)), 1;
        t0 = now_usec();
        for (unsigned i = 0; i < arg_count; i++) {
                r = submit_task(bus, NULL, &error);
                if (r < 0) {
                        fprintf(stderr, "submission %u: %s\n", i, error.message ?: strerror(-r));
                        return 1;
                }
        }
        printf("submitted %u tasks in %.2f s (%.1f ms each)\n", arg_count, (now_usec() - t0) / 1e6,
               (now_usec() - t0) / 1e3 / arg_count);
        return 0;
}

static int run_list(void) {
        sd_bus *bus = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        uint32_t *lat = calloc(arg_count, sizeof(uint32_t));
        unsigned tasks = 0;
        int r;

        if (!lat)
                return 1;
        r = sd_bus_open_system(&bus);
        if (r < 0)
                return fprintf(stderr, "cannot connect to the bus: %s\n", strerror(-r)), 1;
        for (unsigned i = 0; i < arg_count; i++) {
                uint64_t t0 = now_usec();
                r = list_call(bus, &tasks, &error);
                if (r < 0)
                        return fprintf(stderr, "%s: %s\n", list_method(), error.message ?: strerror(-r)), 1;
                lat[i] = (uint32_t) (now_usec() - t0);
        }
        qsort(lat, arg_count, sizeof(*lat), cmp_u32);
        printf("%s of %u tasks, %u calls: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", list_method(), tasks, arg_count,
               lat[arg_count / 2] / 1000.0, lat[arg_count * 99 / 100] / 1000.0, lat[arg_count - 1] / 1000.0);
        return 0;
}

/* Opens connections and sends submissions as stdin says, one command a
 * line, printing each outcome; for the checks of what polkit's answers do
 * (tests/integration/daemon-load.sh):
 *     submit N        SubmitTask on connection N (0-7, opened at first use):
 *                     prints "submit N ok" or "submit N <D-Bus error name>"
 *     write PATH TEXT writes TEXT and a newline to PATH
 *     wait PATH       waits until PATH exists (at most 30 s)
 *     sleep SECONDS */
static int run_script(void) {
        sd_bus *buses[8] = {};
        char line[512];

        if (!arg_repo)
                return fprintf(stderr, "script needs --repo=\n"), 2;
        while (fgets(line, sizeof(line), stdin)) {
                char what[16] = "", arg[256] = "", text[200] = "";
                unsigned n;

                if (sscanf(line, "%15s %255s %199[^\n]", what, arg, text) < 1)
                        continue;
                if (streq(what, "submit") && sscanf(arg, "%u", &n) == 1 && n < 8) {
                        sd_bus_error error = SD_BUS_ERROR_NULL;
                        int r = 0;

                        if (!buses[n])
                                r = sd_bus_open_system(&buses[n]);
                        if (r >= 0)
                                r = submit_task(buses[n], NULL, &error);
                        printf("submit %u %s\n", n, r >= 0 ? "ok" : error.name ?: strerror(-r));
                        sd_bus_error_free(&error);
                } else if (streq(what, "write")) {
                        FILE *f = fopen(arg, "we");
                        if (!f || fprintf(f, "%s\n", text) < 0 || fclose(f) != 0)
                                return fprintf(stderr, "cannot write '%s'\n", arg), 1;
                } else if (streq(what, "wait")) {
                        uint64_t t0 = now_usec();
                        while (access(arg, F_OK) < 0) {
                                if (now_usec() - t0 > 30000000u)
                                        return fprintf(stderr, "'%s' did not appear in 30 s\n", arg), 1;
                                usleep(20000);
                        }
                } else if (streq(what, "sleep"))
                        usleep((useconds_t) (strtod(arg, NULL) * 1e6));
                else
                        return fprintf(stderr, "unknown command '%s'\n", what), 2;
                fflush(stdout);
        }
        for (size_t i = 0; i < 8; i++)
                sd_bus_flush_close_unref(buses[i]);
        return 0;
}

typedef struct Burst {
        unsigned answered, errors;
        sd_event *event;
        unsigned count;
} Burst;

static int on_burst_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Burst *b = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(m);

        (void) ret_error;
        if (e && b->errors++ < 5)
                fprintf(stderr, "SubmitTask: %s: %s\n", e->name, e->message);
        if (++b->answered == b->count)
                (void) sd_event_exit(b->event, 0);
        return 0;
}

/* COUNT connections at once, each sending one SubmitTask without waiting:
 * as many callers as that asking at the same moment. */
static int run_burst(void) {
        Burst b = { .count = arg_count };
        sd_bus **buses = calloc(arg_count, sizeof(sd_bus *));
        uint64_t t0;

        if (!arg_repo || !buses)
                return fprintf(stderr, "burst needs --repo=\n"), 2;
        if (sd_event_new(&b.event) < 0)
                return 1;
        for (unsigned i = 0; i < arg_count; i++)
                if (sd_bus_open_system(&buses[i]) < 0 || sd_bus_attach_event(buses[i], b.event, 0) < 0)
                        return fprintf(stderr, "cannot open connection %u\n", i), 1;
        t0 = now_usec();
        for (unsigned i = 0; i < arg_count; i++)
                if (sd_bus_call_method_async(buses[i], NULL, BUS_NAME, BUS_PATH, BUS_IFACE, "SubmitTask", on_burst_reply,
                                             &b, "a{sv}", 3, "repository", "s", arg_repo, "goal", "s", "burst",
                                             "test_command", "s", "true") < 0)
                        return fprintf(stderr, "cannot send on connection %u\n", i), 1;
        if (sd_event_loop(b.event) < 0)
                return 1;
        printf("burst: %u submissions on %u connections at once: %u errors, %.2f s\n", b.answered, arg_count,
               b.errors, (now_usec() - t0) / 1e6);
        for (unsigned i = 0; i < arg_count; i++)
                sd_bus_flush_close_unref(buses[i]);
        free(buses);
        sd_event_unref(b.event);
        return b.errors > 0;
}

static int run_first(void) {
        uint64_t t0 = now_usec();
        for (;;) {
                sd_bus *bus = NULL;
                sd_bus_error error = SD_BUS_ERROR_NULL;
                unsigned tasks = 0;
                int r = sd_bus_open_system(&bus);
                if (r >= 0)
                        r = list_tasks(bus, &tasks, NULL, &error);
                sd_bus_error_free(&error);
                sd_bus_flush_close_unref(bus);
                if (r >= 0) {
                        printf("first answer after %.1f ms (%u tasks)\n", (now_usec() - t0) / 1e3, tasks);
                        return 0;
                }
                if (now_usec() - t0 > 30000000u)
                        return fprintf(stderr, "no answer in 30 s: %s\n", strerror(-r)), 1;
                usleep(10000);
        }
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "clients", required_argument, NULL, 'c' },
                { "rate",    required_argument, NULL, 'r' },
                { "seconds", required_argument, NULL, 's' },
                { "count",   required_argument, NULL, 'n' },
                { "repo",    required_argument, NULL, 'R' },
                { "socket",  required_argument, NULL, 'S' },
                { "closed",  no_argument,       NULL, 'C' },
                { "mix",     required_argument, NULL, 'm' },
                { "list",    required_argument, NULL, 'L' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'c': arg_clients = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'r': arg_rate = (unsigned) strtoul(optarg, NULL, 10); break;
                case 's': arg_seconds = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'n': arg_count = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'R': arg_repo = optarg; break;
                case 'S': arg_socket = optarg; break;
                case 'C': arg_closed = true; break;
                case 'L':
                        if (strcmp(optarg, "full") == 0)
                                arg_list_full = true;
                        else if (strcmp(optarg, "filtered") != 0)
                                return fprintf(stderr, "--list= is filtered or full\n"), 2;
                        arg_list_set = true;
                        break;
                case 'm': {
                        unsigned v[_OP_MAX], sum = 0;
                        if (sscanf(optarg, "%u,%u,%u,%u,%u", &v[0], &v[1], &v[2], &v[3], &v[4]) != _OP_MAX)
                                return fprintf(stderr, "--mix= needs five numbers\n"), 2;
                        for (int i = 0; i < _OP_MAX; i++)
                                sum += op_share[i] = v[i];
                        if (sum != 100)
                                return fprintf(stderr, "--mix= must add up to 100\n"), 2;
                        break;
                }
                default: return 2;
                }
        if (optind >= argc || arg_count == 0) {
                fprintf(stderr, "usage: agentfab-load rate|submit|list|first [OPTIONS]\n");
                return 2;
        }
        if (strcmp(argv[optind], "rate") == 0) {
                op_name[OP_LIST] = arg_list_full ? "ListTasks" : "ListFiltered";
                return run_rate();
        }
        if (strcmp(argv[optind], "submit") == 0)
                return run_submit();
        if (strcmp(argv[optind], "list") == 0) {
                /* ListTasks() unless told: the figure of the queued tasks' phase. */
                if (!arg_list_set)
                        arg_list_full = true;
                return run_list();
        }
        if (strcmp(argv[optind], "first") == 0)
                return run_first();
        if (strcmp(argv[optind], "script") == 0)
                return run_script();
        if (strcmp(argv[optind], "burst") == 0)
                return run_burst();
        fprintf(stderr, "unknown mode '%s'\n", argv[optind]);
        return 2;
}
