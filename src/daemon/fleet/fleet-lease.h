/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* This host's lease in the fleet, by its own monotonic clock: no I/O, so
 * that a unit test drives it with made-up times.
 *
 * The database keeps a host's lease until its own now() + LeaseSec at the
 * renewal. The host counts from when it *sent* the last renewal that
 * succeeded, which is no later than the database's stamp, and fences itself
 * ⅔ LeaseSec after that: other hosts take its tasks over only once the whole
 * lease has run out by the database's clock, so a fenced host stops at least
 * ⅓ LeaseSec before anybody else may start (less the drift of two clocks over
 * one lease). A host begins fenced: what it has on disk may have been taken
 * over while it was down, and it works on nothing before it has renewed and
 * checked each task in the database. */

typedef struct FleetLease {
        uint64_t lease_usec;            /* LeaseSec= */
        uint64_t renewed_usec;          /* CLOCK_MONOTONIC: when the last renewal that succeeded was sent; 0: never */
        bool fenced;                    /* works on nothing, publishes nothing */
        bool confirming;                /* renewed while fenced: the tasks' ownership is being checked */
} FleetLease;

void fleet_lease_init(FleetLease *l, uint64_t lease_usec);

/* How often to renew: a third of the lease. */
uint64_t fleet_lease_renew_interval(const FleetLease *l);

/* When the host fences itself if no renewal succeeds before: UINT64_MAX
 * while it is fenced or has never renewed. */
uint64_t fleet_lease_deadline(const FleetLease *l);

/* A renewal sent at sent_usec succeeded. Returns true when the host was
 * fenced and must now confirm, in the database, which tasks it still holds
 * (then fleet_lease_confirmed()). A renewal sent before the fence began
 * that comes back after it counts like any other. */
bool fleet_lease_renewed(FleetLease *l, uint64_t sent_usec);

/* At now_usec: true, once, when the lease has run out by our clock and the
 * host must fence itself now. */
bool fleet_lease_check(FleetLease *l, uint64_t now_usec);

/* Every task was checked after a renewal: the host works again, unless
 * the lease ran out again meanwhile (then it stays fenced; returns false). */
bool fleet_lease_confirmed(FleetLease *l, uint64_t now_usec);
