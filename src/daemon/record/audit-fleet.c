/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "audit-internal.h"
#include "log.h"
#include "messages.h"
#include "string-util.h"

/* The fleet's part of the audit trail: the host and epoch every entry
 * carries, and the entries of the fleet's own events. */

/* In a fleet (fleet.h): this host's name, and where the epoch of its claim
 * on a task comes from. */
static char *fleet_host = NULL;
static uint64_t (*fleet_epoch)(const char *id, void *userdata) = NULL;
static void *fleet_userdata = NULL;

void audit_set_fleet(const char *host, uint64_t (*epoch)(const char *id, void *userdata), void *userdata) {
        free(fleet_host);
        fleet_host = host ? strdup(host) : NULL;
        if (host && !fleet_host)
                log_oom();
        fleet_epoch = epoch;
        fleet_userdata = userdata;
}

const char *audit_fleet_host(void) {
        return fleet_host;
}

uint64_t audit_task_epoch(const Task *t) {
        return fleet_epoch ? fleet_epoch(t->id, fleet_userdata) : 0;
}

void audit_takeover(Task *t, const char *from_host, uint64_t from_epoch, uint64_t epoch, unsigned step,
                    const char *checkpoint) {
        char step_s[16], from_epoch_s[24];

        assert(t);

        snprintf(step_s, sizeof(step_s), "%u", step);
        snprintf(from_epoch_s, sizeof(from_epoch_s), "%" PRIu64, from_epoch);
        /* The epoch is the one of this claim, given by the caller: the entry
         * is written as the claim is made, and is what `audit --verify`
         * takes as the mark of the change of epoch, so it must not depend
         * on when the fleet's own table learns of the claim. The host and
         * the epoch are the usual fields, for a reader that matches on
         * them. */
        journal_send("MESSAGE=Task %s taken over by %s at epoch %" PRIu64 " from %s (epoch %" PRIu64 "), "
                     "going on after step %u%s%s.",
                     t->id, fleet_host ?: "this host", epoch, from_host ?: "an unknown host", from_epoch, step,
                     checkpoint ? " at " : "", strempty(checkpoint),
                     "MESSAGE_ID=" AGENTFAB_MESSAGE_TAKEOVER_STR,
                     "PRIORITY=%i", LOG_NOTICE,
                     "AGENTFAB_EVENT=takeover",
                     "AGENTFAB_TASK=%s", t->id,
                     "AGENTFAB_FROM_HOST=%s", strempty(from_host),
                     "AGENTFAB_FROM_EPOCH=%s", from_epoch_s,
                     "AGENTFAB_STEP=%s", step_s,
                     "AGENTFAB_COMMIT=%s", strempty(checkpoint),
                     "AGENTFAB_HOST=%s", strempty(fleet_host),
                     "AGENTFAB_EPOCH=%" PRIu64, epoch,
                     NULL);
        /* The task's history (events.jsonl) has it once the task has its
         * place among this host's tasks; an entry written while the task is
         * still being made is the journal's alone. */
        if (t->tasks_fd >= 0)
                audit_task_event(t, "takeover", UID_INVALID, "from_host", strempty(from_host), "from_epoch", from_epoch_s,
                                 "step", step_s);
}
