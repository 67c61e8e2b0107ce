/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "audit.h"
#include "breakers.h"
#include "dependencies.h"
#include "fs-util.h"
#include "json-util.h"
#include "leave-out.h"
#include "log.h"
#include "review-model.h"
#include "review-settings.h"
#include "review-stage.h"
#include "review.h"
#include "string-util.h"
#include "task-job.h"
#include "task-store.h"
#include "workspace-path.h"

#define REVIEW_SETTINGS_PATH ".agentfab.md"
#define REVIEW_STAGE_FILE_MAX (64U * 1024U * 1024U)

static void review_job_free(void *p);

bool breaker_is_review(const char *breaker) {
        Breaker b = breaker ? breaker_from_string(breaker) : _BREAKER_INVALID;
        return IN_SET(b, BREAKER_SECRET, BREAKER_VULNERABLE_DEPENDENCY, BREAKER_REVIEW, BREAKER_COVERAGE_DROPPED);
}

/* Reads a regular file below the workspace, never following a symlink out
 * of it (workspace_open()). */
static int read_workspace_file(int ws_fd, const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int dir_fd = -EBADF;
        _cleanup_free_ char *name = NULL;
        int r;

        r = workspace_open_parent(ws_fd, path, false, &dir_fd, &name);
        if (r < 0)
                return r;
        return read_file_at(dir_fd, name, max, ret, ret_size);
}

/* The base commit's .agentfab.md. SECURITY: the base's, never the task's:
 * a model must not be able to allow itself what it added. */
static int read_base_settings(Ledger *l, char **ret, size_t *ret_size) {
        int r = ledger_read_file(l, false, REVIEW_SETTINGS_PATH, REVIEW_SETTINGS_SIZE_MAX, ret, ret_size);
        if (IN_SET(r, -ENOENT, -EISDIR, -ELOOP, -EFBIG)) {
                *ret = NULL;
                *ret_size = 0;
                return 0;
        }
        return r;
}

/* The coverage report to compare: the task's spec key, else the base's
 * .agentfab.md coverage-report:. */
static int coverage_report_path(Task *t, const ReviewRepoSettings *s, char **ret) {
        const char *p = t->spec.coverage_report ?: (s ? s->coverage_report : NULL);

        *ret = NULL;
        if (!p || workspace_path_check(p) < 0)
                return 0;
        *ret = strdup(p);
        return *ret ? 0 : -ENOMEM;
}

/* Reading the base's .agentfab.md and the report, and writing the copy
 * (with its fsync), is disk work: a job of the task's queue with the run's
 * ledger borrowed (run->phase PHASE_LEDGER meanwhile). */
typedef struct CoverageJob {
        Ledger *ledger;
        int dir_fd;
        char *task_id;
        char *spec_path;           /* the task's coverage-report, or NULL */
} CoverageJob;

static void coverage_job_free(void *p) {
        CoverageJob *j = p;

        if (!j)
                return;
        ledger_free(j->ledger);
        safe_close(j->dir_fd);
        free(j->task_id);
        free(j->spec_path);
        free(j);
}

static int coverage_job_run(void *p) {
        _cleanup_(review_repo_settings_done) ReviewRepoSettings s = {};
        _cleanup_free_ char *settings = NULL, *report = NULL;
        CoverageJob *j = p;
        const char *path;
        size_t size = 0;
        int r;

        if (read_base_settings(j->ledger, &settings, &size) >= 0 && settings)
                (void) review_repo_settings_parse(settings, size, &s);
        path = j->spec_path ?: s.coverage_report;
        if (!path || workspace_path_check(path) < 0)
                return 0;
        r = read_workspace_file(ledger_workspace_fd(j->ledger), path, REVIEW_STAGE_REPORT_MAX, &report, &size);
        if (r < 0) {
                log_info_errno(r, "Task '%s': the baseline wrote no coverage report '%s' (%m): coverage is not compared.",
                               j->task_id, path);
                (void) unlinkat(j->dir_fd, REVIEW_STAGE_BASE_COVERAGE_FILE, 0);
                return 0;
        }
        r = write_file_atomic(j->dir_fd, REVIEW_STAGE_BASE_COVERAGE_FILE, report, size, 0600);
        if (r < 0)
                log_warning_errno(r, "Task '%s': cannot keep the base's coverage report, ignoring: %m", j->task_id);
        return 0;
}

