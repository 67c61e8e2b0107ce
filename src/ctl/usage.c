/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <json-c/json.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "json-util.h"
#include "macro.h"
#include "micros.h"
#include "string-util.h"
#include "task-resources.h"
#include "usage.h"

typedef struct UsageRow {
        uint32_t uid;
        char *user;
        uint32_t tasks;
        uint64_t cpu_usec, memory_peak, net_bytes, tokens_in, tokens_out, cost_micros;
        char *currency;
        bool mixed_currencies;
} UsageRow;

static void usage_row_done(UsageRow *r) {
        free(r->user);
        free(r->currency);
}

/* "YYYY-MM-DD" or "today" as the CLOCK_REALTIME µs of that UTC midnight. */
static int parse_day(const char *s, uint64_t *ret) {
        struct tm tm = {};
        const char *end;
        time_t t;

        if (streq(s, "today")) {
                t = time(NULL);
                *ret = (uint64_t) (t - t % 86400) * 1000000ULL;
                return 0;
        }
        end = strptime(s, "%Y-%m-%d", &tm);
        if (!end || *end || strlen(s) != 10)
                return -EINVAL;
        t = timegm(&tm);
        if (t < 0)
                return -ERANGE;
        *ret = (uint64_t) t * 1000000ULL;
        return 0;
}

static int parse_user(const char *s, uint32_t *ret) {
        const struct passwd *pw = getpwnam(s);
        uint64_t u;

        if (pw) {
                *ret = pw->pw_uid;
                return 0;
        }
        if (safe_atou64(s, &u) >= 0 && u < UINT32_MAX) {
                *ret = (uint32_t) u;
                return 0;
        }
        return -ESRCH;
}

static int call_get_usage(sd_bus *bus, bool has_since, uint64_t since, bool has_uid, uint32_t uid, sd_bus_error *error,
                          sd_bus_message **reply) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH,
                                           AGENTFAB_FACTORY_INTERFACE, "GetUsage");
        if (r >= 0)
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r >= 0 && has_since)
                r = sd_bus_message_append(m, "{sv}", "since", "t", since);
        if (r >= 0 && has_uid)
                r = sd_bus_message_append(m, "{sv}", "uid", "u", uid);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return sd_bus_call(bus, m, 0, error, reply);
}

