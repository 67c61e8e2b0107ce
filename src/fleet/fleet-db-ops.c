/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-db-internal.h"
#include "fleet-db.h"
#include "json-util.h"
#include "macro.h"
#include "string-table.h"

/* The operations of a host of the fleet: each is one call of one of the
 * schema's functions (fleet-schema.c), which is one transaction on the
 * server, and a parser of its rows. */

void fleet_claims_free(FleetClaim *c, size_t n) {
        for (size_t i = 0; c && i < n; i++) {
                free(c[i].id);
                free(c[i].owner);
                free(c[i].spec);
                free(c[i].environment);
                free(c[i].checkpoint);
        }
        free(c);
}

void fleet_task_infos_free(FleetTaskInfo *t, size_t n) {
        for (size_t i = 0; t && i < n; i++) {
                free(t[i].id);
                free(t[i].host);
                free(t[i].owner);
        }
        free(t);
}

void fleet_requests_free(FleetRequest *r, size_t n) {
        for (size_t i = 0; r && i < n; i++) {
                free(r[i].task_id);
                free(r[i].argument);
                free(r[i].from_host);
        }
        free(r);
}

FleetTaskRecord *fleet_task_record_free(FleetTaskRecord *r) {
        if (!r)
                return NULL;
        free(r->id);
        free(r->progress);
        free(r->checkpoint);
        strv_free(r->lines);
        free(r);
        return NULL;
}

/* A field as a new string, NULL for SQL NULL. -ENOMEM only. */
static int get_string(PGresult *res, int row, int col, char **ret) {
        if (PQgetisnull(res, row, col)) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(PQgetvalue(res, row, col));
        return *ret ? 0 : -ENOMEM;
}

static int get_uint64(PGresult *res, int row, int col, uint64_t *ret) {
        const char *s;
        char *end;
        unsigned long long v;

        if (PQgetisnull(res, row, col))
                return -EBADMSG;
        s = PQgetvalue(res, row, col);
        if (s[0] == '-' || s[0] == '\0')
                return -EBADMSG;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0')
                return -EBADMSG;
        *ret = v;
        return 0;
}

static bool get_bool(PGresult *res, int row, int col) {
        return !PQgetisnull(res, row, col) && streq(PQgetvalue(res, row, col), "t");
}

static bool result_shape(PGresult *res, int fields) {
        return res && PQnfields(res) == fields;
}

/* Operations answered with success or an errno. */

static void complete_done(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_done_t done = q->handler;

        if (done)
                done(db, error, error_message, q->userdata);
}

/* A function returning boolean: false is -ESTALE (zero rows: the task is
 * no longer the caller's at that epoch). */
static void complete_fenced(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_done_t done = q->handler;

        if (error == 0 && (!result_shape(res, 1) || PQntuples(res) != 1)) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        } else if (error == 0 && !get_bool(res, 0, 0)) {
                error = -ESTALE;
                error_message = "The task is no longer this host's at this epoch";
        }
        if (done)
                done(db, error, error_message, q->userdata);
}

int fleet_db_add_host(FleetDb *db, const char *host, const char *role, fleet_db_done_t done, void *userdata) {
        assert(db);

        if (isempty(host) || strlen(host) > FLEET_DB_NAME_MAX || isempty(role) || strlen(role) > 63)
                return -EINVAL;
        return fleet_db_query(db, "SELECT agentfab.add_host($1, $2)", (const char *[]) { host, role }, 2,
                              complete_done, done, userdata, NULL, NULL);
}

static void complete_lease(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_lease_t done = q->handler;
        uint64_t until = 0;

        if (error == 0 && (!result_shape(res, 1) || PQntuples(res) != 1)) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        } else if (error == 0 && PQgetisnull(res, 0, 0)) {
                /* The caller's role maps to a host whose row went away. */
                error = -ENOENT;
                error_message = "This host has no row in the fleet";
        } else if (error == 0 && get_uint64(res, 0, 0, &until) < 0) {
                error = -EBADMSG;
                error_message = "Unexpected lease from the database";
        }
        if (done)
                done(db, error, error_message, until, q->userdata);
}

