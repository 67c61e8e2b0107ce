/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How long agentfabd takes to answer, while it works: every INTERVAL ms for
 * DURATION seconds, one D-Bus call (GetAll of a task's Task1 properties,
 * Checkpoints included; or ListTasks without --task) and one stream socket
 * request (a task's event history, or an unknown task), each timed from
 * the request to its answer. Prints count, p50, p99 and max of each, in
 * milliseconds, on one line per kind:
 *   bus n=N p50=X p99=Y max=Z
 *   stream n=N p50=X p99=Y max=Z
 * With --slowest=N, then the N slowest answers of each kind with the wall
 * clock time they were asked at (UTC, as the journal has it), to find what
 * the daemon was doing then:
 *   slow bus 186.2 ms at 20:51:07.123456
 * Not a test: it asserts nothing; the caller compares runs. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

static volatile sig_atomic_t stop;

static void on_stop(int sig) {
        (void) sig;
        stop = 1;
}

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

typedef struct Sample {
        uint64_t usec;
        struct timespec at;        /* CLOCK_REALTIME at the request */
} Sample;

static int cmp_sample_desc(const void *a, const void *b) {
        uint64_t x = ((const Sample *) a)->usec, y = ((const Sample *) b)->usec;
        return x > y ? -1 : x < y;
}

static void report_slowest(const char *what, Sample *v, size_t n, unsigned count) {
        qsort(v, n, sizeof(Sample), cmp_sample_desc);
        for (size_t i = 0; i < n && i < count; i++) {
                struct tm tm;
                gmtime_r(&v[i].at.tv_sec, &tm);
                printf("slow %s %.1f ms at %02d:%02d:%02d.%06ld\n", what, v[i].usec / 1000.0, tm.tm_hour, tm.tm_min,
                       tm.tm_sec, v[i].at.tv_nsec / 1000);
        }
}

static void report(const char *what, uint64_t *v, size_t n, unsigned failed) {
        if (n == 0) {
                printf("%s n=0 failed=%u\n", what, failed);
                return;
        }
        qsort(v, n, sizeof(uint64_t), cmp_u64);
        printf("%s n=%zu failed=%u p50=%.1f p99=%.1f max=%.1f\n", what, n, failed, v[n / 2] / 1000.0,
               v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1000.0, v[n - 1] / 1000.0);
}

/* connect, request, first line of the answer. */
static int stream_request(const char *path, const char *task) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char req[128], buf[4096];
        int fd, r = -EIO;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -EINVAL;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        snprintf(req, sizeof(req), "{\"task\": \"%s\", \"stream\": \"events\", \"follow\": false}\n", task);
        if (write(fd, req, strlen(req)) == (ssize_t) strlen(req))
                for (;;) {
                        ssize_t k = read(fd, buf, sizeof(buf));
                        if (k <= 0)
                                break;
                        if (memchr(buf, '\n', (size_t) k)) {
                                r = 0;
                                break;
                        }
                }
        close(fd);
        return r;
}

int main(int argc, char *argv[]) {
        const char *task = NULL, *socket_path = "/run/agentfab/agentfab.sock";
        double duration = 10;
        unsigned interval_ms = 20, bus_failed = 0, stream_failed = 0, slowest = 0;
        static const struct option options[] = {
                { "task", required_argument, NULL, 't' },
                { "socket", required_argument, NULL, 's' },
                { "duration", required_argument, NULL, 'd' },
                { "interval-ms", required_argument, NULL, 'i' },
                { "slowest", required_argument, NULL, 'S' },
                {}
        };
        sd_bus *bus = NULL;
        char path[128];
        int c, r;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 't': task = optarg; break;
                case 's': socket_path = optarg; break;
                case 'd': duration = atof(optarg); break;
                case 'i': interval_ms = (unsigned) atoi(optarg); break;
                case 'S': slowest = (unsigned) atoi(optarg); break;
                default: return 2;
                }
        /* SIGINT or SIGTERM: stop and report what was measured. */
        struct sigaction sa = { .sa_handler = on_stop };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "cannot connect to the system bus: %s\n", strerror(-r));
                return 1;
        }
        snprintf(path, sizeof(path), "/org/agentfab/Factory1/task/%s", task ?: "");

        size_t cap = (size_t) (duration * 1000 / (interval_ms ?: 1)) + 16, nb = 0, ns = 0;
        uint64_t *bus_lat = calloc(cap, sizeof(uint64_t)), *stream_lat = calloc(cap, sizeof(uint64_t));
        Sample *bus_at = calloc(cap, sizeof(Sample)), *stream_at = calloc(cap, sizeof(Sample));
        if (!bus_lat || !stream_lat || !bus_at || !stream_at)
                return 1;

        uint64_t end = now_us() + (uint64_t) (duration * 1e6);
        while (!stop && now_us() < end && nb < cap && ns < cap) {
                sd_bus_error error = SD_BUS_ERROR_NULL;
                sd_bus_message *reply = NULL;
                uint64_t t0 = now_us();
                struct timespec at;

                clock_gettime(CLOCK_REALTIME, &at);
                if (task)
                        r = sd_bus_call_method(bus, "org.agentfab.Factory1", path, "org.freedesktop.DBus.Properties",
                                               "GetAll", &error, &reply, "s", "org.agentfab.Task1");
                else
                        r = sd_bus_call_method(bus, "org.agentfab.Factory1", "/org/agentfab/Factory1",
                                               "org.agentfab.Factory1", "ListTasks", &error, &reply, "");
                if (r < 0 && !stop)
                        bus_failed++;
                else {
                        bus_at[nb] = (Sample) { now_us() - t0, at };
                        bus_lat[nb] = bus_at[nb].usec;
                        nb++;
                }
                /* The daemon's Peer.Ping() after a list answered, as a main
                 * loop would, once the time is taken: otherwise the probe is
                 * taken for a client that never reads. */
                while (sd_bus_process(bus, NULL) > 0)
                        ;
                sd_bus_message_unref(reply);
                sd_bus_error_free(&error);

                t0 = now_us();
                clock_gettime(CLOCK_REALTIME, &at);
                if (stream_request(socket_path, task ?: "000000000000") < 0) {
                        if (!stop)
                                stream_failed++;
                }
                else {
                        stream_at[ns] = (Sample) { now_us() - t0, at };
                        stream_lat[ns] = stream_at[ns].usec;
                        ns++;
                }

                if (!stop)
                        usleep(interval_ms * 1000);
        }
        report("bus", bus_lat, nb, bus_failed);
        report("stream", stream_lat, ns, stream_failed);
        report_slowest("bus", bus_at, nb, slowest);
        report_slowest("stream", stream_at, ns, slowest);
        sd_bus_unref(bus);
        return 0;
}