static void on_coverage_done(Task *task, int r, void *p, void *userdata) {
        CoverageJob *j = p;
        AgentRun *run = userdata;
        review_coverage_done_t done = run->coverage_done;

        (void) task, (void) r;
        run->coverage_done = NULL;
        if (agent_job_ended(run, &j->ledger) && done)
                done(run);
}

void review_stage_keep_base_coverage(AgentRun *run, review_coverage_done_t done) {
        Task *t = run->task;
        CoverageJob *j;
        int r;

        if (!run->ledger || run->job)
                return done(run);
        j = calloc(1, sizeof(CoverageJob));
        if (!j)
                return done(run);   /* failures only lose the comparison */
        j->dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3);
        j->task_id = strdup(t->id);
        j->spec_path = t->spec.coverage_report ? strdup(t->spec.coverage_report) : NULL;
        if (j->dir_fd < 0 || !j->task_id || (t->spec.coverage_report && !j->spec_path)) {
                coverage_job_free(j);
                return done(run);
        }
        r = agent_job_start(run, "coverage", coverage_job_run, on_coverage_done, coverage_job_free, j, &j->ledger,
                            PHASE_LEDGER);
        if (r < 0)
                return done(run);
        run->coverage_done = done;
}

/* ---- The stage ---- */

typedef struct ReviewJob {
        /* Borrowed from the run while the job runs (nothing else touches
         * the ledger in PHASE_REVIEW); given back in done(), freed with the
         * job if the run went away meanwhile. */
        Ledger *ledger;
        int dir_fd;
        char *task_id;
        /* Inputs. */
        char *settings;                 /* the base's .agentfab.md; NULL none */
        size_t settings_size;
        char *coverage_path;
        char **secret_scan_ignore;
        char *vulnerability_database;
        double coverage_tolerance;
        char **checker_names;           /* the commands, as their names */
        char **checker_outputs;         /* their stdout, in order */
        size_t *checker_sizes;
        size_t n_checkers;
        /* The checker in flight, on the loop. */
        char **commands;
        size_t next;
        char **changed;                 /* files the change added or modified */
        char *out;
        size_t out_size;
        bool out_truncated;
        bool want_diff;                 /* for the reviewer model */
        uint64_t start_usec;            /* CLOCK_MONOTONIC, for the journal */
        char *commit;                   /* what is reviewed: the checkpoint, or "base" */
        /* Result. */
        char *diff;                     /* base..tip, at most REVIEW_MODEL_DIFF_MAX bytes */
        ReviewResult result;
        int save_result;                /* of writing the findings' file */
        char *error;
} ReviewJob;

void review_stage_job_free(struct ReviewJob *j) {
        review_job_free(j);
}

static void review_job_free(void *p) {
        ReviewJob *j = p;

        if (!j)
                return;
        ledger_free(j->ledger);
        safe_close(j->dir_fd);
        free(j->task_id);
        free(j->settings);
        free(j->coverage_path);
        strv_free(j->secret_scan_ignore);
        free(j->vulnerability_database);
        strv_free(j->checker_names);
        for (size_t i = 0; i < j->n_checkers; i++)
                free(j->checker_outputs[i]);
        free(j->checker_outputs);
        free(j->checker_sizes);
        strv_free(j->commands);
        strv_free(j->changed);
        free(j->out);
        review_result_done(&j->result);
        free(j->diff);
        free(j->commit);
        free(j->error);
        free(j);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ReviewJob *, review_job_free);

/* The diff for the reviewer model, cut at REVIEW_MODEL_DIFF_MAX. */
static int review_job_diff(ReviewJob *j) {
        _cleanup_close_ int fd = memfd_create("agentfab-review-diff", MFD_CLOEXEC);
        ssize_t n;
        int r;

        if (fd < 0)
                return -errno;
        r = ledger_export_diff(j->ledger, fd);
        if (r < 0)
                return r;
        j->diff = malloc(REVIEW_MODEL_DIFF_MAX + 1);
        if (!j->diff)
                return -ENOMEM;
        n = pread(fd, j->diff, REVIEW_MODEL_DIFF_MAX, 0);
        if (n < 0)
                return -errno;
        j->diff[n] = 0;
        return 0;
}

