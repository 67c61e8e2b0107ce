/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "environments.h"
#include "macro.h"

typedef struct Factory Factory;
typedef struct Task Task;

/* agentfabd's side of the egress proxy (agentfab-proxy(8)): one control
 * connection, made when the first task needs a network and watched on the
 * event loop; each task of an environment with Network=allowlist|audited is
 * registered for the life of its sandbox, with the environment's Allow=
 * entries and the hosts approvals added (TaskProgress.allowed_hosts), and
 * its channel goes to the launcher with the sandbox request. The proxy
 * tells us of refused connections; in allowlist mode the first one of a
 * step trips the task's network breaker, naming the host.
 *
 * When the proxy goes away (a restart, a crash), every registration is
 * gone with the connection, and with it the forwarder in each sandbox: the
 * tasks' commands find no network at all. Each such task gets a new
 * sandbox, registered anew over a new connection, before its next step
 * (egress_task_lost()). A task that needs a network and cannot have it
 * fails with the reason; it never runs with more network than allowed. */

typedef struct Egress Egress;

int egress_new(Factory *f, Egress **ret);
Egress *egress_free(Egress *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(Egress *, egress_free);

/* Registers task t for a sandbox of environment env (whose Network= is not
 * off): *ret_channel_fd is the channel to hand to the launcher (close it
 * after). On failure a negative errno and *ret_error, a sentence. */
int egress_register(Egress *e, Task *t, const Environment *env, int *ret_channel_fd, char **ret_error);

/* Adds what the task's connections used since the last call (or its
 * registration) to its progress's counters (TaskResources). */
void egress_account(Egress *e, Task *t);

/* Ends the task's registration, if it has one (its sandbox ends or was
 * given up). */
void egress_unregister(Egress *e, const char *task_id);

/* Whether the task's registration was lost with the proxy's connection
 * since it was made: its sandbox has no network any more and must be
 * replaced (egress_unregister() forgets this). */
bool egress_task_lost(Egress *e, const char *task_id);

/* Reads what the proxy has sent so far, without waiting: refusals that
 * arrived with a command's end are counted in its step. */
void egress_poll(Egress *e);

/* The first connection refused to the task in allowlist mode since the
 * last call: 1 with *ret_host ("host" or "host:port" as an Allow= entry
 * would name it) and *ret_reason, 0 if there was none. */
int egress_take_refusal(Egress *e, const char *task_id, char **ret_host, char **ret_reason);

/* An approval's --allow-host entries: checked (shape, bound), added to the
 * task's state (the caller persists it) and, if the task is registered, to
 * the proxy's allowlist at once; journaled with who allowed them. Errors
 * are org.freedesktop.DBus.Error.InvalidArgs. */
int egress_task_allow(Egress *e, Task *t, char **hosts, uid_t caller, sd_bus_error *error);
