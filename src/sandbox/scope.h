/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

typedef struct ScopeLimits {
        uint64_t memory_max;           /* bytes; UINT64_MAX: none */
        uint64_t tasks_max;            /* UINT64_MAX: none */
        uint64_t cpu_quota_per_sec_usec; /* UINT64_MAX: none */
        uint64_t runtime_max_usec;     /* UINT64_MAX: none */
} ScopeLimits;

#define AGENTFAB_SLICE "agentfab.slice"

/* Moves pid into a new transient scope unit in agentfab.slice, with the
 * limits, and returns only when systemd's job for it has finished: before
 * that, the process could run outside its limits. */
int scope_start(sd_bus *bus, const char *unit, const char *description, pid_t pid,
                const ScopeLimits *limits, sd_bus_error *error);