/* In the worker thread: everything the engine needs, read from the ledger
 * and the task directory, then the engine itself. */
static int review_job_analyse(ReviewJob *j) {
        LedgerFileLines *lines = NULL;
        ReviewFile *files = NULL;
        ReviewManifest *manifests = NULL;
        ReviewCheckerOutput *checkers = NULL;
        char **old_texts = NULL, **new_texts = NULL;
        _cleanup_free_ char *base_cov = NULL, *final_cov = NULL;
        size_t n_lines = 0, n_manifests = 0, base_cov_size = 0, final_cov_size = 0;
        ReviewCoverageReports cov = {};
        int r;

        r = ledger_added_lines(j->ledger, &lines, &n_lines);
        if (r == -E2BIG) {
                /* Fail closed: a change too big to read is not passed on a part. */
                r = finding_list_add(&j->result.findings, FINDING_REVIEW_ERROR, FINDING_ERROR, NULL, 0, "too-large",
                                     "The change adds more than %u MiB of text: it was not reviewed.",
                                     LEDGER_ADDED_BYTES_MAX / 1024U / 1024U);
                if (r < 0)
                        return r;
                j->result.tripped = true;
                j->result.breaker = REVIEW_BREAKER_REVIEW;
                j->result.reason = strdup("the change is too large to review");
                return j->result.reason ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;

        /* Same layout (ledger.h says so); copied field by field all the same. */
        files = calloc(MAX(n_lines, (size_t) 1), sizeof(ReviewFile));
        manifests = calloc(MAX(n_lines, (size_t) 1), sizeof(ReviewManifest));
        old_texts = calloc(MAX(n_lines, (size_t) 1), sizeof(char *));
        new_texts = calloc(MAX(n_lines, (size_t) 1), sizeof(char *));
        checkers = calloc(MAX(j->n_checkers, (size_t) 1), sizeof(ReviewCheckerOutput));
        if (!files || !manifests || !old_texts || !new_texts || !checkers) {
                r = -ENOMEM;
                goto finish;
        }
        for (size_t i = 0; i < n_lines; i++) {
                files[i] = (ReviewFile) {
                        .path = lines[i].path,
                        .lines = (const ReviewLine *) lines[i].lines,
                        .n_lines = lines[i].n_lines,
                };
                if (manifest_kind_from_path(lines[i].path) < 0)
                        continue;
                size_t os = 0, ns = 0;
                int k = ledger_read_file(j->ledger, false, lines[i].path, REVIEW_STAGE_MANIFEST_MAX, &old_texts[i], &os);
                if (k < 0 && k != -ENOENT)
                        old_texts[i] = NULL;
                k = ledger_read_file(j->ledger, true, lines[i].path, REVIEW_STAGE_MANIFEST_MAX, &new_texts[i], &ns);
                if (k < 0)
                        continue;
                manifests[n_manifests++] = (ReviewManifest) {
                        .path = lines[i].path,
                        .old_text = old_texts[i], .old_size = os,
                        .new_text = new_texts[i], .new_size = ns,
                };
        }
        for (size_t i = 0; i < j->n_checkers; i++)
                checkers[i] = (ReviewCheckerOutput) {
                        .name = j->checker_names[i],
                        .output = j->checker_outputs[i],
                        .size = j->checker_sizes[i],
                };

        if (j->coverage_path) {
                (void) read_file_at(j->dir_fd, REVIEW_STAGE_BASE_COVERAGE_FILE, REVIEW_STAGE_REPORT_MAX, &base_cov,
                                    &base_cov_size);
                (void) read_workspace_file(ledger_workspace_fd(j->ledger), j->coverage_path, REVIEW_STAGE_REPORT_MAX,
                                           &final_cov, &final_cov_size);
                cov = (ReviewCoverageReports) {
                        .path = j->coverage_path,
                        .base = base_cov, .base_size = base_cov_size,
                        .final = final_cov, .final_size = final_cov_size,
                };
        }

        ReviewConfig c = {
                .secret_scan_ignore = j->secret_scan_ignore,
                .vulnerability_database = j->vulnerability_database,
                .coverage_tolerance = j->coverage_tolerance,
        };
        ReviewInput in = {
                .files = files, .n_files = n_lines,
                .manifests = manifests, .n_manifests = n_manifests,
                .checkers = checkers, .n_checkers = j->n_checkers,
                .coverage = j->coverage_path ? &cov : NULL,
                .repo_settings = j->settings, .repo_settings_size = j->settings_size,
        };
        r = review_run(&c, &in, &j->result);
        if (r >= 0 && j->want_diff && !j->result.tripped)
                r = review_job_diff(j);

finish:
        for (size_t i = 0; i < n_lines; i++) {
                free(old_texts ? old_texts[i] : NULL);
                free(new_texts ? new_texts[i] : NULL);
        }
        free(old_texts);
        free(new_texts);
        free(files);
        free(manifests);
        free(checkers);
        ledger_file_lines_free(lines, n_lines);
        return r;
}

static int review_stage_save(int dir_fd, const ReviewResult *res, const char *commit) {
        _cleanup_json_ json_object *j = NULL;
        const char *text;

        if (review_result_to_json(res, &j) < 0 || json_add_string(j, "commit", commit) < 0)
                return -ENOMEM;
        text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
        return write_file_atomic(dir_fd, REVIEW_STAGE_FILE, text, strlen(text), 0600);
}

/* In the worker thread: the analysis, then its findings' file (not on the
 * loop: an atomic write is two fsyncs). */
static int review_job_run(void *p) {
        ReviewJob *j = p;
        int r;

        r = review_job_analyse(j);
        if (r < 0)
                return r;
        j->save_result = review_stage_save(j->dir_fd, &j->result, j->commit);
        return 0;
}

static Breaker breaker_from_review(ReviewBreaker b) {
        switch (b) {
        case REVIEW_BREAKER_SECRET: return BREAKER_SECRET;
        case REVIEW_BREAKER_VULNERABLE_DEPENDENCY: return BREAKER_VULNERABLE_DEPENDENCY;
        case REVIEW_BREAKER_COVERAGE_DROPPED: return BREAKER_COVERAGE_DROPPED;
        default: return BREAKER_REVIEW;
        }
}

static void review_stage_done(AgentRun *run, ReviewJob *j, int r);

static void on_review_done(Task *task, int r, void *p, void *userdata) {
        ReviewJob *j = p;
        AgentRun *run = userdata;
        Task *t = run->task;

        (void) task;
        if (!agent_job_ended(run, &j->ledger))
                return;
        if (t->state == TASK_PAUSED) {
                /* Paused while the analysis ran: its result counts once the
                 * task is resumed (a breaker cannot trip, nor the reviewer
                 * model be called, while the task says "paused"). The job
                 * frees j: the result moves. */
                ReviewJob *k = malloc(sizeof(ReviewJob));
                if (!k)
                        return agent_fail(run, "Out of memory.");
                *k = *j;
                *j = (ReviewJob) { .dir_fd = -EBADF };
                run->held_review = k;
                run->held_review_result = r;
                run->phase = PHASE_REVIEW;
                return;
        }
        review_stage_done(run, j, r);
}

bool review_stage_take_held(AgentRun *run) {
        _cleanup_(review_job_freep) ReviewJob *j = NULL;

        if (!run || !run->held_review)
                return false;
        j = TAKE_PTR(run->held_review);
        run->phase = PHASE_IDLE;
        review_stage_done(run, j, run->held_review_result);
        return true;
}

static void review_stage_done(AgentRun *run, ReviewJob *j, int r) {
        Task *t = run->task;
        const FindingList *l = &j->result.findings;
        size_t n_errors, n_warnings;
        const char *commit;

        if (r < 0)
                return agent_fail(run, "The review could not run: %s", strerror(-r));

        commit = j->commit;
        if (j->save_result < 0)
                return agent_fail(run, "Cannot keep the review's findings: %s", strerror(-j->save_result));

        for (char **w2 = j->result.warnings; w2 && *w2; w2++)
                log_notice("Task '%s': .agentfab.md of the base: %s", t->id, *w2);
        for (size_t i = 0; i < l->n; i++)
                audit_review_finding(t, finding_kind_to_string(l->items[i].kind),
                                     finding_severity_to_string(l->items[i].severity), l->items[i].file,
                                     l->items[i].line, l->items[i].rule, l->items[i].message);
        n_errors = finding_list_count(l, _FINDING_KIND_INVALID, FINDING_ERROR);
        n_warnings = finding_list_count(l, _FINDING_KIND_INVALID, FINDING_WARNING) - n_errors;
        audit_reviewed(t, commit, agent_now_usec() - j->start_usec, n_errors, n_warnings,
                       j->result.tripped ? review_breaker_to_string(j->result.breaker) : NULL, j->result.reason);
        task_changed(t, TASK_CHANGE_FINDINGS);

        if (j->result.tripped)
                return agent_trip(run, breaker_from_review(j->result.breaker), j->result.reason,
                                  t->progress.checkpoint);
        if (review_model_wanted(run))
                return review_model_start(run, j->diff, l);

        _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};
        agent_progress_ack_init(run, &ack);
        ack.set_reviewed = ack.reviewed = true;
        agent_save_progress_then(run, &ack, NULL, 0, NULL, agent_saved_go_on);
}

