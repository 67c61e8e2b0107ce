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

/* Connects to the system manager: its private socket when we are root (one
 * hop less, as systemctl does), else the system bus. */
int scope_bus_open(sd_bus **ret);

/* Stops unit (SIGKILL to everything in it first: what is left of a crashed
 * owner needs no grace) and waits for the stop job, at most timeout_usec.
 * Returns 1 if the unit existed and was stopped, 0 if there was no such
 * unit, negative on failure. */
int scope_stop(sd_bus *bus, const char *unit, uint64_t timeout_usec, sd_bus_error *error);

/* Names of the loaded units matching a glob pattern ("agentfab-task-*.scope"). */
int scope_list(sd_bus *bus, const char *pattern, char ***ret, sd_bus_error *error);
