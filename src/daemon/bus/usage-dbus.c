/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>

#include "access.h"
#include "bus-server.h"
#include "macro.h"
#include "manager.h"
#include "quota.h"
#include "string-util.h"
#include "usage-dbus.h"

typedef struct UsageOptions {
        uint64_t since, until;  /* days; UINT64_MAX until: no end */
        uid_t uid;              /* UID_INVALID: every owner */
} UsageOptions;

static int read_usage_options(sd_bus_message *m, UsageOptions *o, sd_bus_error *error) {
        bool has_since = false;
        int r;

        *o = (UsageOptions) { .until = UINT64_MAX, .uid = UID_INVALID };
        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key;
                uint64_t t;

                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "since") || streq(key, "until")) {
                        r = sd_bus_message_read(m, "v", "t", &t);
                        if (r < 0)
                                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                         "Option '%s' must be of type 't'.", key);
                        if (streq(key, "since")) {
                                o->since = quota_day_of(t);
                                has_since = true;
                        } else
                                o->until = quota_day_of(t);
                } else if (streq(key, "uid")) {
                        uint32_t u;
                        r = sd_bus_message_read(m, "v", "u", &u);
                        if (r < 0)
                                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                                        "Option 'uid' must be of type 'u'.");
                        if (u == UID_INVALID)
                                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'uid' is not a uid.");
                        o->uid = u;
                } else
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown option '%s'.",
                                                 string_is_safe(key, false) ? key : "?");
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        if (!has_since)
                o->since = quota_today();
        if (o->until < o->since)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'until' is before 'since'.");
        return 0;
}

static int append_use(sd_bus_message *reply, const QuotaUse *u) {
        const struct passwd *pw = getpwuid(u->owner);
        _cleanup_free_ char *name = NULL;
        int r;

        if (pw && pw->pw_name && string_is_safe(pw->pw_name, false))
                name = strdup(pw->pw_name);
        else if (asprintf(&name, "%u", (unsigned) u->owner) < 0)
                name = NULL;
        if (!name)
                return -ENOMEM;

        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_STRUCT, "ua{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "u", (uint32_t) u->owner);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "a{sv}", 10,
                                  "user", "s", name,
                                  "tasks", "u", (uint32_t) u->tasks,
                                  "cpu_usec", "t", u->cpu_usec,
                                  "memory_peak", "t", u->memory_peak,
                                  "net_bytes", "t", u->net_bytes,
                                  "tokens_in", "t", u->tokens_in,
                                  "tokens_out", "t", u->tokens_out,
                                  /* UINT64_MAX: no task had a price. */
                                  "cost_micros", "t", isempty(u->currency) ? UINT64_MAX : u->cost_micros,
                                  "currency", "s", u->currency,
                                  "mixed_currencies", "b", (int) u->mixed_currencies);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

int method_get_usage(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ QuotaUse *use = NULL;
        BusServer *bs = userdata;
        UsageOptions o;
        size_t n = 0;
        uid_t caller;
        int r;

        r = read_usage_options(message, &o, error);
        if (r < 0)
                return r;
        r = bus_message_get_caller(message, &caller);
        if (r < 0)
                return r;
        /* SECURITY: what others' tasks cost says what they work on and
         * how much: one's own is free to see, anybody else's is the
         * administrator's (org.agentfab.view-usage). */
        if (o.uid != caller) {
                r = access_verify(bs, message, NULL, "org.agentfab.view-usage", false, error);
                if (r < 0)
                        return r;
                if (r == 0)
                        return 1;
        }

        r = quota_use_by_owner(&bs->manager->factory, o.uid, o.since, o.until, &use, &n);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(ua{sv})");
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                r = append_use(reply, use + i);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}