int fleet_db_renew(FleetDb *db, uint64_t lease_usec, char *const *environments, fleet_db_lease_t done,
                   void *userdata) {
        _cleanup_json_ json_object *envs = NULL;
        char lease[32];

        assert(db);

        envs = json_object_new_array();
        if (!envs)
                return -ENOMEM;
        for (char *const *e = environments; e && *e; e++) {
                if (isempty(*e) || strlen(*e) > FLEET_DB_NAME_MAX)
                        return -EINVAL;
                if (json_object_array_add(envs, json_object_new_string(*e)) < 0)
                        return -ENOMEM;
        }
        (void) snprintf(lease, sizeof(lease), "%" PRIu64, lease_usec);

        return fleet_db_query(db, "SELECT agentfab.renew($1, $2)", (const char *[]) { lease, json_to_line(envs) },
                              2, complete_lease, done, userdata, NULL, NULL);
}

static void complete_name(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_name_t done = q->handler;
        const char *name = NULL;

        if (error == 0 && (!result_shape(res, 1) || PQntuples(res) != 1 || PQgetisnull(res, 0, 0))) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        } else if (error == 0)
                name = PQgetvalue(res, 0, 0);
        if (done)
                done(db, error, error_message, name, q->userdata);
}

int fleet_db_host_name(FleetDb *db, fleet_db_name_t done, void *userdata) {
        assert(db);

        return fleet_db_query(db, "SELECT agentfab.caller_host()", NULL, 0, complete_name, done, userdata, NULL,
                              NULL);
}

int fleet_db_enqueue(FleetDb *db, const char *id, const char *owner, const char *spec, const char *environment,
                     fleet_db_done_t done, void *userdata) {
        assert(db);

        if (isempty(id) || isempty(owner) || isempty(spec))
                return -EINVAL;
        if (strlen(spec) > FLEET_DB_SPEC_MAX)
                return -EMSGSIZE;
        return fleet_db_query(db, "SELECT agentfab.enqueue($1, $2, $3, $4)",
                              (const char *[]) { id, owner, spec, environment }, 4, complete_done, done, userdata,
                              NULL, NULL);
}

static void complete_claims(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_claims_t done = q->handler;
        FleetClaim *claims = NULL;
        size_t n = 0;
        bool takeover = q->data != NULL;

        if (error == 0 && !result_shape(res, 6)) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        }
        if (error == 0 && PQntuples(res) > 0) {
                n = (size_t) PQntuples(res);
                claims = calloc(n, sizeof(FleetClaim));
                if (!claims) {
                        n = 0;
                        error = -ENOMEM;
                        error_message = "Out of memory";
                }
        }
        for (size_t i = 0; error == 0 && i < n; i++) {
                FleetClaim *c = claims + i;

                if (get_string(res, i, 0, &c->id) < 0 || get_string(res, i, 1, &c->owner) < 0 ||
                    get_string(res, i, 2, &c->spec) < 0 || get_string(res, i, 3, &c->environment) < 0 ||
                    get_string(res, i, 5, &c->checkpoint) < 0) {
                        error = -ENOMEM;
                        error_message = "Out of memory";
                } else if (!c->id || get_uint64(res, i, 4, &c->epoch) < 0) {
                        error = -EBADMSG;
                        error_message = "Unexpected claim from the database";
                }
                /* A task given back (fleet_db_release()) comes through the
                 * queue with the work acknowledged so far. */
                c->takeover = takeover || c->checkpoint;
        }
        /* A claim that was made but cannot be handed over is lost to
         * this host until its lease runs out and another reaps it. */
        if (done)
                done(db, error, error_message, error < 0 ? NULL : claims, error < 0 ? 0 : n, q->userdata);
        fleet_claims_free(claims, n);
}

