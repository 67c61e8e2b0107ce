/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <time.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "fleet-list.h"
#include "json-util.h"
#include "string-util.h"

static bool state_is_shown(const char *state, char **states, bool all) {
        if (states && states[0]) {
                for (char **s = states; *s; s++)
                        if (streq(*s, state))
                                return true;
                return false;
        }
        return all || streq(state, "queued") || streq(state, "running");
}

int fleet_task_list(sd_bus *bus, char **states, bool all, bool json) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_json_ json_object *array = NULL;
        const char *id, *state, *host, *owner;
        uint64_t epoch, updated;
        unsigned n = 0;
        int r;

        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                               "ListFleetTasks", &error, &reply, NULL);
        if (r < 0)
                return bus_fail("list the fleet's tasks", &error, r);

        if (json) {
                array = json_object_new_array();
                if (!array)
                        return EXIT_FAIL;
        } else
                printf("%-12s  %-9s  %-16s  %5s  %-20s  %s\n", "ID", "STATE", "HOST", "EPOCH", "OWNER", "UPDATED");

        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(ssstst)");
        if (r < 0)
                return EXIT_FAIL;
        while ((r = sd_bus_message_read(reply, "(ssstst)", &id, &state, &host, &epoch, &owner, &updated)) > 0) {
                if (!state_is_shown(state, states, all))
                        continue;
                n++;
                if (json) {
                        json_object *j = json_object_new_object();
                        if (!j || json_add_string(j, "id", id) < 0 || json_add_string(j, "state", state) < 0 ||
                            (!isempty(host) && json_add_string(j, "host", host) < 0) ||
                            json_add_uint64(j, "epoch", epoch) < 0 || json_add_string(j, "owner", owner) < 0 ||
                            json_add_uint64(j, "updated_usec", updated) < 0) {
                                json_object_put(j);
                                return EXIT_FAIL;
                        }
                        json_object_array_add(array, j);
                } else {
                        char when[64];
                        time_t tt = (time_t) (updated / USEC_PER_SEC);
                        struct tm tm;

                        if (updated && localtime_r(&tt, &tm))
                                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
                        else
                                strcpy(when, "-");
                        /* Other hosts' rows pass the terminal filter on stdout
                         * (terminal-escape.h) like everything from elsewhere. */
                        printf("%-12s  %-9s  %-16s  %5llu  %-20s  %s\n", id, state, isempty(host) ? "-" : host,
                               (unsigned long long) epoch, owner, when);
                }
        }
        if (r < 0)
                return EXIT_FAIL;

        if (json)
                printf("%s\n", json_object_to_json_string_ext(array, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        else if (!all && !(states && states[0]))
                printf("\n%u task%s of the fleet queued or running. Pass --all to see ended tasks too.\n", n, n == 1 ? "" : "s");
        else
                printf("\n%u task%s of the fleet listed.\n", n, n == 1 ? "" : "s");
        return EXIT_OK;
}
