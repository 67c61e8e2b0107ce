/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <inttypes.h>
#include <systemd/sd-journal.h>

#include "task.h"

/* What the audit's emitters (audit.c, audit-fleet.c, audit-sandbox.c)
 * share; not for the rest of the daemon, which calls audit.h. */

/* Counts what journald could not take and says it in the next entry it
 * takes (audit.c), so that the trail shows its own gap. */
void audit_journal_sent(int r);
#define journal_send(...) audit_journal_sent(sd_journal_send(__VA_ARGS__))
#define journal_sendv(iov, n) audit_journal_sent(sd_journal_sendv(iov, n))

/* Appends the event to the task's history (events.jsonl) and hands it to
 * its watchers on the stream socket. */
void audit_task_event(Task *t, const char *type, uid_t caller, const char *k1, const char *v1,
                      const char *k2, const char *v2, const char *k3, const char *v3);

/* In a fleet (audit_set_fleet()): this host's name, or NULL on a host
 * alone; the epoch of this host's claim on the task (0 unclaimed). */
const char *audit_fleet_host(void);
uint64_t audit_task_epoch(const Task *t);

/* The fields come last in an entry's list: without a fleet, the NULL format
 * ends the list there, so that the entry is what it is on a host alone. */
#define FLEET_FIELDS(t) (audit_fleet_host() ? "AGENTFAB_HOST=%s" : NULL), audit_fleet_host(), \
        "AGENTFAB_EPOCH=%" PRIu64, audit_task_epoch(t)
#define FLEET_HOST_FIELD() (audit_fleet_host() ? "AGENTFAB_HOST=%s" : NULL), audit_fleet_host()
