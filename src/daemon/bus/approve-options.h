/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* ApproveWithOptions()'s options. "allow_hosts" (as): entries added to the
 * task's network allowlist. "limits" (a{st}): limits the task goes on with,
 * as SubmitTask()'s limits hold them (approve --limit=). An unknown option
 * is refused, so that a client asking for more than this daemon knows
 * hears so. */
#define APPROVE_LIMITS_MAX 16U

typedef struct ApproveOptions {
        bool has_hosts, has_limits;
        char **hosts;
        char **limit_names;
        uint64_t limit_values[APPROVE_LIMITS_MAX];
} ApproveOptions;

void approve_options_done(ApproveOptions *o);
/* Reads the a{sv}; a malformed or unknown option is an InvalidArgs error. */
int approve_options_read(sd_bus_message *message, ApproveOptions *o, sd_bus_error *error);
