/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Ways of getting a command's output into the task's log, measured on
 * this machine's file system: exec-output.c's mover against other designs
 * and the floors. A producer process writes SIZE bytes; the time is from
 * its start until every byte is in the log (page cache, no fsync; the file
 * is freed after the time is taken):
 *
 *   null      the producer into /dev/null (the baseline; copies nothing)
 *   drain     the producer into a 1 MiB pipe whose reader keeps nothing
 *             (splice() to /dev/null): the floor of any design that reads a
 *             pipe, what the producer itself pays for writing into one
 *   own-file  the producer into a file of its own, kept (what a per-command
 *             output file costs when it stays the command's log segment)
 *   append    the same, then appended to the log by copy_file_range()
 *             (a per-command file whose bytes end up in the one log)
 *   loop      a 1 MiB pipe, splice() straight to the log whenever epoll
 *             says it is readable (the same splice() without the mover's
 *             relay pipe)
 *   mover     a 1 MiB pipe and exec-output.c's mover thread (pipe to relay
 *             pipe to log)
 *   spent     the same as an unprivileged user whose pipes have passed
 *             fs.pipe-user-pages-soft (the agentfab user with some fifty
 *             commands at work): the kernel's smallest pipes
 *
 * Producers: "1m" (1 MiB writes of one byte value), "8k" (8 KiB writes,
 * as head and stdio do), "computed" (each 1 MiB computed before it is
 * written: slower than 1 GB/s here). The bound per producer is the output
 * target of docs/PERFORMANCE.md: min(1 GB/s, the /dev/null rate / 1.25).
 *
 * Each figure also says when the producer was done (its last write
 * returned) and the CPU it and this process spent a GiB.
 *
 *   output-paths [--dir=DIR] [--size-mb=N] [--runs=N] [--designs=A,B] [--kinds=A,B]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
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

/* The last run's producer: when it started, how long until it was done
 * (its last write returned) and its CPU time, in seconds; and the CPU time
 * of a mover run in a child of ours (run_mover_spent()). */
static double producer_t0, producer_wall, producer_cpu, spent_cpu;

/* The producer: a child writing arg_size bytes to fd, then exiting. */
static pid_t producer_start(const char *kind, int fd) {
        producer_t0 = now();
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

static double tv_sec(struct timeval tv) {
        return (double) tv.tv_sec + (double) tv.tv_usec / 1e6;
}

static int producer_wait(pid_t pid) {
        struct rusage ru;
        int status;
        if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;
        producer_cpu = tv_sec(ru.ru_utime) + tv_sec(ru.ru_stime);
        producer_wall = now() - producer_t0;
        return 0;
}

/* CPU time of this process so far (the mover's thread and the ring's
 * workers included), in seconds. */
static double self_cpu(void) {
        struct rusage ru;
        (void) getrusage(RUSAGE_SELF, &ru);
        return tv_sec(ru.ru_utime) + tv_sec(ru.ru_stime);
}

/* A run's files are freed after its time is taken: freeing 1 GiB of
 * blocks (with a discard, where the file system asks for one) is the
 * file system's cost of deleting, not of getting the bytes in. */
static int kept_fds[4];
static size_t n_kept;

static int log_open(const char *name) {
        char path[4096];
        (void) snprintf(path, sizeof(path), "%s/%s", arg_dir, name);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
                (void) unlink(path);
                if (n_kept < ELEMENTSOF(kept_fds))
                        kept_fds[n_kept++] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        }
        return fd;
}

static void kept_close(void) {
        while (n_kept > 0)
                safe_close(kept_fds[--n_kept]);
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

/* The floor: a 1 MiB pipe whose reader moves nothing anywhere (splice()
 * to /dev/null frees the pages as they come). No log, so no design that
 * keeps the bytes does better: what the producer itself pays for writing
 * into a pipe, on this kernel. */
static int run_drain(const char *kind) {
        _cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        int p[2];
        uint64_t n = 0;
        pid_t pid;

        if (null < 0 || pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rd = p[0];
        (void) fcntl(rd, F_SETPIPE_SZ, WRITE_MAX);
        pid = producer_start(kind, p[1]);
        safe_close(p[1]);
        for (ssize_t k; (k = splice(rd, NULL, null, NULL, WRITE_MAX, SPLICE_F_MOVE)) != 0;) {
                if (k < 0 && errno != EINTR)
                        return -errno;
                n += k > 0 ? (uint64_t) k : 0;
        }
        return producer_wait(pid) < 0 || n != arg_size ? -EIO : 0;
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

/* The mover as the agentfab user gets it with some fifty commands at
 * work: its pipes past fs.pipe-user-pages-soft, so that the kernel gives
 * a new pipe two pages and will not grow it. Run in a child, as nobody
 * when we are root (root is not held to the limit), after taking pipes
 * until the kernel refuses more; the child's figures come back by a pipe. */
static int run_mover_spent(const char *kind) {
        double back[3];
        int p[2], status;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        fflush(stdout);
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int spare[2], r;

                if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
                        _exit(2);
                for (unsigned i = 0; i < 4096; i++)
                        if (pipe2(spare, O_CLOEXEC) < 0 || fcntl(spare[0], F_SETPIPE_SZ, WRITE_MAX) < 0)
                                break;
                double c0 = self_cpu();
                r = run_mover(kind);
                back[0] = producer_wall, back[1] = producer_cpu, back[2] = self_cpu() - c0;
                _exit(r < 0 || write(p[1], back, sizeof(back)) != sizeof(back));
        }
        safe_close(p[1]);
        _cleanup_close_ int rd = p[0];
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            read(rd, back, sizeof(back)) != sizeof(back))
                return -EIO;
        producer_wall = back[0], producer_cpu = back[1], spent_cpu = back[2];
        return 0;
}

static const struct {
        const char *name;
        int (*run)(const char *kind);
} designs[] = {
        { "null", run_null },
        { "drain", run_drain },
        { "own-file", run_own_file },
        { "append", run_append },
        { "loop", run_loop },
        { "mover", run_mover },
        { "spent", run_mover_spent },
};

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n) {
        double t[100];
        memcpy(t, v, n * sizeof(double));
        qsort(t, n, sizeof(double), cmp_double);
        return t[n / 2];
}

