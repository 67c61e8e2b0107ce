/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libpq-fe.h>

#include "fleet-db.h"

/* One statement (or, with multi, a string of statements) waiting for or on
 * the wire. complete is called exactly once: with the last result of the
 * query and error 0, or with res NULL and a negative errno. A completion
 * that goes on with the same transaction queues its next query with
 * fleet_db_query_first(), so that nothing else is sent in between. */
typedef struct FleetDbQuery FleetDbQuery;
typedef void (*fleet_db_complete_t)(FleetDb *db, FleetDbQuery *q, PGresult *res, int error, const char *error_message);

struct FleetDbQuery {
        FleetDbQuery *next;
        const char *sql;                /* a static string */
        bool multi;                     /* several statements, sent with PQsendQuery(), no parameters */
        bool bound;                     /* queued with fleet_db_query_first(): belongs to this connection */
        char **params;                  /* copies; NULL entries are SQL NULL */
        int n_params;
        fleet_db_complete_t complete;
        void *handler;                  /* the caller's handler, of the operation's type */
        void *userdata;
        void *data;                     /* the operation's own state, freed with free_data */
        void (*free_data)(void *data);
        /* Filled while the query is on the wire. */
        PGresult *result;
        int error;
        char *error_message;
};

/* Queues a query at the end (fleet_db_query) or at the head (first). params
 * are copied. Takes data (freed with free_data) even on failure. A query
 * queued first belongs to the connection it was queued on (it goes on a
 * transaction, or LISTENs on it): when that connection is lost before it
 * is sent, it fails with -ECONNRESET instead of going to the next one. */
int fleet_db_query(FleetDb *db, const char *sql, const char *const *params, int n_params,
                   fleet_db_complete_t complete, void *handler, void *userdata, void *data,
                   void (*free_data)(void *data));
int fleet_db_query_first(FleetDb *db, const char *sql, bool multi, const char *const *params, int n_params,
                         fleet_db_complete_t complete, void *handler, void *userdata, void *data,
                         void (*free_data)(void *data));

/* A negative errno for a failed result: its SQLSTATE mapped (see the
 * schema's functions for the codes they raise). */
int fleet_db_result_errno(const PGresult *res);

/* The SQL of the schema (fleet-schema.c). */
extern const char *const fleet_schema_migrations[FLEET_DB_SCHEMA_VERSION];
