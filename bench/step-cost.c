/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a step costs the daemon on repositories of 1,000 to 100,000 files:
 * the work of the end of a step (its change list and the breakers' path
 * rules, the checkpoint, the changes since base and the size breakers), as
 * agent-loop.c does it, with the ledger tracking changes as the agent does.
 * Three steps: one that wrote a file through the write_file tool, one whose
 * run_command touched nothing, one whose run_command rewrote 1,000 files;
 * and a reset to the last checkpoint (how a task begins after its baseline
 * tests, and how it resumes), with nothing or 1,000 files to restore.
 * Baselines, on the same tree in the same run: `git add -A && git
 * write-tree` and `git status --porcelain` (git's own stat index, by full
 * path names), and the change list without the stat index (libgit2's walk
 * of the workspace, twice a step: the "old" figures; on the first three
 * steps only, on the first only from 50,000 files on).
 *
 *   step-cost [--sizes=1000,10000,100000] [--steps=N] [--old-steps=N] [--dir=DIR]
 */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "breakers.h"
#include "fs-util.h"
#include "ledger-internal.h"
#include "ledger.h"
#include "macro.h"
#include "tools.h"
#include "trace.h"

#define FILES_PER_DIR 20U
#define REWRITE_FILES 1000U

static unsigned arg_steps = 15;
static unsigned arg_old_steps = 3;
static bool arg_old_steps_set = false;
/* Steps timed with libgit2's walk ("old") at this many files and more,
 * unless --old-steps says otherwise: there one takes about a minute of wall
 * clock (20 s of CPU). */
#define OLD_STEPS_BIG_FILES 50000U
#define OLD_STEPS_BIG 1U
static char *arg_dir = NULL;

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

/* CPU time of this process (its io_uring workers included) and of its
 * waited-for children: on a shared machine the wall clock measures the
 * neighbours too. */
