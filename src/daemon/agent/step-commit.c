/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent.h"
#include "leave-out.h"
#include "step-commit.h"
#include "string-util.h"
#include "task-job.h"

#define STEP_BODY_FILES_MAX 50U

StepCommit *step_commit_free(StepCommit *c) {
        if (!c)
                return NULL;
        free(c->task_id);
        free(c->subject);
        free(c->body);
        free(c->model);
        free(c->test_command);
        free(c->user_name);
        free(c->environment);
        free(c->reference);
        strv_free(c->trailers);
        strv_free(c->commands);
        free(c->before);
        free(c->review_seen);
        free(c->review_diff);
        ledger_free(c->ledger);
        free(c->error);
        file_changes_free(c->step_changes, c->n_step_changes);
        file_changes_free(c->all_changes, c->n_all_changes);
        free(c->diffstat);
        json_object_put(c->checkpoints);
        strv_free(c->left_out);
        ledger_leave_out_done(&c->leave_out);
        free(c);
        return NULL;
}

StepCommit *step_commit_steal(StepCommit *c) {
        StepCommit *k = malloc(sizeof(StepCommit));

        if (!k)
                return NULL;
        *k = *c;
        *c = (StepCommit) {};
        return k;
}

/* Appends the files the step changed to the commit body. */
static int step_body_add_changes(StepCommit *c) {
        char *buf = NULL;
        size_t size = 0;

        FILE *f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        fputs(strempty(c->body), f);
        if (c->n_step_changes > 0)
                fputs(c->body ? "\nFiles:\n" : "Files:\n", f);
        for (size_t i = 0; i < c->n_step_changes && i < STEP_BODY_FILES_MAX; i++) {
                const FileChange *fc = &c->step_changes[i];
                fprintf(f, "  %c %s%s%s\n", fc->status, fc->old_path ?: "", fc->old_path ? " -> " : "", fc->path);
        }
        if (c->n_step_changes > STEP_BODY_FILES_MAX)
                fprintf(f, "  and %zu more\n", c->n_step_changes - STEP_BODY_FILES_MAX);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        free(c->body);
        c->body = buf;
        return 0;
}

static int step_commit_work(StepCommit *c);

/* In the worker thread; its trace goes back with the result. */
static int step_commit_run(void *p) {
        StepCommit *c = p;
        int r;

        /* What another job did on this thread before (a reset traces its
         * phases too) is not this step's. */
        (void) trace_take((TracePhase[TRACE_PHASES_MAX]) {});
        r = step_commit_work(c);
        c->n_trace = trace_take(c->trace);
        return r;
}

/* The commit itself: a step's checkpoint, or the delivery's evidence
 * commit (ledger_record(): the same tree, never "nothing to commit"). */
static int step_commit_commit(StepCommit *c) {
        Checkpoint cp = {
                .task_id = c->task_id,
                .step = c->step,
                .subject = c->subject,
                .body = c->body,
                .model = c->model,
                .commands = c->commands,
                .tests = c->tests,
                .test_command = c->test_command,
                .test_exit = c->test_exit,
                .uid = c->uid,
                .environment = c->environment,
                .user_name = c->user_name,
                .reference = c->reference,
                .requirement = c->requirement,
                .trailers = c->trailers,
                .have_test_count = c->have_test_count,
                .test_count = c->test_count,
        };
        int r;

        r = c->record ? ledger_record(c->ledger, &cp, c->commit, &c->error) :
                        ledger_checkpoint(c->ledger, &cp, c->commit, &c->error);
        c->result = r;
        if (r < 0)
                return r;
        c->committed = c->record || r > 0;
        return 0;
}

static int step_commit_work(StepCommit *c) {
        int r;

        r = leave_out_apply(c->ledger, &c->leave_out);
        if (r < 0)
                return r;

        if (c->changes) {
                /* What the step changed: for a reviewer reading git log, and
                 * for the breakers' path rules (the commit leaves the
                 * workspace as it is). */
                c->step_known = ledger_changes(c->ledger, c->before, &c->step_changes, &c->n_step_changes) >= 0;
                if (c->step_known && step_body_add_changes(c) < 0)
                        return -ENOMEM;
        }

        if (!c->no_commit) {
                r = step_commit_commit(c);
                if (r < 0)
                        return r;
        }

        /* Asked again if it failed before the commit: the breakers' path
         * rules need the step's changes. */
        if (c->changes && !c->step_known)
                c->step_known = ledger_changes(c->ledger, c->before, &c->step_changes, &c->n_step_changes) >= 0;
        /* Everything since the base, for the breakers' size rules. */
        if (c->changes)
                c->all_result = ledger_changes(c->ledger, NULL, &c->all_changes, &c->n_all_changes);
        /* A finish is shown its whole change once before it is accepted
         * (agent-loop.c), and again whenever the tip moved since. */
        if (c->review) {
                c->review_result = ledger_head(c->ledger, c->review_tip);
                if (c->review_result >= 0 && !streq_ptr(c->review_seen, c->review_tip))
                        c->review_result = ledger_review_diff(c->ledger, c->review_max, &c->review_diff);
        }
        /* What the delivery's summary and its journal entry say of the branch. */
        if (c->delivery) {
                c->head_result = ledger_head(c->ledger, c->head);
                (void) ledger_diffstat(c->ledger, &c->diffstat);
        }
        /* The list of checkpoints: for the summary, and for the Checkpoints
         * property, which every GetAll() asks for and which follows each
         * new tip; read here rather than on the loop when the bus asks. */
        if (c->delivery || c->committed)
                (void) ledger_checkpoints(c->ledger, &c->checkpoints);
        c->n_left_out = ledger_take_left_out(c->ledger, &c->left_out);
        return 0;
}

