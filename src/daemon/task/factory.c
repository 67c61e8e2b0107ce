/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "factory.h"
#include "fs-util.h"
#include "time-util.h"

void factory_init(Factory *f) {
        *f = (Factory) {
                .state_fd = -EBADF,
                .tasks_fd = -EBADF,
        };
        config_init(&f->config);
        f->last_activity_usec = clock_now_usec(CLOCK_MONOTONIC);
}

void factory_done(Factory *f) {
        for (size_t i = 0; i < f->n_tasks; i++)
                task_free(f->tasks[i]);
        free(f->tasks);
        f->tasks = NULL;
        free(f->tasks_by_id);
        f->tasks_by_id = NULL;
        f->n_tasks = 0;
        f->by_state = (TaskIndex) {};
        model_profiles_done(&f->profiles);
        environments_done(&f->environments);
        f->tasks_fd = safe_close(f->tasks_fd);
        f->state_fd = safe_close(f->state_fd);
        config_done(&f->config);
        free(f->state_dir);
        f->state_dir = NULL;
}

void factory_touch(Factory *f) {
        f->last_activity_usec = clock_now_usec(CLOCK_MONOTONIC);
}

/* Where id is in tasks_by_id, or would go. */
static size_t factory_task_index(Factory *f, const char *id, bool *ret_found) {
        size_t lo = 0, hi = f->n_tasks;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(f->tasks_by_id[mid]->id, id);

                if (c == 0) {
                        *ret_found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = false;
        return lo;
}

/* A binary search: a busy client looks thousands of tasks up hundreds of
 * times a second. */
Task *factory_find_task(Factory *f, const char *id) {
        bool found;
        size_t i;

        if (!task_id_is_valid(id))
                return NULL;
        i = factory_task_index(f, id, &found);
        return found ? f->tasks_by_id[i] : NULL;
}

int factory_add_task(Factory *f, Task *t) {
        bool found;
        size_t i;
        Task **a;

        i = factory_task_index(f, t->id, &found);
        if (found)
                return -EEXIST;
        a = realloc(f->tasks_by_id, sizeof(Task *) * (f->n_tasks + 1));
        if (!a)
                return -ENOMEM;
        f->tasks_by_id = a;
        a = realloc(f->tasks, sizeof(Task *) * (f->n_tasks + 1));
        if (!a)
                return -ENOMEM;
        f->tasks = a;
        memmove(f->tasks_by_id + i + 1, f->tasks_by_id + i, sizeof(Task *) * (f->n_tasks - i));
        f->tasks_by_id[i] = t;
        t->position = f->n_tasks;
        f->tasks[f->n_tasks++] = t;
        task_index_add(&f->by_state, t);
        t->factory = f;
        t->tasks_fd = f->tasks_fd;
        factory_schedule(f);
        return 0;
}

/* These are asked at every submission and change of state: they count (or
 * walk) the tasks that are not finished, never all of them. */
unsigned factory_active_tasks(Factory *f) {
        return (unsigned) task_index_count(&f->by_state, task_state_mask_active());
}

unsigned factory_unfinished_tasks_of(Factory *f, uid_t uid) {
        unsigned n = 0;

        if (uid == UID_INVALID)
                return (unsigned) task_index_count(&f->by_state, task_state_mask_unfinished());
        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (!task_state_is_final(s))
                        TASK_INDEX_FOREACH(t, &f->by_state, s)
                                if (t->owner == uid)
                                        n++;
        return n;
}

int factory_tasks_in_states(Factory *f, TaskStateMask states, Task ***ret, size_t *ret_n) {
        return task_index_collect(&f->by_state, states, ret, ret_n);
}

#define HOOK(f, name, ...)                                              \
        do {                                                            \
                if ((f) && (f)->hooks && (f)->hooks->name)              \
                        (f)->hooks->name((f), __VA_ARGS__);             \
        } while (0)

void task_state_changed(Task *t, TaskState old_state, uid_t caller) {
        if (t->factory)
                task_index_update(&t->factory->by_state, t);
        HOOK(t->factory, task_state_changed, t, old_state, caller);
}

void task_changed(Task *t, unsigned what) {
        HOOK(t->factory, task_changed, t, what);
}

void task_jobs_idle(Task *t) {
        HOOK(t->factory, task_jobs_idle, t);
}

void task_send_event(Task *t, json_object *event) {
        HOOK(t->factory, task_event, t, event);
}

void task_send_output(Task *t, const char *data, size_t size) {
        HOOK(t->factory, task_output, t, data, size);
}

void factory_schedule(Factory *f) {
        if (f && f->hooks && f->hooks->schedule)
                f->hooks->schedule(f);
}
