/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Benchmark of the task sandbox against named baselines, measured in one
 * run on one machine:
 *   cold start: agentfab-sandbox (with its transient scope when a system
 *               manager is reachable) vs bwrap with equivalent isolation vs
 *               plain fork+exec, each running /bin/true to completion;
 *   per command: /bin/true run by a live sandbox's exec service (request,
 *               fork, exec, output pipes, exit report) vs plain fork+exec;
 *   seccomp:    a syscall-heavy dd inside the sandbox vs the same dd with
 *               no filter, and with a filter that allows everything (the
 *               kernel's fixed cost of any filter, which no policy can go
 *               below).
 * Prints medians and ratios. Not a test: it asserts nothing. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec-client.h"

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* A filter that allows everything: what any seccomp filter costs on this
 * kernel, before its program decides anything. */
static int load_allow_all_filter(void) {
        struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        struct sock_fprog prog = { .len = 1, .filter = &allow };

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return -errno;
        return 0;
}

static int run(char *const argv[], bool quiet, bool allow_all_filter) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                if (allow_all_filter && load_allow_all_filter() < 0)
                        _exit(126);
                if (quiet) {
                        freopen("/dev/null", "w", stdout);
                        freopen("/dev/null", "w", stderr);
                }
                execv(argv[0], argv);
                _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int compare(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

typedef struct Contender {
        char *const *argv;      /* NULL: left out (e.g. no bwrap installed) */
        bool allow_all_filter;
} Contender;

/* The medians of n runs of each contender, taken in turns (a, b, c, a, b,
 * c, ...), so that what drifts during the run (the other core's load, the
 * clock's frequency) weighs on all of them alike. A contender that fails
 * gets 0. */
static void medians_interleaved(const Contender *c, size_t n_c, int n, uint64_t *ret) {
        uint64_t *t = calloc((size_t) n * n_c, sizeof(uint64_t));
        bool *ok = calloc(n_c, sizeof(bool));

        for (size_t k = 0; k < n_c; k++) {
                ret[k] = 0;
                /* A warm-up, and a check that it works at all. */
                ok[k] = t && c[k].argv && run(c[k].argv, true, c[k].allow_all_filter) == 0;
                if (c[k].argv && !ok[k])
                        fprintf(stderr, "'%s' failed; skipping.\n", c[k].argv[0]);
        }
        for (int i = 0; t && i < n; i++)
                for (size_t k = 0; k < n_c; k++) {
                        if (!ok[k])
                                continue;
                        uint64_t s = now_ns();
                        ok[k] = run(c[k].argv, true, c[k].allow_all_filter) == 0;
                        t[k * (size_t) n + (size_t) i] = now_ns() - s;
                }
        for (size_t k = 0; t && k < n_c; k++)
                if (ok[k]) {
                        qsort(t + k * (size_t) n, (size_t) n, sizeof(uint64_t), compare);
                        ret[k] = t[k * (size_t) n + (size_t) n / 2];
                }
        free(t);
        free(ok);
}

static void row(const char *name, uint64_t ns, uint64_t baseline, const char *baseline_name) {
        if (ns == 0) {
                printf("  %-44s %12s\n", name, "n/a");
                return;
        }
        if (baseline > 0)
                printf("  %-44s %9.3f ms   %5.2fx %s\n", name, ns / 1e6, (double) ns / (double) baseline, baseline_name);
        else
                printf("  %-44s %9.3f ms\n", name, ns / 1e6);
}

int main(int argc, char *argv[]) {
        const char *sandbox = "/usr/bin/agentfab-sandbox", *bwrap = "/usr/bin/bwrap", *workspace = NULL;
        char dd_count[32] = "count=1000000";
        int runs = 50, dd_runs = 9, c;
        bool scope = true;

        static const struct option options[] = {
                { "sandbox",   required_argument, NULL, 's' },
                { "bwrap",     required_argument, NULL, 'b' },
                { "workspace", required_argument, NULL, 'w' },
                { "runs",      required_argument, NULL, 'n' },
                { "no-scope",  no_argument,       NULL, 'S' },
                {}
        };
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 's': sandbox = optarg; break;
                case 'b': bwrap = optarg; break;
                case 'w': workspace = optarg; break;
                case 'n': runs = atoi(optarg); break;
                case 'S': scope = false; break;
                default: return 2;
                }
        if (!workspace || runs < 3) {
                fprintf(stderr, "usage: %s --workspace=DIR [--runs=N] [--sandbox=PATH] [--bwrap=PATH] [--no-scope]\n", argv[0]);
                return 2;
        }

        char ws_opt[4096];
        snprintf(ws_opt, sizeof(ws_opt), "--workspace=%s", workspace);

        char *plain[] = { (char *) "/bin/true", NULL };
        char *agentfab[] = { (char *) sandbox, ws_opt, (char *) (scope ? "--tmp-size=64M" : "--no-scope"),
                             (char *) "--", (char *) "/bin/true", NULL };
        /* The namespaces agentfab-sandbox makes as root (all but a user
         * namespace, which bwrap would add and which cannot mount /proc in a
         * container whose /proc has read-only parts). */
        char *bw[] = { (char *) bwrap, (char *) "--unshare-ipc", (char *) "--unshare-pid", (char *) "--unshare-net",
                       (char *) "--unshare-uts", (char *) "--unshare-cgroup-try", (char *) "--die-with-parent", (char *) "--new-session",
                       (char *) "--ro-bind", (char *) "/", (char *) "/", (char *) "--tmpfs", (char *) "/tmp",
                       (char *) "--proc", (char *) "/proc", (char *) "--dev", (char *) "/dev",
                       (char *) "--dir", (char *) "/tmp/workspace", (char *) "--bind", (char *) workspace, (char *) "/tmp/workspace", (char *) "--chdir", (char *) "/tmp/workspace",
                       (char *) "--unsetenv", (char *) "HOME", (char *) "/bin/true", NULL };

        /* In blocks, not in turns: a start leaves work behind (the kernel
         * frees a network namespace later, systemd removes a cgroup), and
         * each contender is to meet its own, as in a steady stream of starts. */
        printf("Cold start until /bin/true has run (median of %d, in blocks):\n", runs);
        uint64_t t_plain, t_bwrap = 0, t_af;
        medians_interleaved((const Contender[]) { { plain, false } }, 1, runs, &t_plain);
        if (access(bwrap, X_OK) == 0)
                medians_interleaved((const Contender[]) { { bw, false } }, 1, runs, &t_bwrap);
        medians_interleaved((const Contender[]) { { agentfab, false } }, 1, runs, &t_af);
        row("plain fork+exec (baseline)", t_plain, 0, "");
        row("bwrap: same namespaces, ro /, tmpfs, workspace", t_bwrap, t_plain, "of fork+exec");
        row(scope ? "agentfab-sandbox, with transient scope" : "agentfab-sandbox, no scope", t_af, t_plain, "of fork+exec");
        if (t_bwrap > 0 && t_af > 0)
                printf("  agentfab-sandbox / bwrap: %.2fx (target <= 1.00x)\n", (double) t_af / (double) t_bwrap);

        /* A live sandbox serving commands. */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
                char fd_opt[32];
                snprintf(fd_opt, sizeof(fd_opt), "--serve-fd=%i", sv[1]);
                fflush(stdout);
                pid_t pid = fork();
                if (pid == 0) {
                        int fl = fcntl(sv[1], F_GETFD);
                        fcntl(sv[1], F_SETFD, fl & ~FD_CLOEXEC);
                        execl(sandbox, sandbox, ws_opt, scope ? "--tmp-size=64M" : "--no-scope", fd_opt, (char *) NULL);
                        _exit(127);
                }
                close(sv[1]);
                char *t_argv[] = { (char *) "/bin/true", NULL };
                ExecRequest req = { .argv = t_argv, .timeout_usec = UINT64_MAX };
                uint64_t *t = calloc((size_t) runs, sizeof(uint64_t));
                bool ok = t != NULL;
                for (int i = -1; ok && i < runs; i++) { /* i = -1: warm-up */
                        ExecResult res;
                        uint64_t st = now_ns();
                        ok = exec_client_run(sv[0], &req, -1, 4096, NULL, &res) >= 0 && res.status == 0;
                        if (i >= 0)
                                t[i] = now_ns() - st;
                        exec_result_done(&res);
                }
                close(sv[0]);
                waitpid(pid, NULL, 0);
                printf("\nPer command, /bin/true (median of %d):\n", runs);
                if (ok) {
                        qsort(t, (size_t) runs, sizeof(uint64_t), compare);
                        row("plain fork+exec (baseline)", t_plain, 0, "");
                        row("in a live agentfab sandbox (exec service)", t[runs / 2], t_plain, "of fork+exec (target <= 1.05x)");
                } else
                        printf("  the exec service failed\n");
                free(t);
        }

        char *dd[] = { (char *) "/bin/dd", (char *) "if=/dev/zero", (char *) "of=/dev/null", (char *) "bs=1", dd_count, NULL };
        char *dd_sb[] = { (char *) sandbox, ws_opt, (char *) (scope ? "--tmp-size=64M" : "--no-scope"), (char *) "--",
                          (char *) "/bin/dd", (char *) "if=/dev/zero", (char *) "of=/dev/null", (char *) "bs=1", dd_count, NULL };
        printf("\nSyscall-heavy loop, dd bs=1 count=1000000 (2M syscalls; median of %d, taken in turns):\n", dd_runs);
        uint64_t loop[3];
        medians_interleaved((const Contender[]) { { dd, false }, { dd, true }, { dd_sb, false } }, 3, dd_runs, loop);
        uint64_t t_dd = loop[0], t_dd_any = loop[1], t_dd_sb = loop[2];
        row("dd, no filter (baseline)", t_dd, 0, "");
        row("dd, a one-instruction allow-all filter", t_dd_any, t_dd, "of unfiltered (any filter's floor)");
        row("dd in agentfab-sandbox, seccomp filter", t_dd_sb, t_dd, "of unfiltered");
        if (t_dd > 0 && t_dd_sb > t_af)
                printf("  filter cost without sandbox start-up: %.3fx (target <= 1.10x)\n",
                       (double) (t_dd_sb - t_af) / (double) t_dd);
        if (t_dd_any > 0 && t_dd_sb > t_af)
                printf("  the same against the allow-all filter: %.3fx (what the policy itself adds)\n",
                       (double) (t_dd_sb - t_af) / (double) t_dd_any);
        return 0;
}
