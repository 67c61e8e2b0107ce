/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the bus asks of a task's ledger outside its run: its exports, its
 * base, its checkpoints, and a reset by hand. Each opens the ledger itself. */

#include <sys/types.h>
#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "task.h"

/* An export of the task's branch as a readable fd: "bundle", "mbox" or "diff". */
int task_ledger_export(Task *t, const char *format, int *ret_fd, sd_bus_error *error);

/* The commit the task's branch started from. */
int task_ledger_base_commit(Task *t, char ret[static 41]);

/* Checkpoints as JSON [{step, commit, subject}], read from the ledger. */
int task_ledger_checkpoints(Task *t, json_object **ret);

/* Every commit on the task's branch, base..tip, as JSON [{commit, step
 * (absent without an Agentfab-Step trailer), subject}]: for an audit. */
#define TASK_LEDGER_COMMITS_MAX 100000U
int task_ledger_commits(Task *t, json_object **ret);

/* ResetTo() of a failed task: its workspace and branch go back to rev (a
 * checkpoint's commit id, maybe abbreviated, or "base"), its progress says
 * so and the model is told. Returns the checkpoint's step (0: base), the
 * full commit id and the tip the branch had (ret_undone). The task's
 * progress is saved before the workspace is reset. */
int task_ledger_reset_to(Task *t, const char *rev, uid_t uid, char ret_commit[static 41], char ret_undone[static 41],
                         sd_bus_error *error);