static double cpu_ms(void) {
        struct timespec ts;
        struct rusage ru;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        double t = (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
        if (getrusage(RUSAGE_CHILDREN, &ru) >= 0)
                t += (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
                     (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
        return t;
}

typedef struct Clock {
        double wall, cpu;
} Clock;

static Clock clock_now(void) {
        return (Clock) { now_ms(), cpu_ms() };
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

typedef struct Sample {
        double v[256];
        unsigned n;
} Sample;

typedef struct Timing {
        Sample wall, cpu;
} Timing;

static void sample_add(Sample *s, double v) {
        if (s->n < ELEMENTSOF(s->v))
                s->v[s->n++] = v;
}

static void timing_add(Timing *t, Clock start) {
        Clock now = clock_now();
        sample_add(&t->wall, now.wall - start.wall);
        sample_add(&t->cpu, now.cpu - start.cpu);
}

static double sample_median(Sample *s) {
        if (s->n == 0)
                return 0;
        qsort(s->v, s->n, sizeof(double), cmp_double);
        return s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
}

static double sample_p90(Sample *s) {
        if (s->n == 0)
                return 0;
        qsort(s->v, s->n, sizeof(double), cmp_double);
        return s->v[MIN((size_t) (s->n * 9 / 10), (size_t) s->n - 1)];
}

static int sh(const char *fmt, ...) _printf_(1, 2);
static int sh(const char *fmt, ...) {
        char cmd[8192];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        int r = system(cmd);
        return r == 0 ? 0 : -EIO;
}

static void sh_time(Timing *t, const char *fmt, ...) _printf_(2, 3);
static void sh_time(Timing *t, const char *fmt, ...) {
        char cmd[8192];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        Clock c = clock_now();
        if (system(cmd) == 0)
                timing_add(t, c);
}

static void file_name(unsigned i, char *buf, size_t size) {
        unsigned dir = i / FILES_PER_DIR;
        (void) snprintf(buf, size, "d%03u/s%03u/f%02u.c", dir / 64, dir % 64, i % FILES_PER_DIR);
}

static int write_text(const char *root, const char *name, unsigned version) {
        char path[4096], text[1024];
        (void) snprintf(path, sizeof(path), "%s/%s", root, name);
        int k = snprintf(text, sizeof(text),
                         "/* %s */\n#include <stdio.h>\n\nstatic int value = %u;\n\n"
                         "int f(int x) {\n        if (x > value)\n                return x - value;\n"
                         "        return value - x;\n}\n\nint g(void) {\n        return f(%u);\n}\n",
                         name, version, version * 7);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
                /* Its directories first. */
                char dir[4096];
                (void) snprintf(dir, sizeof(dir), "%s", path);
                *strrchr(dir, '/') = '\0';
                char *slash = strrchr(dir, '/');
                *slash = '\0';
                (void) mkdir(dir, 0755);
                *slash = '/';
                (void) mkdir(dir, 0755);
                fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0)
                        return -errno;
        }
        return write(fd, text, (size_t) k) == k ? 0 : -EIO;
}

/* The end of a step, as agent_end_step() and agent_check_breakers() do it. */
static int step_end(Ledger *l, char before[static 41], unsigned step) {
        _cleanup_(breaker_config_done) BreakerConfig bc = {};
        _cleanup_(breaker_trip_done) BreakerTrip trip = {};
        FileChange *c = NULL;
        size_t n = 0;
        char commit[41];
        _cleanup_free_ char *error = NULL;
        int r;

        if (breaker_config_init_defaults(&bc) < 0)
                return -ENOMEM;
        r = ledger_changes(l, before[0] ? before : NULL, &c, &n);
        if (r < 0)
                return r;
        _cleanup_free_ BreakerChange *bch = calloc(MAX(n, (size_t) 1), sizeof(BreakerChange));
        for (size_t i = 0; bch && i < n; i++)
                bch[i] = (BreakerChange) { .path = c[i].path, .status = c[i].status, .added = c[i].added,
                                           .removed = c[i].removed, .old_path = c[i].old_path };
        BreakerConfig step_only = bc;
        step_only.max_files_changed = UINT_MAX;
        step_only.max_lines_changed = UINT_MAX;
        if (bch)
                (void) breakers_check_changes(&step_only, bch, n, &trip);
        file_changes_free(c, n);

        Checkpoint cp = { .task_id = "bench", .step = step, .subject = "step", .tests = "not-run" };
        r = ledger_checkpoint(l, &cp, commit, &error);
        if (r < 0) {
                fprintf(stderr, "checkpoint: %s\n", error ?: strerror(-r));
                return r;
        }
        if (r > 0)
                memcpy(before, commit, 41);

        r = ledger_changes(l, NULL, &c, &n);
        if (r < 0)
                return r;
        _cleanup_free_ BreakerChange *all = calloc(MAX(n, (size_t) 1), sizeof(BreakerChange));
        for (size_t i = 0; all && i < n; i++)
                all[i] = (BreakerChange) { .path = c[i].path, .status = c[i].status, .added = c[i].added,
                                           .removed = c[i].removed, .old_path = c[i].old_path };
        BreakerConfig size_only = bc;
        for (int i = 0; i < _BREAKER_MAX; i++)
                size_only.enabled[i] = i == BREAKER_FILES_CHANGED || i == BREAKER_LINES_CHANGED;
        breaker_trip_done(&trip);
        if (all)
                (void) breakers_check_changes(&size_only, all, n, &trip);
        file_changes_free(c, n);
        return 0;
}

typedef struct Row {
        const char *what;
        Timing ours, add, status, old;
        TracePhase phases[TRACE_PHASES_MAX];
        size_t n_phases;
        unsigned steps;
} Row;

/* Adds what the trace recorded during one step of the row. */
static void row_trace(Row *r) {
        TracePhase p[TRACE_PHASES_MAX];
        size_t n = trace_take(p);

        r->steps++;
        for (size_t i = 0; i < n; i++) {
                size_t k;
                for (k = 0; k < r->n_phases; k++)
                        if (streq(r->phases[k].name, p[i].name))
                                break;
                if (k == r->n_phases) {
                        if (k >= TRACE_PHASES_MAX)
                                continue;
                        r->phases[r->n_phases++] = (TracePhase) {};
                        memcpy(r->phases[k].name, p[i].name, sizeof(p[i].name));
                }
                r->phases[k].usec += p[i].usec;
                r->phases[k].calls += p[i].calls;
        }
}

static void row_print(unsigned files, Row *r, double target) {
        double ow = sample_median(&r->ours.wall), oc = sample_median(&r->ours.cpu);

        printf("%7u  %-34s %8.2f %8.2f %8.2f", files, r->what, ow, sample_p90(&r->ours.wall), oc);
        Timing *base[] = { &r->add, &r->status, &r->old };
        for (size_t i = 0; i < ELEMENTSOF(base); i++) {
                double bw = sample_median(&base[i]->wall), bc = sample_median(&base[i]->cpu);
                if (base[i]->wall.n > 0)
                        printf(" %8.2f %8.2f %7.3fx", bw, bc, bc > 0 ? oc / bc : 0);
                else
                        printf(" %8s %8s %8s", "", "", "");
        }
        if (target > 0)
                printf("  target %.0f ms: %s", target, ow <= target ? "met" : "not met");
        printf("\n");
        if (r->steps > 0 && r->n_phases > 0) {
                /* Means per step, from the trace (AGENTFAB_TRACE's phases). */
                for (size_t i = 0; i < r->n_phases; i++) {
                        r->phases[i].usec /= r->steps;
                        r->phases[i].calls = (r->phases[i].calls + r->steps - 1) / r->steps;
                }
                _cleanup_free_ char *text = trace_format(r->phases, r->n_phases);
                printf("#        phases (means): %s\n", strempty(text));
        }
}

/* The watch against a scan of every file, both measured in this run. */
static void row_vs(unsigned files, const char *what, Row *ours, Row *scan) {
        double oc = sample_median(&ours->ours.cpu), sc = sample_median(&scan->ours.cpu);
        double ow = sample_median(&ours->ours.wall), sw = sample_median(&scan->ours.wall);

        printf("# %u files, %s: the watch %.2f ms CPU (%.2f wall) against the scan %.2f ms CPU (%.2f wall): %.3fx CPU, %.3fx wall\n",
               files, what, oc, ow, sc, sw, sc > 0 ? oc / sc : 0, sw > 0 ? ow / sw : 0);
}

static int bench_size(unsigned files) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_free_ char *src = NULL, *task = NULL, *ws = NULL, *gitdir = NULL, *git = NULL, *error = NULL;
        char before[41] = "", name[256];
        unsigned step = 1;
        double t;
        int r;

        if (asprintf(&src, "%s/src-%u", arg_dir, files) < 0 || asprintf(&task, "%s/task-%u", arg_dir, files) < 0 ||
            asprintf(&ws, "%s/workspace", task) < 0 || asprintf(&gitdir, "%s/git-%u", arg_dir, files) < 0 ||
            asprintf(&git, "git --git-dir='%s' --work-tree='%s' -c core.untrackedCache=false -c core.fsmonitor=false",
                     gitdir, ws) < 0)
                return -ENOMEM;

        /* The repository: FILES_PER_DIR files a directory, two levels. */
        t = now_ms();
        (void) sh("rm -rf '%s' '%s' '%s'", src, task, gitdir);
        if (mkdir(src, 0755) < 0)
                return -errno;
        for (unsigned i = 0; i < files; i++) {
                file_name(i, name, sizeof(name));
                r = write_text(src, name, 0);
                if (r < 0)
                        return r;
        }
        if (sh("cd '%s' && git -c init.defaultBranch=main init -q && git add -A && "
               "git -c user.name=b -c user.email=b@b commit -q -m base", src) < 0)
                return -EIO;
        if (mkdir(task, 0755) < 0)
                return -errno;
        _cleanup_close_ int task_fd = open(task, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        LedgerOptions o = { .max_bytes = UINT64_MAX };
        r = ledger_create(task_fd, src, -EBADF, NULL, "agentfab/bench", &o, &error, &l);
        if (r < 0) {
                fprintf(stderr, "ledger_create: %s\n", error ?: strerror(-r));
                return r;
        }
        ledger_track_changes(l, true);
        /* git's own index of the same work tree, for the baselines. */
        if (sh("git init -q --bare '%s' && %s add -A && %s write-tree >/dev/null", gitdir, git, git) < 0)
                return -EIO;
        /* Two steps to settle: the first stage reads what the checkout
         * left racy; then the clock moves on. */
        for (int i = 0; i < 2; i++) {
                ledger_note_all(l);
                r = step_end(l, before, step++);
                if (r < 0)
                        return r;
                usleep(50 * 1000);
        }
        printf("# %u files: repository made and imported in %.1f s\n", files, (now_ms() - t) / 1000.0);

        int ws_fd = ledger_workspace_fd(l);
        Row write = { .what = "write_file, one file" },
            nothing = { .what = "run_command touched nothing" },
            nothing_scan = { .what = "  the same, scanned (no watch)" },
            nothing_sync = { .what = "  scanned, statx without io_uring" },
            rewrite = { .what = "run_command rewrote 1,000 files" },
            rewrite_scan = { .what = "  the same, scanned (no watch)" };

        for (unsigned k = 0; k < arg_steps; k++) {
                /* A step that wrote one file through the tool. */
                char content[512];
                file_name((k * 7919U) % files, name, sizeof(name));
                (void) snprintf(content, sizeof(content), "/* step %u */\nint step_%u(void) {\n        return %u;\n}\n", step, step, k);
                ToolCallArgs a = { .kind = TOOL_WRITE_FILE, .path = name, .content = content };
                _cleanup_free_ char *out = NULL;
                (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
                Clock c = clock_now();
                r = tool_write_file(ws_fd, &a, 1024 * 1024, &out);
                ledger_note_path(l, name);
                if (r >= 0)
                        r = step_end(l, before, step++);
                timing_add(&write.ours, c);
                row_trace(&write);
                if (r < 0)
                        return r;
                sh_time(&write.add, "%s add -A && %s write-tree >/dev/null", git, git);
                sh_time(&write.status, "%s status --porcelain >/dev/null", git);
                /* Without the stat index: libgit2's walk for the step's
                 * changes and again for those since base. A few samples
                 * do (--old-steps, 3; 1 from 50,000 files on): at 100,000
                 * files each takes a minute of wall clock. */
                if (k < (files >= OLD_STEPS_BIG_FILES && !arg_old_steps_set ? OLD_STEPS_BIG : arg_old_steps)) {
                        FileChange *fc = NULL;
                        size_t n = 0;
                        Clock c0 = clock_now();
                        if (ledger_changes_walk(l, before, &fc, &n) >= 0)
                                file_changes_free(fc, n);
                        if (ledger_changes_walk(l, NULL, &fc, &n) >= 0)
                                file_changes_free(fc, n);
                        timing_add(&write.old, c0);
                }

                /* A command that changed nothing: what the watch saw. */
                ledger_set_io_uring(true);
                ledger_note_all(l);
                (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
                c = clock_now();
                r = step_end(l, before, step++);
                timing_add(&nothing.ours, c);
                row_trace(&nothing);
                if (r < 0)
                        return r;
                sh_time(&nothing.add, "%s add -A && %s write-tree >/dev/null", git, git);
                sh_time(&nothing.status, "%s status --porcelain >/dev/null", git);
                /* The baselines: the scan of every file's metadata (what
                 * each step after a command does without the watch). */
                ledger_note_rescan(l);
                (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
                c = clock_now();
                r = step_end(l, before, step++);
                timing_add(&nothing_scan.ours, c);
                row_trace(&nothing_scan);
                if (r < 0)
                        return r;
                ledger_set_io_uring(false);
                ledger_note_rescan(l);
                (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
                c = clock_now();
                r = step_end(l, before, step++);
                timing_add(&nothing_sync.ours, c);
                row_trace(&nothing_sync);
                ledger_set_io_uring(true);
                if (r < 0)
                        return r;
        }

        unsigned rewrites = MAX(arg_steps / 3, 3U);
        for (unsigned k = 0; k < rewrites && files >= REWRITE_FILES; k++) {
                /* The sandbox's part, not timed: 1,000 files rewritten. */
                unsigned start = (k * 3001U) % files;
                for (unsigned i = 0; i < REWRITE_FILES; i++) {
                        file_name((start + i) % files, name, sizeof(name));
                        r = write_text(ws, name, step * 1000 + i);
                        if (r < 0)
                                return r;
                }
                usleep(10 * 1000);
                ledger_note_all(l);
                (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
                Clock c = clock_now();
                r = step_end(l, before, step++);
                timing_add(&rewrite.ours, c);
                row_trace(&rewrite);
                if (r < 0)
                        return r;
                sh_time(&rewrite.add, "%s add -A && %s write-tree >/dev/null", git, git);
                sh_time(&rewrite.status, "%s status --porcelain >/dev/null", git);

                /* The same rewrite again, found by a scan. */
                for (unsigned i = 0; i < REWRITE_FILES; i++) {
                        file_name((start + i) % files, name, sizeof(name));
                        r = write_text(ws, name, step * 1000 + i + 500);
                        if (r < 0)
                                return r;
                }
                usleep(10 * 1000);
                ledger_note_rescan(l);
                (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
                c = clock_now();
                r = step_end(l, before, step++);
                timing_add(&rewrite_scan.ours, c);
                row_trace(&rewrite_scan);
                if (r < 0)
                        return r;
        }

        /* A reset to the last checkpoint, the way a task begins (after its
         * baseline tests ran) or resumes, and its next stage: once with
         * nothing changed, once after 1,000 files were rewritten. Baseline:
         * git reset --hard of the same rewrite in git's own work tree. */
        Row reset_none = { .what = "reset, nothing changed" },
            reset_some = { .what = "reset, 1,000 files rewritten" };
        unsigned resets = MAX(arg_steps / 5, 2U);
        for (unsigned k = 0; k < resets; k++) {
                for (int changed = 0; changed <= (files >= REWRITE_FILES); changed++) {
                        Row *row = changed ? &reset_some : &reset_none;
                        unsigned start = (k * 4001U) % files;

                        if (changed) {
                                for (unsigned i = 0; i < REWRITE_FILES; i++) {
                                        file_name((start + i) % files, name, sizeof(name));
                                        if ((r = write_text(ws, name, step * 7000 + i)) < 0)
                                                return r;
                                }
                        }
                        usleep(10 * 1000);
                        (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
                        Clock c = clock_now();
                        r = ledger_reset(l, before);
                        if (r >= 0) {
                                ledger_note_all(l);
                                r = step_end(l, before, step++);
                        }
                        timing_add(&row->ours, c);
                        row_trace(row);
                        if (r < 0)
                                return r;
                        if (changed)
                                for (unsigned i = 0; i < REWRITE_FILES; i++) {
                                        file_name((start + i) % files, name, sizeof(name));
                                        if ((r = write_text(ws, name, step * 9000 + i)) < 0)
                                                return r;
                                }
                        sh_time(&row->add, "%s reset -q --hard", git);
                }
        }

        double target = files <= 1000 ? 5 : files <= 10000 ? 20 : files <= 100000 ? 200 : 0;
        row_print(files, &write, target);
        row_print(files, &nothing, target);
        row_print(files, &nothing_scan, 0);
        row_print(files, &nothing_sync, 0);
        if (rewrite.ours.wall.n > 0) {
                row_print(files, &rewrite, 0);
                row_print(files, &rewrite_scan, 0);
        }
        row_vs(files, "a command that touched nothing", &nothing, &nothing_scan);
        if (rewrite.ours.wall.n > 0)
                row_vs(files, "a command that rewrote 1,000 files", &rewrite, &rewrite_scan);
        row_print(files, &reset_none, 0);
        if (reset_some.ours.wall.n > 0)
                row_print(files, &reset_some, 0);
        fflush(stdout);

        l = ledger_free(l);
        (void) sh("rm -rf '%s' '%s' '%s'", src, task, gitdir);
        return 0;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "sizes", required_argument, NULL, 's' },
                { "steps", required_argument, NULL, 'n' },
                { "dir", required_argument, NULL, 'd' },
                { "old-steps", required_argument, NULL, 'o' },
                {}
        };
        const char *sizes = "1000,10000,100000";
        char tmpl[] = "/var/tmp/step-cost-XXXXXX";
        int c;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 's':
                        sizes = optarg;
                        break;
                case 'n':
                        arg_steps = (unsigned) atoi(optarg);
                        if (arg_steps < 1 || arg_steps > 200)
                                arg_steps = 15;
                        break;
                case 'd':
                        arg_dir = strdup(optarg);
                        break;
                case 'o':
                        arg_old_steps = (unsigned) atoi(optarg);
                        arg_old_steps_set = true;
                        break;
                default:
                        return 2;
                }
        trace_set_enabled(true);
        bool own_dir = !arg_dir;
        if (own_dir && !(arg_dir = strdup(mkdtemp(tmpl) ?: "")))
                return 1;
        if (isempty(arg_dir))
                return 1;

        printf("# per-step daemon cost in ms: the step's changes + breakers, the checkpoint, the changes since base + "
               "breakers; medians of %u steps (wall clock, and CPU time of the process and its children)\n", arg_steps);
        printf("# baselines on the same tree: git add -A && git write-tree (for the resets: git reset --hard of the same "
               "change); git status --porcelain; the change lists as every step made them before (libgit2's walk, "
               "twice a step); ratios of CPU times\n");
        printf("%7s  %-34s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "files", "step", "wall", "wall p90", "cpu",
               "add wall", "add cpu", "ratio", "stat wall", "stat cpu", "ratio", "old wall", "old cpu", "ratio");

        int ret = 0;
        _cleanup_free_ char *list = strdup(sizes);
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                unsigned files = (unsigned) atoi(tok);
                if (files < 10)
                        continue;
                int r = bench_size(files);
                if (r < 0) {
                        fprintf(stderr, "%u files: %s\n", files, strerror(-r));
                        ret = 1;
                }
        }
        if (own_dir)
                (void) sh("rm -rf '%s'", arg_dir);
        free(arg_dir);
        return ret;
}