static void step_commit_job_free(void *p) {
        step_commit_free(p);
}

static void on_step_commit_done(Task *t, int r, void *p, void *userdata) {
        StepCommit *c = p;
        AgentRun *run = userdata;
        step_commit_done_t done = run->commit_done;

        (void) t;
        if (c->result >= 0 && r < 0)
                c->result = r;
        run->commit_done = NULL;
        if (!agent_job_ended(run, &c->ledger))
                return;
        if (run->task->state == TASK_PAUSED) {
                /* Paused while the job ran: what it did counts only once
                 * the task is resumed (a breaker, the review, the next model
                 * call must not follow meanwhile). The phase stays, so that
                 * nothing else starts. The job frees c: the results move. */
                StepCommit *k = step_commit_steal(c);
                if (!k)
                        return agent_fail(run, "Out of memory.");
                run->held = k;
                run->held_done = done;
                run->phase = PHASE_LEDGER;
                return;
        }
        done(run, c);
}

bool step_commit_take_held(AgentRun *run) {
        _cleanup_(step_commit_freep) StepCommit *c = NULL;
        step_commit_done_t done;

        if (!run || !run->held)
                return false;
        c = TAKE_PTR(run->held);
        done = TAKE_PTR(run->held_done);
        run->phase = PHASE_IDLE;
        done(run, c);
        return true;
}

int step_commit_start(AgentRun *run, StepCommit *c, step_commit_done_t done) {
        int r;

        assert(run->ledger && !run->job);
        r = agent_job_start(run, "checkpoint", step_commit_run, on_step_commit_done, step_commit_job_free, c, &c->ledger,
                            PHASE_LEDGER);
        if (r < 0)
                return r;
        run->commit_done = done;
        return 0;
}

typedef struct ResetJob {
        Ledger *ledger;
        char commit[41];           /* empty: the base */
} ResetJob;

static void reset_job_free(void *p) {
        ResetJob *j = p;

        if (!j)
                return;
        ledger_free(j->ledger);
        free(j);
}

static int reset_job_run(void *p) {
        ResetJob *j = p;
        int r;

        if (!j->commit[0]) {
                r = ledger_base(j->ledger, j->commit);
                if (r < 0)
                        return r;
        }
        return ledger_reset(j->ledger, j->commit);
}

static void on_reset_done(Task *t, int r, void *p, void *userdata) {
        ResetJob *j = p;
        AgentRun *run = userdata;
        run_reset_done_t done = run->reset_done;

        (void) t;
        run->reset_done = NULL;
        if (agent_job_ended(run, &j->ledger))
                done(run, r);
}

int step_reset_start(AgentRun *run, const char *commit, run_reset_done_t done) {
        ResetJob *j;
        int r;

        assert(run->ledger && !run->job);
        j = calloc(1, sizeof(ResetJob));
        if (!j)
                return -ENOMEM;
        if (commit)
                (void) snprintf(j->commit, sizeof(j->commit), "%s", commit);
        r = agent_job_start(run, "reset", reset_job_run, on_reset_done, reset_job_free, j, &j->ledger, PHASE_LEDGER);
        if (r < 0)
                return r;
        run->reset_done = done;
        return 0;
}

/* ---- closing the run's ledger ---- */

/* Closing a ledger writes its index back (the stat data for the next run)
 * and frees the repository: on a 100,000-file tree that is megabytes
 * written and hashed, and tens of milliseconds. It is a job of the task's
 * queue like any other, so that nothing opens the ledger meanwhile. */
typedef struct CloseJob {
        Ledger *ledger;            /* NULL once closed */
} CloseJob;

static int close_job_run(void *p) {
        CloseJob *j = p;

        j->ledger = ledger_free(j->ledger);
        return 0;
}

static void close_job_done(Task *t, int r, void *p, void *userdata) {
        (void) t, (void) r, (void) p, (void) userdata;
}

static void close_job_free(void *p) {
        CloseJob *j = p;

        if (!j)
                return;
        ledger_free(j->ledger);    /* never run: the task went away */
        free(j);
}

void step_commit_close_ledger(Task *t, Ledger **l) {
        CloseJob *j;

        if (!*l || !t->factory)
                return;
        j = calloc(1, sizeof(CloseJob));
        if (!j)
                return;            /* closed where it is, later */
        j->ledger = *l;
        if (task_job_enqueue(t, "ledger close", close_job_run, close_job_done, close_job_free, j, NULL, NULL) < 0) {
                free(j);
                return;
        }
        *l = NULL;
}
