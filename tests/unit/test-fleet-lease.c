/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "fleet-lease.h"
#include "tap.h"

#define S 1000000ULL

int main(void) {
        FleetLease l;

        /* A host begins fenced: what it has on disk may have been taken
         * over while it was down. Nothing fences it again before it works. */
        fleet_lease_init(&l, 30 * S);
        CHECK(l.fenced && !l.confirming, "a host begins fenced");
        CHECK_UINT_EQ(fleet_lease_renew_interval(&l), 10 * S, "it renews every third of the lease");
        CHECK_UINT_EQ(fleet_lease_deadline(&l), UINT64_MAX, "no deadline while fenced");
        CHECK(!fleet_lease_check(&l, 1000 * S), "no fence while fenced already");

        /* The first renewal leads to the check of its tasks, and only then
         * to work. */
        CHECK(fleet_lease_renewed(&l, 100 * S), "the first renewal asks for the tasks' check");
        CHECK(!fleet_lease_renewed(&l, 101 * S), "asked once, not again while checking");
        CHECK(l.fenced, "still fenced while checking");
        CHECK(fleet_lease_confirmed(&l, 102 * S) && !l.fenced, "works once checked");
        CHECK_UINT_EQ(fleet_lease_deadline(&l), 121 * S, "deadline: 2/3 lease after the last renewal was sent");

        /* Renewals move the deadline; one sent earlier never moves it back. */
        CHECK(!fleet_lease_renewed(&l, 110 * S), "renewed while working: nothing to check");
        CHECK_UINT_EQ(fleet_lease_deadline(&l), 130 * S, "deadline moved");
        (void) fleet_lease_renewed(&l, 105 * S);
        CHECK_UINT_EQ(fleet_lease_deadline(&l), 130 * S, "an older renewal's answer moves nothing");

        /* At the deadline, by our own clock, the host fences itself, once:
         * the others take over only at the full lease by the database's. */
        CHECK(!fleet_lease_check(&l, 130 * S - 1), "not before the deadline");
        CHECK(fleet_lease_check(&l, 130 * S) && l.fenced, "fenced at the deadline");
        CHECK(!fleet_lease_check(&l, 131 * S), "once");

        /* A renewal after the fence: the check again, then work. */
        CHECK(fleet_lease_renewed(&l, 140 * S), "renewed after the fence: check the tasks");
        CHECK(fleet_lease_confirmed(&l, 141 * S) && !l.fenced, "works again");

        /* A check that takes longer than what is left of the lease does
         * not unfence: the lease ran out meanwhile. */
        CHECK(fleet_lease_check(&l, 200 * S), "fenced again");
        CHECK(fleet_lease_renewed(&l, 201 * S), "renewed");
        CHECK(!fleet_lease_confirmed(&l, 221 * S) && l.fenced && !l.confirming,
              "a check answered after the lease ran out again leaves the host fenced");
        CHECK(fleet_lease_renewed(&l, 230 * S), "the next renewal checks again");
        /* A check that a lapse of the lease overtakes starts over. */
        CHECK(!fleet_lease_check(&l, 250 * S) && !l.confirming, "a check overtaken by the lease starts over");
        CHECK(!fleet_lease_confirmed(&l, 251 * S) && l.fenced, "and its late answer changes nothing");

        /* The shortest lease still leaves a third of it between the fence
         * and a takeover. */
        fleet_lease_init(&l, 3 * S);
        (void) fleet_lease_renewed(&l, 10 * S);
        (void) fleet_lease_confirmed(&l, 10 * S);
        CHECK_UINT_EQ(fleet_lease_deadline(&l), 12 * S, "LeaseSec=3s: fenced 2s after the renewal was sent");

        return tap_done();
}
