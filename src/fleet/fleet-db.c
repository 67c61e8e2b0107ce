/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "fleet-db-internal.h"
#include "fleet-db.h"
#include "log.h"
#include "macro.h"
#include "string-table.h"
#include "string-util.h"

/* The connection: libpq's non-blocking interface on sd-event. One I/O
 * source on libpq's socket (which libpq may change while it connects, to
 * the next address it tries), one timer for the reconnect's backoff, and a
 * queue of queries sent one at a time. */

typedef enum FleetDbConnState {
        FLEET_DB_DISCONNECTED,  /* waiting for the backoff timer */
        FLEET_DB_CONNECTING,    /* PQconnectPoll() until PGRES_POLLING_OK */
        FLEET_DB_READY,
} FleetDbConnState;

struct FleetDb {
        sd_event *event;
        char *conninfo;
        PGconn *conn;
        int fd;
        sd_event_source *io;
        sd_event_source *retry;
        sd_event_source *deadline;      /* a connection attempt or a query that takes too long */
        uint64_t timeout_usec;
        FleetDbConnState state;
        uint64_t backoff_usec;
        unsigned n_connections;

        char **channels;

        FleetDbQuery *queue, *queue_tail;
        FleetDbQuery *current;

        fleet_db_connection_t on_connection;
        fleet_db_notify_t on_notify;
        void *userdata;
};

static const char *const fleet_task_state_table[_FLEET_TASK_STATE_MAX] = {
        [FLEET_TASK_QUEUED] = "queued",
        [FLEET_TASK_RUNNING] = "running",
        [FLEET_TASK_SUCCEEDED] = "succeeded",
        [FLEET_TASK_FAILED] = "failed",
        [FLEET_TASK_CANCELLED] = "cancelled",
};

DEFINE_STRING_TABLE_LOOKUP(fleet_task_state, FleetTaskState);

static const char *const fleet_request_kind_table[_FLEET_REQUEST_KIND_MAX] = {
        [FLEET_REQUEST_APPROVE] = "approve",
        [FLEET_REQUEST_REJECT] = "reject",
        [FLEET_REQUEST_CANCEL] = "cancel",
        [FLEET_REQUEST_PAUSE] = "pause",
        [FLEET_REQUEST_RESUME] = "resume",
        [FLEET_REQUEST_AMEND] = "amend",
};

DEFINE_STRING_TABLE_LOOKUP(fleet_request_kind, FleetRequestKind);

static FleetDbQuery *query_free(FleetDbQuery *q) {
        if (!q)
                return NULL;
        for (int i = 0; i < q->n_params; i++)
                free(q->params[i]);
        free(q->params);
        if (q->free_data)
                q->free_data(q->data);
        PQclear(q->result);
        free(q->error_message);
        free(q);
        return NULL;
}

static void query_complete(FleetDb *db, FleetDbQuery *q, int error, const char *error_message) {
        PGresult *res = error < 0 ? NULL : q->result;

        if (q->complete)
                q->complete(db, q, res, error, error_message);
        query_free(q);
}

int fleet_db_result_errno(const PGresult *res) {
        const char *state;

        if (!res)
                return -ENOMEM;

        switch (PQresultStatus(res)) {
        case PGRES_COMMAND_OK:
        case PGRES_TUPLES_OK:
        case PGRES_EMPTY_QUERY:
                return 0;
        default:
                break;
        }

        state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (!state)
                return -EIO;
        /* The codes the schema's functions raise, and the classes the
         * server raises that a caller acts on. */
        if (streq(state, "42501"))      /* insufficient_privilege, or not a host of the fleet */
                return -EACCES;
        if (streq(state, "23505"))      /* unique_violation */
                return -EEXIST;
        if (streq(state, "P0002"))      /* no_data_found: no such task (held by the caller) */
                return -ENOENT;
        if (streq(state, "22023") || strneq(state, "22", 2) || strneq(state, "23", 2))
                return -EINVAL;         /* a bad argument, or one the table's checks refuse */
        if (streq(state, "AF001"))      /* the caller's lease ran out */
                return -ESTALE;
        if (streq(state, "AF002"))      /* the task has ended */
                return -ESRCH;
        if (streq(state, "AF003"))      /* the schema is newer than this library */
                return -EPROTONOSUPPORT;
        if (strneq(state, "40", 2))     /* serialization failure, deadlock: try again */
                return -EAGAIN;
        if (strneq(state, "08", 2) || strneq(state, "57P", 3))
                return -ECONNRESET;     /* connection failure, server shutting down */
        if (streq(state, "3F000") || streq(state, "42P01") || streq(state, "42883"))
                return -ENOMEDIUM;      /* no schema, table or function: not migrated */
        return -EIO;
}

