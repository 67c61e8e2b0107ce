/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The agent's own work on its ledger, off the event loop (task-job.h): the
 * commit at a step's end with the change lists the commit body and the
 * breakers need, the delivery's final commit, its evidence commit and what
 * its summary reads of the branch (head, diffstat, checkpoints), and the reset of the workspace to the acknowledged
 * checkpoint when a run starts. The job borrows the run's Ledger while it
 * runs (run->ledger is NULL meanwhile, run->phase PHASE_LEDGER) and gives
 * it back before done() is called. If the run is stopped meanwhile, the job
 * finishes on its own data and frees the Ledger. Nothing here touches the
 * state file: what the job did counts only once done() has acknowledged
 * it, so a crash in the middle redoes the step from the last
 * acknowledgement (ledger_reset() takes the branch back). */

#include <json-c/json.h>
#include <stdbool.h>

#include "agent-run.h"
#include "ledger.h"
#include "trace.h"

typedef struct StepCommit {
        /* The checkpoint (copies: the run may be freed while the job runs). */
        char *task_id, *subject, *body, *model, *test_command, *user_name, *environment;
        char *reference;           /* Agentfab-Ref:, or NULL */
        LedgerLeaveOut leave_out;  /* set on the ledger before it stages (leave-out.h) */
        unsigned requirement;      /* Agentfab-Requirement: v<n> */
        char **trailers;           /* further "Agentfab-Key: value" lines, or NULL */
        const char *tests;         /* a literal */
        char **commands;
        unsigned step;
        int test_exit;
        uid_t uid;
        char *before;              /* the last acknowledged checkpoint; NULL: the base */
        bool have_test_count;      /* Agentfab-Tests: "..., N tests" */
        unsigned test_count;
        bool changes;              /* list the step's changes (into the body) and those since the base */
        bool delivery;             /* afterwards the head, the diffstat and the checkpoints */
        bool record;               /* ledger_record(): the evidence commit, same tree, not a step */
        bool no_commit;            /* nothing committed: only what delivery asks for */
        /* A finish: the whole diff against the base for the model to
         * review, unless the tip is review_seen (the tip it was shown last;
         * NULL none), at most review_max bytes. */
        bool review;
        char *review_seen;
        size_t review_max;

        /* Results, valid in done(). */
        Ledger *ledger;
        int result;                /* of ledger_checkpoint() */
        char *error;
        char commit[41];
        bool committed;
        bool step_known;           /* the step's changes could be listed */
        FileChange *step_changes;
        size_t n_step_changes;
        int all_result;            /* of the changes since the base */
        FileChange *all_changes;
        size_t n_all_changes;
        int head_result;
        char head[41];
        char *diffstat;
        json_object *checkpoints;
        char **left_out;           /* what the stages left out (ledger_take_left_out()) */
        int review_result;         /* with review: of the tip's and the diff's reading */
        char review_tip[41];
        char *review_diff;         /* NULL: nothing to review (no change, or review_seen) */
        size_t n_left_out;
        /* AGENTFAB_TRACE=1: when the step's end began, and the phases the
         * worker thread traced (trace.h keeps them per thread). */
        uint64_t trace_start;
        TracePhase trace[TRACE_PHASES_MAX];
        size_t n_trace;
        uint64_t save_usec;        /* the acknowledgement's write (agent-loop.c) */
} StepCommit;

StepCommit *step_commit_free(StepCommit *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(StepCommit *, step_commit_free);

/* Moves what c holds into a new StepCommit, for a done() that keeps it
 * past its return; c stays, empty. NULL: out of memory. */
StepCommit *step_commit_steal(StepCommit *c);

/* done() runs with the run's Ledger back; c is freed after it. */
typedef void (*step_commit_done_t)(AgentRun *run, StepCommit *c);
/* Takes c (also on failure). */
int step_commit_start(AgentRun *run, StepCommit *c, step_commit_done_t done);

/* From task_unpaused(): hands a step's end that came back while the task
 * was paused to its done(). Returns true if there was one. */
bool step_commit_take_held(AgentRun *run);

/* Resets the workspace and the branch to commit (NULL: the base). */
typedef void (*run_reset_done_t)(AgentRun *run, int r);
int step_reset_start(AgentRun *run, const char *commit, run_reset_done_t done);

/* Hands the ledger *l of a run that ends to t's job queue, to be closed
 * (its index written, the repository freed) in a worker thread; *l is
 * NULL then. Left as it is if that cannot be done. */
void step_commit_close_ledger(Task *t, Ledger **l);
