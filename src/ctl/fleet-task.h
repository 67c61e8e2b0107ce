/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* A task another host of the fleet holds, as the verbs reach it from this
 * host (Factory1's GetFleetTask(), GetFleetOutput(), PostFleetRequest()):
 * used when this host does not know the task and is a host of a fleet. */

/* 1 with *ret_status (GetFleetTask()'s reply): id is a task of the fleet
 * that this host does not have. 0: this host has it, or is in no fleet
 * (the verb goes on as for any task, which says so when there is none).
 * Minus an exit code, the error printed; with quiet, 0 instead (the verb
 * finds the task its own way and says what is wrong). */
int fleet_task_lookup(sd_bus *bus, const char *id, bool quiet, sd_bus_message **ret_status);

/* What the fleet adds to a task's status. Strings point into the reply. */
typedef struct FleetTaskExtra {
        const char *host, *fleet_owner, *fleet_state;
        uint64_t epoch, stop;
} FleetTaskExtra;
int fleet_task_extra(sd_bus_message *status, FleetTaskExtra *ret);

/* summary or log: printed as the holder last wrote it. An exit code. */
int fleet_task_output(sd_bus *bus, const char *id, const char *name);

/* approve, reject, cancel, pause, resume or amend, posted for the holder:
 * an approval or rejection names the breaker stop status showed. An exit
 * code. */
typedef struct FleetTaskRequest {
        const char *kind;
        const char *comment, *goal, *acceptance;
        uint64_t timeout_usec;          /* a person may be typing a password at polkit's prompt */
        bool json;
} FleetTaskRequest;
int fleet_task_request(sd_bus *bus, const char *id, sd_bus_message *status, const FleetTaskRequest *req);
