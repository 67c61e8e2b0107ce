/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "task-state.h"

typedef struct Task Task;

/* The manager's tasks by state: one list for each state, with its length.
 * A busy factory keeps every task it ever ran (thousands, most of them
 * finished), while a client asks many times a second for the few that are
 * not finished: whatever asks for the tasks of some states walks those
 * lists only, and counting the active or unfinished ones walks nothing.
 * No D-Bus here (manager-dbus.c answers ListTasksFiltered() with it). */
typedef struct TaskIndex {
        Task *head[_TASK_STATE_MAX];
        Task *tail[_TASK_STATE_MAX];
        size_t count[_TASK_STATE_MAX];
} TaskIndex;

/* A set of states, one bit each. */
typedef unsigned TaskStateMask;
#define TASK_STATE_MASK(s) (1U << (s))
#define TASK_STATE_MASK_ALL ((1U << _TASK_STATE_MAX) - 1U)
/* Every state that is not final: what "agentfabctl list" shows. */
TaskStateMask task_state_mask_unfinished(void);
TaskStateMask task_state_mask_active(void);

/* Adds the state named to *mask; an unknown name is -EINVAL and leaves
 * *mask as it was. */
int task_state_mask_add_name(TaskStateMask *mask, const char *name);

/* Links t into the list of t->state, at its end. */
void task_index_add(TaskIndex *x, Task *t);
/* Moves t to the list of its state now, if that changed since it was
 * added or last updated: to be called after every change of t->state. */
void task_index_update(TaskIndex *x, Task *t);
void task_index_remove(TaskIndex *x, Task *t);

size_t task_index_count(const TaskIndex *x, TaskStateMask states);

/* The tasks in the given states, in the order of their position (the
 * order ListTasks() gives), in an array the caller frees; *ret is NULL
 * when none are. Costs what is in those states only. */
int task_index_collect(const TaskIndex *x, TaskStateMask states, Task ***ret, size_t *ret_n);

/* Each task of state s, in the order it entered it; the body must not
 * change any task's state. */
#define TASK_INDEX_FOREACH(t, x, s) for (Task *t = (x)->head[s]; t; t = t->state_next)
