/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

/* The fleet's database: one libpq connection driven by sd-event, and the
 * operations a host of the fleet makes on the shared PostgreSQL schema
 * (schema "agentfab", created by fleet_db_migrate()).
 *
 * Nothing here blocks. Operations are queued and sent one at a time; each
 * ends in exactly one call of its handler from the event loop (unless the
 * FleetDb is freed first, which calls none). When the connection breaks,
 * or a connection attempt or a query takes longer than the timeout
 * (FLEET_DB_TIMEOUT_USEC), it is made again with a growing backoff
 * (FLEET_DB_BACKOFF_MIN_USEC up to FLEET_DB_BACKOFF_MAX_USEC): an operation
 * that was on the wire fails with -ECONNRESET or -ETIMEDOUT (it may or may
 * not have committed: every operation is safe to retry, see each one),
 * operations not yet sent wait for the new connection.
 *
 * Who the caller is comes from the database, never from an argument: each
 * host logs in with its own role, which fleet_db_add_host() maps to a host
 * name, and every function checks that the row it writes belongs to the
 * caller's host (SECURITY DEFINER functions; host roles cannot write the
 * tables directly). */

typedef struct FleetDb FleetDb;

#define FLEET_DB_BACKOFF_MIN_USEC (100 * 1000ULL)
#define FLEET_DB_BACKOFF_MAX_USEC (5 * 1000 * 1000ULL)
/* How long a connection attempt or a query may take before the connection
 * is dropped (the query fails with -ETIMEDOUT) and made again. */
#define FLEET_DB_TIMEOUT_USEC (30 * 1000 * 1000ULL)

/* The channel every enqueue notifies (payload: the task id), and the one
 * every posted request notifies (payload: the name of the host that holds
 * the task). */
#define FLEET_DB_CHANNEL_QUEUE "agentfab_queue"
#define FLEET_DB_CHANNEL_REQUESTS "agentfab_requests"

/* Bounds on what a caller or the database can make us hold. */
#define FLEET_DB_CLAIM_MAX 1024U
#define FLEET_DB_NAME_MAX 255U
/* Sizes the schema refuses beyond (and the operations before sending):
 * every host that claims a task or takes it over reads these into memory. */
#define FLEET_DB_SPEC_MAX 1048576               /* a task's spec, bytes of JSON text */
#define FLEET_DB_PROGRESS_MAX 1048576           /* its progress, likewise */
#define FLEET_DB_LINE_MAX 16777216              /* one conversation line */
#define FLEET_DB_ACK_LINES_MAX 10000            /* lines in one ack */
#define FLEET_DB_OUTPUT_MAX 4194304             /* a summary, or the kept tail of an output log */

typedef enum FleetTaskState {
        FLEET_TASK_QUEUED,
        FLEET_TASK_RUNNING,
        FLEET_TASK_SUCCEEDED,
        FLEET_TASK_FAILED,
        FLEET_TASK_CANCELLED,
        _FLEET_TASK_STATE_MAX,
        _FLEET_TASK_STATE_INVALID = -EINVAL,
} FleetTaskState;

const char *fleet_task_state_to_string(FleetTaskState s);
FleetTaskState fleet_task_state_from_string(const char *s);

typedef enum FleetRequestKind {
        FLEET_REQUEST_APPROVE,
        FLEET_REQUEST_REJECT,
        FLEET_REQUEST_CANCEL,
        FLEET_REQUEST_PAUSE,
        FLEET_REQUEST_RESUME,
        FLEET_REQUEST_AMEND,
        _FLEET_REQUEST_KIND_MAX,
        _FLEET_REQUEST_KIND_INVALID = -EINVAL,
} FleetRequestKind;

const char *fleet_request_kind_to_string(FleetRequestKind k);
FleetRequestKind fleet_request_kind_from_string(const char *s);

/* A task this host now holds, from fleet_db_claim() or fleet_db_reap(). */
typedef struct FleetClaim {
        char *id;
        char *owner;            /* "user@host" */
        char *spec;             /* JSON text as enqueued */
        char *environment;      /* NULL: any host */
        uint64_t epoch;         /* this host's epoch for the task: acks must carry it */
        char *checkpoint;       /* last acknowledged checkpoint commit, NULL if none (a fresh task) */
        bool takeover;          /* reaped from a host whose lease ran out, or given back with a checkpoint:
                                 * resume from what fleet_db_read_task() says, not from the start */
} FleetClaim;

