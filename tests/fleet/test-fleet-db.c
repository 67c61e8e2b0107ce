/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The fleet's database layer against a real PostgreSQL 15 (tests/fleet/pg.sh
 * starts a private cluster; tests/fleet/run.sh runs this in it). Three
 * "hosts" are three connections with roles of their own, as three agentfab
 * hosts would be. Nothing is mocked: the claims race on the server, the
 * leases run by its clock, the restart is pg_ctl's. */

#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#include "fleet-db-internal.h"
#include "fleet-db.h"
#include "fleet-test.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "tap.h"
#include "time-util.h"

#define N_TASKS 300
#define N_GPU_TASKS 20

/* Claiming hosts: each claims again as soon as its claim returns, until one
 * comes back empty, so that the three claims overlap on the server. */
typedef struct Claimer {
        FleetDb *db;
        const char *name;
        Result r;
        bool finished;
        int error;
        char **ids;
        size_t n_claims, n_epoch_one;
} Claimer;

static void on_claimer(FleetDb *db, int error, const char *message, const FleetClaim *c, size_t n, void *userdata) {
        Claimer *cl = userdata;

        if (error < 0) {
                cl->error = error;
                cl->finished = true;
                return;
        }
        for (size_t i = 0; i < n; i++) {
                (void) strv_extend(&cl->ids, c[i].id);
                cl->n_claims++;
                if (c[i].epoch == 1)
                        cl->n_epoch_one++;
        }
        if (n == 0 || fleet_db_claim(db, 7, on_claimer, cl) < 0)
                cl->finished = true;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int main(void) {
        _cleanup_(fleet_db_freep) FleetDb *owner = NULL, *owner2 = NULL, *a = NULL, *b = NULL, *c = NULL, *x = NULL;
        _cleanup_free_ char *state = NULL, *v = NULL;
        const char *restart, *stop_server, *start_server;
        Result r = {}, r2 = {};
        Notified nb = {};
        Claimer cl[3] = {};
        const char *task = NULL;
        uint64_t t0;
        int k;

        signal(SIGPIPE, SIG_IGN);
        alarm(300);

        base_conninfo = getenv("PG_CONNINFO");
        admin_conninfo = getenv("PG_ADMIN_CONNINFO");
        owner_conninfo = getenv("PG_OWNER_CONNINFO");
        restart = getenv("PG_RESTART");
        stop_server = getenv("PG_STOP_SERVER");
        start_server = getenv("PG_START_SERVER");
        if (!base_conninfo || !admin_conninfo || !owner_conninfo || !restart || !stop_server || !start_server) {
                printf("1..0 # SKIP no PostgreSQL cluster: run through tests/fleet/run.sh\n");
                return 0;
        }

        if (sd_event_new(&event) < 0)
                return 1;
        if (getenv("FLEET_DEBUG"))
                log_set_max_level(LOG_DEBUG);

        /* Roles: three hosts and one role that is no host. */
        state = exec_sql(admin_conninfo,
                         "CREATE ROLE host_a LOGIN; CREATE ROLE host_b LOGIN; CREATE ROLE host_c LOGIN; "
                         "CREATE ROLE stranger LOGIN", NULL);
        CHECK_STR_EQ(state, "", "roles for three hosts and a stranger created");

        /* The connection string is checked before a connection is tried. */
        k = fleet_db_check_conninfo("host=127.0.0.1 port=", NULL);
        CHECK_ERRNO(k, 0, "an empty value is a valid connection string");
        {
                _cleanup_free_ char *m = NULL;
                k = fleet_db_check_conninfo("host=127.0.0.1 bogus=1", &m);
                CHECK(k == -EINVAL && m && strstr(m, "bogus"), "an unknown key is refused, named: %s", strempty(m));
        }

        owner = connect_as("agentfab");
        owner2 = connect_as("agentfab");
        a = connect_as("host_a");
        b = connect_as("host_b");
        c = connect_as("host_c");
        x = connect_as("stranger");
        CHECK(owner && owner2 && a && b && c && x, "six connections started");

        /* A host role cannot create the schema: the owner does it. */
        k = migrate(a, &r);
        CHECK_ERRNO(k, -EACCES, "a host role cannot create the schema (%s)", strempty(r.message));
        CHECK(fleet_db_is_connected(a), "and its connection is still usable");

        /* Two migrators at once on an empty database: the advisory lock
         * makes the second wait and then find the work done. */
        result_reset(&r);
        result_reset(&r2);
        CHECK(fleet_db_migrate(owner, on_done, &r) >= 0 && fleet_db_migrate(owner2, on_done, &r2) >= 0,
              "two migrations started at once");
        wait_for(&r.done);
        wait_for(&r2.done);
        CHECK(r.done && r.error == 0 && r2.done && r2.error == 0, "both succeed (%d %s, %d %s)", r.error,
              strempty(r.message), r2.error, strempty(r2.message));
        free(v);
        v = admin_value("SELECT count(*) || ':' || max(version) FROM agentfab.migrations");
        CHECK_STR_EQ(v, "3:3", "each migration applied once");

        /* Idempotent: again, and from a host role once it is current. */
        CHECK_ERRNO(migrate(owner, &r), 0, "migrating a current schema again succeeds");
        CHECK_ERRNO(migrate(a, &r), 0, "a host role finds the schema current (%s)", strempty(r.message));
        free(v);
        v = admin_value("SELECT count(*) FROM agentfab.migrations");
        CHECK_STR_EQ(v, "3", "and applies nothing");

        /* A database at version 1, as an older agentfab left it: a host
         * role cannot bring it up to date, the owner can. */
        free(state);
        state = exec_sql(admin_conninfo,
                         "DROP FUNCTION agentfab.get_task(text); "
                         "DROP FUNCTION agentfab.get_output(text, text); DROP FUNCTION agentfab.release(text, bigint); "
                         "DROP FUNCTION agentfab.put_output(text, bigint, text, text); "
                         "DROP TABLE agentfab.outputs; DELETE FROM agentfab.migrations WHERE version >= 2", NULL);
        CHECK_STR_EQ(state, "", "the schema taken back to version 1");
        CHECK_ERRNO(migrate(a, &r), -EACCES, "a host role cannot migrate it (%s)", strempty(r.message));
        CHECK_ERRNO(migrate(owner, &r), 0, "the owner migrates it");
        free(v);
        v = admin_value("SELECT string_agg(version::text, ',' ORDER BY version) || ' ' || "
                        "(to_regclass('agentfab.outputs') IS NOT NULL)::text FROM agentfab.migrations");
        CHECK_STR_EQ(v, "1,2,3 true", "to the latest version, each migration once, the outputs there again");

        /* Hosts: the owner maps roles; a host cannot. */
        result_reset(&r);
        CHECK(fleet_db_add_host(owner, "host-a", "host_a", on_done, &r) >= 0 && wait_for(&r.done) && r.error == 0,
              "owner maps host_a to host-a (%s)", strempty(r.message));
        result_reset(&r);
        CHECK(fleet_db_add_host(owner, "host-b", "host_b", on_done, &r) >= 0 && wait_for(&r.done) && r.error == 0,
              "owner maps host_b to host-b");
        result_reset(&r);
        CHECK(fleet_db_add_host(owner, "host-c", "host_c", on_done, &r) >= 0 && wait_for(&r.done) && r.error == 0,
              "owner maps host_c to host-c");
        result_reset(&r);
        CHECK(fleet_db_add_host(owner, "host-a", "host_a", on_done, &r) >= 0 && wait_for(&r.done) && r.error == 0,
              "mapping again is idempotent");
        result_reset(&r);
        CHECK(fleet_db_add_host(owner, "host-a", "host_b", on_done, &r) >= 0 && wait_for(&r.done) &&
              r.error == -EEXIST, "a host name mapped to another role is refused (%d)", r.error);
        result_reset(&r);
        CHECK(fleet_db_add_host(a, "host-x", "stranger", on_done, &r) >= 0 && wait_for(&r.done) &&
              r.error == -EACCES, "a host role cannot map roles (%d %s)", r.error, strempty(r.message));

        result_reset(&r);
        CHECK(fleet_db_host_name(b, on_name, &r) >= 0 && wait_for(&r.done) && r.error == 0 &&
              streq_ptr(r.progress, "host-b"), "host_b's role is host-b to the database (%s)", strempty(r.progress));
        result_reset(&r);
        CHECK(fleet_db_host_name(x, on_name, &r) >= 0 && wait_for(&r.done) && r.error == -EACCES,
              "a stranger's role is no host");

        /* Leases by the database's clock: lease_until is its now() + lease,
         * whatever this process's clock says. */
        CHECK_ERRNO(renew(a, 30 * USEC_PER_SEC, NULL, &r), 0, "host-a renews its lease");
        CHECK_ERRNO(renew(b, 30 * USEC_PER_SEC, NULL, &r), 0, "host-b renews its lease");
        CHECK_ERRNO(renew(c, 30 * USEC_PER_SEC, STRV_MAKE("gpu"), &r), 0, "host-c renews, with environment gpu");
        free(v);
        v = admin_value("SELECT extract(epoch FROM lease_until - renewed)::int || ' ' || "
                        "(abs(extract(epoch FROM renewed - now())) < 5)::text FROM agentfab.hosts WHERE name = 'host-c'");
        CHECK_STR_EQ(v, "30 true", "the lease runs 30 s from the database's own now()");
        {
                _cleanup_free_ char *db_now = admin_value("SELECT (extract(epoch FROM now()) * 1000000)::bigint");
                uint64_t n = db_now ? strtoull(db_now, NULL, 10) : 0;
                CHECK(r.value > n + 25 * USEC_PER_SEC && r.value <= n + 31 * USEC_PER_SEC,
                      "renew reports the lease's end by the database's clock");
        }
        CHECK_ERRNO(renew(x, 30 * USEC_PER_SEC, NULL, &r), -EACCES, "a role that is no host has no lease (%s)",
                    strempty(r.message));

        /* NOTIFY wakes a listener. */
        fleet_db_set_handlers(b, NULL, on_notify, &nb);
        CHECK_ERRNO(fleet_db_listen(b, FLEET_DB_CHANNEL_QUEUE), 0, "host-b listens on the queue");
        CHECK_ERRNO(fleet_db_listen(b, FLEET_DB_CHANNEL_REQUESTS), 0, "and on requests");
        run_for(200 * USEC_PER_MSEC);
        CHECK_ERRNO(enqueue(a, "first", "alice@host-a", NULL, &r), 0, "host-a enqueues a task");
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        while (nb.n == 0 && clock_now_usec(CLOCK_MONOTONIC) < t0 + 5 * USEC_PER_SEC)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        CHECK(nb.n == 1 && streq_ptr(nb.channel, FLEET_DB_CHANNEL_QUEUE) && streq_ptr(nb.payload, "first"),
              "host-b is woken with the task's id (%u, %s)", nb.n, strempty(nb.payload));

        /* Enqueue: the owner is the caller's own user@host. */
        CHECK_ERRNO(enqueue(a, "forged", "alice@host-b", NULL, &r), -EINVAL,
                    "host-a cannot enqueue for a user of host-b (%s)", strempty(r.message));
        CHECK_ERRNO(enqueue(a, "first", "alice@host-a", NULL, &r), -EEXIST, "a task id is taken once");
        CHECK_ERRNO(enqueue(x, "stranger", "eve@host-x", NULL, &r), -EACCES, "a stranger enqueues nothing");
        CHECK_ERRNO(enqueue(a, "../bad", "alice@host-a", NULL, &r), -EINVAL, "an id that is no name is refused");
        {
                /* A spec past the limit: refused before sending, and by the
                 * schema when sent all the same. */
                size_t size = FLEET_DB_SPEC_MAX + 16;
                _cleanup_free_ char *big = malloc(size + 1);

                if (big) {
                        memset(big, ' ', size);
                        big[0] = '"';
                        big[size - 1] = '"';
                        big[size] = '\0';
                }
                CHECK(big && fleet_db_enqueue(a, "big", "alice@host-a", big, NULL, on_done, &r) == -EMSGSIZE,
                      "a spec over %u bytes is refused before sending", FLEET_DB_SPEC_MAX);
                result_reset(&r);
                CHECK(big &&
                      fleet_db_query(a, "SELECT agentfab.enqueue($1, $2, $3, NULL)",
                                     (const char *[]) { "big", "alice@host-a", big }, 3, on_query, NULL, &r, NULL,
                                     NULL) >= 0 &&
                      wait_for(&r.done) && r.error == -EINVAL,
                      "and by the schema (%d, %s)", r.error, strempty(r.message));
        }

        /* Queued without waiting: they go one after the other. */
        {
                Counter n = {};
                for (unsigned i = 1; i < N_TASKS; i++) {
                        char id[32];
                        snprintf(id, sizeof(id), "t%03u", i);
                        if (fleet_db_enqueue(a, id, "alice@host-a", "{}", i <= N_GPU_TASKS ? "gpu" : NULL, on_count,
                                             &n) < 0)
                                break;
                }
                t0 = clock_now_usec(CLOCK_MONOTONIC);
                while (n.done < N_TASKS - 1 && clock_now_usec(CLOCK_MONOTONIC) < t0 + 30 * USEC_PER_SEC)
                        (void) sd_event_run(event, 100 * USEC_PER_MSEC);
                CHECK(n.done == N_TASKS - 1 && n.failed == 0, "299 more enqueued without waiting (%u, %u failed)",
                      n.done, n.failed);
        }
        free(v);
        v = admin_value("SELECT count(*) || ' ' || count(environment) FROM agentfab.tasks WHERE state = 'queued'");
        CHECK_STR_EQ(v, "300 20", "300 tasks queued, 20 of them for gpu");

        /* Three hosts claim at once, 7 at a time, until the queue is empty:
         * SKIP LOCKED gives every task to one host only. */
        cl[0] = (Claimer) { .db = a, .name = "host-a" };
        cl[1] = (Claimer) { .db = b, .name = "host-b" };
        cl[2] = (Claimer) { .db = c, .name = "host-c" };
        for (unsigned i = 0; i < 3; i++)
                (void) fleet_db_claim(cl[i].db, 7, on_claimer, cl + i);
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        while (!(cl[0].finished && cl[1].finished && cl[2].finished) &&
               clock_now_usec(CLOCK_MONOTONIC) < t0 + 30 * USEC_PER_SEC)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        CHECK(cl[0].error == 0 && cl[1].error == 0 && cl[2].error == 0, "the three claimers end without error");
        {
                _cleanup_strv_free_ char **all = NULL;
                size_t n = 0, dup = 0, gpu_elsewhere = 0;

                for (unsigned i = 0; i < 3; i++)
                        for (char **id = cl[i].ids; id && *id; id++) {
                                (void) strv_extend(&all, *id);
                                n++;
                                if (i != 2 && strneq(*id, "t0", 2) && atoi(*id + 1) <= N_GPU_TASKS)
                                        gpu_elsewhere++;
                        }
                if (all)
                        qsort(all, n, sizeof(char *), cmp_str);
                for (size_t i = 1; i < n; i++)
                        if (streq(all[i - 1], all[i]))
                                dup++;
                CHECK_UINT_EQ(n, N_TASKS, "every task claimed (host-a %zu, host-b %zu, host-c %zu)", cl[0].n_claims,
                              cl[1].n_claims, cl[2].n_claims);
                CHECK_UINT_EQ(dup, 0, "no task claimed twice");
                CHECK_UINT_EQ(gpu_elsewhere, 0, "the gpu tasks went to host-c only");
                CHECK(cl[0].n_epoch_one + cl[1].n_epoch_one + cl[2].n_epoch_one == N_TASKS,
                      "each claim raised the epoch from 0 to 1");
        }
        free(v);
        v = admin_value("SELECT count(*) FROM agentfab.tasks WHERE state = 'running' AND epoch = 1");
        CHECK_STR_EQ(v, "300", "the database agrees: 300 running at epoch 1");

        /* Pick a task host-a holds, and acknowledge a step. */
        task = cl[0].ids ? cl[0].ids[0] : "none";
        CHECK_ERRNO(ack(a, task, 1, 0, (const char *[]) { "{\"role\":\"user\"}", "{\"role\":\"assistant\"}" }, 2,
                        "{\"step\":1}", "1111111111111111111111111111111111111111", &r),
                    0, "host-a acknowledges step 1 of its task %s", task);
        CHECK_ERRNO(ack(a, task, 1, 1, (const char *[]) { "{\"role\":\"assistant\"}", "{\"role\":\"tool\"}" }, 2,
                        "{\"step\":2}", "2222222222222222222222222222222222222222", &r),
                    0, "and step 2, which rewrites line 1 as a retried ack would");
        CHECK_ERRNO(ack(a, task, 1, 9, (const char *[]) { "x" }, 1, NULL, NULL, &r), -EINVAL,
                    "an ack that would leave a gap in the lines is refused");
        CHECK_ERRNO(read_task(a, task, &r), 0, "host-a reads its task back");
        CHECK(r.n == 3 && streq_ptr(r.lines[2], "{\"role\":\"tool\"}") && streq_ptr(r.progress, "{\"step\": 2}"),
              "three lines, the last progress (%zu, %s)", r.n, strempty(r.progress));

        /* Another host's rows: not through the functions... */
        CHECK_ERRNO(ack(b, task, 1, 3, (const char *[]) { "evil" }, 1, "{\"evil\":1}", NULL, &r), -ESTALE,
                    "host-b's ack of host-a's task changes nothing and is told lost");
        CHECK_ERRNO(read_task(b, task, &r), -ENOENT, "host-b cannot read host-a's conversation");
        result_reset(&r);
        CHECK(fleet_db_finish(b, task, 1, FLEET_TASK_FAILED, on_done, &r) >= 0 && wait_for(&r.done) &&
              r.error == -ESTALE, "host-b cannot end host-a's task");
        /* ... nor directly. */
        free(state);
        {
                _cleanup_free_ char *ci = NULL;
                (void) asprintf(&ci, "%s user=host_b", base_conninfo);
                state = exec_sql(ci, "UPDATE agentfab.tasks SET epoch = 99", NULL);
                CHECK_STR_EQ(state, "42501", "host-b cannot update the tasks table directly");
                free(state);
                state = exec_sql(ci, "UPDATE agentfab.hosts SET lease_until = now() + interval '1 day'", NULL);
                CHECK_STR_EQ(state, "42501", "nor the hosts table (a lease of its own making)");
                free(state);
                state = exec_sql(ci, "SELECT line FROM agentfab.lines", NULL);
                CHECK_STR_EQ(state, "42501", "nor read the conversations");
                free(state);
                state = exec_sql(ci, "CREATE FUNCTION agentfab.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'", NULL);
                CHECK_STR_EQ(state, "42501", "nor add functions to the schema");
        }

        /* Lease expiry: host-a's lease shrinks to 1 s and runs out; host-b
         * reaps its tasks with the epoch raised, host-a's late ack is lost. */
        CHECK_ERRNO(renew(a, USEC_PER_SEC, NULL, &r), 0, "host-a's lease set to 1 s");
        run_for(1200 * USEC_PER_MSEC);
        result_reset(&r);
        CHECK(fleet_db_reap(b, FLEET_DB_CLAIM_MAX, on_claims, &r) >= 0 && wait_for(&r.done) && r.error == 0,
              "host-b reaps (%s)", strempty(r.message));
        {
                size_t found = SIZE_MAX, bad = 0;
                for (size_t i = 0; i < r.n; i++) {
                        if (streq(r.ids[i], task))
                                found = i;
                        if (r.epochs[i] != 2 || !r.takeovers[i])
                                bad++;
                }
                CHECK(r.n == cl[0].n_claims - 0 && bad == 0, "it takes all %zu of host-a's tasks at epoch 2 (%zu)",
                      cl[0].n_claims, r.n);
                CHECK(found != SIZE_MAX && streq_ptr(r.checkpoints[found], "2222222222222222222222222222222222222222"),
                      "with the last acknowledged checkpoint");
        }
        result_reset(&r2);
        CHECK(fleet_db_held(a, on_claims, &r2) >= 0 && wait_for(&r2.done) && r2.error == 0 && r2.n == 0,
              "host-a holds nothing any more (%zu)", r2.n);
        {
                size_t n_b = r.n + cl[1].n_claims;
                result_reset(&r2);
                CHECK(fleet_db_held(b, on_claims, &r2) >= 0 && wait_for(&r2.done) && r2.error == 0 && r2.n == n_b,
                      "host-b holds its own and the reaped ones (%zu of %zu)", r2.n, n_b);
        }
        /* Giving back: host-b releases one of its own tasks after a step;
         * host-c cannot release it; host-a claims it, at epoch 2, to resume. */
        {
                const char *own = cl[1].ids ? cl[1].ids[0] : "none";

                CHECK_ERRNO(ack(b, own, 1, 0, (const char *[]) { "{\"role\":\"user\"}" }, 1, NULL,
                                "4444444444444444444444444444444444444444", &r), 0, "host-b acks a step of %s", own);
                result_reset(&r);
                CHECK(fleet_db_release(c, own, 1, on_done, &r) >= 0 && wait_for(&r.done) && r.error == -ESTALE,
                      "host-c cannot give back host-b's task");
                result_reset(&r);
                CHECK(fleet_db_release(b, own, 1, on_done, &r) >= 0 && wait_for(&r.done) && r.error == 0,
                      "host-b gives it back");
                CHECK_ERRNO(renew(c, 30 * USEC_PER_SEC, STRV_MAKE("gpu"), &r), 0, "host-c renews");
                result_reset(&r);
                CHECK(fleet_db_claim(c, 10, on_claims, &r) >= 0 && wait_for(&r.done) && r.error == 0 && r.n == 1 &&
                      streq(r.ids[0], own) && r.epochs[0] == 2 && r.takeovers[0] &&
                      streq_ptr(r.checkpoints[0], "4444444444444444444444444444444444444444"),
                      "host-c claims it at epoch 2, to resume from its checkpoint (%zu)", r.n);
                CHECK_ERRNO(ack(b, own, 1, 1, (const char *[]) { "late" }, 1, NULL, NULL, &r), -ESTALE,
                            "host-b's ack after giving it back is lost");
                result_reset(&r);
                CHECK(fleet_db_finish(c, own, 2, FLEET_TASK_SUCCEEDED, on_done, &r) >= 0 && wait_for(&r.done) &&
                      r.error == 0, "host-c ends it");
        }
        CHECK_ERRNO(ack(a, task, 1, 3, (const char *[]) { "late" }, 1, "{\"late\":1}", "3333", &r), -ESTALE,
                    "host-a's late ack with epoch 1 is told lost");
        CHECK_ERRNO(read_task(b, task, &r), 0, "host-b reads the task it took over");
        CHECK(r.value == 2 && r.n == 3 && streq_ptr(r.progress, "{\"step\": 2}") &&
              streq_ptr(r.checkpoint, "2222222222222222222222222222222222222222"),
              "exactly what host-a acknowledged, at epoch 2 (%zu lines)", r.n);
        result_reset(&r);
        CHECK(fleet_db_claim(a, 1, on_claims, &r) >= 0 && wait_for(&r.done) && r.error == -ESTALE,
              "a host whose lease ran out claims nothing (%s)", strempty(r.message));
        result_reset(&r);
        CHECK(fleet_db_reap(c, FLEET_DB_CLAIM_MAX, on_claims, &r) >= 0 && wait_for(&r.done) && r.error == 0 &&
              r.n == 0, "nothing is left to reap for host-c");

        /* Requests: host-a (alive again) asks host-b, which holds the task. */
        CHECK_ERRNO(renew(a, 30 * USEC_PER_SEC, NULL, &r), 0, "host-a renews again");
        nb.n = 0;
        result_reset(&r);
        CHECK(fleet_db_post_request(a, task, FLEET_REQUEST_APPROVE, "looks right", 3, on_id, &r) >= 0 &&
              wait_for(&r.done) && r.error == 0 && r.value > 0, "host-a posts an approval of stop 3");
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        while (nb.n == 0 && clock_now_usec(CLOCK_MONOTONIC) < t0 + 5 * USEC_PER_SEC)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        CHECK(nb.n == 1 && streq_ptr(nb.channel, FLEET_DB_CHANNEL_REQUESTS) && streq_ptr(nb.payload, "host-b"),
              "the holder is woken (%s)", strempty(nb.payload));
        result_reset(&r);
        CHECK(fleet_db_take_requests(b, on_requests, &r) >= 0 && wait_for(&r.done) && r.error == 0 && r.n == 1,
              "host-b takes one request");
        CHECK(r.request.kind == FLEET_REQUEST_APPROVE && r.request.stop == 3 && r.request.epoch == 2 &&
              streq_ptr(r.request.from_host, "host-a") && streq_ptr(r.request.argument, "looks right"),
              "the approval of stop 3 from host-a, at epoch 2");
        {
                uint64_t id = r.request.id;

                result_reset(&r);
                CHECK(fleet_db_take_requests(b, on_requests, &r) >= 0 && wait_for(&r.done) && r.error == 0 &&
                      r.n == 1 && r.request.id == id,
                      "until it is done, the next take returns it again (nothing lost with a lost answer)");
                result_reset(&r);
                CHECK(fleet_db_request_done(a, id, on_done, &r) >= 0 && wait_for(&r.done) && r.error == -ESTALE,
                      "the poster cannot mark it done for the holder");
                result_reset(&r);
                CHECK(fleet_db_request_done(b, id, on_done, &r) >= 0 && wait_for(&r.done) && r.error == 0,
                      "the holder marks it done");
                result_reset(&r);
                CHECK(fleet_db_request_done(b, id, on_done, &r) >= 0 && wait_for(&r.done) && r.error == 0,
                      "again, as a retry would");
                result_reset(&r);
                CHECK(fleet_db_take_requests(b, on_requests, &r) >= 0 && wait_for(&r.done) && r.error == 0 &&
                      r.n == 0, "and it is not returned any more");
        }
        result_reset(&r);
        CHECK(fleet_db_take_requests(a, on_requests, &r) >= 0 && wait_for(&r.done) && r.error == 0 && r.n == 0,
              "nothing for host-a");
        CHECK_ERRNO(fleet_db_post_request(a, task, FLEET_REQUEST_APPROVE, NULL, 0, on_id, &r), -EINVAL,
                    "an approval names its stop");
        result_reset(&r);
        CHECK(fleet_db_post_request(a, "nosuch", FLEET_REQUEST_PAUSE, NULL, 0, on_id, &r) >= 0 &&
              wait_for(&r.done) && r.error == -ENOENT, "a request for no task is refused");
        CHECK_ERRNO(enqueue(a, "queued-then-cancelled", "alice@host-a", NULL, &r), 0, "a task queued");
        result_reset(&r);
        CHECK(fleet_db_post_request(c, "queued-then-cancelled", FLEET_REQUEST_CANCEL, NULL, 0, on_id, &r) >= 0 &&
              wait_for(&r.done) && r.error == 0, "cancelled from host-c while queued");

        /* Ending, and listing from any host. */
        result_reset(&r);
        CHECK(fleet_db_finish(b, task, 2, FLEET_TASK_SUCCEEDED, on_done, &r) >= 0 && wait_for(&r.done) &&
              r.error == 0, "host-b ends the task it took over");
        result_reset(&r);
        CHECK(fleet_db_finish(b, task, 2, FLEET_TASK_SUCCEEDED, on_done, &r) >= 0 && wait_for(&r.done) &&
              r.error == 0, "ending it again the same way succeeds, as a retry after a lost answer would");
        result_reset(&r);
        CHECK(fleet_db_finish(b, task, 2, FLEET_TASK_FAILED, on_done, &r) >= 0 && wait_for(&r.done) &&
              r.error == -ESTALE, "but not another way");

        /* Outputs: written by the holder under its epoch, also after the
         * end, read from any host. */
        result_reset(&r);
        CHECK(fleet_db_put_output(b, task, 2, FLEET_OUTPUT_SUMMARY, "All done.", on_done, &r) >= 0 &&
              wait_for(&r.done) && r.error == 0, "host-b writes the summary of the task it ended (%s)",
              strempty(r.message));
        result_reset(&r);
        CHECK(fleet_db_put_output(a, task, 1, FLEET_OUTPUT_SUMMARY, "Forged.", on_done, &r) >= 0 &&
              wait_for(&r.done) && r.error == -ESTALE, "host-a, at its old epoch, cannot");
        result_reset(&r);
        CHECK(fleet_db_get_output(c, task, FLEET_OUTPUT_SUMMARY, on_output, &r) >= 0 && wait_for(&r.done) &&
              r.error == 0 && r.value == 2 && streq_ptr(r.progress, "All done."),
              "host-c reads it, written at epoch 2 (%s)", strempty(r.progress));
        result_reset(&r);
        CHECK(fleet_db_get_output(c, task, FLEET_OUTPUT_LOG, on_output, &r) >= 0 && wait_for(&r.done) &&
              r.error == -ENOENT, "no log was written");
        result_reset(&r);
        CHECK(fleet_db_get_output(x, task, FLEET_OUTPUT_SUMMARY, on_output, &r) >= 0 && wait_for(&r.done) &&
              r.error == -EACCES, "a stranger reads nothing");

        /* A task's status (schema version 3): its holder writes it, any
         * host reads it by id together with the task's row. */
        result_reset(&r);
        CHECK(fleet_db_get_task(c, task, on_task, &r) >= 0 && wait_for(&r.done) && r.error == 0 && !r.progress &&
              r.n == 1 && streq_ptr(r.tasks[0].host, "host-b") && r.tasks[0].epoch == 2 &&
              r.tasks[0].state == FLEET_TASK_SUCCEEDED && streq_ptr(r.tasks[0].owner, "alice@host-a"),
              "host-c reads the task by id, no status written yet (%s)", strempty(r.message));
        result_reset(&r);
        CHECK(fleet_db_put_output(b, task, 2, FLEET_OUTPUT_STATUS, "{\"State\":\"succeeded\"}", on_done, &r) >= 0 &&
              wait_for(&r.done) && r.error == 0, "host-b writes its status (%s)", strempty(r.message));
        result_reset(&r);
        CHECK(fleet_db_put_output(a, task, 1, FLEET_OUTPUT_STATUS, "{}", on_done, &r) >= 0 && wait_for(&r.done) &&
              r.error == -ESTALE, "host-a, at its old epoch, cannot");
        result_reset(&r);
        CHECK(fleet_db_get_task(c, task, on_task, &r) >= 0 && wait_for(&r.done) && r.error == 0 &&
              streq_ptr(r.progress, "{\"State\":\"succeeded\"}") && r.n == 1 && r.tasks[0].epoch == 2,
              "host-c reads it with the row (%s)", strempty(r.progress));
        result_reset(&r);
        CHECK(fleet_db_get_task(c, "no-such-task", on_task, &r) >= 0 && wait_for(&r.done) && r.error == -ENOENT,
              "no such task: -ENOENT (%d)", r.error);
        result_reset(&r);
        CHECK(fleet_db_get_task(x, task, on_task, &r) >= 0 && wait_for(&r.done) && r.error == -EACCES,
              "a stranger reads no task");
        result_reset(&r);
        CHECK(fleet_db_post_request(a, task, FLEET_REQUEST_CANCEL, NULL, 0, on_id, &r) >= 0 && wait_for(&r.done) &&
              r.error == -ESRCH, "a request for an ended task is refused");
        CHECK_ERRNO(list_tasks(c, &r), 0, "host-c lists the fleet");
        {
                const FleetTaskInfo *t = find_task(&r, task), *q = find_task(&r, "queued-then-cancelled");
                CHECK(r.n == N_TASKS + 1 && t && t->state == FLEET_TASK_SUCCEEDED && streq_ptr(t->host, "host-b") &&
                      t->epoch == 2 && streq_ptr(t->owner, "alice@host-a") && t->updated_usec > 0,
                      "every task, the taken-over one succeeded on host-b at epoch 2");
                CHECK(q && q->state == FLEET_TASK_CANCELLED && !q->host, "the cancelled one with no host");
        }
        CHECK_ERRNO(list_tasks(x, &r), -EACCES, "a stranger lists nothing");

        /* A query the server does not answer in time: the connection is
         * dropped, the query fails with -ETIMEDOUT, the next one works. */
        {
                _cleanup_(fleet_db_freep) FleetDb *slow = connect_as("host_a");
                uint64_t start;

                fleet_db_set_timeout(slow, USEC_PER_SEC);
                result_reset(&r);
                start = clock_now_usec(CLOCK_MONOTONIC);
                CHECK(slow && fleet_db_query(slow, "SELECT pg_sleep(5)", NULL, 0, on_query, NULL, &r, NULL, NULL) >= 0 &&
                      wait_for(&r.done) && r.error == -ETIMEDOUT,
                      "a query that takes 5 s fails with -ETIMEDOUT after 1 s (%d, %s)", r.error, strempty(r.message));
                CHECK(clock_now_usec(CLOCK_MONOTONIC) - start < 3 * USEC_PER_SEC, "and not later");
                CHECK_ERRNO(renew(slow, 30 * USEC_PER_SEC, NULL, &r), 0, "the next operation works");
                CHECK_UINT_EQ(fleet_db_connections(slow), 2, "on a new connection");
        }
        /* A server that accepts and never answers: each attempt to connect
         * is given up after the timeout and made again. */
        {
                _cleanup_(fleet_db_freep) FleetDb *hung = NULL;
                _cleanup_close_ int fd = -EBADF;
                _cleanup_free_ char *ci = NULL;
                unsigned accepted = 0;
                uint16_t port = 0;

                fd = black_hole(&port);
                CHECK(fd >= 0, "a listener that never answers");
                (void) asprintf(&ci, "host=127.0.0.1 port=%u dbname=agentfab user=host_a", port);
                CHECK(ci && fleet_db_new(event, ci, &hung) >= 0, "a connection to it started");
                if (hung)
                        fleet_db_set_timeout(hung, 400 * USEC_PER_MSEC);
                t0 = clock_now_usec(CLOCK_MONOTONIC);
                while (clock_now_usec(CLOCK_MONOTONIC) < t0 + 2 * USEC_PER_SEC) {
                        int cfd;
                        (void) sd_event_run(event, 20 * USEC_PER_MSEC);
                        while (fd >= 0 && (cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
                                accepted++;
                                /* Kept open, silent, until the end of the test. */
                        }
                }
                CHECK(accepted >= 2 && !fleet_db_is_connected(hung),
                      "the attempt is given up and made again (%u attempts in 2 s)", accepted);
        }

        /* The server restarts: operations sent on the dead connection fail
         * with -ECONNRESET for the caller to retry; the connection is made
         * again; LISTEN is renewed. */
        {
                unsigned before = fleet_db_connections(a), tries = 0;
                k = system(restart);
                CHECK(k == 0, "pg_ctl restart");
                do {
                        k = renew(a, 30 * USEC_PER_SEC, NULL, &r);
                        tries++;
                } while (k == -ECONNRESET && tries < 5);
                CHECK(k == 0 && fleet_db_connections(a) == before + 1,
                      "host-a renews after the restart (%u tries, %u connections)", tries, fleet_db_connections(a));
        }
        /* The server is down: an operation waits in the queue and runs
         * once it is back, nothing lost. */
        k = system(stop_server);
        CHECK(k == 0, "server stopped");
        run_for(500 * USEC_PER_MSEC);
        CHECK(!fleet_db_is_connected(a) && !fleet_db_is_connected(b), "the hosts know they are disconnected");
        result_reset(&r);
        CHECK(fleet_db_enqueue(a, "while-down", "alice@host-a", "{}", NULL, on_done, &r) >= 0,
              "an enqueue while the server is down is queued");
        run_for(300 * USEC_PER_MSEC);
        CHECK(!r.done, "and waits");
        k = system(start_server);
        CHECK(k == 0, "server started");
        nb.n = 0;
        wait_for(&r.done);
        CHECK(r.done && r.error == 0, "the waiting enqueue runs on the new connection (%d %s)", r.error,
              strempty(r.message));
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        while (!fleet_db_is_connected(b) && clock_now_usec(CLOCK_MONOTONIC) < t0 + 10 * USEC_PER_SEC)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        run_for(200 * USEC_PER_MSEC);
        nb.n = 0;
        CHECK_ERRNO(enqueue(a, "after-restart", "alice@host-a", NULL, &r), 0, "host-a enqueues after the restart");
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        while (nb.n == 0 && clock_now_usec(CLOCK_MONOTONIC) < t0 + 5 * USEC_PER_SEC)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        CHECK(nb.n >= 1 && streq_ptr(nb.payload, "after-restart"), "host-b listens again after reconnecting (%s)",
              strempty(nb.payload));
        free(v);
        v = admin_value("SELECT count(*) FROM agentfab.tasks WHERE id IN ('while-down', 'after-restart')");
        CHECK_STR_EQ(v, "2", "both tasks are in the database, once each");

        result_reset(&r);
        result_reset(&r2);
        free(nb.channel);
        free(nb.payload);
        for (unsigned i = 0; i < 3; i++)
                strv_free(cl[i].ids);
        owner = fleet_db_free(owner);
        owner2 = fleet_db_free(owner2);
        a = fleet_db_free(a);
        b = fleet_db_free(b);
        c = fleet_db_free(c);
        x = fleet_db_free(x);
        event = sd_event_unref(event);
        return tap_done();
}
