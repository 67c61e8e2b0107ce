/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* How long after a host's death its task is another host's, at the
 * database: the floor under the fleet's takeover time, which the daemon's
 * resume adds to. Host A claims a task and renews its lease every
 * LeaseSec/3, as agentfabd does; it dies (stops renewing) at a random
 * moment between two renewals. Host B renews and reaps every LeaseSec/3 on
 * a timer of its own, as agentfabd does; the time from A's death to the
 * reap that returns the task is measured, RUNS times.
 *
 *   fleet-takeover [RUNS [LEASE_SEC]]      (in tests/fleet/pg.sh's environment)
 *
 * With a lease that ends LeaseSec after A's last renewal and a reap every
 * LeaseSec/3, the time lies between 2/3 and 4/3 LeaseSec (A dies between
 * 0 and 1/3 LeaseSec after renewing, so its lease ends 2/3 to 1 LeaseSec
 * after its death; B's next reap comes within 1/3 LeaseSec of that).
 * Prints; never judges. */

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "fleet-db.h"
#include "macro.h"
#include "time-util.h"

static sd_event *event;

typedef struct Op {
        bool done;
        int error;
        size_t n;
        char id[64];
} Op;

static void on_done(FleetDb *db, int error, const char *message, void *userdata) {
        Op *op = userdata;
        op->done = true;
        op->error = error;
        if (error < 0)
                fprintf(stderr, "fleet-takeover: %s\n", message ?: "failed");
}

static void on_lease(FleetDb *db, int error, const char *message, uint64_t until, void *userdata) {
        on_done(db, error, message, userdata);
}

static void on_claims(FleetDb *db, int error, const char *message, const FleetClaim *c, size_t n, void *userdata) {
        Op *op = userdata;

        on_done(db, error, message, userdata);
        op->n = n;
        if (n > 0)
                snprintf(op->id, sizeof(op->id), "%s", c[0].id);
}

static int wait_op(Op *op) {
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + 60 * USEC_PER_SEC;

        while (!op->done && clock_now_usec(CLOCK_MONOTONIC) < deadline)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        return !op->done ? -ETIMEDOUT : op->error;
}

/* Host B: renews and reaps every LeaseSec/3; records when a reap returns
 * the task. */
typedef struct Reaper {
        FleetDb *db;
        uint64_t lease_usec;
        Op renew, reap;
        bool busy;
        uint64_t found_usec;
        char found[64];
} Reaper;

static void on_reaped(FleetDb *db, int error, const char *message, const FleetClaim *c, size_t n, void *userdata) {
        Reaper *rp = userdata;

        rp->busy = false;
        if (error < 0) {
                fprintf(stderr, "fleet-takeover: reap: %s\n", message ?: "failed");
                return;
        }
        if (n > 0 && rp->found_usec == 0) {
                rp->found_usec = clock_now_usec(CLOCK_MONOTONIC);
                snprintf(rp->found, sizeof(rp->found), "%s", c[0].id);
        }
}

static void on_reaper_renewed(FleetDb *db, int error, const char *message, uint64_t until, void *userdata) {
        Reaper *rp = userdata;

        if (error < 0 || fleet_db_reap(db, 16, on_reaped, rp) < 0)
                rp->busy = false;
}

static int reaper_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Reaper *rp = userdata;

        (void) sd_event_source_set_time(s, usec + rp->lease_usec / 3);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        if (rp->busy)
                return 0;
        rp->busy = true;
        if (fleet_db_renew(rp->db, rp->lease_usec, NULL, on_reaper_renewed, rp) < 0)
                rp->busy = false;
        return 0;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static int exec_sql(const char *conninfo, const char *sql) {
        PGconn *c = PQconnectdb(conninfo);
        PGresult *res;
        int r = 0;

        if (PQstatus(c) != CONNECTION_OK) {
                fprintf(stderr, "connect: %s", PQerrorMessage(c));
                PQfinish(c);
                return -ECONNREFUSED;
        }
        res = PQexec(c, sql);
        if (!IN_SET(PQresultStatus(res), PGRES_COMMAND_OK, PGRES_TUPLES_OK)) {
                fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
                r = -EIO;
        }
        PQclear(res);
        PQfinish(c);
        return r;
}

int main(int argc, char *argv[]) {
        const char *base = getenv("PG_CONNINFO"), *owner = getenv("PG_OWNER_CONNINFO"),
                   *admin = getenv("PG_ADMIN_CONNINFO");
        unsigned runs = argc > 1 ? (unsigned) atoi(argv[1]) : 20, lease_sec = argc > 2 ? (unsigned) atoi(argv[2]) : 3;
        FleetDb *owner_db = NULL, *a = NULL, *b = NULL;
        sd_event_source *tick = NULL;
        Reaper rp = {};
        uint64_t *took, lease, now = 0;
        char conninfo[512];
        Op op = {};

        if (!base || !owner || !admin) {
                fprintf(stderr, "fleet-takeover: run in tests/fleet/pg.sh's environment (bash bench/fleet-takeover.sh)\n");
                return 1;
        }
        if (runs < 1 || runs > 1000 || lease_sec < 1 || lease_sec > 3600) {
                fprintf(stderr, "fleet-takeover: RUNS 1...1000, LEASE_SEC 1...3600\n");
                return 1;
        }
        lease = lease_sec * USEC_PER_SEC;
        took = calloc(runs, sizeof(uint64_t));
        if (!took || sd_event_new(&event) < 0)
                return 1;
        srandom((unsigned) clock_now_usec(CLOCK_REALTIME));

        if (exec_sql(admin, "CREATE ROLE bench_a LOGIN; CREATE ROLE bench_b LOGIN") < 0 ||
            fleet_db_new(event, owner, &owner_db) < 0)
                return 1;
        op = (Op) {};
        if (fleet_db_migrate(owner_db, on_done, &op) < 0 || wait_op(&op) < 0)
                return 1;
        op = (Op) {};
        if (fleet_db_add_host(owner_db, "bench-a", "bench_a", on_done, &op) < 0 || wait_op(&op) < 0)
                return 1;
        op = (Op) {};
        if (fleet_db_add_host(owner_db, "bench-b", "bench_b", on_done, &op) < 0 || wait_op(&op) < 0)
                return 1;
        snprintf(conninfo, sizeof(conninfo), "%s user=bench_a", base);
        if (fleet_db_new(event, conninfo, &a) < 0)
                return 1;
        snprintf(conninfo, sizeof(conninfo), "%s user=bench_b", base);
        if (fleet_db_new(event, conninfo, &b) < 0)
                return 1;

        /* Host B's timer runs through all the runs, so that its phase
         * against each death is whatever it happens to be. */
        rp = (Reaper) { .db = b, .lease_usec = lease };
        (void) sd_event_now(event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_time(event, &tick, CLOCK_MONOTONIC, now, 0, reaper_tick, &rp) < 0)
                return 1;

        printf("fleet takeover at the database: LeaseSec=%u, renewals and reaps every LeaseSec/3, %u runs\n",
               lease_sec, runs);
        for (unsigned i = 0; i < runs; i++) {
                char id[32];
                uint64_t death, offset;

                snprintf(id, sizeof(id), "takeover-%u", i);
                op = (Op) {};
                if (fleet_db_renew(a, lease, NULL, on_lease, &op) < 0 || wait_op(&op) < 0)
                        return 1;
                op = (Op) {};
                if (fleet_db_enqueue(a, id, "bench@bench-a", "{}", NULL, on_done, &op) < 0 || wait_op(&op) < 0)
                        return 1;
                /* B must not claim it from the queue: only A claims here. */
                op = (Op) {};
                if (fleet_db_claim(a, 1, on_claims, &op) < 0 || wait_op(&op) < 0 || op.n != 1 || !streq(op.id, id)) {
                        fprintf(stderr, "fleet-takeover: host A did not claim %s\n", id);
                        return 1;
                }

                /* A's last renewal, then its death somewhere before the next. */
                op = (Op) {};
                if (fleet_db_renew(a, lease, NULL, on_lease, &op) < 0 || wait_op(&op) < 0)
                        return 1;
                offset = (uint64_t) random() % (lease / 3);
                death = clock_now_usec(CLOCK_MONOTONIC) + offset;
                while (clock_now_usec(CLOCK_MONOTONIC) < death)
                        (void) sd_event_run(event, 10 * USEC_PER_MSEC);

                rp.found_usec = 0;
                rp.found[0] = '\0';
                while (rp.found_usec == 0 && clock_now_usec(CLOCK_MONOTONIC) < death + 4 * lease)
                        (void) sd_event_run(event, 100 * USEC_PER_MSEC);
                if (rp.found_usec == 0 || !streq(rp.found, id)) {
                        fprintf(stderr, "fleet-takeover: run %u: no takeover of %s within 4 LeaseSec\n", i, id);
                        return 1;
                }
                took[i] = rp.found_usec - death;

                /* B ends it, so that the next run starts clean. */
                op = (Op) {};
                if (fleet_db_finish(b, id, 2, FLEET_TASK_SUCCEEDED, on_done, &op) < 0 || wait_op(&op) < 0)
                        return 1;
        }

        qsort(took, runs, sizeof(uint64_t), cmp_u64);
        printf("from death to the task reaped by another host: median %.2f s (%.2f LeaseSec), best %.2f s, worst %.2f s "
               "(%.2f LeaseSec)\n",
               (double) took[runs / 2] / USEC_PER_SEC, (double) took[runs / 2] / lease,
               (double) took[0] / USEC_PER_SEC, (double) took[runs - 1] / USEC_PER_SEC,
               (double) took[runs - 1] / lease);

        sd_event_source_disable_unref(tick);
        fleet_db_free(a);
        fleet_db_free(b);
        fleet_db_free(owner_db);
        sd_event_unref(event);
        free(took);
        return 0;
}