/* One task of the fleet, from fleet_db_list(). */
typedef struct FleetTaskInfo {
        char *id;
        FleetTaskState state;
        char *host;             /* NULL while queued */
        uint64_t epoch;
        char *owner;
        uint64_t updated_usec;  /* CLOCK_REALTIME µs, by the database's clock */
} FleetTaskInfo;

/* A request posted on one host for a task another holds. */
typedef struct FleetRequest {
        uint64_t id;
        char *task_id;
        FleetRequestKind kind;
        char *argument;         /* comment, or amend text; may be NULL */
        uint64_t stop;          /* approve/reject: the breaker stop it answers; 0 otherwise */
        char *from_host;
        uint64_t epoch;         /* the task's epoch when returned */
} FleetRequest;

/* What a host that takes a task over reads back: only what was acknowledged. */
typedef struct FleetTaskRecord {
        char *id;
        uint64_t epoch;
        char *progress;         /* JSON text, NULL if none */
        char *checkpoint;       /* commit id, NULL if none */
        char **lines;           /* the acknowledged conversation lines, in order, NULL-terminated */
        size_t n_lines;
} FleetTaskRecord;

/* One step's acknowledgment (fleet_db_ack()). */
typedef struct FleetAck {
        const char *task_id;
        uint64_t epoch;
        uint64_t first_line;    /* index of lines[0] in the task's conversation: a retried ack rewrites, never duplicates */
        const char *const *lines;
        size_t n_lines;
        const char *progress;   /* JSON text, or NULL to keep */
        const char *checkpoint; /* commit id, or NULL to keep */
} FleetAck;

void fleet_claims_free(FleetClaim *c, size_t n);
void fleet_task_infos_free(FleetTaskInfo *t, size_t n);
void fleet_requests_free(FleetRequest *r, size_t n);
FleetTaskRecord *fleet_task_record_free(FleetTaskRecord *r);
static inline void fleet_task_record_freep(FleetTaskRecord **r) {
        fleet_task_record_free(*r);
}

/* Handlers. error is 0 or a negative errno; error_message a one-line
 * explanation from the server or libpq when error < 0 (else NULL). Arrays
 * and records belong to the library and are freed after the handler
 * returns: copy what you keep. */
typedef void (*fleet_db_done_t)(FleetDb *db, int error, const char *error_message, void *userdata);
typedef void (*fleet_db_claims_t)(FleetDb *db, int error, const char *error_message,
                                  const FleetClaim *claims, size_t n, void *userdata);
typedef void (*fleet_db_tasks_t)(FleetDb *db, int error, const char *error_message,
                                 const FleetTaskInfo *tasks, size_t n, void *userdata);
typedef void (*fleet_db_requests_t)(FleetDb *db, int error, const char *error_message,
                                    const FleetRequest *requests, size_t n, void *userdata);
typedef void (*fleet_db_record_t)(FleetDb *db, int error, const char *error_message,
                                  const FleetTaskRecord *record, void *userdata);
/* lease_until_usec: CLOCK_REALTIME µs by the database's clock. */
typedef void (*fleet_db_lease_t)(FleetDb *db, int error, const char *error_message,
                                 uint64_t lease_until_usec, void *userdata);
typedef void (*fleet_db_id_t)(FleetDb *db, int error, const char *error_message, uint64_t id, void *userdata);
typedef void (*fleet_db_output_t)(FleetDb *db, int error, const char *error_message, uint64_t epoch,
                                  const char *content, void *userdata);
typedef void (*fleet_db_name_t)(FleetDb *db, int error, const char *error_message, const char *name,
                                void *userdata);

/* connected: called each time a connection is made (true) or lost (false). */
typedef void (*fleet_db_connection_t)(FleetDb *db, bool connected, const char *error_message, void *userdata);
typedef void (*fleet_db_notify_t)(FleetDb *db, const char *channel, const char *payload, void *userdata);

/* Whether libpq can parse conninfo (a "key=value ..." string or a
 * postgresql:// URI); -EINVAL with libpq's words otherwise. */
int fleet_db_check_conninfo(const char *conninfo, char **ret_error_message);

