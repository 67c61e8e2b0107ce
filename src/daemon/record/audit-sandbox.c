/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdio.h>

#include "audit.h"
#include "audit-internal.h"
#include "messages.h"
#include "string-util.h"

/* The sandbox's life in the audit trail: made, taken up again after a
 * restart, frozen, thawed and released. */

void audit_sandbox(Task *t, const char *unit, pid_t pid, uid_t uid) {
        char uid_s[16] = "";

        if (uid != UID_INVALID)
                snprintf(uid_s, sizeof(uid_s), "%u", (unsigned) uid);
        journal_send("MESSAGE=Task %s has its sandbox in %s (pid %i, commands as uid %s).", t->id, unit, (int) pid,
                               uid_s[0] ? uid_s : "unknown",
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_SANDBOX_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=sandbox",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UNIT=%s", unit,
                               "AGENTFAB_SANDBOX_PID=%i", (int) pid,
                               "AGENTFAB_SANDBOX_UID=%s", uid_s,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "sandbox", UID_INVALID, "unit", unit, uid_s[0] ? "sandbox_uid" : NULL, uid_s, NULL, NULL);
}

void audit_sandbox_reattached(Task *t, const char *unit, pid_t pid, uid_t uid, uint64_t usec) {
        char uid_s[16] = "", usec_s[32];

        if (uid != UID_INVALID)
                snprintf(uid_s, sizeof(uid_s), "%u", (unsigned) uid);
        snprintf(usec_s, sizeof(usec_s), "%" PRIu64, usec);
        journal_send("MESSAGE=Task %s has its sandbox in %s again (pid %i, commands as uid %s).", t->id, unit,
                               (int) pid, uid_s[0] ? uid_s : "unknown",
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_REATTACHED_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=sandbox-reattached",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UNIT=%s", unit,
                               "AGENTFAB_SANDBOX_PID=%i", (int) pid,
                               "AGENTFAB_SANDBOX_UID=%s", uid_s,
                               "AGENTFAB_USEC=%s", usec_s,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "sandbox-reattached", UID_INVALID, "unit", unit, uid_s[0] ? "sandbox_uid" : NULL, uid_s, NULL, NULL);
}

void audit_sandbox_frozen(Task *t, const char *why, const char *method, uint64_t usec) {
        char usec_s[32];

        snprintf(usec_s, sizeof(usec_s), "%" PRIu64, usec);
        (void) sd_journal_send("MESSAGE=Task %s: sandbox frozen (%s, by %s in %.1f ms).", t->id, why, method,
                               (double) usec / 1000.0,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_FROZEN_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=frozen",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_FREEZE_REASON=%s", why,
                               "AGENTFAB_FREEZER=%s", method,
                               "AGENTFAB_FREEZE_USEC=%s", usec_s,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "frozen", UID_INVALID, "why", why, "freezer", method, "freeze_usec", usec_s);
}

void audit_sandbox_thawed(Task *t, uint64_t frozen_usec) {
        char usec_s[32];

        snprintf(usec_s, sizeof(usec_s), "%" PRIu64, frozen_usec);
        (void) sd_journal_send("MESSAGE=Task %s: sandbox thawed after %.1f s frozen.", t->id, (double) frozen_usec / USEC_PER_SEC,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_THAWED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=thawed",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_FROZEN_USEC=%s", usec_s,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "thawed", UID_INVALID, "frozen_usec", usec_s, NULL, NULL, NULL, NULL);
}

void audit_sandbox_released(Task *t, uint64_t paused_usec) {
        char usec_s[32];

        snprintf(usec_s, sizeof(usec_s), "%" PRIu64, paused_usec);
        (void) sd_journal_send("MESSAGE=Task %s: frozen sandbox torn down after %.0f s (MaxPausedSec=).", t->id,
                               (double) paused_usec / USEC_PER_SEC,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_RELEASED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=sandbox-released",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_PAUSED_USEC=%s", usec_s,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "sandbox-released", UID_INVALID, "paused_usec", usec_s, NULL, NULL, NULL, NULL);
}