static int claim_or_reap(FleetDb *db, const char *sql, unsigned max, bool takeover, fleet_db_claims_t done,
                         void *userdata) {
        char count[16];

        assert(db);

        if (max < 1 || max > FLEET_DB_CLAIM_MAX)
                return -ERANGE;
        (void) snprintf(count, sizeof(count), "%u", max);
        /* data only marks a reap: a non-NULL pointer nobody frees. */
        return fleet_db_query(db, sql, (const char *[]) { count }, 1, complete_claims, done, userdata,
                              takeover ? (void *) db : NULL, NULL);
}

int fleet_db_claim(FleetDb *db, unsigned max, fleet_db_claims_t done, void *userdata) {
        return claim_or_reap(db, "SELECT * FROM agentfab.claim($1)", max, false, done, userdata);
}

int fleet_db_reap(FleetDb *db, unsigned max, fleet_db_claims_t done, void *userdata) {
        return claim_or_reap(db, "SELECT * FROM agentfab.reap($1)", max, true, done, userdata);
}

int fleet_db_release(FleetDb *db, const char *id, uint64_t epoch, fleet_db_done_t done, void *userdata) {
        char e[32];

        assert(db);

        if (isempty(id))
                return -EINVAL;
        (void) snprintf(e, sizeof(e), "%" PRIu64, epoch);
        return fleet_db_query(db, "SELECT agentfab.release($1, $2)", (const char *[]) { id, e }, 2, complete_fenced,
                              done, userdata, NULL, NULL);
}

int fleet_db_held(FleetDb *db, fleet_db_claims_t done, void *userdata) {
        assert(db);

        return fleet_db_query(db, "SELECT * FROM agentfab.held()", NULL, 0, complete_claims, done, userdata, NULL,
                              NULL);
}

int fleet_db_ack(FleetDb *db, const FleetAck *ack, fleet_db_done_t done, void *userdata) {
        _cleanup_json_ json_object *lines = NULL;
        char epoch[32], first[32];

        assert(db);
        assert(ack);

        if (isempty(ack->task_id) || (ack->n_lines > 0 && !ack->lines))
                return -EINVAL;
        if (ack->n_lines > FLEET_DB_ACK_LINES_MAX || (ack->progress && strlen(ack->progress) > FLEET_DB_PROGRESS_MAX))
                return -EMSGSIZE;

        lines = json_object_new_array_ext((int) MIN(ack->n_lines, (size_t) INT32_MAX));
        if (!lines)
                return -ENOMEM;
        for (size_t i = 0; i < ack->n_lines; i++) {
                if (!ack->lines[i])
                        return -EINVAL;
                if (strlen(ack->lines[i]) > FLEET_DB_LINE_MAX)
                        return -EMSGSIZE;
                if (json_object_array_add(lines, json_object_new_string(ack->lines[i])) < 0)
                        return -ENOMEM;
        }
        (void) snprintf(epoch, sizeof(epoch), "%" PRIu64, ack->epoch);
        (void) snprintf(first, sizeof(first), "%" PRIu64, ack->first_line);

        return fleet_db_query(db, "SELECT agentfab.ack($1, $2, $3, $4, $5, $6)",
                              (const char *[]) { ack->task_id, epoch, first, json_to_line(lines), ack->progress,
                                                 ack->checkpoint },
                              6, complete_fenced, done, userdata, NULL, NULL);
}

int fleet_db_finish(FleetDb *db, const char *id, uint64_t epoch, FleetTaskState state, fleet_db_done_t done,
                    void *userdata) {
        char e[32];

        assert(db);

        if (isempty(id) || !IN_SET(state, FLEET_TASK_SUCCEEDED, FLEET_TASK_FAILED, FLEET_TASK_CANCELLED))
                return -EINVAL;
        (void) snprintf(e, sizeof(e), "%" PRIu64, epoch);
        return fleet_db_query(db, "SELECT agentfab.finish($1, $2, $3)",
                              (const char *[]) { id, e, fleet_task_state_to_string(state) }, 3, complete_fenced,
                              done, userdata, NULL, NULL);
}

