/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "macro.h"
#include "string-table.h"
#include "task-state.h"

static const char *const task_state_table[_TASK_STATE_MAX] = {
        [TASK_QUEUED]            = "queued",
        [TASK_PREPARING]         = "preparing",
        [TASK_RUNNING]           = "running",
        [TASK_AWAITING_APPROVAL] = "awaiting-approval",
        [TASK_DELIVERING]        = "delivering",
        [TASK_SUCCEEDED]         = "succeeded",
        [TASK_FAILED]            = "failed",
        [TASK_CANCELLED]         = "cancelled",
        [TASK_PAUSED]            = "paused",
};

DEFINE_STRING_TABLE_LOOKUP(task_state, TaskState);

bool task_state_is_final(TaskState s) {
        return s == TASK_SUCCEEDED || s == TASK_FAILED || s == TASK_CANCELLED;
}

bool task_state_is_active(TaskState s) {
        return s == TASK_PREPARING || s == TASK_RUNNING || s == TASK_DELIVERING;
}

bool task_state_transition_allowed(TaskState from, TaskState to) {
        /* Rows: from; bits: to. Every non-final state may fail or be cancelled.
         * A failed task may be resumed (back to queued, from its last checkpoint);
         * succeeded and cancelled tasks are final. A task being prepared or at
 * work may be paused, and goes back to where it was when resumed. */
#define B(s) (1u << (s))
        static const unsigned allowed[_TASK_STATE_MAX] = {
                [TASK_QUEUED]            = B(TASK_PREPARING) | B(TASK_FAILED) | B(TASK_CANCELLED),
                [TASK_PREPARING]         = B(TASK_QUEUED) | B(TASK_RUNNING) | B(TASK_PAUSED) | B(TASK_FAILED) | B(TASK_CANCELLED),
                [TASK_RUNNING]           = B(TASK_AWAITING_APPROVAL) | B(TASK_DELIVERING) | B(TASK_PAUSED) | B(TASK_FAILED) |
                                           B(TASK_CANCELLED),
                [TASK_AWAITING_APPROVAL] = B(TASK_RUNNING) | B(TASK_FAILED) | B(TASK_CANCELLED),
                [TASK_DELIVERING]        = B(TASK_SUCCEEDED) | B(TASK_FAILED) | B(TASK_CANCELLED),
                [TASK_SUCCEEDED]         = 0,
                [TASK_FAILED]            = B(TASK_QUEUED),
                [TASK_CANCELLED]         = 0,
                [TASK_PAUSED]            = B(TASK_PREPARING) | B(TASK_RUNNING) | B(TASK_FAILED) | B(TASK_CANCELLED),
        };
#undef B
        if (from < 0 || from >= _TASK_STATE_MAX || to < 0 || to >= _TASK_STATE_MAX)
                return false;
        return allowed[from] & (1u << to);
}

bool task_state_may_amend(TaskState s) {
        return s == TASK_AWAITING_APPROVAL || s == TASK_FAILED;
}