static void review_stage_analyse(AgentRun *run, ReviewJob *j) {
        int r;

        j->commit = strdup(run->task->progress.checkpoint ?: "base");
        if (!j->commit) {
                review_job_free(j);
                return agent_fail(run, "Out of memory.");
        }
        /* In the task's job queue: nothing else works on its ledger meanwhile. */
        r = agent_job_start(run, "review", review_job_run, on_review_done, review_job_free, j, &j->ledger, PHASE_REVIEW);
        if (r < 0)
                return agent_fail(run, "Cannot start the review: %s", strerror(-r));
}

static void review_stage_next_checker(AgentRun *run, ReviewJob *j);

static void on_checker_output(const char *stream, const char *data, size_t size, void *userdata) {
        AgentRun *run = userdata;
        ReviewJob *j = run->review;

        /* stdout only: that is where SARIF and gcc-style lines go. */
        if (!j || !streq(stream, "stdout") || j->out_truncated)
                return;
        if (j->out_size + size > REVIEW_STAGE_CHECKER_OUTPUT_MAX) {
                j->out_truncated = true;
                return;
        }
        char *n = realloc(j->out, j->out_size + size + 1);
        if (!n) {
                j->out_truncated = true;
                return;
        }
        memcpy(n + j->out_size, data, size);
        j->out_size += size;
        n[j->out_size] = 0;
        j->out = n;
}

