/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>

#include "fleet-lease.h"

void fleet_lease_init(FleetLease *l, uint64_t lease_usec) {
        assert(l);
        *l = (FleetLease) {
                .lease_usec = lease_usec,
                .fenced = true,
        };
}

uint64_t fleet_lease_renew_interval(const FleetLease *l) {
        return l->lease_usec / 3;
}

uint64_t fleet_lease_deadline(const FleetLease *l) {
        if (l->fenced || l->renewed_usec == 0)
                return UINT64_MAX;
        return l->renewed_usec + l->lease_usec / 3 * 2;
}

bool fleet_lease_renewed(FleetLease *l, uint64_t sent_usec) {
        assert(l);

        /* Replies come in the order sent (one connection), but a renewal
         * that was sent earlier never moves the lease back. */
        if (sent_usec > l->renewed_usec)
                l->renewed_usec = sent_usec;
        if (!l->fenced || l->confirming)
                return false;
        l->confirming = true;
        return true;
}

bool fleet_lease_check(FleetLease *l, uint64_t now_usec) {
        assert(l);

        if (l->fenced) {
                /* Confirming on a lease that ran out again: start over
                 * with the next renewal. */
                if (l->confirming && l->renewed_usec + l->lease_usec / 3 * 2 <= now_usec)
                        l->confirming = false;
                return false;
        }
        if (l->renewed_usec + l->lease_usec / 3 * 2 > now_usec)
                return false;
        l->fenced = true;
        l->confirming = false;
        return true;
}

bool fleet_lease_confirmed(FleetLease *l, uint64_t now_usec) {
        assert(l);

        if (!l->confirming)
                return false;
        l->confirming = false;
        if (l->renewed_usec + l->lease_usec / 3 * 2 <= now_usec)
                return false;
        l->fenced = false;
        return true;
}