static void complete_list(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_tasks_t done = q->handler;
        FleetTaskInfo *tasks = NULL;
        size_t n = 0;

        if (error == 0 && !result_shape(res, 6)) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        }
        if (error == 0 && PQntuples(res) > 0) {
                n = (size_t) PQntuples(res);
                tasks = calloc(n, sizeof(FleetTaskInfo));
                if (!tasks) {
                        n = 0;
                        error = -ENOMEM;
                        error_message = "Out of memory";
                }
        }
        for (size_t i = 0; error == 0 && i < n; i++) {
                FleetTaskInfo *t = tasks + i;

                if (get_string(res, i, 0, &t->id) < 0 || get_string(res, i, 2, &t->host) < 0 ||
                    get_string(res, i, 4, &t->owner) < 0) {
                        error = -ENOMEM;
                        error_message = "Out of memory";
                        break;
                }
                t->state = fleet_task_state_from_string(PQgetvalue(res, i, 1));
                if (!t->id || t->state < 0 || get_uint64(res, i, 3, &t->epoch) < 0 ||
                    get_uint64(res, i, 5, &t->updated_usec) < 0) {
                        error = -EBADMSG;
                        error_message = "Unexpected task from the database";
                }
        }
        if (done)
                done(db, error, error_message, error < 0 ? NULL : tasks, error < 0 ? 0 : n, q->userdata);
        fleet_task_infos_free(tasks, n);
}

int fleet_db_list(FleetDb *db, unsigned limit, fleet_db_tasks_t done, void *userdata) {
        char l[16];

        assert(db);

        (void) snprintf(l, sizeof(l), "%u", MIN(limit, (unsigned) INT32_MAX));
        return fleet_db_query(db, "SELECT * FROM agentfab.list_tasks($1)", (const char *[]) { l }, 1,
                              complete_list, done, userdata, NULL, NULL);
}

/* A row of list_tasks() into t; -ENOMEM, or -EBADMSG for a row that is not one. */
static int task_info_from_row(PGresult *res, int row, FleetTaskInfo *t) {
        if (get_string(res, row, 0, &t->id) < 0 || get_string(res, row, 2, &t->host) < 0 ||
            get_string(res, row, 4, &t->owner) < 0)
                return -ENOMEM;
        t->state = fleet_task_state_from_string(PQgetvalue(res, row, 1));
        if (!t->id || !t->owner || t->state < 0 || get_uint64(res, row, 3, &t->epoch) < 0 ||
            get_uint64(res, row, 5, &t->updated_usec) < 0)
                return -EBADMSG;
        return 0;
}

static void complete_task(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_task_t done = q->handler;
        FleetTaskInfo t = {};
        const char *status = NULL;
        int k;

        if (error == 0 && (!result_shape(res, 7) || PQntuples(res) != 1)) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        } else if (error == 0 && (k = task_info_from_row(res, 0, &t)) < 0) {
                error = k;
                error_message = k == -ENOMEM ? "Out of memory" : "Unexpected task from the database";
        } else if (error == 0 && !PQgetisnull(res, 0, 6))
                status = PQgetvalue(res, 0, 6);
        if (done)
                done(db, error, error_message, error < 0 ? NULL : &t, status, q->userdata);
        free(t.id);
        free(t.host);
        free(t.owner);
}

int fleet_db_get_task(FleetDb *db, const char *id, fleet_db_task_t done, void *userdata) {
        assert(db);

        if (isempty(id) || strlen(id) > FLEET_DB_NAME_MAX)
                return -EINVAL;
        return fleet_db_query(db, "SELECT * FROM agentfab.get_task($1)", (const char *[]) { id }, 1, complete_task,
                              done, userdata, NULL, NULL);
}

