/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "agent.h"
#include "fleet.h"

/* A step's acknowledgment on a host of a fleet (agentfabd(8), "A FLEET OF
 * HOSTS"): the state file holds the step (agent/), then its checkpoint
 * and everything it needs is pushed to Remote= as
 * refs/agentfab/<task>/<epoch> (in the task's ledger job queue), then the
 * database takes the conversation's new lines, the task's record and the
 * checkpoint in one transaction, only while the task's epoch is this
 * host's. Only then does the step count: the agent goes on. Zero rows
 * (-ESTALE) means another host holds the task: this host stops its agent,
 * cancels it here and never reports it. A push or a database that fails
 * is tried again (the agent waits), a fenced host waits for its fence's
 * end. The checkpoint's base goes with the first push, as
 * refs/agentfab/<task>/base. */

typedef struct FleetAcks FleetAcks;

int fleet_acks_new(Fleet *fl, FleetAcks **ret);
/* After the database's connection is freed (no handler follows). */
FleetAcks *fleet_acks_free(FleetAcks *a);
/* The Fleet's (fleet.c). */
FleetAcks *fleet_acks(const Fleet *fl);

/* The member of an acknowledged record (task_to_json()) that names the
 * host and epoch that acknowledged it: {"host": "...", "epoch": N}. A host
 * that takes the task over reads it and takes it out before it reads the
 * record as a task's. */
#define FLEET_ACK_STAMP "fleet"
int fleet_ack_stamp(json_object *record, const char *host, uint64_t epoch);

/* The agent's publisher (agent_publish_t); userdata is the Fleet. */
int fleet_ack_publish(Task *t, const AgentPublish *p, void *userdata);

/* A task ended here: its branch's tip (with what delivery added) goes to
 * Remote= under refs/agentfab/<task>/<epoch>, so that every host shows and
 * fetches what it delivered; then done. 0: nothing to publish (done is not
 * called), 1: under way. */
typedef void (*fleet_tip_done_t)(Fleet *fl, const char *task_id);
int fleet_ack_publish_tip(Fleet *fl, Task *t, uint64_t epoch, fleet_tip_done_t done);
