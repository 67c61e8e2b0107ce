/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "macro.h"

static int bus_exit_code(const sd_bus_error *e, int r) {
        if (sd_bus_error_has_name(e, AGENTFAB_ERROR_NO_SUCH_TASK))
                return EXIT_NO_TASK;
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_ACCESS_DENIED) ||
            sd_bus_error_has_name(e, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED) || r == -EACCES || r == -EPERM)
                return EXIT_DENIED;
        if (sd_bus_error_has_name(e, AGENTFAB_ERROR_INVALID_SPEC) || sd_bus_error_has_name(e, SD_BUS_ERROR_INVALID_ARGS))
                return EXIT_USAGE;
        return EXIT_FAIL;
}

int bus_fail(const char *what, const sd_bus_error *e, int r) {
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED))
                fprintf(stderr, "Failed to %s: %s\n(Authentication is required; run on a terminal, or without --no-ask-password.)\n",
                        what, e->message);
        else if (sd_bus_error_is_set(e))
                fprintf(stderr, "Failed to %s: %s\n", what, e->message ?: e->name);
        else
                fprintf(stderr, "Failed to %s: %s\n", what, strerror(-r));
        return bus_exit_code(e, r);
}

int bus_connect(const char *address, bool session, bool ask_password, sd_bus **ret) {
        sd_bus *bus = NULL;
        int r;

        if (address) {
                r = sd_bus_new(&bus);
                if (r >= 0)
                        r = sd_bus_set_address(bus, address);
                if (r >= 0)
                        r = sd_bus_set_bus_client(bus, true);
                if (r >= 0)
                        r = sd_bus_start(bus);
        } else if (session)
                r = sd_bus_open_user(&bus);
        else
                r = sd_bus_open_system(&bus);
        if (r < 0) {
                sd_bus_unref(bus);
                fprintf(stderr, "Failed to connect to the bus: %s\n", strerror(-r));
                return r;
        }
        (void) sd_bus_set_allow_interactive_authorization(bus, ask_password);
        *ret = bus;
        return 0;
}

int bus_append_string_entry(sd_bus_message *m, const char *key, const char *value) {
        if (!value)
                return 0;
        return sd_bus_message_append(m, "{sv}", key, "s", value);
}

int bus_call_task_method_s(sd_bus *bus, const char *path, const char *method, const char *arg, sd_bus_error *error,
                           sd_bus_message **reply) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE, method);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", arg);
        if (r < 0)
                return r;
        return sd_bus_call(bus, m, REPOSITORY_CALL_TIMEOUT_USEC, error, reply);
}
