/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The end of a task's work: the final commit, the summary, and the push and
 * pull request its spec asks for, which run in a worker thread. The task
 * succeeds even when the push or the pull request fails (its Reason then
 * says what failed): the work is done and delivered in the factory. */

#include "agent-run.h"

/* Delivers the run's task, which is in state delivering. Ends in state
 * succeeded, or failed if the final commit or the summary cannot be made. */
void delivery_start(AgentRun *run);
