/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The fleet's claim benchmark: TASKS queued tasks, hosts claiming BATCH at a
 * time through src/fleet until the queue is empty, each host on its own
 * connection and role, all three with a claim in flight at once. Measured:
 * claims per second, and the database's CPU time (user + system of the
 * postmaster and every process it forked, from /proc/PID/stat, before and
 * after). Against two baselines measured in the same run, on the same
 * cluster and client path:
 *   naive   the same claim with FOR UPDATE and no SKIP LOCKED: claimers
 *           queue up behind each other's row locks;
 *   single  one host claiming alone with SKIP LOCKED.
 *
 *   fleet-claims [TASKS [BATCH]]      (in tests/fleet/pg.sh's environment)
 *
 * Prints; never judges. */

#include <dirent.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "fleet-db-internal.h"
#include "fleet-db.h"
#include "macro.h"
#include "time-util.h"

#define N_HOSTS 3

static sd_event *event;

/* The baseline claim: agentfab.claim() without SKIP LOCKED, made by the
 * schema's owner for this benchmark only. */
static const char naive_claim_sql[] =
        "CREATE OR REPLACE FUNCTION agentfab.bench_claim_naive(p_max integer)\n"
        "RETURNS TABLE (id text, owner text, spec text, environment text, epoch bigint, checkpoint text)\n"
        "LANGUAGE plpgsql SECURITY DEFINER SET search_path = agentfab, pg_temp AS $f$\n"
        "#variable_conflict use_column\n"
        "DECLARE h text := caller_live_host(); envs text[];\n"
        "BEGIN\n"
        "        SELECT hosts.environments INTO envs FROM hosts WHERE name = h;\n"
        "        RETURN QUERY\n"
        "        WITH c AS (SELECT t.id FROM tasks t\n"
        "                   WHERE t.state = 'queued' AND (t.environment IS NULL OR t.environment = ANY (envs))\n"
        "                   ORDER BY t.created, t.id LIMIT p_max FOR UPDATE)\n"
        "        UPDATE tasks t SET state = 'running', host = h, epoch = t.epoch + 1, updated = now()\n"
        "                FROM c WHERE t.id = c.id\n"
        "                RETURNING t.id, t.owner, t.spec::text, t.environment, t.epoch, t.checkpoint;\n"
        "END $f$";

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

/* CPU time in clock ticks of pid and every process whose parent it is. */
static uint64_t proc_ticks(pid_t pid) {
        char path[64], buf[1024];
        unsigned long utime = 0, stime = 0;
        FILE *f;
        char *p;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        if (!fgets(buf, sizeof(buf), f)) {
                fclose(f);
                return 0;
        }
        fclose(f);
        /* After "pid (comm) ": state is field 3; utime and stime 14 and 15. */
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
                return 0;
        return utime + stime;
}

static pid_t proc_ppid(pid_t pid) {
        char path[64], buf[1024];
        FILE *f;
        char *p;
        int ppid = 0;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = '\0';
        fclose(f);
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 2, "%*c %d", &ppid) != 1)
                return 0;
        return ppid;
}

static uint64_t db_cpu_usec(pid_t postmaster) {
        uint64_t ticks = proc_ticks(postmaster);
        DIR *d = opendir("/proc");
        struct dirent *de;

        while (d && (de = readdir(d))) {
                pid_t pid = (pid_t) atoi(de->d_name);
                if (pid > 0 && proc_ppid(pid) == postmaster)
                        ticks += proc_ticks(pid);
        }
        if (d)
                closedir(d);
        return ticks * USEC_PER_SEC / (uint64_t) sysconf(_SC_CLK_TCK);
}

typedef struct Claimer {
        FleetDb *db;
        bool naive;
        unsigned batch;
        size_t claimed, empty;
        int error;
        bool busy;
} Claimer;

static size_t total_claimed, target;

static void claim_next(Claimer *cl);

static void on_claimed(Claimer *cl, int error, size_t n) {
        cl->busy = false;
        if (error < 0) {
                cl->error = error;
                return;
        }
        cl->claimed += n;
        total_claimed += n;
        if (n == 0)
                cl->empty++;
        /* A naive claimer that waited on a row another took gets fewer
         * rows, or none, while tasks remain: it claims again until all
         * are claimed. */
        if (total_claimed < target)
                claim_next(cl);
}

static void on_claims(FleetDb *db, int error, const char *message, const FleetClaim *c, size_t n, void *userdata) {
        on_claimed(userdata, error, n);
}

