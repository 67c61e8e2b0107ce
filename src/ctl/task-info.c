/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "string-util.h"
#include "task-id.h"
#include "task-info.h"
#include "task-state.h"

/* Resolves an id to its object path with GetTask(), which is also where
 * polkit is asked when it is somebody else's task. */
int task_get_path(sd_bus *bus, const char *id, char **ret_path) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *path;
        int r;

        if (!task_id_is_valid(id)) {
                fprintf(stderr, "'%s' is not a task id (12 hex digits).\n", id);
                return -EXIT_USAGE;
        }

        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                               "GetTask", &error, &reply, "s", id);
        if (r < 0)
                return -bus_fail("get task", &error, r);
        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return -EXIT_FAIL;
        *ret_path = strdup(path);
        return *ret_path ? 0 : -EXIT_FAIL;
}

/* Resources: a{sv} of counters ("t") and the currency ("s"); a counter
 * left out is unknown, one this agentfabctl does not know is passed over. */
static int read_resources(sd_bus_message *reply, TaskInfo *info) {
        const char *key;
        int r;

        task_resources_init_unknown(&info->resources);
        info->has_resources = true;
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_VARIANT, "a{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *contents;
                uint64_t u;

                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(reply, NULL, &contents);
                if (r < 0)
                        return r;
                if (streq(contents, "t")) {
                        r = sd_bus_message_read(reply, "v", "t", &u);
                        if (r >= 0)
                                (void) task_resources_set(&info->resources, key, u);
                } else if (streq(key, "currency") && streq(contents, "s")) {
                        const char *c;
                        r = sd_bus_message_read(reply, "v", "s", &c);
                        if (r >= 0 && task_currency_is_valid(c))
                                memcpy(info->resources.currency, c, strlen(c) + 1);
                } else
                        r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(reply);
}

int task_info_read(sd_bus_message *reply, TaskInfo *info) {
        int r;

        *info = (TaskInfo) {};
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *name, *contents;
                char type;

                r = sd_bus_message_read(reply, "s", &name);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(reply, &type, &contents);
                if (r < 0)
                        return r;

                const char **s = NULL;
                if (streq(name, "Id")) s = &info->id;
                else if (streq(name, "State")) s = &info->state;
                else if (streq(name, "Reason")) s = &info->reason;
                else if (streq(name, "Repository")) s = &info->repository;
                else if (streq(name, "Goal")) s = &info->goal;
                else if (streq(name, "AcceptanceCriteria")) s = &info->acceptance;
                else if (streq(name, "TestCommand")) s = &info->test_command;
                else if (streq(name, "Base")) s = &info->base;
                else if (streq(name, "Model")) s = &info->model;
                else if (streq(name, "Branch")) s = &info->branch;
                else if (streq(name, "Plan")) s = &info->plan;
                else if (streq(name, "HeadCommit")) s = &info->head;
                else if (streq(name, "Breaker")) s = &info->breaker;
                else if (streq(name, "PushURL")) s = &info->push_url;
                else if (streq(name, "Forge")) s = &info->forge;
                else if (streq(name, "ForgeRepository")) s = &info->forge_repository;
                else if (streq(name, "PullRequestBase")) s = &info->pull_request_base;
                else if (streq(name, "PullRequest")) s = &info->pull_request;
                else if (streq(name, "Environment")) s = &info->environment;
                else if (streq(name, "EnvironmentIdentity")) s = &info->environment_identity;
                else if (streq(name, "Reference")) s = &info->reference;
                else if (streq(name, "FreezerState")) s = &info->freezer;

                if (s && streq(contents, "s"))
                        r = sd_bus_message_read(reply, "v", "s", s);
                else if (streq(name, "Owner") && streq(contents, "u"))
                        r = sd_bus_message_read(reply, "v", "u", &info->owner);
                else if (streq(name, "CreatedUSec") && streq(contents, "t"))
                        r = sd_bus_message_read(reply, "v", "t", &info->created);
                else if (streq(name, "UpdatedUSec") && streq(contents, "t"))
                        r = sd_bus_message_read(reply, "v", "t", &info->updated);
                else if (streq(name, "RequirementVersion") && streq(contents, "u"))
                        r = sd_bus_message_read(reply, "v", "u", &info->requirement);
                else if (streq(name, "Step") && streq(contents, "u"))
                        r = sd_bus_message_read(reply, "v", "u", &info->step);
                else if (streq(name, "TokensUsed") && streq(contents, "t"))
                        r = sd_bus_message_read(reply, "v", "t", &info->tokens);
                else if (streq(name, "CommandsRun") && streq(contents, "t"))
                        r = sd_bus_message_read(reply, "v", "t", &info->commands);
                else if (streq(name, "Resources") && streq(contents, "a{sv}"))
                        r = read_resources(reply, info);
                else
                        r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(reply);
}

