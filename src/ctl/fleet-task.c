/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "fleet-task.h"
#include "json-util.h"
#include "string-util.h"
#include "task-id.h"

int fleet_task_lookup(sd_bus *bus, const char *id, bool quiet, sd_bus_message **ret_status) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        /* Not an id: the verb says so, as always. */
        if (!task_id_is_valid(id))
                return 0;
        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE, "GetTask",
                               &error, NULL, "s", id);
        if (r >= 0)
                return 0;
        if (!sd_bus_error_has_name(&error, AGENTFAB_ERROR_NO_SUCH_TASK))
                return quiet ? 0 : -bus_fail("get task", &error, r);
        sd_bus_error_free(&error);

        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                               "GetFleetTask", &error, &reply, "s", id);
        if (r < 0) {
                /* No fleet here (or a daemon from before fleets), or no
                 * such task in it either: "no task", as without a fleet. */
                if (sd_bus_error_has_name(&error, SD_BUS_ERROR_NOT_SUPPORTED) ||
                    sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD) ||
                    sd_bus_error_has_name(&error, AGENTFAB_ERROR_NO_SUCH_TASK) || quiet)
                        return 0;
                return -bus_fail("read the task from the fleet", &error, r);
        }
        *ret_status = TAKE_PTR(reply);
        return 1;
}

int fleet_task_extra(sd_bus_message *status, FleetTaskExtra *ret) {
        int r;

        *ret = (FleetTaskExtra) {};
        r = sd_bus_message_rewind(status, true);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(status, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(status, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *name, *contents;
                char type;

                r = sd_bus_message_read(status, "s", &name);
                if (r >= 0)
                        r = sd_bus_message_peek_type(status, &type, &contents);
                if (r < 0)
                        return r;
                if (streq(name, "Host") && streq(contents, "s"))
                        r = sd_bus_message_read(status, "v", "s", &ret->host);
                else if (streq(name, "FleetOwner") && streq(contents, "s"))
                        r = sd_bus_message_read(status, "v", "s", &ret->fleet_owner);
                else if (streq(name, "FleetState") && streq(contents, "s"))
                        r = sd_bus_message_read(status, "v", "s", &ret->fleet_state);
                else if (streq(name, "Epoch") && streq(contents, "t"))
                        r = sd_bus_message_read(status, "v", "t", &ret->epoch);
                else if (streq(name, "BreakerStop") && streq(contents, "t"))
                        r = sd_bus_message_read(status, "v", "t", &ret->stop);
                else
                        r = sd_bus_message_skip(status, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(status);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(status);
}

int fleet_task_output(sd_bus *bus, const char *id, const char *name) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *text;
        int r;

        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                               "GetFleetOutput", &error, &reply, "ss", id, name);
        if (r < 0)
                return bus_fail(streq(name, "log") ? "read the task's output from the fleet" :
                                                     "get summary from the fleet", &error, r);
        r = sd_bus_message_read(reply, "s", &text);
        if (r < 0)
                return EXIT_FAIL;
        fputs(text, stdout);
        return EXIT_OK;
}

static int append_text(sd_bus_message *m, const char *key, const char *value) {
        if (!value)
                return 0;
        return sd_bus_message_append(m, "{sv}", key, "s", value);
}

int fleet_task_request(sd_bus *bus, const char *id, sd_bus_message *status, const FleetTaskRequest *req) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        bool decision = streq(req->kind, "approve") || streq(req->kind, "reject");
        FleetTaskExtra extra;
        uint64_t request;
        int r;

        r = fleet_task_extra(status, &extra);
        if (r < 0) {
                fprintf(stderr, "Failed to read the task's status from the fleet: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH,
                                           AGENTFAB_FACTORY_INTERFACE, "PostFleetRequest");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", id, req->kind);
        if (r >= 0)
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r >= 0 && decision) {
                /* The stop this person saw: an answer to it is no answer
                 * to a later one. */
                r = append_text(m, "comment", strempty(req->comment));
                if (r >= 0 && extra.stop > 0)
                        r = sd_bus_message_append(m, "{sv}", "stop", "t", extra.stop);
        }
        if (r >= 0 && streq(req->kind, "amend"))
                r = append_text(m, "goal", req->goal);
        if (r >= 0 && streq(req->kind, "amend"))
                r = append_text(m, "acceptance", req->acceptance);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0) {
                fprintf(stderr, "Failed to build request: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        r = sd_bus_call(bus, m, req->timeout_usec, &error, &reply);
        if (r < 0)
                return bus_fail("post the request to the fleet", &error, r);
        r = sd_bus_message_read(reply, "t", &request);
        if (r < 0)
                return EXIT_FAIL;
        if (req->json) {
                _cleanup_json_ json_object *j = json_object_new_object();
                (void) json_add_uint64(j, "request", request);
                (void) json_add_string(j, "host", extra.host);
                if (decision)
                        (void) json_add_uint64(j, "stop", extra.stop);
                printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
        } else if (decision)
                fprintf(stderr, "Task %s is on host %s of the fleet: request %" PRIu64 " posted, for its stop at step %"
                        PRIu64 ".\n", id, strempty(extra.host), request, extra.stop);
        else
                fprintf(stderr, "Task %s is on host %s of the fleet: request %" PRIu64 " posted.\n", id,
                        isempty(extra.host) ? "(none yet)" : extra.host, request);
        return EXIT_OK;
}