static void on_naive(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *message) {
        on_claimed(q->userdata, error, error < 0 || !res ? 0 : (size_t) PQntuples(res));
}

static void claim_next(Claimer *cl) {
        char batch[16];
        int r;

        cl->busy = true;
        if (!cl->naive) {
                r = fleet_db_claim(cl->db, cl->batch, on_claims, cl);
        } else {
                snprintf(batch, sizeof(batch), "%u", cl->batch);
                r = fleet_db_query(cl->db, "SELECT * FROM agentfab.bench_claim_naive($1)", (const char *[]) { batch },
                                   1, on_naive, NULL, cl, NULL, NULL);
        }
        if (r < 0) {
                cl->busy = false;
                cl->error = r;
        }
}

static void on_done(FleetDb *db, int error, const char *message, void *userdata) {
        int *r = userdata;
        *r = error < 0 ? error : 1;
        if (error < 0)
                fprintf(stderr, "fleet-claims: %s\n", message ?: "failed");
}

static void on_lease(FleetDb *db, int error, const char *message, uint64_t until, void *userdata) {
        on_done(db, error, message, userdata);
}

static int wait_result(int *r) {
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + 60 * USEC_PER_SEC;

        while (*r == 0 && clock_now_usec(CLOCK_MONOTONIC) < deadline)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        return *r < 0 ? *r : *r == 0 ? -ETIMEDOUT : 0;
}

typedef struct Figures {
        double seconds, claims_per_sec, cpu_ms, cpu_usec_per_claim;
        size_t empty;
} Figures;

static int run_mode(const char *name, FleetDb **hosts, unsigned n_hosts, bool naive, unsigned batch,
                    const char *owner, pid_t postmaster, unsigned tasks, Figures *ret) {
        Claimer cl[N_HOSTS] = {};
        char sql[512];
        uint64_t t0, t1, c0, c1;
        int r;

        /* Created a microsecond apart, so that "oldest first" is one order. */
        snprintf(sql, sizeof(sql),
                 "INSERT INTO agentfab.tasks (id, owner, spec, created) "
                 "SELECT 'b' || g, 'bench@bench-a', '{}', now() + g * interval '1 microsecond' "
                 "FROM generate_series(1, %u) g", tasks);
        r = exec_sql(owner, "DELETE FROM agentfab.tasks");
        if (r >= 0)
                r = exec_sql(owner, sql);
        if (r >= 0)
                r = exec_sql(owner, "VACUUM ANALYZE agentfab.tasks");
        if (r < 0)
                return r;

        total_claimed = 0;
        target = tasks;
        c0 = db_cpu_usec(postmaster);
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < n_hosts; i++) {
                cl[i] = (Claimer) { .db = hosts[i], .naive = naive, .batch = batch };
                claim_next(cl + i);
        }
        for (;;) {
                bool busy = false, failed = false;
                for (unsigned i = 0; i < n_hosts; i++) {
                        busy = busy || cl[i].busy;
                        failed = failed || cl[i].error < 0;
                }
                if (!busy || failed)
                        break;
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        }
        t1 = clock_now_usec(CLOCK_MONOTONIC);
        c1 = db_cpu_usec(postmaster);
        for (unsigned i = 0; i < n_hosts; i++)
                if (cl[i].error < 0) {
                        fprintf(stderr, "fleet-claims: %s: a claim failed: %s\n", name, strerror(-cl[i].error));
                        return cl[i].error;
                }
        if (total_claimed != tasks) {
                fprintf(stderr, "fleet-claims: %s: %zu claimed of %u\n", name, total_claimed, tasks);
                return -EIO;
        }

        *ret = (Figures) {
                .seconds = (double) (t1 - t0) / USEC_PER_SEC,
                .claims_per_sec = (double) tasks * USEC_PER_SEC / (double) (t1 - t0),
                .cpu_ms = (double) (c1 - c0) / 1000.0,
                .cpu_usec_per_claim = (double) (c1 - c0) / tasks,
        };
        for (unsigned i = 0; i < n_hosts; i++)
                ret->empty += cl[i].empty;
        printf("%-34s %6.2f s %8.0f claims/s   DB CPU %7.0f ms (%5.0f µs per task)   empty claims %zu",
               name, ret->seconds, ret->claims_per_sec, ret->cpu_ms, ret->cpu_usec_per_claim, ret->empty);
        if (n_hosts > 1) {
                printf("   per host");
                for (unsigned i = 0; i < n_hosts; i++)
                        printf(" %zu", cl[i].claimed);
        }
        printf("\n");
        return 0;
}