static int read_row(sd_bus_message *reply, UsageRow *row) {
        int r;

        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_STRUCT, "ua{sv}");
        if (r <= 0)
                return r;
        r = sd_bus_message_read(reply, "u", &row->uid);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        row->cost_micros = UINT64_MAX;
        while ((r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key, *contents, *s;
                uint64_t *field = NULL;

                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(reply, NULL, &contents);
                if (r < 0)
                        return r;
                if (streq(key, "cpu_usec")) field = &row->cpu_usec;
                else if (streq(key, "memory_peak")) field = &row->memory_peak;
                else if (streq(key, "net_bytes")) field = &row->net_bytes;
                else if (streq(key, "tokens_in")) field = &row->tokens_in;
                else if (streq(key, "tokens_out")) field = &row->tokens_out;
                else if (streq(key, "cost_micros")) field = &row->cost_micros;

                if (field && streq(contents, "t"))
                        r = sd_bus_message_read(reply, "v", "t", field);
                else if (streq(key, "tasks") && streq(contents, "u"))
                        r = sd_bus_message_read(reply, "v", "u", &row->tasks);
                else if (streq(key, "mixed_currencies") && streq(contents, "b")) {
                        int b;
                        r = sd_bus_message_read(reply, "v", "b", &b);
                        row->mixed_currencies = b;
                } else if ((streq(key, "user") || streq(key, "currency")) && streq(contents, "s")) {
                        r = sd_bus_message_read(reply, "v", "s", &s);
                        if (r >= 0 && free_and_strdup(streq(key, "user") ? &row->user : &row->currency, s) < 0)
                                r = -ENOMEM;
                } else
                        r = sd_bus_message_skip(reply, "v");   /* a newer daemon's figure */
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
        r = sd_bus_message_exit_container(reply);
        return r < 0 ? r : 1;
}

static json_object *row_to_json(const UsageRow *row) {
        json_object *o = json_object_new_object();
        char c[32];

        if (!o ||
            json_add_string(o, "user", row->user) < 0 ||
            json_add_uint64(o, "uid", row->uid) < 0 ||
            json_add_uint64(o, "tasks", row->tasks) < 0 ||
            json_add_uint64(o, "cpu_usec", row->cpu_usec) < 0 ||
            json_add_uint64(o, "memory_peak", row->memory_peak) < 0 ||
            json_add_uint64(o, "net_bytes", row->net_bytes) < 0 ||
            json_add_uint64(o, "tokens_in", row->tokens_in) < 0 ||
            json_add_uint64(o, "tokens_out", row->tokens_out) < 0 ||
            json_object_object_add(o, "cost_micros", row->cost_micros == UINT64_MAX ? NULL :
                                   json_object_new_uint64(row->cost_micros)) < 0 ||
            json_object_object_add(o, "cost", row->cost_micros == UINT64_MAX ? NULL :
                                   json_object_new_string(format_micros(c, row->cost_micros))) < 0 ||
            json_add_string(o, "currency", isempty(row->currency) ? NULL : row->currency) < 0) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

int usage_show(sd_bus *bus, const char *since, const char *user, bool json) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_object_putp) json_object *array = NULL;
        uint64_t since_usec = 0;
        uint32_t uid = 0;
        bool own = false;
        int r;

        if (since && parse_day(since, &since_usec) < 0) {
                fprintf(stderr, "Invalid --since='%s': expected a day, YYYY-MM-DD (UTC), or 'today'.\n", since);
                return EXIT_USAGE;
        }
        if (user && parse_user(user, &uid) < 0) {
                fprintf(stderr, "No such user '%s'.\n", user);
                return EXIT_USAGE;
        }
        r = call_get_usage(bus, since, since_usec, user, uid, &error, &reply);
        if (r < 0 && !user && (sd_bus_error_has_name(&error, SD_BUS_ERROR_ACCESS_DENIED) ||
                                  sd_bus_error_has_name(&error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED))) {
                /* Every owner's needs an administrator: one's own does not. */
                sd_bus_error_free(&error);
                own = true;
                r = call_get_usage(bus, since, since_usec, true, (uint32_t) getuid(), &error, &reply);
        }
        if (r < 0)
                return bus_fail("get usage", &error, r);
        if (own)
                fprintf(stderr, "Only your own usage: seeing other users' needs an administrator "
                        "(polkit action org.agentfab.view-usage).\n");

        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(ua{sv})");
        if (r < 0)
                return bus_fail("read usage", NULL, r);
        if (json && !(array = json_object_new_array()))
                return bus_fail("read usage", NULL, -ENOMEM);
        if (!json)
                printf("%-16s %5s %10s %10s %10s %21s %14s\n", "USER", "TASKS", "CPU", "MEM-PEAK", "NET", "TOKENS IN/OUT",
                       "COST");
        for (;;) {
                _cleanup_(usage_row_done) UsageRow row = {};
                char mem[32], net[32], cost[48], c[32];

                r = read_row(reply, &row);
                if (r < 0)
                        return bus_fail("read usage", NULL, r);
                if (r == 0)
                        break;
                if (json) {
                        json_object *o = row_to_json(&row);
                        if (!o || json_object_array_add(array, o) < 0) {
                                json_object_put(o);
                                return bus_fail("read usage", NULL, -ENOMEM);
                        }
                        continue;
                }
                task_resources_format_bytes(mem, row.memory_peak);
                task_resources_format_bytes(net, row.net_bytes);
                if (row.cost_micros == UINT64_MAX)
                        snprintf(cost, sizeof(cost), "-");
                else
                        snprintf(cost, sizeof(cost), "%s %s%s", format_micros(c, row.cost_micros), strempty(row.currency),
                                 row.mixed_currencies ? "*" : "");
                printf("%-16s %5u %8.1f s %10s %10s %10llu/%-10llu %14s\n", strempty(row.user), row.tasks,
                       (double) row.cpu_usec / 1000000.0, mem, net, (unsigned long long) row.tokens_in,
                       (unsigned long long) row.tokens_out, cost);
        }
        if (json)
                printf("%s\n", json_object_to_json_string_ext(array, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        return EXIT_OK;
}
