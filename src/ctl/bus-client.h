/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* Exit codes, as documented in agentfabctl(1). */
enum {
        EXIT_OK = 0,
        EXIT_FAIL = 1,
        EXIT_USAGE = 2,
        EXIT_DENIED = 3,
        EXIT_NO_TASK = 4,
};

/* The system bus, the user's (session) or the one at address; interactive
 * authorization as ask_password says. Prints why it failed. */
int bus_connect(const char *address, bool session, bool ask_password, sd_bus **ret);
/* Prints "Failed to WHAT: ..." for a failed call and returns the exit
 * code it maps to (no such task, denied, bad arguments, or failure). */
int bus_fail(const char *what, const sd_bus_error *e, int r);