/* Takes a reference on e; conninfo is a libpq connection string (or URI).
 * Starts connecting at once (libpq resolves a host name before this
 * returns; a numeric address or a socket directory does not wait). A
 * server that cannot be reached is tried again with the backoff. */
int fleet_db_new(sd_event *e, const char *conninfo, FleetDb **ret);
/* Calls no handler. Not from within a handler. */
FleetDb *fleet_db_free(FleetDb *db);
static inline void fleet_db_freep(FleetDb **db) {
        fleet_db_free(*db);
}

void fleet_db_set_handlers(FleetDb *db, fleet_db_connection_t on_connection, fleet_db_notify_t on_notify,
                           void *userdata);
/* LISTENs on channel now and after every reconnect. Notifications sent
 * while disconnected are lost: callers also poll. */
int fleet_db_listen(FleetDb *db, const char *channel);
bool fleet_db_is_connected(const FleetDb *db);
/* Changes FLEET_DB_TIMEOUT_USEC for this connection (0: none); an attempt
 * or a query under way gets the new timeout from now. */
void fleet_db_set_timeout(FleetDb *db, uint64_t usec);
/* How many connections were made so far (1 after the first). */
unsigned fleet_db_connections(const FleetDb *db);

/* Schema. The latest version this library knows. */
#define FLEET_DB_SCHEMA_VERSION 3
/* Brings the schema to FLEET_DB_SCHEMA_VERSION, one transaction per
 * migration under pg_advisory_xact_lock(), so that two hosts migrating at
 * once apply each migration once. A schema already current costs one
 * query and needs no right but USAGE; a migration needs the role that owns
 * the schema (or, for the first, CREATE on the database): a host role
 * gets -EACCES. -EPROTONOSUPPORT: the schema is newer than this library. */
int fleet_db_migrate(FleetDb *db, fleet_db_done_t done, void *userdata);

/* Maps host name to database role (run by the schema's owner; a host role
 * gets -EACCES). Idempotent; a role already mapped to another host is
 * -EEXIST. */
int fleet_db_add_host(FleetDb *db, const char *host, const char *role, fleet_db_done_t done, void *userdata);

/* The host name the database maps the caller's role to: the "host" of
 * owners it may enqueue for. -EACCES: the role is no host of the fleet. */
int fleet_db_host_name(FleetDb *db, fleet_db_name_t done, void *userdata);

/* Renews the caller's liveness row (fleet_db_add_host() made it): its lease
 * runs until the database's now() + lease_usec (1 s to 1 day);
 * environments (NULL-terminated, may be NULL) are those this host has. */
int fleet_db_renew(FleetDb *db, uint64_t lease_usec, char *const *environments, fleet_db_lease_t done, void *userdata);

/* Queues a task and NOTIFYs FLEET_DB_CHANNEL_QUEUE. owner must be
 * "user@<caller's host>"; spec is JSON text of at most FLEET_DB_SPEC_MAX
 * bytes (-EMSGSIZE); environment may be NULL.
 * -EEXIST: a task with that id exists (after a lost connection, maybe the
 * first attempt's). */
int fleet_db_enqueue(FleetDb *db, const char *id, const char *owner, const char *spec, const char *environment,
                     fleet_db_done_t done, void *userdata);

/* Claims up to max queued tasks (oldest first) for the caller, only those
 * whose environment it has, with FOR UPDATE SKIP LOCKED: several hosts
 * claiming at once never get the same task. Raises each task's epoch. A
 * caller whose lease ran out claims nothing (-ESTALE). After -ECONNRESET
 * or -ETIMEDOUT the claim may have been made: fleet_db_held() finds what
 * the caller holds. */
int fleet_db_claim(FleetDb *db, unsigned max, fleet_db_claims_t done, void *userdata);

/* Takes over up to max running tasks whose host's lease ran out, as claim
 * does (epoch + 1, environments honoured); claims[i].takeover is true. */
int fleet_db_reap(FleetDb *db, unsigned max, fleet_db_claims_t done, void *userdata);

/* Gives a task the caller holds at epoch back to the queue at once (a host
 * that stops), instead of letting its lease run out; NOTIFYs the queue.
 * What was acknowledged stays: the next claim resumes it. -ESTALE as for
 * an ack. */
int fleet_db_release(FleetDb *db, const char *id, uint64_t epoch, fleet_db_done_t done, void *userdata);

