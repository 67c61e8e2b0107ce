/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "task-index.h"
#include "task.h"

TaskStateMask task_state_mask_unfinished(void) {
        TaskStateMask m = 0;

        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (!task_state_is_final(s))
                        m |= TASK_STATE_MASK(s);
        return m;
}

TaskStateMask task_state_mask_active(void) {
        TaskStateMask m = 0;

        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (task_state_is_active(s))
                        m |= TASK_STATE_MASK(s);
        return m;
}

int task_state_mask_add_name(TaskStateMask *mask, const char *name) {
        TaskState s = task_state_from_string(name);

        if (s < 0)
                return -EINVAL;
        *mask |= TASK_STATE_MASK(s);
        return 0;
}

static bool state_is_valid(TaskState s) {
        return s >= 0 && s < _TASK_STATE_MAX;
}

void task_index_add(TaskIndex *x, Task *t) {
        TaskState s = t->state;

        /* A state out of range (never made by the state machine, nor
         * accepted by task_load()) would index past the lists. */
        if (!state_is_valid(s))
                s = TASK_FAILED;
        t->indexed_state = s;
        t->state_next = NULL;
        t->state_prev = x->tail[s];
        if (x->tail[s])
                x->tail[s]->state_next = t;
        else
                x->head[s] = t;
        x->tail[s] = t;
        x->count[s]++;
        t->indexed = true;
}

void task_index_remove(TaskIndex *x, Task *t) {
        TaskState s = t->indexed_state;

        if (!t->indexed)
                return;
        if (t->state_prev)
                t->state_prev->state_next = t->state_next;
        else
                x->head[s] = t->state_next;
        if (t->state_next)
                t->state_next->state_prev = t->state_prev;
        else
                x->tail[s] = t->state_prev;
        x->count[s]--;
        t->state_prev = t->state_next = NULL;
        t->indexed = false;
}

void task_index_update(TaskIndex *x, Task *t) {
        if (t->indexed && t->indexed_state == t->state)
                return;
        task_index_remove(x, t);
        task_index_add(x, t);
}

size_t task_index_count(const TaskIndex *x, TaskStateMask states) {
        size_t n = 0;

        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (states & TASK_STATE_MASK(s))
                        n += x->count[s];
        return n;
}

static int cmp_position(const void *a, const void *b) {
        const Task *x = *(Task *const *) a, *y = *(Task *const *) b;

        return x->position < y->position ? -1 : x->position > y->position;
}

int task_index_collect(const TaskIndex *x, TaskStateMask states, Task ***ret, size_t *ret_n) {
        size_t n = task_index_count(x, states), k = 0;
        Task **a = NULL;

        if (n > 0) {
                a = calloc(n, sizeof(Task *));
                if (!a)
                        return -ENOMEM;
                for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                        if (states & TASK_STATE_MASK(s))
                                for (Task *t = x->head[s]; t && k < n; t = t->state_next)
                                        a[k++] = t;
                /* Each list is in the order its tasks entered the state:
                 * sorted, the answer keeps ListTasks()' order, whatever
                 * happened meanwhile. */
                qsort(a, k, sizeof(Task *), cmp_position);
        }
        *ret = a;
        *ret_n = k;
        return 0;
}
