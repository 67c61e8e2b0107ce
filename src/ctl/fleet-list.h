/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* "agentfabctl list --fleet": the tasks of the whole fleet as its database
 * has them (ListFleetTasks()), with the host that holds each: those not
 * ended (all with all; those in states, if given), one line each, or a
 * JSON array. The same from every host. Returns an exit code. */
int fleet_task_list(sd_bus *bus, char **states, bool all, bool json);
