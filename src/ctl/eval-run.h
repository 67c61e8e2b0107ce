/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "eval-corpus.h"

/* One run of one task of a corpus under one profile: its repository made
 * from the task's repo/, the task submitted over the bus as the calling
 * user, followed until it ends, and graded outside the agent's reach. */

typedef enum EvalOutcome {
        EVAL_PASSED,            /* delivered, and the grading command passed */
        EVAL_DECLINED,          /* the agent gave up a task that cannot be done: the right outcome */
        EVAL_TESTS,             /* delivered but the grade fails, or stopped by tests-failing */
        EVAL_BUDGET,            /* a budget ran out */
        EVAL_BREAKER,           /* another breaker stopped it for a person */
        EVAL_MALFORMED,         /* too many malformed replies */
        EVAL_GAVE_UP,           /* the agent gave up a task that can be done */
        EVAL_ERROR,             /* failed otherwise, cancelled, timed out, or not even submitted */
        _EVAL_OUTCOME_MAX,
        _EVAL_OUTCOME_INVALID = -EINVAL,
} EvalOutcome;

const char *eval_outcome_to_string(EvalOutcome o);
EvalOutcome eval_outcome_from_string(const char *s);

typedef struct EvalResult {
        const EvalTask *task;
        char *task_name;        /* as in the JSON (a compared report has no EvalTask) */
        char *profile;
        unsigned run;           /* 1..runs */
        bool solvable;          /* false: passed means the agent gave up */
        bool passed;
        bool person;            /* a person approved a stop or amended the requirement (the tip says) */
        EvalOutcome outcome;
        char *detail;           /* the breaker, the task's reason or the grade's last line */
        char *task_id, *state, *breaker, *model;
        uint32_t steps;
        uint64_t tokens, commands;
        double seconds;
} EvalResult;

void eval_result_done(EvalResult *r);
/* Whether the run ended (or could not start): not one left out by an
 * interruption. */
static inline bool eval_result_ended(const EvalResult *r) {
        return r->state || r->detail;
}

typedef enum EvalSandboxKind {
        EVAL_SANDBOX_AGENTFAB,  /* agentfab-sandbox(1) */
        EVAL_SANDBOX_BWRAP,     /* bwrap(1), where agentfab-sandbox cannot mount /proc */
} EvalSandboxKind;

typedef struct EvalContext {
        sd_bus *bus;
        const char *workdir;    /* private: one directory a run below it */
        const char *sandbox;    /* agentfab-sandbox */
        EvalSandboxKind sandbox_kind;
        bool ask_password;
        uint64_t timeout_usec;  /* a run that takes longer is cancelled */
        unsigned n_started;
} EvalContext;

typedef struct EvalRun {
        EvalResult *result;
        const char *model;      /* the profile submitted with */
        char *dir, *path;
        uint64_t start_usec;
        bool active;
        bool submitted;
} EvalRun;

/* Makes the run's repository and submits the task (model: the profile's
 * name to submit with). On failure the result says why and the run is not
 * active. Returns 0 or a negative errno for what stops the whole eval
 * (out of memory, refused by polkit). */
int eval_run_start(EvalContext *c, EvalRun *run, EvalResult *result, const char *model);
/* Looks at the task once: 0 while it goes on; 1 when it ended and the
 * result is complete (graded, and cancelled if it waited for a person). */
int eval_run_poll(EvalContext *c, EvalRun *run);
void eval_run_done(EvalRun *run);

/* Finds out which sandbox grades here: agentfab-sandbox if it can run a
 * command, else bwrap. Returns 0 or a negative errno (said why). */
int eval_sandbox_probe(EvalContext *c);
/* The command line that runs command in tree in that sandbox, with a timeout. */
int eval_sandbox_argv(const EvalContext *c, const char *tree, unsigned timeout_sec, const char *command, char ***ret);
