/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* "agentfabctl usage [--since=DATE] [--user=NAME] [--json]": each owner's
 * totals over the tasks submitted since DATE (a UTC day, YYYY-MM-DD;
 * default today), through GetUsage(). Without --user every owner's, which
 * needs org.agentfab.view-usage; denied that, the caller's own, with a
 * note. Returns an exit code. */
int usage_show(sd_bus *bus, const char *since, const char *user, bool json);
