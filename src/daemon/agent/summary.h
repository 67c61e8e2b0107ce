/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The delivery summary (summary.md): what was done, the steps, the tests,
 * the breakers and approvals, the budget used and what a person should
 * still confirm. It is the pull request's body too. */

#include "agent-run.h"
#include "task.h"

/* What the summary needs of the run's task, copied on the loop (diffstat
 * and checkpoints, as ledger_checkpoints() gives them, may be NULL), so
 * that summary_text() can run in a worker thread: it reads the task's
 * events and review records, up to tens of MiB on a long task. */
typedef struct SummaryInput SummaryInput;
int summary_input_new(AgentRun *run, const char *diffstat, json_object *checkpoints, SummaryInput **ret);
SummaryInput *summary_input_free(SummaryInput *in);
DEFINE_TRIVIAL_CLEANUP_FUNC(SummaryInput *, summary_input_free);

/* The text of summary.md (TASK_SUMMARY_FILE), for the caller to write:
 * valid UTF-8, no control character but newline and tab. */
int summary_text(const SummaryInput *in, char **ret, size_t *ret_size);

/* summary_text() written atomically into the task's directory. */
int summary_write(const SummaryInput *in);

/* The pull request's body: the summary of task id, read from its
 * directory dir_fd, bounded and valid UTF-8. Blocks: for a worker thread. */
int summary_pull_request_body(int dir_fd, const char *id, char **ret);
