/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

/* Export() of the task's branch (format mbox, bundle or diff) copied to
 * stdout. Returns an exit code. */
int export_to_stdout(sd_bus *bus, const char *id, const char *format);
/* The task's branch as a bundle, imported as agentfab/<id> into repo
 * (default: the task's own repository, when it is a local one) with the
 * caller's rights. Returns an exit code. */
int export_fetch(sd_bus *bus, const char *id, const char *repo);
