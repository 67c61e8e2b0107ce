/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* agentfabctl audit ID --verify: cross-checks the journal's entries of the
 * task (only those journald attributes to agentfab.service) against the
 * commits on its branch (the daemon's ListCommits()):
 *  - every commit that a step or verified entry names (AGENTFAB_COMMIT=)
 *    is on the branch, unless a later reset or rejection undid it;
 *  - every commit on the branch has such an entry;
 *  - the last delivered entry names the branch's tip, and a succeeded task
 *    has one.
 * Prints each gap (or, with json, one JSON object) and returns the number
 * of gaps, or a negative errno when it could not check. With repository
 * (audit --repo=), the branch is read there as a fleet's Remote= has it
 * (audit-branch.h) and bus and path are not used; a succeeded task without
 * its delivered entry is then not seen, its state being unknown. */
int audit_verify(sd_bus *bus, const char *id, const char *path, const char *repository, bool json);
