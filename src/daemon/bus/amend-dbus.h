/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

/* Task1.Amend() (amend-dbus.c): a new goal and/or new acceptance criteria
 * for a task that is not at work. userdata is the Task. */
int method_amend(sd_bus_message *message, void *userdata, sd_bus_error *error);
