/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limit-word.h"
#include "macro.h"
#include "micros.h"
#include "string-util.h"

int limit_word_parse(const char *word, char **ret_name, uint64_t *ret_value) {
        const char *eq = strchr(word, '=');
        _cleanup_free_ char *name = NULL;
        uint64_t v;
        int r;

        if (!eq || eq == word) {
                fprintf(stderr, "Invalid --limit '%s': expected NAME=VALUE.\n", word);
                return -EINVAL;
        }
        name = strndup(word, (size_t) (eq - word));
        if (!name)
                return -ENOMEM;
        if (streq(name, "max_cost")) {
                r = parse_micros(eq + 1, &v);
                if (r < 0) {
                        fprintf(stderr, "Invalid --limit '%s': max_cost is an amount of the model's currency, "
                                "like 0.50 (at most six decimals).\n", word);
                        return -EINVAL;
                }
        } else if (safe_atou64(eq + 1, &v) < 0) {
                fprintf(stderr, "Invalid --limit '%s': expected NAME=NUMBER.\n", word);
                return -EINVAL;
        }
        *ret_name = TAKE_PTR(name);
        *ret_value = v;
        return 0;
}

int approve_options_append(sd_bus_message *m, char **allow_hosts, char **limits) {
        int r;

        r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r >= 0 && allow_hosts) {
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "allow_hosts");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, SD_BUS_TYPE_VARIANT, "as");
                if (r >= 0)
                        r = sd_bus_message_append_strv(m, allow_hosts);
                for (int i = 0; i < 2 && r >= 0; i++)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0 && limits) {
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "limits");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, SD_BUS_TYPE_VARIANT, "a{st}");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{st}");
                for (char **l = limits; r >= 0 && *l; l++) {
                        _cleanup_free_ char *name = NULL;
                        uint64_t v;

                        r = limit_word_parse(*l, &name, &v);
                        if (r >= 0)
                                r = sd_bus_message_append(m, "{st}", name, v);
                }
                for (int i = 0; i < 3 && r >= 0; i++)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}
