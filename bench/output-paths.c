/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Ways of getting a command's output into the task's log, measured on
 * this machine's file system: the experiment issue 9's output target was
 * decided by. A producer process writes SIZE bytes; the time is from its
 * start until every byte is in the log (page cache, no fsync):
 *
 *   null      the producer into /dev/null (the baseline; copies nothing)
 *   own-file  the producer into a file of its own, kept (what a per-command
 *             output file costs when it stays the command's log segment)
 *   append    the same, then appended to the log by copy_file_range()
 *             (a per-command file whose bytes end up in the one log)
 *   loop      a 1 MiB pipe, splice() straight to the log whenever epoll
 *             says it is readable (exec-output.c's first design; its
 *             thread did the same until it went through a relay pipe)
 *   mover     a 1 MiB pipe and exec-output.c's mover thread (what runs now:
 *             pipe to relay pipe to log)
 *
 * Producers: "1m" (1 MiB writes of one byte value), "8k" (8 KiB writes,
 * as head and stdio do), "computed" (each 1 MiB computed before it is
 * written: slower than 1 GB/s here). The bound per producer is issue 9's:
 * min(1 GB/s, the /dev/null rate / 1.25).
 *
 *   output-paths [--dir=DIR] [--size-mb=N] [--runs=N]     (DIR: where the log goes; default /var/tmp)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec-output.h"
#include "macro.h"

#define WRITE_MAX (1024 * 1024)

static const char *arg_dir = "/var/tmp";
static uint64_t arg_size = 1024ull * 1024 * 1024;
static unsigned arg_runs = 3;

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* The producer: a child writing arg_size bytes to fd, then exiting. */
static pid_t producer_start(const char *kind, int fd) {
        pid_t pid = fork();
        if (pid != 0)
                return pid;

        size_t chunk = streq(kind, "8k") ? 8192 : WRITE_MAX;
        char *buf = malloc(WRITE_MAX);
        uint64_t x = 88172645463325252ull;
        if (!buf)
                _exit(1);
        memset(buf, 'x', WRITE_MAX);
        for (uint64_t done = 0; done < arg_size;) {
                if (streq(kind, "computed"))
                        /* Two rounds of xorshift over the buffer: work per byte. */
                        for (int round = 0; round < 2; round++)
                                for (size_t i = 0; i < WRITE_MAX; i += 8) {
                                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                                        memcpy(buf + i, &x, 8);
                                }
                ssize_t k = write(fd, buf, (size_t) MIN((uint64_t) chunk, arg_size - done));
                if (k <= 0)
                        _exit(1);
                done += (uint64_t) k;
        }
        _exit(0);
}

static int producer_wait(pid_t pid) {
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;
        return 0;
}

static int log_open(const char *name) {
        char path[4096];
        (void) snprintf(path, sizeof(path), "%s/%s", arg_dir, name);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0)
                (void) unlink(path);
        return fd;
}

static int run_null(const char *kind) {
        _cleanup_close_ int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        return fd < 0 ? -errno : producer_wait(producer_start(kind, fd));
}

static int run_own_file(const char *kind) {
        _cleanup_close_ int fd = log_open("output-paths.seg");
        return fd < 0 ? -errno : producer_wait(producer_start(kind, fd));
}

static int run_append(const char *kind) {
        _cleanup_close_ int seg = log_open("output-paths.seg"), log = log_open("output-paths.log");
        loff_t in = 0, out = 0;
        int r;

        if (seg < 0 || log < 0)
                return -errno;
        r = producer_wait(producer_start(kind, seg));
        if (r < 0)
                return r;
        for (;;) {
                ssize_t k = copy_file_range(seg, &in, log, &out, 64u << 20, 0);
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return (uint64_t) out == arg_size ? 0 : -EIO;
        }
}