static char *result_message(const PGresult *res) {
        const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        return strdup(m ?: "unknown error");
}

static void queue_push(FleetDb *db, FleetDbQuery *q, bool first) {
        if (first) {
                q->next = db->queue;
                db->queue = q;
                if (!db->queue_tail)
                        db->queue_tail = q;
        } else {
                q->next = NULL;
                if (db->queue_tail)
                        db->queue_tail->next = q;
                else
                        db->queue = q;
                db->queue_tail = q;
        }
}

static FleetDbQuery *queue_pop(FleetDb *db) {
        FleetDbQuery *q = db->queue;

        if (!q)
                return NULL;
        db->queue = q->next;
        if (!db->queue)
                db->queue_tail = NULL;
        q->next = NULL;
        return q;
}

static int connection_start(FleetDb *db);
static void connection_fail(FleetDb *db, int error, const char *why);
static void dispatch(FleetDb *db);

static void connection_lost(FleetDb *db, const char *why) {
        connection_fail(db, -ECONNRESET, why);
}

static int deadline_handler(sd_event_source *s, uint64_t usec, void *userdata) {
        FleetDb *db = userdata;

        connection_fail(db, -ETIMEDOUT,
                        db->state == FLEET_DB_CONNECTING ? "Timed out connecting to the database"
                                                         : "Timed out waiting for the database");
        return 0;
}

/* libpq's connect_timeout does not apply to PQconnectPoll(), and a server
 * that stops answering (stopped, partitioned away) leaves a query waiting
 * for TCP to give up, which takes many minutes: so each connection attempt
 * and each query gets a deadline of our own, and past it the connection is
 * dropped and made again. */
