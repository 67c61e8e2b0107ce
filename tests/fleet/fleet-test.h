/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What test-fleet-db.c drives src/fleet with: the results its handlers
 * fill in, operations waited for on the event loop, and blocking libpq
 * for what a test sets up or looks at as the superuser. */

#include <libpq-fe.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "fleet-db-internal.h"
#include "fleet-db.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static sd_event *event;
static const char *base_conninfo, *admin_conninfo, *owner_conninfo;

typedef struct Result {
        bool done;
        int error;
        char *message;
        uint64_t value;
        char **ids;
        uint64_t *epochs;
        bool *takeovers;
        char **checkpoints;
        size_t n;
        FleetTaskInfo *tasks;   /* list: the fields the tests look at */
        FleetRequest request;   /* take_requests: the first */
        char **lines;           /* read_task */
        char *progress;
        char *checkpoint;
} Result;

static void result_reset(Result *r) {
        free(r->message);
        strv_free(r->ids);
        free(r->epochs);
        free(r->takeovers);
        for (size_t i = 0; r->checkpoints && i < r->n; i++)
                free(r->checkpoints[i]);
        free(r->checkpoints);
        if (r->tasks)
                fleet_task_infos_free(r->tasks, r->n);
        free(r->request.task_id);
        free(r->request.argument);
        free(r->request.from_host);
        strv_free(r->lines);
        free(r->progress);
        free(r->checkpoint);
        *r = (Result) {};
}

static void result_set(Result *r, int error, const char *message) {
        r->done = true;
        r->error = error;
        r->message = message ? strdup(message) : NULL;
}

/* Runs the loop until *done, at most 30 s. */
static bool wait_for(const bool *done) {
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + 30 * USEC_PER_SEC;

        while (!*done && clock_now_usec(CLOCK_MONOTONIC) < deadline)
                (void) sd_event_run(event, 100 * USEC_PER_MSEC);
        return *done;
}

static void run_for(uint64_t usec) {
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + usec;

        while (clock_now_usec(CLOCK_MONOTONIC) < deadline)
                (void) sd_event_run(event, 10 * USEC_PER_MSEC);
}

static void on_done(FleetDb *db, int error, const char *message, void *userdata) {
        result_set(userdata, error, message);
}

typedef struct Counter {
        unsigned done, failed;
} Counter;

static void on_count(FleetDb *db, int error, const char *message, void *userdata) {
        Counter *n = userdata;
        n->done++;
        if (error < 0)
                n->failed++;
}

static void on_lease(FleetDb *db, int error, const char *message, uint64_t until, void *userdata) {
        Result *r = userdata;
        result_set(r, error, message);
        r->value = until;
}

static void on_name(FleetDb *db, int error, const char *message, const char *name, void *userdata) {
        Result *r = userdata;
        result_set(r, error, message);
        r->progress = name ? strdup(name) : NULL;
}

static void on_output(FleetDb *db, int error, const char *message, uint64_t epoch, const char *content,
                      void *userdata) {
        Result *r = userdata;
        result_set(r, error, message);
        r->value = epoch;
        r->progress = content ? strdup(content) : NULL;
}

static void on_query(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *message) {
        result_set(q->userdata, error, message);
}

/* A TCP listener that accepts connections and never says a word: a
 * database that hangs. */
static int black_hole(uint16_t *ret_port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &len) < 0) {
                if (fd >= 0)
                        close(fd);
                return -errno;
        }
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

static void on_id(FleetDb *db, int error, const char *message, uint64_t id, void *userdata) {
        Result *r = userdata;
        result_set(r, error, message);
        r->value = id;
}

static void on_claims(FleetDb *db, int error, const char *message, const FleetClaim *c, size_t n, void *userdata) {
        Result *r = userdata;

        result_set(r, error, message);
        r->n = n;
        r->epochs = calloc(n + 1, sizeof(uint64_t));
        r->takeovers = calloc(n + 1, sizeof(bool));
        r->checkpoints = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
                (void) strv_extend(&r->ids, c[i].id);
                r->epochs[i] = c[i].epoch;
                r->takeovers[i] = c[i].takeover;
                r->checkpoints[i] = c[i].checkpoint ? strdup(c[i].checkpoint) : NULL;
        }
}

static void on_tasks(FleetDb *db, int error, const char *message, const FleetTaskInfo *t, size_t n, void *userdata) {
        Result *r = userdata;

        result_set(r, error, message);
        r->n = n;
        r->tasks = calloc(n + 1, sizeof(FleetTaskInfo));
        for (size_t i = 0; i < n; i++)
                r->tasks[i] = (FleetTaskInfo) {
                        .id = strdup(t[i].id),
                        .state = t[i].state,
                        .host = t[i].host ? strdup(t[i].host) : NULL,
                        .epoch = t[i].epoch,
                        .owner = strdup(t[i].owner),
                        .updated_usec = t[i].updated_usec,
                };
}

/* get_task: the row as tasks[0] (n 1), the status in progress. */
static void on_task(FleetDb *db, int error, const char *message, const FleetTaskInfo *t, const char *status,
                    void *userdata) {
        Result *r = userdata;

        on_tasks(db, error, message, t, t ? 1 : 0, userdata);
        r->progress = status ? strdup(status) : NULL;
}

