/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "json-util.h"
#include "task-id.h"
#include "task-resources.h"

/* A task as the daemon's org.agentfab.Task1 properties show it. The
 * strings point into the GetAll() reply they were read from. */
typedef struct TaskInfo {
        const char *id, *state, *reason, *repository, *goal, *acceptance, *test_command, *base, *model, *branch;
        const char *plan, *head, *breaker, *push_url, *forge, *forge_repository, *pull_request_base, *pull_request;
        const char *environment, *environment_identity, *reference;
        const char *freezer;
        uint32_t owner, step, requirement;
        uint64_t created, updated, tokens, commands;
        bool has_resources;             /* a daemon that counts them */
        TaskResources resources;
} TaskInfo;

/* The task's object path, by GetTask() (where polkit is asked when it is
 * somebody else's task). Errors are printed; returns minus an exit code. */
int task_get_path(sd_bus *bus, const char *id, char **ret_path);
/* GetAll() of the task at path into info; *ret_reply owns the strings. */
int task_info_get(sd_bus *bus, const char *path, sd_bus_message **ret_reply, TaskInfo *info, sd_bus_error *error);
/* The properties of an a{sv} (GetAll()'s, or GetFleetTask()'s, which
 * names them alike) into info, pointing into reply. */
int task_info_read(sd_bus_message *reply, TaskInfo *info);
/* Both of the above, errors printed: returns an exit code. */
int task_info_load(sd_bus *bus, const char *id, sd_bus_message **ret_reply, TaskInfo *info);
json_object *task_info_to_json(const TaskInfo *i);