static void deadline_arm(FleetDb *db) {
        uint64_t now = 0;
        int r;

        if (db->timeout_usec == 0)
                return;
        (void) sd_event_now(db->event, CLOCK_MONOTONIC, &now);
        if (db->deadline) {
                r = sd_event_source_set_time(db->deadline, now + db->timeout_usec);
                if (r >= 0)
                        r = sd_event_source_set_enabled(db->deadline, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time(db->event, &db->deadline, CLOCK_MONOTONIC, now + db->timeout_usec, 0,
                                      deadline_handler, db);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the fleet database's timeout, ignoring: %m");
}

static void deadline_disarm(FleetDb *db) {
        if (db->deadline)
                (void) sd_event_source_set_enabled(db->deadline, SD_EVENT_OFF);
}

static int io_set_events(FleetDb *db, uint32_t events) {
        return sd_event_source_set_io_events(db->io, events);
}

static int retry_handler(sd_event_source *s, uint64_t usec, void *userdata) {
        FleetDb *db = userdata;
        int r;

        r = connection_start(db);
        if (r < 0)
                connection_lost(db, "Cannot start connecting");
        return 0;
}

/* Forgets the connection and schedules the next attempt. The query on the
 * wire may have run: it fails with error (-ECONNRESET, -ETIMEDOUT) for its
 * caller to retry. Queries not yet sent wait. */
static void connection_fail(FleetDb *db, int error, const char *why) {
        bool was_ready = db->state == FLEET_DB_READY;
        _cleanup_free_ char *message = NULL;
        FleetDbQuery *q;
        uint64_t now = 0;
        int r;

        deadline_disarm(db);
        if (db->conn && error != -ETIMEDOUT) {
                const char *m = PQerrorMessage(db->conn);
                if (!isempty(m)) {
                        message = strdup(m);
                        if (message)
                                message[strcspn(message, "\n")] = '\0';
                }
        }
        if (!message)
                message = strdup(why);

        db->io = sd_event_source_disable_unref(db->io);
        if (db->conn) {
                PQfinish(db->conn);
                db->conn = NULL;
        }
        db->fd = -EBADF;
        db->state = FLEET_DB_DISCONNECTED;

        q = TAKE_PTR(db->current);
        if (q)
                query_complete(db, q, error, message ?: "Connection to the database lost");

        /* Queries bound to the old connection (a transaction's next
         * statement, LISTEN, ROLLBACK) fail; the next connection LISTENs
         * again. They are at the head of the queue; a completion called
         * here may queue more, at the end. */
        while (db->queue && db->queue->bound) {
                q = queue_pop(db);
                query_complete(db, q, error, message ?: "Connection to the database lost");
        }

        if (was_ready && db->on_connection)
                db->on_connection(db, false, message, db->userdata);

        db->backoff_usec = db->backoff_usec == 0 ? FLEET_DB_BACKOFF_MIN_USEC
                                                 : MIN(db->backoff_usec * 2, FLEET_DB_BACKOFF_MAX_USEC);
        (void) sd_event_now(db->event, CLOCK_MONOTONIC, &now);
        if (db->retry)
                r = sd_event_source_set_time(db->retry, now + db->backoff_usec) < 0 ? -EIO :
                    sd_event_source_set_enabled(db->retry, SD_EVENT_ONESHOT);
        else
                r = sd_event_add_time(db->event, &db->retry, CLOCK_MONOTONIC, now + db->backoff_usec, 0,
                                      retry_handler, db);
        if (r < 0)
                log_warning_errno(r, "Failed to schedule reconnecting to the fleet's database, ignoring: %m");
        else
                log_debug("Fleet database: %s; connecting again in %" PRIu64 " ms.", strempty(message),
                          db->backoff_usec / USEC_PER_MSEC);
}

static void connection_ready(FleetDb *db) {
        int r;

        deadline_disarm(db);
        db->state = FLEET_DB_READY;
        db->n_connections++;
        log_debug("Fleet database: connected (connection %u).", db->n_connections);
        db->backoff_usec = 0;

        /* LISTEN again on every channel, before anything queued. */
        for (size_t i = strv_length(db->channels); i > 0; i--) {
                const char *channel = db->channels[i - 1];
                _cleanup_free_ char *sql = NULL;
                char *ident = PQescapeIdentifier(db->conn, channel, strlen(channel));

                if (!ident || asprintf(&sql, "LISTEN %s", ident) < 0) {
                        PQfreemem(ident);
                        connection_lost(db, "Out of memory");
                        return;
                }
                PQfreemem(ident);
                /* A query's SQL is static; a LISTEN's owns it through data. */
                r = fleet_db_query_first(db, sql, true, NULL, 0, NULL, NULL, NULL, sql, free);
                TAKE_PTR(sql);  /* the query owns it, or has freed it */
                if (r < 0) {
                        connection_lost(db, "Out of memory");
                        return;
                }
        }

        if (db->on_connection)
                db->on_connection(db, true, NULL, db->userdata);
}

static void deliver_notifications(FleetDb *db) {
        PGnotify *n;

        while ((n = PQnotifies(db->conn))) {
                if (db->on_notify)
                        db->on_notify(db, n->relname, n->extra, db->userdata);
                PQfreemem(n);
        }
}

/* Reads what the server sent: notifications, and the results of the query
 * on the wire until libpq says there are no more. */
static void read_input(FleetDb *db) {
        if (PQconsumeInput(db->conn) == 0) {
                connection_lost(db, "Connection to the database lost");
                return;
        }
        deliver_notifications(db);
        if (!db->conn)
                return;         /* a handler's query could not be sent, and the connection was dropped */

        while (db->current && !PQisBusy(db->conn)) {
                PGresult *res = PQgetResult(db->conn);
                FleetDbQuery *q = db->current;

                if (!res) {
                        /* The query is done. A string of statements that
                         * failed inside its transaction leaves the
                         * transaction aborted: roll it back before anything
                         * else goes. */
                        db->current = NULL;
                        deadline_disarm(db);
                        if (PQtransactionStatus(db->conn) == PQTRANS_INERROR && q->error < 0)
                                (void) fleet_db_query_first(db, "ROLLBACK", true, NULL, 0, NULL, NULL, NULL, NULL,
                                                            NULL);
                        query_complete(db, q, q->error, q->error_message);
                        if (!db->conn)
                                return;
                        continue;
                }

                if (q->error == 0) {
                        int e = fleet_db_result_errno(res);
                        if (e < 0) {
                                q->error = e;
                                q->error_message = result_message(res);
                        }
                }
                if (q->error == 0 && IN_SET(PQresultStatus(res), PGRES_TUPLES_OK, PGRES_COMMAND_OK)) {
                        PQclear(q->result);
                        q->result = res;
                } else
                        PQclear(res);
        }

        if (PQstatus(db->conn) == CONNECTION_BAD)
                connection_lost(db, "Connection to the database lost");
}

static int io_handler(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FleetDb *db = userdata;

        if (db->state == FLEET_DB_CONNECTING) {
                PostgresPollingStatusType p = PQconnectPoll(db->conn);
                int r;

                switch (p) {
                case PGRES_POLLING_OK:
                        if (PQsetnonblocking(db->conn, 1) < 0) {
                                connection_lost(db, "Cannot make the connection non-blocking");
                                return 0;
                        }
                        r = io_set_events(db, EPOLLIN);
                        if (r < 0) {
                                connection_lost(db, "Cannot watch the connection");
                                return 0;
                        }
                        connection_ready(db);
                        break;
                case PGRES_POLLING_READING:
                case PGRES_POLLING_WRITING:
                        /* libpq may have moved to another socket (the next
                         * host or address of the connection string). */
                        if (PQsocket(db->conn) != db->fd) {
                                db->io = sd_event_source_disable_unref(db->io);
                                db->fd = PQsocket(db->conn);
                                r = sd_event_add_io(db->event, &db->io, db->fd, 0, io_handler, db);
                                if (r < 0) {
                                        connection_lost(db, "Cannot watch the connection");
                                        return 0;
                                }
                        }
                        r = io_set_events(db, p == PGRES_POLLING_READING ? EPOLLIN : EPOLLOUT);
                        if (r < 0)
                                connection_lost(db, "Cannot watch the connection");
                        return 0;
                default:
                        connection_lost(db, "Cannot connect to the database");
                        return 0;
                }
        } else if (db->state == FLEET_DB_READY) {
                if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                        read_input(db);
                if (db->state == FLEET_DB_READY && (revents & EPOLLOUT)) {
                        int f = PQflush(db->conn);
                        if (f < 0) {
                                connection_lost(db, "Cannot write to the database");
                                return 0;
                        }
                        (void) io_set_events(db, f > 0 ? EPOLLIN | EPOLLOUT : EPOLLIN);
                }
        }

        dispatch(db);
        return 0;
}

/* libpq writes the server's notices ("relation already exists,
 * skipping", the FATAL of a server shutting down) to stderr by default:
 * they are no news to anyone but a debugging person. */
static void notice_processor(void *userdata, const char *message) {
        log_debug("Fleet database: %.*s", (int) strcspn(message, "\n"), message);
}

static int connection_start(FleetDb *db) {
        int r;

        assert(!db->conn);

        db->conn = PQconnectStart(db->conninfo);
        if (!db->conn)
                return -ENOMEM;
        PQsetNoticeProcessor(db->conn, notice_processor, db);
        if (PQstatus(db->conn) == CONNECTION_BAD)
                return -ECONNREFUSED;

        db->fd = PQsocket(db->conn);
        if (db->fd < 0)
                return -EBADF;
        r = sd_event_add_io(db->event, &db->io, db->fd, EPOLLOUT, io_handler, db);
        if (r < 0)
                return r;
        db->state = FLEET_DB_CONNECTING;
        deadline_arm(db);
        return 0;
}

/* Sends the next query if none is on the wire. A query that cannot be sent
 * was not run: it goes back to the head of the queue and waits for the next
 * connection. */
static void dispatch(FleetDb *db) {
        FleetDbQuery *q;
        int ok, f;

        if (db->state != FLEET_DB_READY || db->current || !db->queue)
                return;

        q = queue_pop(db);
        if (q->multi)
                ok = PQsendQuery(db->conn, q->sql);
        else
                ok = PQsendQueryParams(db->conn, q->sql, q->n_params, NULL, (const char *const *) q->params,
                                       NULL, NULL, 0);
        if (!ok) {
                queue_push(db, q, true);
                connection_lost(db, "Cannot send to the database");
                return;
        }
        db->current = q;
        deadline_arm(db);

        f = PQflush(db->conn);
        if (f < 0) {
                /* Not all of it went out: the server ran none of it. */
                db->current = NULL;
                queue_push(db, q, true);
                connection_lost(db, "Cannot write to the database");
                return;
        }
        (void) io_set_events(db, f > 0 ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

static int query_new(const char *sql, bool multi, const char *const *params, int n_params,
                     fleet_db_complete_t complete, void *handler, void *userdata, void *data,
                     void (*free_data)(void *data), FleetDbQuery **ret) {
        FleetDbQuery *q;

        q = calloc(1, sizeof(*q));
        if (!q) {
                if (free_data)
                        free_data(data);
                return -ENOMEM;
        }
        *q = (FleetDbQuery) {
                .sql = sql,
                .multi = multi,
                .complete = complete,
                .handler = handler,
                .userdata = userdata,
                .data = data,
                .free_data = free_data,
        };
        if (n_params > 0) {
                q->params = calloc(n_params, sizeof(char *));
                if (!q->params) {
                        query_free(q);
                        return -ENOMEM;
                }
                q->n_params = n_params;
                for (int i = 0; i < n_params; i++)
                        if (params[i]) {
                                q->params[i] = strdup(params[i]);
                                if (!q->params[i]) {
                                        query_free(q);
                                        return -ENOMEM;
                                }
                        }
        }
        *ret = q;
        return 0;
}

int fleet_db_query(FleetDb *db, const char *sql, const char *const *params, int n_params,
                   fleet_db_complete_t complete, void *handler, void *userdata, void *data,
                   void (*free_data)(void *data)) {
        FleetDbQuery *q;
        int r;

        r = query_new(sql, false, params, n_params, complete, handler, userdata, data, free_data, &q);
        if (r < 0)
                return r;
        queue_push(db, q, false);
        dispatch(db);
        return 0;
}

int fleet_db_query_first(FleetDb *db, const char *sql, bool multi, const char *const *params, int n_params,
                         fleet_db_complete_t complete, void *handler, void *userdata, void *data,
                         void (*free_data)(void *data)) {
        FleetDbQuery *q;
        int r;

        r = query_new(sql, multi, params, n_params, complete, handler, userdata, data, free_data, &q);
        if (r < 0)
                return r;
        q->bound = true;
        queue_push(db, q, true);
        /* Called from a completion or from connection_ready(): read_input()
         * and io_handler() dispatch once it returns. */
        return 0;
}

int fleet_db_new(sd_event *e, const char *conninfo, FleetDb **ret) {
        _cleanup_(fleet_db_freep) FleetDb *db = NULL;
        int r;

        assert(e);
        assert(conninfo);
        assert(ret);

        db = calloc(1, sizeof(*db));
        if (!db)
                return -ENOMEM;
        db->fd = -EBADF;
        db->timeout_usec = FLEET_DB_TIMEOUT_USEC;
        db->event = sd_event_ref(e);
        db->conninfo = strdup(conninfo);
        if (!db->conninfo)
                return -ENOMEM;

        r = connection_start(db);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                /* Not reachable now (or a bad connection string): keep
                 * trying, as after losing a connection. A connection string
                 * libpq cannot parse is the caller's to check first with
                 * fleet_db_check_conninfo(). */
                connection_lost(db, "Cannot connect to the database");

        *ret = TAKE_PTR(db);
        return 0;
}

int fleet_db_check_conninfo(const char *conninfo, char **ret_error_message) {
        char *err = NULL;
        PQconninfoOption *o;

        o = PQconninfoParse(conninfo, &err);
        if (!o) {
                if (ret_error_message) {
                        *ret_error_message = err ? strdup(err) : NULL;
                        if (*ret_error_message)
                                (*ret_error_message)[strcspn(*ret_error_message, "\n")] = '\0';
                }
                PQfreemem(err);
                return -EINVAL;
        }
        PQconninfoFree(o);
        return 0;
}

FleetDb *fleet_db_free(FleetDb *db) {
        FleetDbQuery *q;

        if (!db)
                return NULL;

        /* No handler is called: the caller is going away. */
        while ((q = queue_pop(db))) {
                q->complete = NULL;
                query_free(q);
        }
        if (db->current) {
                db->current->complete = NULL;
                query_free(db->current);
        }
        sd_event_source_disable_unref(db->io);
        sd_event_source_disable_unref(db->retry);
        sd_event_source_disable_unref(db->deadline);
        if (db->conn)
                PQfinish(db->conn);
        strv_free(db->channels);
        free(db->conninfo);
        sd_event_unref(db->event);
        free(db);
        return NULL;
}

void fleet_db_set_handlers(FleetDb *db, fleet_db_connection_t on_connection, fleet_db_notify_t on_notify,
                           void *userdata) {
        assert(db);
        db->on_connection = on_connection;
        db->on_notify = on_notify;
        db->userdata = userdata;
}

int fleet_db_listen(FleetDb *db, const char *channel) {
        _cleanup_free_ char *sql = NULL;
        FleetDbQuery *q;
        char *ident;
        int r;

        assert(db);

        if (isempty(channel) || strlen(channel) > 63)
                return -EINVAL;
        for (char **i = db->channels; i && *i; i++)
                if (streq(*i, channel))
                        return 0;

        r = strv_extend(&db->channels, channel);
        if (r < 0)
                return r;

        if (db->state != FLEET_DB_READY)
                return 0;       /* connection_ready() LISTENs */

        ident = PQescapeIdentifier(db->conn, channel, strlen(channel));
        if (!ident)
                return -ENOMEM;
        r = asprintf(&sql, "LISTEN %s", ident);
        PQfreemem(ident);
        if (r < 0)
                return -ENOMEM;

        r = query_new(sql, true, NULL, 0, NULL, NULL, NULL, sql, free, &q);
        TAKE_PTR(sql);
        if (r < 0)
                return r;
        queue_push(db, q, false);
        dispatch(db);
        return 0;
}

void fleet_db_set_timeout(FleetDb *db, uint64_t usec) {
        assert(db);
        db->timeout_usec = usec;
        if (usec == 0)
                deadline_disarm(db);
        else if (db->state == FLEET_DB_CONNECTING || db->current)
                deadline_arm(db);
}

bool fleet_db_is_connected(const FleetDb *db) {
        return db && db->state == FLEET_DB_READY;
}

unsigned fleet_db_connections(const FleetDb *db) {
        return db ? db->n_connections : 0;
}
