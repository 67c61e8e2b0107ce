/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "approve-options.h"
#include "environments.h"
#include "string-util.h"
#include "task.h"

void approve_options_done(ApproveOptions *o) {
        strv_free(o->hosts);
        strv_free(o->limit_names);
}

static int read_approve_hosts(sd_bus_message *message, ApproveOptions *o, sd_bus_error *error) {
        int r;

        if (o->has_hosts)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'allow_hosts' given twice.");
        o->has_hosts = true;
        r = sd_bus_message_enter_container(message, SD_BUS_TYPE_VARIANT, "as");
        if (r < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'allow_hosts' must be of type 'as'.");
        r = sd_bus_message_read_strv(message, &o->hosts);
        if (r < 0)
                return r;
        if (strv_length(o->hosts) > TASK_ALLOWED_HOSTS_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "At most %u hosts may be allowed.",
                                         TASK_ALLOWED_HOSTS_MAX);
        for (char **h = o->hosts; h && *h; h++)
                if (!environment_allow_entry_is_valid(*h))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "'%s' is not a host name, address or *.glob with an optional port.",
                                                 strempty(string_is_safe(*h, false) ? *h : NULL));
        return sd_bus_message_exit_container(message);
}

static int read_approve_limits(sd_bus_message *message, ApproveOptions *o, sd_bus_error *error) {
        size_t n = 0;
        int r;

        if (o->has_limits)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'limits' given twice.");
        o->has_limits = true;
        r = sd_bus_message_enter_container(message, SD_BUS_TYPE_VARIANT, "a{st}");
        if (r < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'limits' must be of type 'a{st}'.");
        r = sd_bus_message_enter_container(message, SD_BUS_TYPE_ARRAY, "{st}");
        if (r < 0)
                return r;
        for (;;) {
                const char *name;
                uint64_t value;

                r = sd_bus_message_read(message, "{st}", &name, &value);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                if (n >= APPROVE_LIMITS_MAX)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "At most %u limits may be set.",
                                                 APPROVE_LIMITS_MAX);
                if (!task_limit_name_is_valid(name))
                        return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                                "Limit name is not valid: letters, digits and '_', at most 64.");
                r = strv_extend(&o->limit_names, name);
                if (r < 0)
                        return r;
                o->limit_values[n++] = value;
        }
        r = sd_bus_message_exit_container(message);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(message);
}

int approve_options_read(sd_bus_message *message, ApproveOptions *o, sd_bus_error *error) {
        int r;

        r = sd_bus_message_enter_container(message, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(message, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read(message, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "allow_hosts"))
                        r = read_approve_hosts(message, o, error);
                else if (streq(key, "limits"))
                        r = read_approve_limits(message, o, error);
                else
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown option '%s'.",
                                                 string_is_safe(key, false) ? key : "?");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(message);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(message);
}
