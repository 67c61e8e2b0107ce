/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* "agentfabctl list": the tasks in the given states (NULL: those not
 * finished; with all, every task), one line each, or a JSON array.
 * Returns an exit code. */
int task_list(sd_bus *bus, char **states, bool all, bool json);

/* Splits "a,b" arguments of --state= into *states; "help" prints the
 * state names and returns 0 (nothing more to do), else 1. */
int task_list_parse_states(const char *arg, char ***states);