int main(int argc, char *argv[]) {
        const char *base = getenv("PG_CONNINFO"), *owner = getenv("PG_OWNER_CONNINFO"),
                   *admin = getenv("PG_ADMIN_CONNINFO"), *dir = getenv("PG_DIR");
        unsigned tasks = argc > 1 ? (unsigned) atoi(argv[1]) : 1000, batch = argc > 2 ? (unsigned) atoi(argv[2]) : 1;
        FleetDb *owner_db = NULL, *hosts[N_HOSTS] = {};
        Figures skip3, naive3, single;
        char path[512], conninfo[512];
        pid_t postmaster = 0;
        FILE *f;
        int r, done;

        if (!base || !owner || !admin || !dir) {
                fprintf(stderr, "fleet-claims: run in tests/fleet/pg.sh's environment (bash bench/fleet-claims.sh)\n");
                return 1;
        }
        if (tasks < 1 || batch < 1 || batch > FLEET_DB_CLAIM_MAX) {
                fprintf(stderr, "fleet-claims: TASKS and BATCH must be positive\n");
                return 1;
        }
        snprintf(path, sizeof(path), "%s/data/postmaster.pid", dir);
        f = fopen(path, "re");
        if (!f || fscanf(f, "%d", &postmaster) != 1 || postmaster <= 0) {
                fprintf(stderr, "fleet-claims: no postmaster pid in %s\n", path);
                return 1;
        }
        fclose(f);

        if (sd_event_new(&event) < 0)
                return 1;
        r = exec_sql(admin, "CREATE ROLE bench_a LOGIN; CREATE ROLE bench_b LOGIN; CREATE ROLE bench_c LOGIN");
        if (r < 0)
                return 1;
        if (fleet_db_new(event, owner, &owner_db) < 0)
                return 1;
        done = 0;
        if (fleet_db_migrate(owner_db, on_done, &done) < 0 || wait_result(&done) < 0)
                return 1;
        for (unsigned i = 0; i < N_HOSTS; i++) {
                char host[16], role[16];
                snprintf(host, sizeof(host), "bench-%c", 'a' + i);
                snprintf(role, sizeof(role), "bench_%c", 'a' + i);
                done = 0;
                if (fleet_db_add_host(owner_db, host, role, on_done, &done) < 0 || wait_result(&done) < 0)
                        return 1;
                snprintf(conninfo, sizeof(conninfo), "%s user=%s", base, role);
                if (fleet_db_new(event, conninfo, &hosts[i]) < 0)
                        return 1;
                done = 0;
                if (fleet_db_renew(hosts[i], 600 * USEC_PER_SEC, NULL, on_lease, &done) < 0 ||
                    wait_result(&done) < 0)
                        return 1;
        }
        if (exec_sql(owner, naive_claim_sql) < 0)
                return 1;

        printf("fleet claims: %u queued tasks, claims of %u, PostgreSQL 15 on 127.0.0.1, %ld CPUs\n", tasks, batch,
               sysconf(_SC_NPROCESSORS_ONLN));
        if (run_mode("3 hosts, SKIP LOCKED (agentfab)", hosts, 3, false, batch, owner, postmaster, tasks, &skip3) < 0 ||
            run_mode("3 hosts, FOR UPDATE (naive)", hosts, 3, true, batch, owner, postmaster, tasks, &naive3) < 0 ||
            run_mode("1 host, SKIP LOCKED", hosts, 1, false, batch, owner, postmaster, tasks, &single) < 0)
                return 1;
        printf("ratios: SKIP LOCKED vs naive FOR UPDATE, 3 hosts: %.2fx the claims/s, %.2fx the DB CPU per task\n",
               skip3.claims_per_sec / naive3.claims_per_sec, skip3.cpu_usec_per_claim / naive3.cpu_usec_per_claim);
        printf("ratios: 3 hosts vs 1 host, SKIP LOCKED: %.2fx the claims/s, %.2fx the DB CPU per task\n",
               skip3.claims_per_sec / single.claims_per_sec, skip3.cpu_usec_per_claim / single.cpu_usec_per_claim);

        for (unsigned i = 0; i < N_HOSTS; i++)
                fleet_db_free(hosts[i]);
        fleet_db_free(owner_db);
        sd_event_unref(event);
        return 0;
}
