/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The optional reviewer model ([Review] Model=): after the review engine
 * passed, a model (its profile may differ from the worker's) gets the goal,
 * the acceptance criteria, the diff (bounded) and the findings, and answers
 * through one tool, review_verdict: approve, or request changes with
 * comments tied to files and lines. "Request changes" goes back to the
 * worker as a message, up to [Review] MaxReviewRounds=; past that the task
 * waits for a person (breaker review). The verdict is journaled, kept in
 * the task directory (reviewer.json), written in the summary and, when it
 * approved, named on the delivered tip (Agentfab-Reviewed-By:). */

#include "agent-run.h"
#include "finding.h"

#define REVIEW_MODEL_FILE "reviewer.json"
#define REVIEW_MODEL_DIFF_MAX (64U * 1024U)
#define REVIEW_MODEL_COMMENTS_MAX 50U

/* Whether the run's task gets a reviewer model (configured, and not a replay). */
bool review_model_wanted(AgentRun *run);

/* Calls the reviewer model (run->phase PHASE_REVIEW); ends with
 * progress.reviewed and agent_schedule(), the worker told what to change,
 * or a breaker. */
void review_model_start(AgentRun *run, const char *diff, const FindingList *findings);

/* The tool's schema (for tests and the request). */
json_object *review_model_tools(void);

/* Parses the arguments of a review_verdict call into a record
 * {"verdict":"approve"|"request_changes","summary":..,"comments":[{"file","line","comment"}]},
 * every string escaped and bounded; -EBADMSG for anything else. */
int review_model_parse_verdict(const char *arguments, json_object **ret);

/* The summary's "### Reviewer model" part, from the task directory
 * dir_fd; NULL when none answered. Thread-safe. */
int review_model_markdown(int dir_fd, char **ret);

/* "Agentfab-Reviewed-By: PROFILE/MODEL" when the reviewer model approved. */
int review_model_trailers(Task *t, char ***ret);
