/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-journal.h>

/* Where the audit reads the journal (agentfabctl's --directory=, --file=,
 * --merge, as journalctl's): by default the local system journal; a
 * central journal that systemd-journal-remote writes is a directory. */
void audit_set_journal_source(const char *directory, char **files, bool merge);
int audit_journal_open(sd_journal **ret);

/* The value of field in the journal's current entry, cut to n - 1 bytes. */
int journal_field(sd_journal *j, const char *field, char *buf, size_t n);
/* agentfabctl audit ID: the task's entries that journald attributes to
 * agentfab.service, one line each or (json) as JSON. Returns an exit code. */
int audit_list(const char *id, bool json);
