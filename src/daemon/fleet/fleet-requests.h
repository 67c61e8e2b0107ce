/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "fleet-people.h"

/* The requests of people on other hosts for tasks this host holds
 * (fleet-people.h says how they are taken and applied). */
typedef struct FleetInbox FleetInbox;

int fleet_inbox_new(Fleet *fl, FleetInbox **ret);
FleetInbox *fleet_inbox_free(FleetInbox *q);

/* Takes the waiting requests and applies them, unless a take is under
 * way (then once more after it). */
void fleet_inbox_take(FleetInbox *q);

/* What a request carries besides its kind and stop (fleet_db_post_request()'s
 * argument, JSON text): who asked, their words, an amendment, and the
 * breaker they saw. Built by the asking host, parsed by the holder. */
typedef struct FleetRequestArgument {
        char *user;             /* the person's name: the hosts share their users */
        char *comment;
        char *goal;             /* amend: NULL unchanged */
        char *acceptance;
        char *breaker;          /* approve, reject: the breaker of the stop they answer */
} FleetRequestArgument;

void fleet_request_argument_done(FleetRequestArgument *a);
int fleet_request_argument_format(const FleetRequestArgument *a, char **ret);
int fleet_request_argument_parse(const char *text, FleetRequestArgument *ret);
