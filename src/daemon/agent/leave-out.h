/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "agent-run.h"
#include "ledger.h"

/* What a checkpoint of the run leaves out (ledger.h, LedgerLeaveOut):
 * agentfab.conf's LeaveOut= and LeaveOutBinaries=, and the task's progress
 * (when its tests ran, what the agent wrote, what it keeps). Copies, for a
 * job: the run may change while the job works. Freed with
 * ledger_leave_out_done(). */
int agent_leave_out(AgentRun *run, LedgerLeaveOut *ret);

/* In the job's thread: o, with the leave-out: names of the base's
 * .agentfab.md added, set on l before it stages. */
int leave_out_apply(Ledger *l, LedgerLeaveOut *o);
