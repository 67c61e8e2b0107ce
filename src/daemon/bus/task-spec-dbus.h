/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "task-spec.h"

/* SubmitTask()'s a{sv} spec, read into spec (task_spec_init()ed) and
 * checked key by key with task_spec_set_string() and task_spec_set_limit();
 * errors are org.agentfab.Error.InvalidSpec (or InvalidArgs for a message
 * of the wrong shape). */
int task_spec_from_message(TaskSpec *spec, sd_bus_message *m, sd_bus_error *error);
