/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus-polkit.h"
#include "config.h"
#include "environments.h"
#include "model-client.h"
#include "model-profile.h"
#include "task.h"
#include "task-index.h"

typedef struct StreamServer StreamServer;

typedef enum BusKind {
        BUS_SYSTEM,
        BUS_SESSION,
} BusKind;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        BusKind bus_kind;

        Config config;
        char *config_path;

        char *state_dir;
        int state_fd;
        int tasks_fd;

        Task **tasks;
        size_t n_tasks;
        Task **tasks_by_id;        /* the same, sorted by id: every call on a task looks it up */
        TaskIndex by_state;        /* the same, by state: the few unfinished among thousands */

        PolkitRegistry *polkit;
        /* Bus peers that passed polkit's org.agentfab.manage check: they may
         * see every task until they disconnect. */
        sd_bus_track *viewers;

        StreamServer *stream;

        ModelClient *model;            /* one libcurl multi handle for every task's model calls */
        ModelProfiles profiles;        /* [Model] sections of the configuration */
        Environments environments;     /* [Environment] sections, and "default" */
        struct Egress *egress;         /* the egress proxy's control connection (egress.h) */
        sd_event_source *schedule;     /* starts and resumes agents (manager_schedule()) */

        /* SubmitTask() calls whose repository is being imported (submission.h). */
        struct Submission **submissions;
        size_t n_submissions;
        size_t n_jobs;                 /* task jobs queued or running (task-job.h) */

        sd_event_source *idle_timer;
        uint64_t last_activity_usec;   /* CLOCK_MONOTONIC */
        bool name_released;
        bool emitting;                 /* inside our own PropertiesChanged emission */
} Manager;

int manager_new(Manager **ret, const char *state_dir, const char *config_path);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

int manager_load_tasks(Manager *m);
int manager_connect_bus(Manager *m, BusKind kind, const char *address);
int manager_listen_stream(Manager *m, const char *socket_path);
int manager_run(Manager *m);

Task *manager_find_task(Manager *m, const char *id);
int manager_add_task(Manager *m, Task *t);
unsigned manager_active_tasks(Manager *m);
/* Adds a task just stored, announces it and answers its SubmitTask() call;
 * takes t (freed if it cannot be added). */
int manager_submit_finish(Manager *m, sd_bus_message *message, Task *t);
/* Unfinished tasks of uid, or of everybody with UID_INVALID (submissions
 * still importing their repository included). */
unsigned manager_unfinished_tasks_of(Manager *m, uid_t uid);
/* The tasks in the given states, in ListTasks()' order, in an array the
 * caller frees (task_index_collect()). */
int manager_tasks_in_states(Manager *m, TaskStateMask states, Task ***ret, size_t *ret_n);

void manager_update_status(Manager *m);

/* Starts the agents of queued tasks and resumes those that were at work,
 * up to MaxActiveTasks=, from the event loop. */
void manager_schedule(Manager *m);
int manager_start_agents(Manager *m);

/* Records activity, so that idle exit counts from now. */
void manager_touch(Manager *m);

/* Called by the task model after a state change was persisted. */
void manager_task_state_changed(Manager *m, Task *t, TaskState old_state, uid_t caller);

/* manager-dbus.c / task-dbus.c */
int manager_bus_register(Manager *m);
int task_bus_register(Manager *m);
void task_bus_send_changed(Task *t);
void task_bus_send_progress(Task *t);
void task_bus_send_requirement(Task *t);
void task_bus_send_findings(Task *t);
int manager_bus_send_state_changed(Manager *m, Task *t);

/* Whether the sender of m may see task t without asking polkit. */
int manager_caller_may_view(Manager *m, sd_bus_message *message, Task *t);
bool manager_uid_may_view(Manager *m, uid_t uid, const char *sender, Task *t);

/* Authorization for an action on a task (t may be NULL): 1 allowed, 0
 * pending (the handler returns 1 and runs again later), or a negative errno
 * with error set. With owner_ok, the task's owner is allowed without asking. */
int manager_verify_access(Manager *m, sd_bus_message *message, Task *t, const char *action,
                          bool owner_ok, sd_bus_error *error);

/* Whether the configuration lets the spec push where it says and open a
 * pull request on the forge it names; errors are org.agentfab.Error.InvalidSpec. */
int manager_check_delivery(const Config *c, const TaskSpec *spec, sd_bus_error *error);

int bus_message_get_caller(sd_bus_message *message, uid_t *ret_uid);