/* Every running task the caller holds, by id. */
int fleet_db_held(FleetDb *db, fleet_db_claims_t done, void *userdata);

/* One step's acknowledgment, in one transaction, only where the task's
 * epoch is still ack->epoch and the caller holds it. Lines, their count and
 * the progress beyond the FLEET_DB_*_MAX sizes: -EMSGSIZE. -ESTALE: zero rows,
 * the caller has lost the task (nothing was written). */
int fleet_db_ack(FleetDb *db, const FleetAck *ack, fleet_db_done_t done, void *userdata);

/* Ends a task the caller holds at epoch (state: succeeded, failed or
 * cancelled). -ESTALE as for an ack. Ending it again in the same state
 * succeeds (a finish repeated after a lost connection). */
int fleet_db_finish(FleetDb *db, const char *id, uint64_t epoch, FleetTaskState state, fleet_db_done_t done,
                    void *userdata);

/* Every task of the fleet, newest first, at most limit (0: all). */
int fleet_db_list(FleetDb *db, unsigned limit, fleet_db_tasks_t done, void *userdata);

/* Posts a request for a task held by any host (repeated after a lost
 * connection, it may be there twice: the holder applies an approval or
 * rejection once, to its stop); NOTIFYs
 * FLEET_DB_CHANNEL_REQUESTS with the holder's name. stop: the breaker stop
 * an approve or reject answers (> 0 for those, 0 for the others). A cancel
 * of a still-queued task cancels it at once. The handler gets the request's
 * id. -ENOENT: no such task; -ESRCH: the task has ended. */
int fleet_db_post_request(FleetDb *db, const char *task_id, FleetRequestKind kind, const char *argument,
                          uint64_t stop, fleet_db_id_t done, void *userdata);

/* The requests waiting for tasks the caller holds, oldest first: every
 * request not yet done, also those returned before, so that none is lost
 * with a connection or a host (at least once: a request returned again
 * after its holder applied it but died before fleet_db_request_done() is
 * applied twice; an approval or rejection names its stop, so it answers
 * that stop once). */
int fleet_db_take_requests(FleetDb *db, fleet_db_requests_t done, void *userdata);

/* Marks a request applied: no take returns it again. Only the holder of
 * its task may (-ESTALE otherwise); done again, it still succeeds. */
int fleet_db_request_done(FleetDb *db, uint64_t id, fleet_db_done_t done, void *userdata);

/* A task's outputs that people read from any host. */
typedef enum FleetOutput {
        FLEET_OUTPUT_SUMMARY,
        FLEET_OUTPUT_LOG,       /* the tail of the output log: what is kept of it when its host's disk is gone */
        FLEET_OUTPUT_STATUS,    /* what status shows, as its holder last wrote it (JSON text) */
        _FLEET_OUTPUT_MAX,
        _FLEET_OUTPUT_INVALID = -EINVAL,
} FleetOutput;

const char *fleet_output_to_string(FleetOutput o);
FleetOutput fleet_output_from_string(const char *s);

/* Writes (replaces) an output of a task the caller holds at epoch, also
 * once the caller has ended it; at most FLEET_DB_OUTPUT_MAX bytes
 * (-EMSGSIZE). -ESTALE: the task is not the caller's at that epoch. */
int fleet_db_put_output(FleetDb *db, const char *task_id, uint64_t epoch, FleetOutput output, const char *content,
                        fleet_db_done_t done, void *userdata);

/* Reads an output of any task of the fleet, with the epoch it was written
 * at. -ENOENT: none written. */
int fleet_db_get_output(FleetDb *db, const char *task_id, FleetOutput output, fleet_db_output_t done,
                        void *userdata);

/* One task of the fleet by id, for people on any host: its row as
 * fleet_db_list() gives it, and its FLEET_OUTPUT_STATUS (NULL if none
 * written yet), in one read. -ENOENT: no such task. */
typedef void (*fleet_db_task_t)(FleetDb *db, int error, const char *error_message, const FleetTaskInfo *task,
                                const char *status, void *userdata);
int fleet_db_get_task(FleetDb *db, const char *id, fleet_db_task_t done, void *userdata);

/* What was acknowledged for a task the caller holds: its epoch, progress,
 * checkpoint and conversation lines. -ENOENT: no such task held by the
 * caller. */
int fleet_db_read_task(FleetDb *db, const char *id, fleet_db_record_t done, void *userdata);