static void on_checker_done(SandboxSession *s, int error, const ExecResult *result, void *userdata) {
        AgentRun *run = userdata;
        ReviewJob *j = run->review;
        Task *t = run->task;

        (void) s;
        if (!t) {
                return;
        }
        run->phase = PHASE_IDLE;
        agent_resources_sample(run);
        if (error < 0)
                return agent_fail(run, "Cannot run a checker in the sandbox: %s", strerror(-error));
        audit_command(t, t->progress.step + 1, "checker", j->commands[j->next], result->status, result->signal,
                      result->timed_out, result->duration_usec, result->output_bytes);

        /* Its output, whatever the exit status: checkers exit non-zero when
         * they find something. One that was cut, died, or could not be run
         * at all (126, 127: not found or not executable, which would
         * otherwise pass as "no findings") is a review error, through output
         * the engine cannot read: fail closed, so that breaking the checker
         * is no way around it. */
        size_t i = j->n_checkers;
        if (j->out_truncated || result->timed_out || result->signal > 0 || IN_SET(result->status, 126, 127)) {
                j->checker_outputs[i] = strdup("{\"not\": \"valid checker output\"}");
                j->checker_sizes[i] = j->checker_outputs[i] ? strlen(j->checker_outputs[i]) : 0;
        } else {
                j->checker_outputs[i] = j->out ? TAKE_PTR(j->out) : strdup("");
                j->checker_sizes[i] = j->out_size;
        }
        if (!j->checker_outputs[i])
                return agent_fail(run, "Out of memory.");
        j->n_checkers++;
        j->out = mfree_ptr(j->out);
        j->out_size = 0;
        j->out_truncated = false;
        j->next++;
        review_stage_next_checker(run, j);
}

