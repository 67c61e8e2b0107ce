/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "factory.h"
#include "finding.h"
#include "task.h"

/* The agent at work on one task: from queued through preparing (workspace,
 * sandbox, a baseline test run) and running (a plan, then one step after
 * another: a model call, its tool calls, a checkpoint) to delivering. Every
 * wait is asynchronous on the manager's event loop.
 *
 * What survives a crash is only what the state file acknowledges: the step
 * counter, the checkpoint commit and the number of conversation messages.
 * A restarted daemon resets the workspace to that checkpoint, cuts the
 * conversation to that length and redoes the step in flight, so no step is
 * lost and none is done twice. */

#define TASK_TRANSCRIPT_FILE   "transcript.jsonl"
#define TASK_SUMMARY_FILE      "summary.md"
#define TASK_WORKSPACE_DIR     "workspace"

/* Starts or resumes work on t, which is queued, preparing, running or
 * delivering. Does nothing if it is at work already. */
int agent_start(Task *t);

/* The task left the active states (cancelled, failed by a request): stop
 * its model call, end its sandbox. Safe from any callback. */
void agent_stop(Task *t);


/* The task's ledger jobs are done (task-job.h): its agent may go on. */
void agent_wake(Task *t);

/* At shutdown: frees the task's agent at once. */
void agent_destroy(Task *t);

/* Approve() or Reject() of a task paused by a breaker, before its state
 * becomes running again: clears the breaker, extends what was exhausted, or
 * undoes the step that tripped it and tells the model why. Returns 1 if the
 * task must fail instead (too many rejections), with *ret_reason set.
 * limits: what the approval sets (agent_limits_format(); NULL: nothing),
 * listed with it on the delivered tip. */
int agent_decide(Task *t, bool approve, const char *comment, uid_t uid, const char *limits, char **ret_reason);

/* agent-budget.c. An approval's limits (approve --limit=NAME=N, as the
 * task's limits hold them): each a budget an approval may set, given once,
 * above what the task has used. 0, or an error set (InvalidArgs). Nothing
 * is changed: the polkit check comes after it. */
int agent_limits_check(Task *t, char **names, const uint64_t *values, sd_bus_error *error);
/* "max_cpu_sec=600, max_cost=0.50", for the journal and the approvals list. */
int agent_limits_format(char **names, const uint64_t *values, char **ret);
/* Sets them as the task's limits (no extension on top) and journals it. */
void agent_limits_apply(Task *t, char **names, const uint64_t *values, uid_t uid);
/* A plain approval of the budget breaker: each used-up CPU, network or
 * cost budget gets as much again. */
void agent_budget_extend(Task *t);

/* A failed task is resumed: it starts again from its last checkpoint. */
void agent_prepare_resume(Task *t);

/* ---- Pausing (freezer.c) ----
 * A paused task, or one that waits for approval, has its whole sandbox
 * frozen: no CPU, memory kept, its clocks stopped (freezer.h says how). */

/* "frozen", "running" (a sandbox that is not frozen) or "none". */
const char *task_freezer_state(Task *t);

/* Pause() of a running or preparing task, before its state becomes paused:
 * freezes its sandbox, if it has one (failing with the reason if neither
 * systemd nor the cgroup can), stops its model call and its clock. */
int task_pause(Task *t, sd_bus_error *error);

/* Resume() of a paused task, before its state goes back: thaws the
 * sandbox of its agent (a parked one is thawed by the agent that takes it). */
int task_unpause(Task *t, sd_bus_error *error);

/* After that state change: the agent carries on where it stood. */
void task_unpaused(Task *t);

/* The task's state changed: the parked sandbox of a task that no longer
 * waits or is paused ends, the MaxPausedSec= timer goes. */
void freezer_task_state_changed(Task *t);

/* A frozen sandbox keeps the daemon from exiting when idle. */
bool freezer_task_holds_sandbox(Task *t);

/* At start: takes up the frozen sandboxes an earlier instance left in the
 * fd store (fds named "sandbox-ID-PID-UID-BUSY"), parked on their tasks if
 * these are still paused or waiting for approval, and the running ones
 * ("running-ID-PID-UID-0") of tasks still at work, parked for their next
 * agent, once each has been checked (sandbox_session_adopt()); the others
 * are closed (the reap at start stops their scopes). Takes the fds. */
void freezer_adopt_stored(Factory *f, int *fds, char **names, size_t n);

/* ---- The review stage (review-stage.c) ---- */

/* The findings last kept for t; an empty list when the stage has not run. */
int review_stage_load(Task *t, FindingList *ret);

/* ---- Publishing a step (agent-publish.c) ---- */

/* On a host of a fleet a step counts once the fleet's database holds it,
 * not once the state file does: the room above (src/daemon/fleet/) sets a
 * publisher, and each step the state file acknowledged waits for it before
 * anything follows from the step (its report, its breakers, the next
 * model call). Without a publisher (one host) nothing waits: the step goes
 * on as the state file acknowledged it. */

typedef struct AgentPublish {
        uint64_t cookie;           /* given back to agent_published() */
        unsigned step;
        const char *commit;        /* the step's checkpoint; NULL if it made none */
        unsigned first_message;    /* the conversation's index of lines[0] */
        char **lines;              /* the conversation's lines the database may not hold yet, NULL-terminated */
        size_t n_lines;
} AgentPublish;

/* Returns 0 once publishing is under way (agent_published() follows,
 * from the event loop, never from within), or a negative errno: the task
 * fails. */
typedef int (*agent_publish_t)(Task *t, const AgentPublish *p, void *userdata);

void agent_set_publisher(agent_publish_t publish, void *userdata);
bool agent_publishing(void);

/* The publisher's answer for p->cookie: 0, the step counts and the run
 * goes on; -ESTALE, another host holds the task: the run stays where it
 * is and the publisher stops it; another error fails the task. A cookie
 * that no run waits for any more (it was stopped) is ignored. */
void agent_published(Task *t, uint64_t cookie, int r);