static void complete_id(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_id_t done = q->handler;
        uint64_t id = 0;

        if (error == 0 && (!result_shape(res, 1) || PQntuples(res) != 1 || get_uint64(res, 0, 0, &id) < 0)) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        }
        if (done)
                done(db, error, error_message, id, q->userdata);
}

int fleet_db_post_request(FleetDb *db, const char *task_id, FleetRequestKind kind, const char *argument,
                          uint64_t stop, fleet_db_id_t done, void *userdata) {
        const char *k = fleet_request_kind_to_string(kind);
        char s[32];

        assert(db);

        if (isempty(task_id) || !k)
                return -EINVAL;
        if (IN_SET(kind, FLEET_REQUEST_APPROVE, FLEET_REQUEST_REJECT) != (stop > 0))
                return -EINVAL;
        (void) snprintf(s, sizeof(s), "%" PRIu64, stop);
        return fleet_db_query(db, "SELECT agentfab.post_request($1, $2, $3, $4)",
                              (const char *[]) { task_id, k, argument, s }, 4, complete_id, done, userdata, NULL,
                              NULL);
}

static void complete_requests(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_requests_t done = q->handler;
        FleetRequest *requests = NULL;
        size_t n = 0;

        if (error == 0 && !result_shape(res, 7)) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        }
        if (error == 0 && PQntuples(res) > 0) {
                n = (size_t) PQntuples(res);
                requests = calloc(n, sizeof(FleetRequest));
                if (!requests) {
                        n = 0;
                        error = -ENOMEM;
                        error_message = "Out of memory";
                }
        }
        for (size_t i = 0; error == 0 && i < n; i++) {
                FleetRequest *r = requests + i;

                if (get_string(res, i, 1, &r->task_id) < 0 || get_string(res, i, 3, &r->argument) < 0 ||
                    get_string(res, i, 5, &r->from_host) < 0) {
                        error = -ENOMEM;
                        error_message = "Out of memory";
                        break;
                }
                r->kind = fleet_request_kind_from_string(PQgetvalue(res, i, 2));
                if (!r->task_id || r->kind < 0 || get_uint64(res, i, 0, &r->id) < 0 ||
                    get_uint64(res, i, 4, &r->stop) < 0 || get_uint64(res, i, 6, &r->epoch) < 0) {
                        error = -EBADMSG;
                        error_message = "Unexpected request from the database";
                }
        }
        /* Requests that cannot be handed over now stay until done: the
         * next take returns them. */
        if (done)
                done(db, error, error_message, error < 0 ? NULL : requests, error < 0 ? 0 : n, q->userdata);
        fleet_requests_free(requests, n);
}

int fleet_db_take_requests(FleetDb *db, fleet_db_requests_t done, void *userdata) {
        assert(db);

        return fleet_db_query(db, "SELECT * FROM agentfab.take_requests()", NULL, 0, complete_requests, done,
                              userdata, NULL, NULL);
}

int fleet_db_request_done(FleetDb *db, uint64_t id, fleet_db_done_t done, void *userdata) {
        char i[32];

        assert(db);

        if (id == 0)
                return -EINVAL;
        (void) snprintf(i, sizeof(i), "%" PRIu64, id);
        return fleet_db_query(db, "SELECT agentfab.request_done($1)", (const char *[]) { i }, 1, complete_fenced,
                              done, userdata, NULL, NULL);
}

static const char *const fleet_output_table[_FLEET_OUTPUT_MAX] = {
        [FLEET_OUTPUT_SUMMARY] = "summary",
        [FLEET_OUTPUT_LOG] = "log",
        [FLEET_OUTPUT_STATUS] = "status",
};

DEFINE_STRING_TABLE_LOOKUP(fleet_output, FleetOutput);