static char *shell_quote_files(char **files) {
        _cleanup_free_ char *s = strdup("");

        for (char **f = files; s && f && *f; f++) {
                _cleanup_free_ char *q = NULL, *n = NULL;
                size_t k = 0;

                q = malloc(strlen(*f) * 4 + 3);
                if (!q)
                        return NULL;
                q[k++] = '\'';
                for (const char *c = *f; *c; c++) {
                        if (*c == '\'') {
                                memcpy(q + k, "'\\''", 4);
                                k += 4;
                        } else
                                q[k++] = *c;
                }
                q[k++] = '\'';
                q[k] = 0;
                if (asprintf(&n, "%s%s%s", s, *s ? " " : "", q) < 0)
                        return NULL;
                free(s);
                s = TAKE_PTR(n);
        }
        return TAKE_PTR(s);
}

/* "{files}" in a checker command becomes the changed files, each quoted for
 * the shell; they are in $AGENTFAB_CHANGED_FILES too, one a line. */
static char *checker_command(const char *command, char **changed) {
        _cleanup_free_ char *files = shell_quote_files(changed);
        const char *p;
        char *s;

        if (!files)
                return NULL;
        p = strstr(command, "{files}");
        if (!p)
                return strdup(command);
        if (asprintf(&s, "%.*s%s%s", (int) (p - command), command, files, p + strlen("{files}")) < 0)
                return NULL;
        return s;
}

static void review_stage_next_checker(AgentRun *run, ReviewJob *j) {
        _cleanup_free_ char *command = NULL, *list = NULL, *env_files = NULL, *banner = NULL;
        int r;

        if (j->next >= strv_length(j->commands)) {
                run->review = NULL;
                return review_stage_analyse(run, j);
        }
        /* > 0: the sandbox is being made; agent_advance() calls
         * review_stage_start() again when it is, which goes on here. */
        if (agent_open_sandbox(run) != 0)
                return;
        command = checker_command(j->commands[j->next], j->changed);
        list = strv_join(j->changed, "\n");
        if (!command || !list || asprintf(&env_files, "AGENTFAB_CHANGED_FILES=%s", list) < 0)
                return agent_fail(run, "Out of memory.");
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", command, NULL };
        char *env[] = { env_files, NULL };
        if (asprintf(&banner, "\n$ %s    # agentfabd's review: checker\n", command) >= 0)
                (void) write(run->log_fd, banner, strlen(banner));
        ExecRequest req = {
                .argv = argv,
                .env = env,
                .timeout_usec = agent_command_timeout_usec(run),
        };
        run->task->progress.commands++;
        run->phase = PHASE_REVIEW;
        r = sandbox_session_exec(run->session, &req, run->log_fd, run->factory->config.output_keep_bytes,
                                 on_checker_output, on_checker_done, run);
        if (r < 0) {
                run->phase = PHASE_IDLE;
                return agent_fail(run, "Cannot run a checker in the sandbox: %s", strerror(-r));
        }
}

/* What the stage starts from, read in the task's job queue with the run's
 * ledger borrowed: the base's .agentfab.md (a blob of the base commit:
 * opening the object database and reading it is disk work) and, when there
 * are checkers to run, the files they look at: those added or modified
 * since the base, whose names a shell word can carry (on a big repository
 * listing them takes a while). */
typedef struct ChangesJob {
        Ledger *ledger;
        LedgerLeaveOut leave_out;  /* the change is what a checkpoint would record */
        bool admin_checkers;       /* the configuration names checkers */
        char *settings;            /* results */
        size_t settings_size;
        ReviewRepoSettings repo;
        char **changed;
} ChangesJob;

static void changes_job_free(void *p) {
        ChangesJob *c = p;

        if (!c)
                return;
        ledger_free(c->ledger);
        ledger_leave_out_done(&c->leave_out);
        free(c->settings);
        review_repo_settings_done(&c->repo);
        strv_free(c->changed);
        free(c);
}

