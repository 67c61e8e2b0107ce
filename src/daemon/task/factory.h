/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "environments.h"
#include "model-client.h"
#include "model-profile.h"
#include "task-index.h"
#include "task.h"

/* The factory: what every task's code may use of the daemon around it —
 * the settings, the event loop, the state directory, the model client, the
 * environments, the egress proxy — and the registry of its tasks. The
 * Manager (manager.h) embeds one and fills it in; a unit test builds one on
 * the stack. No D-Bus here.
 *
 * The rooms below the manager (task/, record/, host/, agent/) never call up
 * into it: they tell it what happened through these hooks, which the
 * manager installs. Each is called synchronously, after the change it
 * reports is in memory and, where it is persisted, on disk: "saved, then
 * announced" keeps its order. A hook left NULL does nothing. */

typedef struct Factory Factory;
typedef struct Egress Egress;

/* Which of a task's properties changed, for task_changed. */
typedef enum TaskChange {
        TASK_CHANGE_STATE       = 1 << 0,   /* state, reason, breaker, pull request, freezer state */
        TASK_CHANGE_PROGRESS    = 1 << 1,   /* plan, step, head, checkpoints, tokens, commands */
        TASK_CHANGE_REQUIREMENT = 1 << 2,   /* goal, acceptance criteria and their version */
        TASK_CHANGE_FINDINGS    = 1 << 3,   /* the review stage's findings */
        TASK_CHANGE_RESOURCES   = 1 << 4,   /* what the task used (TaskProgress.resources) */
} TaskChange;

typedef struct FactoryHooks {
        /* t's new state is on disk (task_set_state() and its async forms),
         * or, failing that, in memory (task_fail_unsaved()). */
        void (*task_state_changed)(Factory *f, Task *t, TaskState old_state, uid_t caller);
        /* Properties of t changed (a TaskChange mask). */
        void (*task_changed)(Factory *f, Task *t, unsigned what);
        /* t's ledger jobs are all done (task-job.h): its agent may go on. */
        void (*task_jobs_idle)(Factory *f, Task *t);
        /* An event of t was journaled and appended to its events file
         * (audit.h), or its command wrote output: for those following it. */
        void (*task_event)(Factory *f, Task *t, json_object *event);
        void (*task_output)(Factory *f, Task *t, const char *data, size_t size);
        /* Something that held an agent back is gone: start what may start. */
        void (*schedule)(Factory *f);
} FactoryHooks;

struct Factory {
        sd_event *event;
        Config config;
        char *state_dir;
        int state_fd;
        int tasks_fd;

        Task **tasks;              /* in the order ListTasks() gives */
        size_t n_tasks;
        Task **tasks_by_id;        /* the same, sorted by id: every call on a task looks it up */
        TaskIndex by_state;        /* the same, by state: the few unfinished among thousands */

        ModelClient *model;        /* one libcurl multi handle for every task's model calls */
        ModelProfiles profiles;    /* [Model] sections of the configuration */
        Environments environments; /* [Environment] sections, and "default" */
        Egress *egress;            /* the egress proxy's control connection (egress.h) */

        size_t n_jobs;             /* task jobs queued or running (task-job.h) */
        uint64_t last_activity_usec; /* CLOCK_MONOTONIC: idle exit counts from here */

        const FactoryHooks *hooks;
        void *userdata;            /* the hooks' */
};

/* Sets the fields that need it to "none"; the caller fills in the rest. */
void factory_init(Factory *f);
/* Frees the tasks, the settings and what the factory owns (not the event
 * loop's reference, nor the egress connection: their owner frees them). */
void factory_done(Factory *f);

Task *factory_find_task(Factory *f, const char *id);
/* Adds t to the registry and ties it to f; -EEXIST if its id is there. */
int factory_add_task(Factory *f, Task *t);
unsigned factory_active_tasks(Factory *f);
/* Unfinished tasks of uid, or of everybody with UID_INVALID. */
unsigned factory_unfinished_tasks_of(Factory *f, uid_t uid);
/* The tasks in the given states, in ListTasks()' order, in an array the
 * caller frees (task_index_collect()). */
int factory_tasks_in_states(Factory *f, TaskStateMask states, Task ***ret, size_t *ret_n);

/* Records activity, so that idle exit counts from now. */
void factory_touch(Factory *f);

/* The hooks, for the rooms below the manager. Each accepts a task without
 * a factory (a record being built or a unit test's), and does nothing then. */
void task_state_changed(Task *t, TaskState old_state, uid_t caller);
void task_changed(Task *t, unsigned what);
void task_jobs_idle(Task *t);
void task_send_event(Task *t, json_object *event);
void task_send_output(Task *t, const char *data, size_t size);
void factory_schedule(Factory *f);
