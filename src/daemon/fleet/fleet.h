/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "factory.h"
#include "fleet-db.h"
#include "ledger.h"

/* This daemon as one host of a fleet ([Fleet] in agentfab.conf(5)): its
 * connection to the fleet's database (src/fleet/fleet-db.h), its lease and
 * the fence, and the queue. The room sits above agent/ (it freezes and
 * stops agents) and below the manager, which installs its hooks; the bus
 * room asks it to queue a submission and to list the fleet's tasks.
 *
 * The lease: the host renews its liveness row every LeaseSec/3; a host
 * that could not renew for ⅔ LeaseSec by its own monotonic clock fences
 * itself (fleet-lease.h): it pauses and freezes every task at work, starts
 * none, claims none and writes nothing more to the database, until a
 * renewal succeeds and it has asked the database, task by task, which it
 * still holds. Those it holds carry on; those it lost are cancelled here
 * and never reported (another host has them). A daemon begins fenced, so
 * that what it has on disk is checked the same way after a restart.
 *
 * The queue: on a fleet host a submission is a row in the database, not a
 * task of its own; every host claims queued tasks up to its Slots=, woken
 * by the database's notifications and by each renewal (notifications sent
 * while disconnected are lost), and a claimed task becomes a task here
 * through the ordinary record (task_create()) and the manager. A task's
 * end is written back under the epoch its claim got.
 *
 * The takeover (fleet-takeover.c): with each renewal a host with free
 * slots also claims the running tasks of hosts whose lease ran out, and
 * goes on with each from its last acknowledged step. */

typedef struct Fleet Fleet;

typedef struct FleetHooks {
        /* t, claimed from the queue, is on disk: add it as a submitted task
         * (takes t). */
        int (*task_claimed)(Fleet *fl, Task *t, void *userdata);
        /* t, taken over from a host whose lease ran out, is on disk as
         * that host acknowledged it: add it as a task to resume (takes t). */
        int (*task_taken_over)(Fleet *fl, Task *t, void *userdata);
        /* The host may work again: start what may start. */
        void (*unfenced)(Fleet *fl, void *userdata);
} FleetHooks;

/* Connects (in the background, again and again until it works), migrates
 * the schema and starts renewing. f's configuration has [Fleet]. */
int fleet_new(Factory *f, const FleetHooks *hooks, void *userdata, Fleet **ret);
Fleet *fleet_free(Fleet *fl);
static inline void fleet_freep(Fleet **fl) {
        fleet_free(*fl);
}

/* Whether the host works on nothing now (see above). */
bool fleet_is_fenced(const Fleet *fl);
const char *fleet_host(const Fleet *fl);
/* The epoch of a task this host holds; 0 for any other. */
uint64_t fleet_task_epoch(const Fleet *fl, const char *id);

/* What a job that pushes to or fetches from Remote= takes along: for an
 * ssh:// Remote=, this host's own key (RemoteSSHKeyCredential=) and the
 * known hosts ([Git] SSHKnownHostsCredential=), read now so that a renewed
 * credential counts from the next job on; nothing for another URL. Free
 * with ssh_credentials_done(), which wipes them; never log them. The
 * message in *ret_error names the credential only. */
int fleet_remote_read_ssh(const Config *c, SshCredentials *ret, char **ret_error);
/* The ledger's options for Remote= (ledger_publish() and co.), pointing
 * into s. */
LedgerOptions fleet_remote_options(const SshCredentials *s);

/* For the fleet's other modules (fleet-ack.c). */
Factory *fleet_factory(const Fleet *fl);
FleetDb *fleet_database(const Fleet *fl);
/* People on any host (fleet-people.h). */
typedef struct FleetPeople FleetPeople;
FleetPeople *fleet_people(const Fleet *fl);
/* Another host holds t now: its agent is stopped, it is cancelled here
 * and never reported. */
void fleet_task_lost(Fleet *fl, Task *t);

/* t's state changed: a final one is written back, and a slot is free. */
void fleet_task_state_changed(Fleet *fl, Task *t);

/* Queues a submission: t is a task as SubmitTask() built it (its id, spec,
 * owner), not added anywhere. done gets 0 once the row is committed, or
 * the error and the database's message. */
typedef void (*fleet_done_t)(Fleet *fl, int error, const char *message, void *userdata);
int fleet_enqueue(Fleet *fl, const Task *t, fleet_done_t done, void *userdata);

/* A task's owner in the fleet is "USER@HOST", the host it was submitted on;
 * the hosts share their users (the same NSS, agentfabd(8)), so USER is the
 * same person on every host. fleet_owner_uid() looks USER up here
 * (-EINVAL: not USER@HOST, -ESRCH: no such user); fleet_owner_is() says
 * whether owner is user's. */
int fleet_owner_uid(const char *owner, uid_t *ret);
bool fleet_owner_is(const char *owner, const char *user);

/* Every task of the fleet, newest first (fleet-db.h's FleetTaskInfo). */
typedef void (*fleet_list_t)(Fleet *fl, int error, const char *message, const FleetTaskInfo *tasks, size_t n,
                             void *userdata);
int fleet_list(Fleet *fl, fleet_list_t done, void *userdata);