static int changes_job_run(void *p) {
        ChangesJob *c = p;
        FileChange *changes = NULL;
        size_t n_changes = 0;
        int r;

        r = read_base_settings(c->ledger, &c->settings, &c->settings_size);
        if (r < 0)
                return r;
        if (c->settings)
                (void) review_repo_settings_parse(c->settings, c->settings_size, &c->repo);
        if (!c->admin_checkers && strv_length(c->repo.checkers) == 0)
                return 0;

        r = leave_out_apply(c->ledger, &c->leave_out);
        if (r >= 0)
                r = ledger_changes(c->ledger, NULL, &changes, &n_changes);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_changes; i++)
                if (changes[i].status != 'D' && string_is_safe(changes[i].path, false) &&
                    strv_extend(&c->changed, changes[i].path) < 0) {
                        r = -ENOMEM;
                        break;
                }
        file_changes_free(changes, n_changes);
        return r;
}

/* The checkers to run, the administrator's then the repository's (its
 * base's), and where their outputs go. */
static int review_stage_setup(AgentRun *run, ReviewJob *j, ChangesJob *c) {
        Task *t = run->task;
        int r;

        j->settings = TAKE_PTR(c->settings);
        j->settings_size = c->settings_size;
        r = coverage_report_path(t, &c->repo, &j->coverage_path);
        if (r < 0)
                return r;
        for (char **k = c->repo.checkers; k && *k; k++)
                if (strv_extend(&j->commands, *k) < 0)
                        return -ENOMEM;
        size_t n = strv_length(j->commands);
        j->checker_outputs = calloc(MAX(n, (size_t) 1), sizeof(char *));
        j->checker_sizes = calloc(MAX(n, (size_t) 1), sizeof(size_t));
        if (!j->checker_outputs || !j->checker_sizes)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (strv_extend(&j->checker_names, j->commands[i]) < 0)
                        return -ENOMEM;
        j->changed = TAKE_PTR(c->changed);
        return 0;
}

static void on_changes_done(Task *task, int r, void *p, void *userdata) {
        ChangesJob *c = p;
        AgentRun *run = userdata;

        (void) task;
        if (!agent_job_ended(run, &c->ledger))
                return;
        if (r < 0)
                return agent_fail(run, "Cannot read the base's .agentfab.md or list the task's changes: %s", strerror(-r));
        r = review_stage_setup(run, run->review, c);
        if (r < 0)
                return agent_fail(run, "Cannot start the review: %s", strerror(-r));
        /* Paused meanwhile: task_unpaused() schedules the run, and
         * review_stage_start() goes on with the first checker. */
        if (run->task->state == TASK_PAUSED)
                return;
        review_stage_next_checker(run, run->review);
}

void review_stage_start(AgentRun *run) {
        _cleanup_(review_job_freep) ReviewJob *j = NULL;
        const Config *c = &run->factory->config;
        Task *t = run->task;
        ChangesJob *cj;
        int r;

        /* Back from waiting for the sandbox (or from a pause): the next checker. */
        if (run->review)
                return review_stage_next_checker(run, run->review);

        j = calloc(1, sizeof(ReviewJob));
        if (!j)
                return agent_fail(run, "Out of memory.");
        j->dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3);
        j->task_id = strdup(t->id);
        if (j->dir_fd < 0 || !j->task_id)
                return agent_fail(run, "Cannot start the review: %m");

        j->want_diff = review_model_wanted(run);
        /* A verdict of an earlier round is not this round's. */
        (void) unlinkat(run->dir_fd, REVIEW_MODEL_FILE, 0);

        for (char **g = c->secret_scan_ignore; g && *g; g++)
                if (strv_extend(&j->secret_scan_ignore, *g) < 0)
                        return agent_fail(run, "Out of memory.");
        j->coverage_tolerance = c->coverage_tolerance;
        if (c->vulnerability_database && !(j->vulnerability_database = strdup(c->vulnerability_database)))
                return agent_fail(run, "Out of memory.");
        for (char **k = c->checkers; k && *k; k++)
                if (strv_extend(&j->commands, *k) < 0)
                        return agent_fail(run, "Out of memory.");

        cj = calloc(1, sizeof(ChangesJob));
        if (!cj)
                return agent_fail(run, "Out of memory.");
        cj->admin_checkers = strv_length(c->checkers) > 0;
        if (agent_leave_out(run, &cj->leave_out) < 0) {
                changes_job_free(cj);
                return agent_fail(run, "Out of memory.");
        }
        r = agent_job_start(run, "review", changes_job_run, on_changes_done, changes_job_free, cj, &cj->ledger,
                            PHASE_REVIEW);
        if (r < 0)
                return agent_fail(run, "Cannot start the review: %s", strerror(-r));
        j->start_usec = agent_now_usec();
        run->review = TAKE_PTR(j);
}