int task_info_get(sd_bus *bus, const char *path, sd_bus_message **ret_reply, TaskInfo *info, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, path, "org.freedesktop.DBus.Properties", "GetAll",
                               error, &reply, "s", AGENTFAB_TASK_INTERFACE);
        if (r < 0)
                return r;
        r = task_info_read(reply, info);
        if (r < 0)
                return r;
        *ret_reply = TAKE_PTR(reply);
        return 0;
}

json_object *task_info_to_json(const TaskInfo *i) {
        json_object *j = json_object_new_object();
        if (!j)
                return NULL;
        (void) json_add_string(j, "id", i->id);
        (void) json_add_string(j, "state", i->state);
        (void) json_add_string(j, "reason", i->reason);
        (void) json_add_uint64(j, "owner", i->owner);
        (void) json_add_string(j, "repository", i->repository);
        (void) json_add_string(j, "goal", i->goal);
        (void) json_add_string(j, "acceptance", i->acceptance);
        (void) json_add_string(j, "reference", isempty(i->reference) ? NULL : i->reference);
        (void) json_add_uint64(j, "requirement_version", i->requirement);
        (void) json_add_string(j, "test_command", i->test_command);
        (void) json_add_string(j, "base", i->base);
        (void) json_add_string(j, "model", i->model);
        (void) json_add_string(j, "environment", isempty(i->environment) ? "default" : i->environment);
        (void) json_add_string(j, "environment_identity", isempty(i->environment_identity) ? NULL : i->environment_identity);
        (void) json_add_string(j, "branch", i->branch);
        (void) json_add_string(j, "push_url", isempty(i->push_url) ? NULL : i->push_url);
        (void) json_add_string(j, "forge", isempty(i->forge) ? NULL : i->forge);
        (void) json_add_string(j, "forge_repository", isempty(i->forge_repository) ? NULL : i->forge_repository);
        (void) json_add_string(j, "pull_request_base", isempty(i->pull_request_base) ? NULL : i->pull_request_base);
        (void) json_add_string(j, "pull_request", isempty(i->pull_request) ? NULL : i->pull_request);
        (void) json_add_uint64(j, "created_usec", i->created);
        (void) json_add_uint64(j, "updated_usec", i->updated);
        (void) json_add_uint64(j, "step", i->step);
        (void) json_add_string(j, "plan", i->plan);
        (void) json_add_string(j, "head_commit", i->head);
        (void) json_add_string(j, "breaker", i->breaker);
        (void) json_add_string(j, "freezer_state", i->freezer);
        (void) json_add_uint64(j, "tokens_used", i->tokens);
        (void) json_add_uint64(j, "commands_run", i->commands);
        if (i->has_resources) {
                json_object *res = NULL;
                if (task_resources_to_json(&i->resources, &res) >= 0 &&
                    json_object_object_add(j, "resources", res) < 0)
                        json_object_put(res);
        }
        return j;
}

/* Looks task id up and reads its properties: EXIT_OK, or an exit code
 * with the error printed. info points into *ret_reply. */
int task_info_load(sd_bus *bus, const char *id, sd_bus_message **ret_reply, TaskInfo *info) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        r = task_get_path(bus, id, &path);
        if (r < 0)
                return -r;
        r = task_info_get(bus, path, ret_reply, info, &error);
        if (r < 0)
                return bus_fail("read task", &error, r);
        return EXIT_OK;
}
