/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the bus asks of a task's ledger outside its run: its exports, its
 * base, its checkpoints, and a reset by hand. Each opens the ledger itself.
 * Exports, commit lists and resets run in worker threads, queued with the
 * task's other jobs (task-job.h), and answer their call when done. */

#include <sys/types.h>
#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "task.h"

/* Export(): answers message with the task's branch as a readable fd,
 * "bundle", "mbox" or "diff", once made. 1: queued; negative: refused
 * (error set), nothing queued. */
int task_branch_export(Task *t, sd_bus_message *message, const char *format, sd_bus_error *error);

/* The commit the task's branch started from. -EBUSY while a job of the
 * task is at work on its ledger. */
int task_branch_base_commit(Task *t, char ret[static 41]);

/* Checkpoints as JSON [{step, commit, subject}], read from the ledger once
 * for each tip of the branch and kept (keyed by task_branch_checkpoints_key());
 * while a job of the task is at work on it, the list read last (-EBUSY if none). */
int task_branch_checkpoints(Task *t, json_object **ret);
char *task_branch_checkpoints_key(const Task *t);
/* The list read in a worker right after the commit of the tip that the
 * task's progress names now. */
void task_branch_checkpoints_set(Task *t, json_object *list);

/* ListCommits(): answers message with every commit on the task's branch,
 * base..tip, as a(sus) (commit, step: 0 without an Agentfab-Step
 * trailer, subject), for an audit; read in the task's job queue. 1:
 * queued or answered; negative: refused (error set). */
#define TASK_BRANCH_COMMITS_MAX 100000U
int task_branch_list_commits(Task *t, sd_bus_message *message, sd_bus_error *error);

/* ResetTo() of a failed task: its workspace and branch go back to rev (a
 * checkpoint's commit id, maybe abbreviated, or "base"), its progress says
 * so and the model is told; message is answered with the checkpoint's step
 * (0: base) and the full commit id, and the journal names the tip the
 * branch had. The task's progress is saved before the workspace is reset.
 * 1: queued; negative: refused (error set). */
int task_branch_reset_to(Task *t, sd_bus_message *message, const char *rev, uid_t uid, sd_bus_error *error);
