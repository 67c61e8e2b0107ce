/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The delivery summary (summary.md): what was done, the steps, the tests,
 * the breakers and approvals, the budget used and what a person should
 * still confirm. It is the pull request's body too. */

#include "agent-run.h"
#include "task.h"

/* The text of summary.md (TASK_SUMMARY_FILE) of the run's task, for the
 * caller to write; diffstat and checkpoints (as ledger_checkpoints() gives
 * them) may be NULL. */
int summary_text(AgentRun *run, const char *diffstat, json_object *checkpoints, char **ret, size_t *ret_size);

/* The pull request's body: the summary, bounded and valid UTF-8. */
int summary_pull_request_body(AgentRun *run, char **ret);

/* The summary of t (Markdown), once written: -ENOENT before. */
int summary_read(Task *t, char **ret);
