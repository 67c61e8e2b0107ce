/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The review stage, between the agent's accepted finish and delivery: the
 * secret scan, the checkers, the dependency and coverage checks of the
 * review engine (src/review/) run on the task's change base..checkpoint.
 * Findings are journaled, kept in the task directory (review.json, so they
 * survive a restart), shown as the task's Findings property, and written in
 * the summary; an error stops the task for a person with the breaker the
 * engine names. Approving lets delivery go on; rejecting sends the findings
 * (redacted: a secret's value is never kept anywhere) back to the model,
 * and the stage runs again after its next finish. */

#include <stdbool.h>

#include "agent-run.h"
#include "agent.h"
#include "finding.h"
#include "task.h"

#define REVIEW_STAGE_FILE "review.json"
#define REVIEW_STAGE_BASE_COVERAGE_FILE "coverage-base"
/* Bounds of what the stage reads: a coverage report, a manifest, the
 * stdout of one checker. */
#define REVIEW_STAGE_REPORT_MAX (32U * 1024U * 1024U)
#define REVIEW_STAGE_MANIFEST_MAX (16U * 1024U * 1024U)
#define REVIEW_STAGE_CHECKER_OUTPUT_MAX (8U * 1024U * 1024U)

/* After the baseline test run: keeps the base tree's coverage report (if
 * the task names one and the test command wrote it) in the task directory,
 * for the comparison at the end, in a job of the task's queue; done(run)
 * follows (at once if no job could be started), unless the run is stopped
 * meanwhile. Failures only lose the comparison. */
typedef void (*review_coverage_done_t)(AgentRun *run);
void review_stage_keep_base_coverage(AgentRun *run, review_coverage_done_t done);

/* Runs the stage (run->phase PHASE_REVIEW until it is done); it ends with
 * progress.reviewed set and agent_schedule(), or the task stopped by a
 * breaker, or failed. */
void review_stage_start(AgentRun *run);

/* From task_unpaused(): the analysis' result that came back while the task
 * was paused goes on now. Returns true if there was one. */
bool review_stage_take_held(AgentRun *run);


/* A person's decision on a breaker of the stage: on approval the stage
 * counts as passed; on rejection the model must go on (progress.finished
 * cleared) and ret_text tells it what the review found. 0 when the breaker
 * is not one of the stage's. */
int review_stage_decide(Task *t, bool approve, char **ret_text);

/* "Agentfab-Review: N errors, M warnings" for the delivered tip, NULL when
 * the stage did not run. */
int review_stage_trailers(Task *t, char ***ret);

/* The summary's (and pull request's) "## Review" section, from the task
 * directory dir_fd; NULL when the stage did not run. Thread-safe: the
 * summary is made in the task's job queue. */
int review_stage_markdown(int dir_fd, char **ret);

bool breaker_is_review(const char *breaker);

/* Frees what a stopped run's review left (run->review). */
struct ReviewJob;
void review_stage_job_free(struct ReviewJob *j);
