/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The checks of `agentfabctl audit ID --verify`, on a task's journal
 * entries as read (audit-verify.c) and its branch: no journal, no bus, so
 * that they can be tested on made-up entries (tests/unit/test-audit-check.c). */

/* One journal entry of the task, the fields the checks use. A verify
 * keeps one per entry of the task (up to a million): the fields are as
 * long as their values are, and longer ones are cut, so that a value that
 * is too long is still seen not to be a commit id or a host's name. */
typedef struct AuditEntry {
        char event[32];                   /* AGENTFAB_EVENT= */
        char commit[48];                  /* AGENTFAB_COMMIT=, "" without */
        unsigned step;                    /* AGENTFAB_STEP=, UINT_MAX without */
        /* In a fleet: AGENTFAB_HOST= and AGENTFAB_EPOCH= (epoch 0: before any
         * host claimed the task, as its submission); a takeover entry's
         * AGENTFAB_FROM_HOST= and AGENTFAB_FROM_EPOCH=. A host's name is
         * its Name=, by default its hostname (at most 64 bytes). */
        char host[72];
        bool has_epoch;
        uint64_t epoch;
        char from_host[72];
        uint64_t from_epoch;
} AuditEntry;

typedef struct AuditCheck {
        char **gaps;            /* each a line that says what is wrong */
        size_t n_gaps;
} AuditCheck;

void audit_check_done(AuditCheck *c);

/* Fills an entry from NAME=VALUE fields (for tests and for the journal
 * reader alike): the known fields are taken, the rest ignored. */
void audit_entry_set(AuditEntry *e, const char *field, const char *value, size_t n);

/* Checks entries (in the order each host wrote them; entries of one epoch
 * are one host's) against branch (the commit ids on the task's branch,
 * oldest first) and the task's state ("succeeded", ...; NULL: unknown):
 *  - every commit a step or verified entry names is on the branch, unless
 *    a later reset or rejection undid it, or it is of a step past the one a
 *    takeover went on after (the unacknowledged step, done again);
 *  - every commit on the branch has such an entry;
 *  - the last delivered entry names the branch's tip; a succeeded task has one;
 *  - in a fleet, each epoch's entries come from one host, and the entries
 *    go from one epoch to the next only through a takeover entry at the new
 *    epoch that names the host and epoch before it and a step that epoch
 *    reached, after which the steps continue past that step.
 * Appends a line per gap to c. Returns 0, or -ENOMEM. */
int audit_check(const AuditEntry *entries, size_t n_entries, char *const *branch, size_t n_branch, const char *state,
                AuditCheck *c);
