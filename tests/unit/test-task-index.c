/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tap.h"
#include "task-index.h"
#include "task.h"

#define N 12

static Task *tasks[N];

static Task *make(unsigned i, TaskState s) {
        char id[AGENTFAB_TASK_ID_LEN + 1];
        Task *t = NULL;

        snprintf(id, sizeof(id), "%012x", i);
        if (task_new(&t, id) < 0)
                return NULL;
        t->state = s;
        t->position = i;
        return t;
}

/* Whether collecting states gives exactly the tasks of those states, in
 * their position order (ListTasks()' order), as a walk of all would. */
static bool collect_matches_walk(const TaskIndex *x, TaskStateMask states) {
        _cleanup_free_ Task **a = NULL;
        size_t n = 0, k = 0;

        if (task_index_collect(x, states, &a, &n) < 0)
                return false;
        for (size_t i = 0; i < N; i++) {
                if (!(states & TASK_STATE_MASK(tasks[i]->state)))
                        continue;
                if (k >= n || a[k] != tasks[i])
                        return false;
                k++;
        }
        return k == n && n == task_index_count(x, states);
}

int main(void) {
        TaskIndex x = {};
        TaskStateMask m = 0;

        /* The names on the bus: every state's own name, nothing else. */
        for (TaskState s = 0; s < _TASK_STATE_MAX; s++) {
                m = 0;
                CHECK(task_state_mask_add_name(&m, task_state_to_string(s)) == 0 && m == TASK_STATE_MASK(s),
                      "'%s' names its state", task_state_to_string(s));
        }
        m = TASK_STATE_MASK(TASK_QUEUED);
        CHECK(task_state_mask_add_name(&m, "bogus") == -EINVAL && m == TASK_STATE_MASK(TASK_QUEUED),
              "an unknown name is refused and changes nothing");
        CHECK_ERRNO(task_state_mask_add_name(&m, ""), -EINVAL, "an empty name is refused");
        CHECK_ERRNO(task_state_mask_add_name(&m, "Queued"), -EINVAL, "names are case-sensitive, as State is");

        /* "agentfabctl list" shows what is not finished: paused and waiting
         * tasks included, the three final states not. */
        TaskStateMask u = task_state_mask_unfinished();
        CHECK(u & TASK_STATE_MASK(TASK_PAUSED) && u & TASK_STATE_MASK(TASK_AWAITING_APPROVAL) &&
              u & TASK_STATE_MASK(TASK_QUEUED) && !(u & TASK_STATE_MASK(TASK_SUCCEEDED)) &&
              !(u & TASK_STATE_MASK(TASK_FAILED)) && !(u & TASK_STATE_MASK(TASK_CANCELLED)),
              "unfinished: every state but succeeded, failed and cancelled");
        CHECK_INT_EQ(task_state_mask_active(), (TASK_STATE_MASK(TASK_PREPARING) | TASK_STATE_MASK(TASK_RUNNING) |
                                                TASK_STATE_MASK(TASK_DELIVERING)), "active: preparing, running, delivering");

        /* Tasks added in the order of their positions, over all states. */
        for (unsigned i = 0; i < N; i++) {
                tasks[i] = make(i, (TaskState) (i % _TASK_STATE_MAX));
                if (!tasks[i])
                        return 1;
                task_index_add(&x, tasks[i]);
        }
        CHECK_INT_EQ(task_index_count(&x, TASK_STATE_MASK_ALL), N, "every task counted once");
        CHECK_INT_EQ(task_index_count(&x, TASK_STATE_MASK(TASK_QUEUED)), 2, "two queued (positions 0 and 9)");
        CHECK(collect_matches_walk(&x, task_state_mask_unfinished()), "unfinished: as a walk of all finds");
        CHECK(collect_matches_walk(&x, TASK_STATE_MASK_ALL), "all states: every task, in position order");

        /* States change in any order: a task must move with them, and the
         * answer keep the position order although it entered its list last. */
        tasks[0]->state = TASK_CANCELLED;
        task_index_update(&x, tasks[0]);
        tasks[7]->state = TASK_QUEUED;          /* cancelled -> queued: never made, the index need not know */
        task_index_update(&x, tasks[7]);
        tasks[6]->state = TASK_QUEUED;          /* failed -> queued: Resume() */
        task_index_update(&x, tasks[6]);
        tasks[2]->state = TASK_PAUSED;
        task_index_update(&x, tasks[2]);
        task_index_update(&x, tasks[2]);        /* twice: nothing moves */
        CHECK_INT_EQ(task_index_count(&x, TASK_STATE_MASK(TASK_QUEUED)), 3, "queued: 6, 7, 9");
        CHECK(collect_matches_walk(&x, TASK_STATE_MASK(TASK_QUEUED)), "queued in position order after the moves");
        CHECK(collect_matches_walk(&x, task_state_mask_unfinished()), "unfinished after the moves");
        CHECK(collect_matches_walk(&x, TASK_STATE_MASK(TASK_CANCELLED) | TASK_STATE_MASK(TASK_FAILED)),
              "two final states at once");
        CHECK_INT_EQ(task_index_count(&x, TASK_STATE_MASK_ALL), N, "still every task once");

        /* Nothing in a state: no array, no error. */
        _cleanup_free_ Task **none = NULL;
        size_t n = 1;
        CHECK(task_index_collect(&x, 0, &none, &n) == 0 && !none && n == 0,
              "an empty set of states: nothing");

        /* The first, the last and a middle one of a list removed. */
        task_index_remove(&x, tasks[9]);
        task_index_remove(&x, tasks[6]);
        task_index_remove(&x, tasks[6]);        /* not indexed any more: nothing */
        CHECK(task_index_count(&x, TASK_STATE_MASK(TASK_QUEUED)) == 1 && x.head[TASK_QUEUED] == tasks[7] &&
              x.tail[TASK_QUEUED] == tasks[7], "queued: 7 alone after two removals");
        for (unsigned i = 0; i < N; i++)
                task_index_remove(&x, tasks[i]);
        CHECK_INT_EQ(task_index_count(&x, TASK_STATE_MASK_ALL), 0, "all removed");
        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (x.head[s] || x.tail[s])
                        CHECK(false, "list of %s not empty", task_state_to_string(s));
        for (unsigned i = 0; i < N; i++)
                task_free(tasks[i]);
        return tap_done();
}
