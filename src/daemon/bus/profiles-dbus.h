/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

/* ListModelProfiles() (profiles-dbus.c): the model profiles of
 * agentfab.conf(5) with the settings that decide how a model is spoken to,
 * so that a measurement (agentfabctl eval) can say what it measured. */
int method_list_model_profiles(sd_bus_message *message, void *userdata, sd_bus_error *error);
