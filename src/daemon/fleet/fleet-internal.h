/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the fleet room's modules share: the host's state (fleet.c), the
 * queue (fleet-queue.c) and the takeover (fleet-takeover.c). Nothing
 * outside src/daemon/fleet/ includes this. */

#include "fleet-ack.h"
#include "fleet-lease.h"
#include "fleet.h"

/* A task this host holds: claimed from the queue (or found on disk and
 * confirmed in the database). */
typedef struct FleetHeld {
        char *id;
        uint64_t epoch;
        bool paused_by_fence;   /* Pause()d by the fence: the fence's end resumes it */
        bool finished;          /* its end waits to be written (fenced, or the connection broke) */
        bool ending;            /* its end is being written */
        bool publishing;        /* its last tip is being pushed to Remote=: its end is written after */
} FleetHeld;

/* A call of ours whose answer is pending: freed with the Fleet if the
 * database never answers (fleet_db_free() calls no handler). */
typedef struct FleetCall {
        Fleet *fleet;
        struct FleetCall *next, *prev;
        fleet_done_t done;
        fleet_list_t list;
        char *task_id;
        void *userdata;
} FleetCall;

struct Fleet {
        Factory *factory;
        FleetDb *db;
        char *host;
        FleetLease lease;
        unsigned slots;

        sd_event_source *renew_timer;   /* every LeaseSec/3 */
        sd_event_source *fence_timer;   /* at the lease's deadline by our clock */

        bool migrated;
        bool migrating;
        bool renewing;
        bool claiming;
        bool reaping;
        bool find_lost;                 /* a reap's answer was lost: read what we hold after the claim in flight */
        unsigned confirming;            /* reads of our tasks outstanding */
        unsigned creating;              /* claimed tasks being recorded or taken over */

        FleetHeld *held;
        size_t n_held;
        FleetCall *calls;
        FleetAcks *acks;
        FleetPeople *people;

        const FleetHooks *hooks;
        void *userdata;
};

/* Calls in flight (freed with the Fleet if the database never answers). */
FleetCall *fleet_call_new(Fleet *fl);
void fleet_call_free(FleetCall *c);

/* The tasks this host holds. */
FleetHeld *fleet_held_find(const Fleet *fl, const char *id);
int fleet_held_add(Fleet *fl, const char *id, uint64_t epoch);
void fleet_held_remove(Fleet *fl, const char *id);
/* Tasks held and not ended, plus those being recorded or taken over:
 * what counts against Slots=. */
unsigned fleet_busy_slots(const Fleet *fl);
/* Writes a held task's end back (or after the fence, if fenced). */
void fleet_write_end(Fleet *fl, FleetHeld *h, TaskState state);

/* The queue (fleet-queue.c). */
void fleet_claim_more(Fleet *fl);
int fleet_take_claim(Fleet *fl, const FleetClaim *c);

/* After a claim or reap whose answer was lost with the connection: what
 * the database says this host holds and it does not know of is taken. */
void fleet_find_lost_claims(Fleet *fl);

/* The takeover (fleet-takeover.c). */
void fleet_reap_more(Fleet *fl);
/* Takes c over: a task reaped, or claimed back with what was acknowledged
 * of it (c->takeover), or found held after a lost answer at epoch > 1. */
void fleet_take_over(Fleet *fl, const FleetClaim *c);