/* ---- What the stage left ---- */

int review_stage_load(Task *t, FindingList *ret) {
        _cleanup_json_ json_object *j = NULL;
        json_object *findings;
        int r;

        *ret = (FindingList) {};
        r = task_read_json(t, REVIEW_STAGE_FILE, REVIEW_STAGE_FILE_MAX, &j);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(j, "findings", &findings))
                return -EBADMSG;
        return finding_list_from_json(findings, ret);
}

int review_stage_markdown(int dir_fd, char **ret) {
        _cleanup_(review_result_done) ReviewResult res = {};
        _cleanup_json_ json_object *j = NULL;
        json_object *findings;
        const char *breaker = NULL;
        int r;

        *ret = NULL;
        r = task_read_json_at(dir_fd, REVIEW_STAGE_FILE, REVIEW_STAGE_FILE_MAX, &j);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(j, "findings", &findings))
                return -EBADMSG;
        r = finding_list_from_json(findings, &res.findings);
        if (r < 0)
                return r;
        (void) json_get_string(j, "breaker", &breaker);
        if (breaker && review_breaker_from_string(breaker) >= 0) {
                res.tripped = true;
                res.breaker = review_breaker_from_string(breaker);
        }
        _cleanup_free_ char *md = NULL, *reviewer = NULL;
        r = review_result_to_markdown(&res, &md);
        if (r < 0)
                return r;
        r = review_model_markdown(dir_fd, &reviewer);
        if (r < 0)
                return r;
        if (asprintf(ret, "%s%s%s", md, reviewer ? "\n" : "", strempty(reviewer)) < 0)
                return -ENOMEM;
        return 0;
}

int review_stage_trailers(Task *t, char ***ret) {
        _cleanup_(finding_list_done) FindingList l = {};
        _cleanup_strv_free_ char **trailers = NULL;
        _cleanup_free_ char *s = NULL;
        size_t e, w;
        int r;

        *ret = NULL;
        if (!t->progress.reviewed)
                return 0;
        r = review_stage_load(t, &l);
        if (r < 0)
                return r;
        e = finding_list_count(&l, _FINDING_KIND_INVALID, FINDING_ERROR);
        w = finding_list_count(&l, _FINDING_KIND_INVALID, FINDING_WARNING) - e;
        r = review_model_trailers(t, &trailers);
        if (r < 0)
                return r;
        if (asprintf(&s, "Agentfab-Review: %zu error%s, %zu warning%s%s", e, e == 1 ? "" : "s", w, w == 1 ? "" : "s",
                     e > 0 ? " (approved by a person)" : "") < 0 ||
            strv_extend(&trailers, s) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(trailers);
        return 0;
}

int review_stage_decide(Task *t, bool approve, char **ret_text) {
        _cleanup_(finding_list_done) FindingList l = {};
        _cleanup_free_ char *md = NULL;
        int r;

        *ret_text = NULL;
        if (!breaker_is_review(t->progress.breaker))
                return 0;
        if (approve) {
                t->progress.reviewed = true;
                return 0;
        }
        /* Back to the model, with what it must fix. The findings hold no
         * secret's value (finding.h), only its redacted prefix. */
        t->progress.finished = false;
        t->progress.reviewed = false;
        r = review_stage_load(t, &l);
        if (r < 0)
                return r;
        r = finding_list_to_markdown(&l, "Review findings to fix", &md);
        if (r < 0)
                return r;
        if (asprintf(ret_text, "The review of your finished work found problems a person will not accept as they "
                     "are; your work stays in place. Fix them, run the tests and call finish again.\n\n%s", md) < 0)
                return -ENOMEM;
        return 1;
}
