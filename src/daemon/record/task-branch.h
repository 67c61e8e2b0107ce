/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a person asks of a task's branch outside its run: its exports, its
 * base, its checkpoints, its commits, and a reset by hand. Each opens the
 * ledger itself. Exports, commit lists and resets run in worker threads,
 * queued with the task's other jobs (task-job.h), and tell their caller
 * when done. */

#include <json-c/json.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "task.h"

/* What a job found, for its caller. */
typedef struct TaskBranchResult {
        int fd;                    /* an export, readable from its start; the caller dups it */
        json_object *commits;      /* ListCommits(): [{commit, step, subject}], NULL no ledger yet */
        unsigned step;             /* a reset: the checkpoint's step (0: base) */
        const char *commit;        /* and its full commit id */
} TaskBranchResult;

/* Called once, on the loop, when the job is done: r < 0 with error set
 * (t NULL: the daemon is stopping), or r >= 0 and the result. */
typedef void (*task_branch_done_t)(Task *t, int r, sd_bus_error *error, const TaskBranchResult *result,
                                   void *userdata);

/* The caller of a job: once the job is queued, userdata is the job's, and
 * free_userdata(userdata) follows done(), or replaces it if the job is
 * dropped. */
typedef struct TaskBranchCaller {
        task_branch_done_t done;
        void *userdata;
        void (*free_userdata)(void *userdata);
} TaskBranchCaller;

/* The task's branch as a readable fd (result->fd), "bundle", "mbox" or
 * "diff", once made. 1: queued; negative: refused (error set), nothing
 * queued, and caller's userdata still its own. */
int task_branch_export(Task *t, const char *format, const TaskBranchCaller *caller, sd_bus_error *error);

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

/* Every commit on the task's branch, base..tip (result->commits: commit,
 * step: 0 without an Agentfab-Step trailer, subject), for an audit; read
 * in the task's job queue. 1: queued; 0: the task has no branch yet, so
 * no commits, and done() is not called; negative: refused (error set). */
#define TASK_BRANCH_COMMITS_MAX 100000U
int task_branch_list_commits(Task *t, const TaskBranchCaller *caller, sd_bus_error *error);

/* ResetTo() of a failed task: its workspace and branch go back to rev (a
 * checkpoint's commit id, maybe abbreviated, or "base"), its progress says
 * so and the model is told; the caller hears the checkpoint's step (0:
 * base) and the full commit id, and the journal names the tip the branch
 * had. The task's progress is saved before the workspace is reset. 1:
 * queued; negative: refused (error set). */
int task_branch_reset_to(Task *t, const char *rev, uid_t uid, const TaskBranchCaller *caller, sd_bus_error *error);
