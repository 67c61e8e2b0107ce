/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <time.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "json-util.h"
#include "string-util.h"
#include "task-info.h"
#include "task-list.h"
#include "task-state.h"

int task_list_parse_states(const char *arg, char ***states) {
        _cleanup_free_ char *copy = strdup(arg);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        if (streq(arg, "help")) {
                for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                        puts(task_state_to_string(s));
                return 0;
        }
        for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
                if (strv_extend(states, w) < 0)
                        return -ENOMEM;
        return 1;
}

/* The states by default: every one that is not final, as systemctl
 * list-units shows what is active unless --all. */
static int states_unfinished(char ***ret) {
        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (!task_state_is_final(s) && strv_extend(ret, task_state_to_string(s)) < 0)
                        return -ENOMEM;
        return 0;
}

static bool strv_isempty(char **l) {
        return !l || !l[0];
}

static bool strv_contains(char **l, const char *s) {
        for (char **i = l; i && *i; i++)
                if (streq(*i, s))
                        return true;
        return false;
}

/* ListTasksFiltered(states), or, from a daemon older than that method,
 * ListTasks() with the filter applied here. */
static int list_call(sd_bus *bus, char **states, sd_bus_message **ret, bool *ret_filter_here, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        *ret_filter_here = false;
        r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                           "ListTasksFiltered");
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(m, states);
        if (r < 0)
                return r;
        r = sd_bus_call(bus, m, 0, error, ret);
        if (r >= 0 || !sd_bus_error_has_name(error, SD_BUS_ERROR_UNKNOWN_METHOD))
                return r;
        sd_bus_error_free(error);
        *ret_filter_here = !strv_isempty(states);
        return sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                  "ListTasks", error, ret, NULL);
}

int task_list(sd_bus *bus, char **states, bool all, bool json) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_strv_free_ char **unfinished = NULL;
        _cleanup_json_ json_object *array = NULL;
        const char *id, *state, *path;
        bool filter_here;
        unsigned n = 0;
        int r;

        /* --state= names what to show; --all alone shows everything. */
        if (strv_isempty(states) && !all) {
                if (states_unfinished(&unfinished) < 0)
                        return EXIT_FAIL;
                states = unfinished;
        } else if (strv_isempty(states))
                states = NULL;

        r = list_call(bus, states, &reply, &filter_here, &error);
        if (r < 0)
                return bus_fail("list tasks", &error, r);

        if (json)
                array = json_object_new_array();
        else
                printf("%-12s  %-17s  %-6s  %-19s  %s\n", "ID", "STATE", "OWNER", "CREATED", "GOAL");

        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(sso)");
        if (r < 0)
                return EXIT_FAIL;
        while ((r = sd_bus_message_read(reply, "(sso)", &id, &state, &path)) > 0) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *props = NULL;
                TaskInfo info = { .id = id, .state = state };

                if (filter_here && !strv_contains(states, state))
                        continue;
                n++;
                /* A task may vanish from sight between the calls; show what we have. */
                (void) task_info_get(bus, path, &props, &info, &e);
                if (!info.id)
                        info.id = id;
                if (!info.state)
                        info.state = state;

                if (json) {
                        json_object *j = task_info_to_json(&info);
                        if (j)
                                json_object_array_add(array, j);
                } else {
                        char created[64];
                        _cleanup_free_ char *goal = strshorten_line(strempty(info.goal), 60);
                        time_t tt = (time_t) (info.created / USEC_PER_SEC);
                        struct tm tm;
                        if (info.created && localtime_r(&tt, &tm))
                                strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S", &tm);
                        else
                                strcpy(created, "-");
                        printf("%-12s  %-17s  %-6u  %-19s  %s\n", info.id, info.state, info.owner, created, strempty(goal));
                }
        }
        if (r < 0)
                return EXIT_FAIL;

        if (json)
                printf("%s\n", json_object_to_json_string_ext(array, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        else if (unfinished)
                printf("\n%u unfinished task%s listed. Pass --all to see finished tasks too.\n", n, n == 1 ? "" : "s");
        else
                printf("\n%u task%s listed.\n", n, n == 1 ? "" : "s");
        return EXIT_OK;
}