static void on_requests(FleetDb *db, int error, const char *message, const FleetRequest *q, size_t n,
                        void *userdata) {
        Result *r = userdata;

        result_set(r, error, message);
        r->n = n;
        if (n > 0) {
                r->request = q[0];
                r->request.task_id = strdup(q[0].task_id);
                r->request.argument = q[0].argument ? strdup(q[0].argument) : NULL;
                r->request.from_host = strdup(q[0].from_host);
        }
}

static void on_record(FleetDb *db, int error, const char *message, const FleetTaskRecord *rec, void *userdata) {
        Result *r = userdata;

        result_set(r, error, message);
        if (rec) {
                r->value = rec->epoch;
                r->n = rec->n_lines;
                for (size_t i = 0; i < rec->n_lines; i++)
                        (void) strv_extend(&r->lines, rec->lines[i]);
                r->progress = rec->progress ? strdup(rec->progress) : NULL;
                r->checkpoint = rec->checkpoint ? strdup(rec->checkpoint) : NULL;
        }
}

/* Blocking libpq for what the tests set up or look at as the superuser, or
 * try directly as a host role. Returns the SQLSTATE of a failure ("" for
 * success), and the first field of the first row in *ret_value. */
static char *exec_sql(const char *conninfo, const char *sql, char **ret_value) {
        PGconn *c = PQconnectdb(conninfo);
        PGresult *res;
        char *state;

        if (PQstatus(c) != CONNECTION_OK) {
                PQfinish(c);
                return strdup("08000");
        }
        res = PQexec(c, sql);
        if (IN_SET(PQresultStatus(res), PGRES_COMMAND_OK, PGRES_TUPLES_OK)) {
                state = strdup("");
                if (ret_value)
                        *ret_value = PQntuples(res) > 0 && PQnfields(res) > 0 ? strdup(PQgetvalue(res, 0, 0)) : NULL;
        } else {
                const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
                state = strdup(s ?: "?????");
                if (ret_value)
                        *ret_value = NULL;
        }
        PQclear(res);
        PQfinish(c);
        return state;
}

static char *admin_value(const char *sql) {
        char *v = NULL;
        free(exec_sql(admin_conninfo, sql, &v));
        return v;
}

static FleetDb *connect_as(const char *role) {
        _cleanup_free_ char *conninfo = NULL;
        FleetDb *db = NULL;

        if (asprintf(&conninfo, "%s user=%s", base_conninfo, role) < 0)
                return NULL;
        if (fleet_db_new(event, conninfo, &db) < 0)
                return NULL;
        return db;
}

typedef struct Notified {
        unsigned n;
        char *channel, *payload;
} Notified;

static void on_notify(FleetDb *db, const char *channel, const char *payload, void *userdata) {
        Notified *n = userdata;

        n->n++;
        free(n->channel);
        free(n->payload);
        n->channel = strdup(channel);
        n->payload = strdup(payload);
}

static int migrate(FleetDb *db, Result *r) {
        result_reset(r);
        if (fleet_db_migrate(db, on_done, r) < 0 || !wait_for(&r->done))
                return -ETIMEDOUT;
        return r->error;
}

static int renew(FleetDb *db, uint64_t lease, char **envs, Result *r) {
        result_reset(r);
        if (fleet_db_renew(db, lease, envs, on_lease, r) < 0 || !wait_for(&r->done))
                return -ETIMEDOUT;
        return r->error;
}

static int enqueue(FleetDb *db, const char *id, const char *owner, const char *env, Result *r) {
        result_reset(r);
        if (fleet_db_enqueue(db, id, owner, "{\"prompt\":\"do it\"}", env, on_done, r) < 0 || !wait_for(&r->done))
                return -ETIMEDOUT;
        return r->error;
}

static int ack(FleetDb *db, const char *id, uint64_t epoch, uint64_t first, const char *const *lines, size_t n,
               const char *progress, const char *checkpoint, Result *r) {
        FleetAck a = {
                .task_id = id,
                .epoch = epoch,
                .first_line = first,
                .lines = lines,
                .n_lines = n,
                .progress = progress,
                .checkpoint = checkpoint,
        };

        result_reset(r);
        if (fleet_db_ack(db, &a, on_done, r) < 0 || !wait_for(&r->done))
                return -ETIMEDOUT;
        return r->error;
}

static int read_task(FleetDb *db, const char *id, Result *r) {
        result_reset(r);
        if (fleet_db_read_task(db, id, on_record, r) < 0 || !wait_for(&r->done))
                return -ETIMEDOUT;
        return r->error;
}

static int list_tasks(FleetDb *db, Result *r) {
        result_reset(r);
        if (fleet_db_list(db, 0, on_tasks, r) < 0 || !wait_for(&r->done))
                return -ETIMEDOUT;
        return r->error;
}

static const FleetTaskInfo *find_task(const Result *r, const char *id) {
        for (size_t i = 0; i < r->n; i++)
                if (streq(r->tasks[i].id, id))
                        return r->tasks + i;
        return NULL;
}
