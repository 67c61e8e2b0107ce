/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

/* The port of the egress proxy's forwarder on a sandbox's loopback
 * (agentfab-proxy(8)), unless the sandbox is told another. */
#define AGENTFAB_PROXY_PORT 3128

/* The variables every command of a sandbox with a network sees:
 * HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy pointing at
 * http://127.0.0.1:PORT, and NO_PROXY, no_proxy for the loopback itself.
 * A NULL-terminated list of "NAME=VALUE" (free with strv_free()), or NULL
 * when out of memory. */
char **proxy_environment(uint16_t port);
