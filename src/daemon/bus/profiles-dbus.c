/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <systemd/sd-bus.h>

#include "bus-server.h"
#include "manager.h"
#include "micros.h"
#include "model-profile.h"
#include "profiles-dbus.h"
#include "string-util.h"

/* Each profile as its name and a dictionary of its settings. No key and no
 * credential name leaves the daemon: only whether a key is configured.
 * Endpoints carry no user information (model_endpoint_is_valid() refuses
 * it), so they are shown as configured. */
static int append_profile(sd_bus_message *reply, const ModelProfile *p) {
        int r;

        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_STRUCT, "sa{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "s", p->name);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}",
                                  "Kind", "s", model_kind_to_string(p->kind),
                                  "Endpoint", "s", strempty(p->endpoint),
                                  "Model", "s", strempty(p->model),
                                  "MaxTokens", "u", p->max_tokens,
                                  "ContextBudget", "t", p->context_budget,
                                  "Stream", "b", p->stream,
                                  "ToolCalls", "s", model_tool_calls_to_string(p->tool_calls),
                                  "TimeoutUSec", "t", p->timeout_usec,
                                  "MaxRetries", "u", p->max_retries,
                                  "APIKey", "b", p->api_key_credential != NULL);
        if (r < 0)
                return r;
        /* Not sent to the server when unset: not shown either. */
        if (p->temperature >= 0) {
                r = sd_bus_message_append(reply, "{sv}", "Temperature", "d", p->temperature);
                if (r < 0)
                        return r;
        }
        /* As agentfab.conf(5) takes them: decimal, in the currency. */
        if (model_profile_has_prices(p)) {
                char in[32], out[32];
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}",
                                          "PriceInputPerMTok", "s", format_micros(in, p->price_input_micros),
                                          "PriceOutputPerMTok", "s", format_micros(out, p->price_output_micros),
                                          "Currency", "s", p->currency);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

int method_list_model_profiles(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        BusServer *bs = userdata;
        const ModelProfiles *profiles = &bs->manager->factory.profiles;
        int r;

        (void) error;
        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(sa{sv})");
        if (r < 0)
                return r;
        for (size_t i = 0; i < profiles->n_profiles; i++) {
                r = append_profile(reply, profiles->profiles[i]);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}