int fleet_db_put_output(FleetDb *db, const char *task_id, uint64_t epoch, FleetOutput output, const char *content,
                        fleet_db_done_t done, void *userdata) {
        const char *name = fleet_output_to_string(output);
        char e[32];

        assert(db);

        if (isempty(task_id) || !name || !content)
                return -EINVAL;
        if (strlen(content) > FLEET_DB_OUTPUT_MAX)
                return -EMSGSIZE;
        (void) snprintf(e, sizeof(e), "%" PRIu64, epoch);
        return fleet_db_query(db, "SELECT agentfab.put_output($1, $2, $3, $4)",
                              (const char *[]) { task_id, e, name, content }, 4, complete_fenced, done, userdata,
                              NULL, NULL);
}

static void complete_output(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        fleet_db_output_t done = q->handler;
        const char *content = NULL;
        uint64_t epoch = 0;

        if (error == 0 && (!result_shape(res, 2) || PQntuples(res) != 1 || get_uint64(res, 0, 0, &epoch) < 0 ||
                           PQgetisnull(res, 0, 1))) {
                error = -EBADMSG;
                error_message = "Unexpected answer from the database";
        } else if (error == 0)
                content = PQgetvalue(res, 0, 1);
        if (done)
                done(db, error, error_message, epoch, content, q->userdata);
}

int fleet_db_get_output(FleetDb *db, const char *task_id, FleetOutput output, fleet_db_output_t done,
                        void *userdata) {
        const char *name = fleet_output_to_string(output);

        assert(db);

        if (isempty(task_id) || !name)
                return -EINVAL;
        return fleet_db_query(db, "SELECT * FROM agentfab.get_output($1, $2)", (const char *[]) { task_id, name }, 2,
                              complete_output, done, userdata, NULL, NULL);
}

static int record_from_result(PGresult *res, const char *id, FleetTaskRecord **ret) {
        _cleanup_(fleet_task_record_freep) FleetTaskRecord *r = NULL;
        _cleanup_json_ json_object *lines = NULL;
        size_t n;
        int k;

        if (!result_shape(res, 4) || PQntuples(res) != 1)
                return -EBADMSG;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->id = strdup(id);
        if (!r->id || get_string(res, 0, 1, &r->progress) < 0 || get_string(res, 0, 2, &r->checkpoint) < 0)
                return -ENOMEM;
        if (get_uint64(res, 0, 0, &r->epoch) < 0 || PQgetisnull(res, 0, 3))
                return -EBADMSG;

        k = json_parse_strict(PQgetvalue(res, 0, 3), (size_t) PQgetlength(res, 0, 3), &lines);
        if (k < 0)
                return k;
        if (!json_object_is_type(lines, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(lines);
        r->lines = calloc(n + 1, sizeof(char *));
        if (!r->lines)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *l = json_object_array_get_idx(lines, i);

                if (!json_object_is_type(l, json_type_string))
                        return -EBADMSG;
                r->lines[i] = strdup(json_object_get_string(l));
                if (!r->lines[i])
                        return -ENOMEM;
                r->n_lines = i + 1;
        }

        *ret = TAKE_PTR(r);
        return 0;
}

static void complete_record(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message) {
        _cleanup_(fleet_task_record_freep) FleetTaskRecord *r = NULL;
        fleet_db_record_t done = q->handler;

        if (error == 0) {
                error = record_from_result(res, q->data, &r);
                if (error < 0)
                        error_message = error == -ENOMEM ? "Out of memory" : "Unexpected record from the database";
        }
        if (done)
                done(db, error, error_message, r, q->userdata);
}

int fleet_db_read_task(FleetDb *db, const char *id, fleet_db_record_t done, void *userdata) {
        char *copy;

        assert(db);

        if (isempty(id))
                return -EINVAL;
        copy = strdup(id);
        if (!copy)
                return -ENOMEM;
        return fleet_db_query(db, "SELECT * FROM agentfab.read_task($1)", (const char *[]) { id }, 1,
                              complete_record, done, userdata, copy, free);
}
