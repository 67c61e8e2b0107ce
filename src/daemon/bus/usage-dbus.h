/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

/* Factory1.GetUsage(a{sv} options) -> a(ua{sv}) usage: each owner's sums
 * over the tasks submitted in the days asked for (quota.h). Options:
 * "since" (t, CLOCK_REALTIME µs: from the UTC day holding it; default
 * today), "until" (t, likewise, the last day; default none), "uid" (u:
 * that owner only). One's own usage needs nothing; another's, or every
 * owner's, org.agentfab.view-usage. */
int method_get_usage(sd_bus_message *message, void *userdata, sd_bus_error *error);
