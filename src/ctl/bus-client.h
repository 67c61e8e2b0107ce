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

/* Calls whose answer waits for work on a repository in the daemon (an
 * import, an export, a reset: seconds on a big one, while the daemon goes
 * on answering others) get more than sd-bus's default 25 s. */
#define REPOSITORY_CALL_TIMEOUT_USEC (10 * 60 * 1000000ULL)

/* Appends {sv} key => s value to an open a{sv}; nothing when value is NULL. */
int bus_append_string_entry(sd_bus_message *m, const char *key, const char *value);
/* Calls method(s arg) of the task at path, with the repository timeout. */
int bus_call_task_method_s(sd_bus *bus, const char *path, const char *method, const char *arg, sd_bus_error *error,
                           sd_bus_message **reply);
