/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * agentfab-load: drives agentfabd over D-Bus and its stream socket, the way
 * many clients at once would, and prints what it measured. Not installed;
 * bench/load.sh copies it into the test system.
 *
 *   agentfab-load rate --clients=N --rate=CALLS_PER_SEC --seconds=S --repo=PATH [--socket=PATH]
 *       N processes, each with its own bus connection, share the rate: the
 *       calls of each are spread evenly over time (a late call goes at once,
 *       and the achieved rate says so). The mix: ListTasks, GetAll of a
 *       task's properties, SubmitTask of PATH, Cancel of a task the client
 *       submitted, and a watch of a task's history on the stream socket.
 *       Prints calls, errors and p50/p99/max latency per kind and in all.
 *   agentfab-load submit --count=N --repo=PATH
 *       Submits N tasks, one after the other; prints the time it took.
 *   agentfab-load list --count=N
 *       Calls ListTasks N times; prints tasks listed and p50/p99/max.
 *   agentfab-load first
 *       One ListTasks call, retried until answered (at most 30 s): prints
 *       the milliseconds to the first answer, e.g. while the daemon starts.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"

#define BUS_NAME  "org.agentfab.Factory1"
#define BUS_PATH  "/org/agentfab/Factory1"
#define BUS_IFACE "org.agentfab.Factory1"
#define TASK_IFACE "org.agentfab.Task1"

enum { OP_LIST, OP_PROPS, OP_SUBMIT, OP_CANCEL, OP_WATCH, _OP_MAX };
static const char *const op_name[_OP_MAX] = { "ListTasks", "GetAll", "SubmitTask", "Cancel", "watch" };
/* Out of every 100 calls. Submissions and cancels are few: each submission
 * copies a repository, which is the daemon's real work, not the bus's. */
static const unsigned op_share[_OP_MAX] = { 40, 30, 5, 5, 20 };

static const char *arg_repo = NULL;
static const char *arg_socket = "/run/agentfab/agentfab.sock";
static unsigned arg_clients = 8, arg_rate = 1000, arg_seconds = 60, arg_count = 1000;

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
                printf("  %-11s %8zu %8u\n", what, n, errors);
                return;
        }
        qsort(v, n, sizeof(*v), cmp_u32);
        printf("  %-11s %8zu %8u %9.2f %9.2f %9.2f\n", what, n, errors, v[n / 2] / 1000.0,
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
} Result;

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
                unsigned pick = (unsigned) ((i * 37 + index * 11) % 100), op = 0, acc = 0;
                char path[128];

                if (due > now)
                        usleep((useconds_t) (due - now));
                for (op = 0; op < _OP_MAX; op++) {
                        acc += op_share[op];
                        if (pick < acc)
                                break;
                }
                if (op == OP_CANCEL && n_mine == 0)
                        op = OP_LIST;

                t0 = now_usec();
                switch (op) {
                case OP_LIST:
                        r = list_tasks(bus, NULL, NULL, &error);
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

        if (write(fd, &res, sizeof(res)) != sizeof(res))
                return 1;
        for (int i = 0; i < _OP_MAX; i++)
                if (write(fd, lat[i], res.n[i] * sizeof(uint32_t)) != (ssize_t) (res.n[i] * sizeof(uint32_t)))
                        return 1;
        sd_bus_flush_close_unref(bus);
        return 0;
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
        unsigned errors[_OP_MAX] = {}, total_errors = 0;
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
                        _exit(client_run(c, p[1]));
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
                } else
                        for (int i = 0; i < _OP_MAX; i++) {
                                if (n[i] + res.n[i] > cap || read_all(fds[c], lat[i] + n[i], res.n[i] * sizeof(uint32_t)) < 0) {
                                        failed = 1;
                                        break;
                                }
                                n[i] += res.n[i];
                                errors[i] += res.errors[i];
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
        printf("load: %u clients, target %u calls/s for %u s: %zu calls in %.1f s (%.0f calls/s), %u errors\n",
               arg_clients, arg_rate, arg_seconds, total, elapsed / 1e6, total / (elapsed / 1e6), total_errors);
        printf("  %-11s %8s %8s %9s %9s %9s\n", "call", "n", "errors", "p50 ms", "p99 ms", "max ms");
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
                r = list_tasks(bus, &tasks, NULL, &error);
                if (r < 0)
                        return fprintf(stderr, "ListTasks: %s\n", error.message ?: strerror(-r)), 1;
                lat[i] = (uint32_t) (now_usec() - t0);
        }
        qsort(lat, arg_count, sizeof(*lat), cmp_u32);
        printf("ListTasks of %u tasks, %u calls: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", tasks, arg_count,
               lat[arg_count / 2] / 1000.0, lat[arg_count * 99 / 100] / 1000.0, lat[arg_count - 1] / 1000.0);
        return 0;
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
                default: return 2;
                }
        if (optind >= argc || arg_count == 0) {
                fprintf(stderr, "usage: agentfab-load rate|submit|list|first [OPTIONS]\n");
                return 2;
        }
        if (strcmp(argv[optind], "rate") == 0)
                return run_rate();
        if (strcmp(argv[optind], "submit") == 0)
                return run_submit();
        if (strcmp(argv[optind], "list") == 0)
                return run_list();
        if (strcmp(argv[optind], "first") == 0)
                return run_first();
        fprintf(stderr, "unknown mode '%s'\n", argv[optind]);
        return 2;
}
