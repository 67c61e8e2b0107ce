/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "repository.h"
#include "task.h"

/* Who may see or act on a task: the one place that decides it, asked by
 * the bus's handlers and by the stream socket alike. Root sees and does
 * everything; on the session bus (development, no polkit) so does the
 * daemon's own user; an owner sees their own tasks; everything else is
 * polkit's to decide (org.agentfab.*), asynchronously. */

typedef struct BusServer BusServer;

/* The uid of the sender of message (cached per unique name and bus). */
int bus_message_get_caller(sd_bus_message *message, uid_t *ret_uid);

/* The sender's uid, gid and supplementary groups (in *ret_gids, which the
 * caller frees), for the checks a submission's repository path needs. */
int bus_message_get_caller_groups(sd_bus_message *message, Caller *ret, gid_t **ret_gids);

/* Whether uid sees every task without asking polkit: root, the daemon's
 * own user on the session bus, and the bus peer sender if it passed
 * org.agentfab.manage (GetTask()) on this connection. sender may be NULL
 * (a client of the stream socket, which has no bus name). */
bool access_uid_sees_all(BusServer *bs, uid_t uid, const char *sender);
/* Whether uid (sender, as above) may see t without asking polkit. */
bool access_uid_may_view(BusServer *bs, uid_t uid, const char *sender, Task *t);
/* The same for the sender of message; a negative errno if it is unknown. */
int access_caller_may_view(BusServer *bs, sd_bus_message *message, Task *t);

/* Authorization for an action on a task (t may be NULL): 1 allowed, 0
 * pending (the handler returns 1 and runs again later), or a negative errno
 * with error set. With owner_ok, the task's owner is allowed without asking. */
int access_verify(BusServer *bs, sd_bus_message *message, Task *t, const char *action,
                  bool owner_ok, sd_bus_error *error);
