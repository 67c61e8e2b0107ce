/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The end of a task's work: the final commit, the summary, and the push and
 * pull request its spec asks for, which run in a worker thread. The task
 * succeeds even when the push or the pull request fails (its Reason then
 * says what failed): the work is done and delivered in the factory. */

#include "agent-run.h"

/* Delivers the run's task, which is in state delivering: commits what is
 * left in the workspace, runs the task's test command on the final tree in
 * the task's sandbox (PHASE_VERIFY), records the result on the branch as a
 * commit with the tip's own tree (Agentfab-Tests: pass (CMD, exit 0, N
 * tests), and delivery_extra_trailers()), writes the summary and pushes.
 * Ends in state succeeded, or failed if the tests fail on the final tree or
 * the final commit or the summary cannot be made. */
void delivery_start(AgentRun *run);

/* Further trailers for the delivered tip ("Agentfab-Key: value" each, see
 * Checkpoint.trailers): the review stage's result. *ret is NULL or a strv
 * the caller frees. Called once, after the tests passed on the final tree
 * and just before the tip is recorded. */
int delivery_extra_trailers(AgentRun *run, char ***ret);
