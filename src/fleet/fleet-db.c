/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>

#include "fleet-db.h"
#include "macro.h"
#include "string-table.h"

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

/* The first version of this file declares the interface only: every
 * operation answers -EOPNOTSUPP. */

void fleet_claims_free(FleetClaim *c, size_t n) {
        free(c);
}

void fleet_task_infos_free(FleetTaskInfo *t, size_t n) {
        free(t);
}

void fleet_requests_free(FleetRequest *r, size_t n) {
        free(r);
}

FleetTaskRecord *fleet_task_record_free(FleetTaskRecord *r) {
        free(r);
        return NULL;
}

int fleet_db_new(sd_event *e, const char *conninfo, FleetDb **ret) {
        return -EOPNOTSUPP;
}

FleetDb *fleet_db_free(FleetDb *db) {
        return NULL;
}

void fleet_db_set_handlers(FleetDb *db, fleet_db_connection_t on_connection, fleet_db_notify_t on_notify,
                           void *userdata) {
}

int fleet_db_listen(FleetDb *db, const char *channel) {
        return -EOPNOTSUPP;
}

bool fleet_db_is_connected(const FleetDb *db) {
        return false;
}

unsigned fleet_db_connections(const FleetDb *db) {
        return 0;
}

int fleet_db_migrate(FleetDb *db, fleet_db_done_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_add_host(FleetDb *db, const char *host, const char *role, fleet_db_done_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_renew(FleetDb *db, uint64_t lease_usec, char *const *environments, fleet_db_lease_t done,
                   void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_enqueue(FleetDb *db, const char *id, const char *owner, const char *spec, const char *environment,
                     fleet_db_done_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_claim(FleetDb *db, unsigned max, fleet_db_claims_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_reap(FleetDb *db, unsigned max, fleet_db_claims_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_ack(FleetDb *db, const FleetAck *ack, fleet_db_done_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_finish(FleetDb *db, const char *id, uint64_t epoch, FleetTaskState state, fleet_db_done_t done,
                    void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_list(FleetDb *db, unsigned limit, fleet_db_tasks_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_post_request(FleetDb *db, const char *task_id, FleetRequestKind kind, const char *argument,
                          uint64_t stop, fleet_db_id_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_take_requests(FleetDb *db, fleet_db_requests_t done, void *userdata) {
        return -EOPNOTSUPP;
}

int fleet_db_read_task(FleetDb *db, const char *id, fleet_db_record_t done, void *userdata) {
        return -EOPNOTSUPP;
}
