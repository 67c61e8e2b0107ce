/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <json-c/json.h>
#include <systemd/sd-bus.h>

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

#define TASK_CONVERSATION_FILE "conversation.jsonl"
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
 * task must fail instead (too many rejections), with *ret_reason set. */
int agent_decide(Task *t, bool approve, const char *comment, uid_t uid, char **ret_reason);

/* A failed task is resumed: it starts again from its last checkpoint. */
void agent_prepare_resume(Task *t);
