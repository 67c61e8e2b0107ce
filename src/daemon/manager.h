/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "factory.h"
#include "fleet.h"

/* The Manager wires the daemon's rooms together: it owns the Factory (the
 * tasks and what they use), installs the hooks through which task/,
 * record/, host/ and agent/ report, starts and stops agents, and exits when
 * idle. It never speaks D-Bus: the bus room (bus/) sits above it, installs
 * its own hooks here, and is told what to announce through them. */

typedef struct Manager Manager;
typedef struct BusServer BusServer;

typedef struct ManagerHooks {
        /* t's new state is on disk and the agents were told: announce it. */
        void (*task_state_changed)(Manager *m, Task *t, TaskState old_state);
        /* Properties of t changed (TaskChange bits). */
        void (*task_changed)(Manager *m, Task *t, unsigned what);
        /* For those following t: an event of its audit trail, its output. */
        void (*task_event)(Manager *m, Task *t, json_object *event);
        void (*task_output)(Manager *m, Task *t, const char *data, size_t size);
        /* Whether calls wait for their answer (polkit asked, repositories
         * being imported): the daemon does not exit before they have it. */
        bool (*busy)(Manager *m);
        /* Whether clients follow tasks: the daemon is not idle then. */
        bool (*followed)(Manager *m);
        /* Submissions of uid (UID_INVALID: of anybody) not yet tasks. */
        unsigned (*pending_tasks_of)(Manager *m, uid_t uid);
        /* Idle: give the bus name back and answer what came before. */
        void (*going_idle)(Manager *m);
} ManagerHooks;

struct Manager {
        Factory factory;               /* first: what the rooms below see of us */
        char *config_path;

        sd_event_source *schedule;     /* starts and resumes agents (manager_schedule()) */
        sd_event_source *idle_timer;
        sd_event_source *quota_timer;  /* the next UTC day, while an owner's tasks are held (quota.h) */
        bool exiting;                  /* idle, the name given back: start nothing more */

        const ManagerHooks *hooks;     /* the bus room's (bus_server_new()) */
        BusServer *server;             /* owned by the bus room, freed by it */
        Fleet *fleet;                  /* [Fleet]: this host's part in a fleet; NULL alone */
};

static inline Manager *manager_from_factory(Factory *f) {
        return f ? (Manager *) ((char *) f - offsetof(Manager, factory)) : NULL;
}

/* A Manager with nothing loaded: the factory's hooks installed, no event
 * loop, no tasks. manager_new() starts from it; a unit test fills in what
 * it needs (an event loop, a tasks directory) and frees it with
 * manager_done(). */
void manager_init(Manager *m);
void manager_done(Manager *m);

int manager_new(Manager **ret, const char *state_dir, const char *config_path);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

int manager_load_tasks(Manager *m);
int manager_run(Manager *m);

/* Takes up what systemd passed back from its fd store (freezer.h), before
 * the agents start. Takes the fds. */
void manager_adopt_stored(Manager *m, int *fds, char **names, size_t n);

Task *manager_find_task(Manager *m, const char *id);
/* Adds a task just stored and audits its submission; takes t (freed if it
 * cannot be added). */
int manager_add_submitted(Manager *m, Task *t);
/* Unfinished tasks of uid, or of everybody with UID_INVALID (submissions
 * still importing their repository included). */
unsigned manager_unfinished_tasks_of(Manager *m, uid_t uid);

void manager_update_status(Manager *m);

/* Starts the agents of queued tasks and resumes those that were at work,
 * up to MaxActiveTasks=, from the event loop. */
void manager_schedule(Manager *m);
int manager_start_agents(Manager *m);

/* Records activity, so that idle exit counts from now. */
void manager_touch(Manager *m);
