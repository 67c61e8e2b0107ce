/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
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

/* Connects a socket to systemd's private socket (root only): systemd
 * accepts it and sets it up while we do other things. Returns the fd or a
 * negative errno. */
int scope_connect_private(void);

/* Connects to the system manager: over fd (from scope_connect_private(),
 * taken over; or -EBADF) or else its private socket when we are root (one
 * hop less, as systemctl does), else the system bus. Loads libsystemd on
 * first use. */
int scope_bus_open(int fd, sd_bus **ret);

/* For callers that do not link libsystemd themselves. */
sd_bus *scope_bus_close(sd_bus *bus);
void scope_bus_closep(sd_bus **bus);
void scope_error_free(sd_bus_error *e);
bool scope_manager_booted(void); /* sd_booted() */

/* Stops unit (SIGKILL to everything in it first: what is left of a crashed
 * owner needs no grace) and waits for the stop job, at most timeout_usec.
 * Returns 1 if the unit existed and was stopped, 0 if there was no such
 * unit, negative on failure. */
int scope_stop(sd_bus *bus, const char *unit, uint64_t timeout_usec, sd_bus_error *error);

/* Names of the loaded units matching a glob pattern ("agentfab-task-*.scope"). */
int scope_list(sd_bus *bus, const char *pattern, char ***ret, sd_bus_error *error);

/* systemd's own freezer: FreezeUnit() or ThawUnit() of unit, which answers
 * once the unit is frozen (or thawed). Fails with
 * org.freedesktop.DBus.Error.NotSupported where systemd cannot freeze it
 * (systemd 252 on a hybrid cgroup hierarchy). */
int scope_freeze(sd_bus *bus, const char *unit, bool freeze, sd_bus_error *error);