static int run_loop(const char *kind) {
        _cleanup_close_ int log = log_open("output-paths.log"), ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN };
        int p[2];
        loff_t off = 0;
        pid_t pid;

        if (log < 0 || ep < 0 || pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rd = p[0];
        (void) fcntl(rd, F_SETPIPE_SZ, WRITE_MAX);
        (void) fcntl(rd, F_SETFL, O_NONBLOCK);
        pid = producer_start(kind, p[1]);
        safe_close(p[1]);
        if (epoll_ctl(ep, EPOLL_CTL_ADD, rd, &ev) < 0)
                return -errno;
        for (bool end = false; !end;) {
                if (epoll_wait(ep, &ev, 1, -1) < 0 && errno != EINTR)
                        return -errno;
                for (;;) {
                        ssize_t k = splice(rd, NULL, log, &off, WRITE_MAX, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (k > 0)
                                continue;
                        if (k == 0)
                                end = true;
                        else if (errno != EAGAIN && errno != EINTR)
                                return -errno;
                        break;
                }
        }
        return producer_wait(pid) < 0 || (uint64_t) off != arg_size ? -EIO : 0;
}

static int run_mover(const char *kind) {
        _cleanup_close_ int log = log_open("output-paths.log");
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        ExecOutput o;
        ExecResult result = {};
        pid_t pid;
        int r;

        if (log < 0)
                return -errno;
        r = sd_event_new(&e);
        if (r < 0)
                return r;
        exec_output_init(&o);
        r = exec_output_open(&o, e, log, 1024, NULL, NULL);
        if (r < 0) {
                exec_output_close(&o);
                return r;
        }
        pid = producer_start(kind, o.pass_fd);
        o.pass_fd = safe_close(o.pass_fd);
        r = producer_wait(pid);
        /* As the session does when "exit" comes: the rest of the pipe, then the head and tail. */
        if (exec_output_finish(&o, &result) < 0 || result.output_bytes != arg_size)
                r = -EIO;
        exec_result_done(&result);
        return r;
}

static const struct {
        const char *name;
        int (*run)(const char *kind);
} designs[] = {
        { "null", run_null },
        { "own-file", run_own_file },
        { "append", run_append },
        { "loop", run_loop },
        { "mover", run_mover },
};

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "dir", required_argument, NULL, 'd' },
                { "size-mb", required_argument, NULL, 's' },
                { "runs", required_argument, NULL, 'r' },
                {}
        };
        static const char *kinds[] = { "1m", "8k", "computed" };
        int c;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                        arg_dir = optarg;
                        break;
                case 's':
                        arg_size = strtoull(optarg, NULL, 10) * 1024 * 1024;
                        break;
                case 'r':
                        arg_runs = (unsigned) atoi(optarg);
                        break;
                default:
                        return 2;
                }
        if (arg_size == 0 || arg_runs == 0 || arg_runs > 100)
                return 2;

        printf("output-paths: %llu MiB per run, median of %u runs, log in %s\n",
               (unsigned long long) (arg_size >> 20), arg_runs, arg_dir);
        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                double med[ELEMENTSOF(designs)], t[100];

                /* Runs in turns, design after design, so that the machine's
                 * state (its load, the page cache) weighs on all alike. */
                double all[ELEMENTSOF(designs)][100];
                for (unsigned i = 0; i < arg_runs; i++)
                        for (size_t d = 0; d < ELEMENTSOF(designs); d++) {
                                double t0 = now();
                                int r = designs[d].run(kinds[k]);
                                if (r < 0) {
                                        fprintf(stderr, "%s/%s: %s\n", kinds[k], designs[d].name, strerror(-r));
                                        return 1;
                                }
                                all[d][i] = now() - t0;
                        }
                for (size_t d = 0; d < ELEMENTSOF(designs); d++) {
                        memcpy(t, all[d], arg_runs * sizeof(double));
                        qsort(t, arg_runs, sizeof(double), cmp_double);
                        med[d] = t[arg_runs / 2];
                }
                double rate_null = (double) arg_size / med[0] / 1e6, bound = MIN(1000.0, rate_null / 1.25);
                for (size_t d = 0; d < ELEMENTSOF(designs); d++) {
                        double rate = (double) arg_size / med[d] / 1e6;
                        memcpy(t, all[d], arg_runs * sizeof(double));
                        qsort(t, arg_runs, sizeof(double), cmp_double);
                        printf("figure: output-paths %-8s %-8s median %.3f s (%.3f-%.3f) = %5.0f MB/s; %.2fx /dev/null",
                               kinds[k], designs[d].name, med[d], t[0], t[arg_runs - 1], rate, med[d] / med[0]);
                        if (d > 0)
                                printf("; bound %.0f MB/s: %s", bound, rate >= bound ? "met" : "not met");
                        printf("\n");
                }
        }
        return 0;
}
