/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "bus-server.h"

/* People on this host, for a task another host of the fleet holds
 * (fleet-task-dbus.c): Factory1's GetFleetTask(), GetFleetOutput() and
 * PostFleetRequest(). userdata is the BusServer. */
int method_get_fleet_task(sd_bus_message *message, void *userdata, sd_bus_error *error);
int method_get_fleet_output(sd_bus_message *message, void *userdata, sd_bus_error *error);
int method_post_fleet_request(sd_bus_message *message, void *userdata, sd_bus_error *error);

/* Installs the applier of the requests other hosts post for this host's
 * tasks (fleet-people.h): the task methods' own decisions. */
void fleet_task_bus_register(BusServer *bs);
