/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

/* A --limit=NAME=VALUE word, as submit and approve take it: the value is a
 * whole number (seconds, bytes, steps), except max_cost's, an amount of
 * the model profile's currency ("0.50"), sent in millionths. Whether the
 * name is known is the daemon's to say (it lists those it knows). 0, or
 * -EINVAL with a message printed. */
int limit_word_parse(const char *word, char **ret_name, uint64_t *ret_value);

#include <systemd/sd-bus.h>

/* ApproveWithOptions()'s a{sv}: "allow_hosts" (as) and "limits" (a{st}),
 * each if given. -EINVAL (printed) for a bad --limit word. */
int approve_options_append(sd_bus_message *m, char **allow_hosts, char **limits);
