/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "agentfab-bus.h"
#include "macro.h"
#include "task-spec.h"
#include "task-state.h"

typedef struct Manager Manager;

/* A task record and its state machine. No D-Bus here: task-dbus.c exposes
 * it, task-store.c persists it. */
typedef struct Task {
        Manager *manager;          /* NULL in unit tests */
        int tasks_fd;              /* borrowed: the directory holding the task directories */

        char *id;
        uid_t owner;
        TaskState state;
        char *reason;              /* why it waits or failed; empty otherwise */
        uint64_t created_usec;
        uint64_t updated_usec;
        TaskSpec spec;
        char *branch;

        /* The state file could not be read: the record is shown as failed and
         * kept read-only so that nothing overwrites what an administrator may
         * want to recover. */
        bool broken;
} Task;

int task_new(Task **ret, const char *id);
Task *task_free(Task *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Task *, task_free);

bool task_id_is_valid(const char *id);
int task_id_generate(char ret[static AGENTFAB_TASK_ID_LEN + 1]);

/* Moves the task to a new state: refuses illegal transitions
 * (org.agentfab.Error.BadState), persists the record before anything is
 * announced, and restores the old state in memory if persisting fails.
 * caller is the uid whose request caused it, or UID_INVALID. */
int task_set_state(Task *t, TaskState state, const char *reason, uid_t caller, sd_bus_error *error);

/* The task's D-Bus object path; freed by the caller. */
char *task_object_path(const Task *t);

uint64_t now_usec(void);
