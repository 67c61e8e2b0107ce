/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "task.h"

/* Task1.Amend() (amend-dbus.c): a new goal and/or new acceptance criteria
 * for a task that is not at work. userdata is the Task. */
int method_amend(sd_bus_message *message, void *userdata, sd_bus_error *error);

/* The same amendment for a caller already authorized (a request another
 * host of a fleet took): goal and acceptance NULL when unchanged, checked
 * by the same rules. 0 or a negative errno with error set. */
int amend_bus_apply(Task *t, const char *goal, const char *acceptance, uid_t uid, sd_bus_error *error);
