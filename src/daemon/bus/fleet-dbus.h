/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "bus-server.h"
#include "task.h"

/* The fleet as the bus sees it ([Fleet], fleet.h): a SubmitTask() on a host
 * of a fleet queues the task in the fleet's database, and
 * ListFleetTasks() lists what the database holds. */

/* SubmitTask()'s end on a host of a fleet, after its checks and polkit:
 * takes t, queues it and answers the call with its id and path once the
 * database has the row. */
int fleet_dbus_submit(BusServer *bs, sd_bus_message *message, Task *t, sd_bus_error *error);

int method_list_fleet_tasks(sd_bus_message *message, void *userdata, sd_bus_error *error);

/* ExportFleetTask(s id, s format) -> h: Export() for a task of the fleet
 * that this host does not hold, from Remote= (fleet-export-dbus.c). */
int method_export_fleet_task(sd_bus_message *message, void *userdata, sd_bus_error *error);