/* Whether name is in list, a comma-separated list (NULL: everything). */
static bool listed(const char *list, const char *name) {
        size_t n = strlen(name);
        for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
                if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
                        return true;
        return !list;
}

static void help(void) {
        printf("output-paths [OPTIONS]\n\n"
               "Ways of getting a command's output into a log, measured against\n"
               "the same producer into /dev/null and into a pipe drained by nothing.\n\n"
               "  --dir=DIR          where the logs go (default /var/tmp)\n"
               "  --size-mb=N        bytes per run, in MiB (default 1024)\n"
               "  --runs=N           runs per design, the median is shown (default 3)\n"
               "  --designs=A,B,...  of null, drain, own-file, append, loop, mover, spent (default all;\n"
               "                     null and drain, the baselines, always run)\n"
               "  --kinds=A,B,...    producers: 1m, 8k, computed (default all)\n");
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "dir", required_argument, NULL, 'd' },
                { "size-mb", required_argument, NULL, 's' },
                { "runs", required_argument, NULL, 'r' },
                { "designs", required_argument, NULL, 'D' },
                { "kinds", required_argument, NULL, 'k' },
                {}
        };
        static const char *kinds[] = { "1m", "8k", "computed" };
        const char *arg_designs = NULL, *arg_kinds = NULL;
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'd':
                        arg_dir = optarg;
                        break;
                case 's':
                        arg_size = strtoull(optarg, NULL, 10) * 1024 * 1024;
                        break;
                case 'r':
                        arg_runs = (unsigned) atoi(optarg);
                        break;
                case 'D':
                        arg_designs = optarg;
                        break;
                case 'k':
                        arg_kinds = optarg;
                        break;
                default:
                        return 2;
                }
        if (arg_size == 0 || arg_runs == 0 || arg_runs > 100) {
                fprintf(stderr, "output-paths: --size-mb and --runs (1-100) must be positive\n");
                return 2;
        }

        printf("output-paths: %llu MiB per run, median of %u runs, log in %s\n",
               (unsigned long long) (arg_size >> 20), arg_runs, arg_dir);
        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                double all[ELEMENTSOF(designs)][100], done[ELEMENTSOF(designs)][100];
                double cpu_producer[ELEMENTSOF(designs)] = {}, cpu_self[ELEMENTSOF(designs)] = {};
                double gib = (double) arg_size / (1u << 30);

                if (!listed(arg_kinds, kinds[k]))
                        continue;
                /* Runs in turns, design after design, so that the machine's
                 * state (its load, the page cache) weighs on all alike. */
                for (unsigned i = 0; i < arg_runs; i++)
                        for (size_t d = 0; d < ELEMENTSOF(designs); d++) {
                                double c0, t0;
                                int r;

                                if (d > 1 && !listed(arg_designs, designs[d].name))
                                        continue;
                                spent_cpu = 0;
                                c0 = self_cpu();
                                t0 = now();
                                r = designs[d].run(kinds[k]);
                                if (r < 0) {
                                        fprintf(stderr, "%s/%s: %s\n", kinds[k], designs[d].name, strerror(-r));
                                        return 1;
                                }
                                all[d][i] = now() - t0;
                                done[d][i] = producer_wall;
                                kept_close();
                                cpu_self[d] += self_cpu() - c0 + spent_cpu;
                                cpu_producer[d] += producer_cpu;
                        }
                double med_null = median(all[0], arg_runs), med_drain = median(all[1], arg_runs);
                double bound = MIN(1000.0, (double) arg_size / med_null / 1e6 / 1.25);
                for (size_t d = 0; d < ELEMENTSOF(designs); d++) {
                        if (d > 1 && !listed(arg_designs, designs[d].name))
                                continue;
                        double med = median(all[d], arg_runs), rate = (double) arg_size / med / 1e6;
                        printf("figure: output-paths %-8s %-8s median %.3f s = %5.0f MB/s; %.2fx /dev/null, %.2fx a drained pipe",
                               kinds[k], designs[d].name, med, rate, med / med_null, med / med_drain);
                        if (d > 1)
                                printf("; bound %.0f MB/s: %s", bound, rate >= bound ? "met" : "not met");
                        /* Where the time goes: when the producer was done
                         * (its last byte written), and CPU seconds a GiB,
                         * the producer's and this process's (the mover and
                         * its ring's worker). */
                        printf("; producer done after %.3f s; CPU s/GiB producer %.2f, ours %.2f\n",
                               median(done[d], arg_runs), cpu_producer[d] / arg_runs / gib, cpu_self[d] / arg_runs / gib);
                }
        }
        return 0;
}
