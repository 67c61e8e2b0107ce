/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>

typedef enum TaskState {
        TASK_QUEUED,
        TASK_PREPARING,
        TASK_RUNNING,
        TASK_AWAITING_APPROVAL,
        TASK_DELIVERING,
        TASK_SUCCEEDED,
        TASK_FAILED,
        TASK_CANCELLED,
        TASK_PAUSED,               /* by Pause(): its sandbox frozen, nothing counts */
        _TASK_STATE_MAX,
        _TASK_STATE_INVALID = -EINVAL,
} TaskState;

const char *task_state_to_string(TaskState s);
TaskState task_state_from_string(const char *s);

/* Finished for good: no transition leads out of it except an explicit Resume() of a failed task. */
bool task_state_is_final(TaskState s);

/* The daemon is doing work for the task: it must not exit while one is in this state. */
bool task_state_is_active(TaskState s);

/* A person may amend the task's requirement (goal, acceptance criteria) in
 * this state: no step is in flight, and the model hears of the change
 * before its next call. */
bool task_state_may_amend(TaskState s);

/* The state machine: the only transitions the daemon will make. */
bool task_state_transition_allowed(TaskState from, TaskState to);
