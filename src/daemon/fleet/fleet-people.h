/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "fleet-db.h"
#include "task.h"

/* People on any host of a fleet, the holder's half (fleet.h): what the
 * host that works on a task tells the others about it, and what it does
 * for the people on the others.
 *
 * Status: after a task's state or progress changes, a moment later (one
 * write for a burst of changes), the holder writes what status shows of
 * it to the database (FLEET_OUTPUT_STATUS, a JSON object named as the
 * Task1 properties, with "BreakerStop"), under its epoch and never while
 * fenced. At the end it writes the final status, the summary and the kept
 * tail of the output log (FLEET_PEOPLE_LOG_TAIL bytes, escaped as `logs`
 * shows it); while the task works, that tail too, with the first status
 * written FLEET_PEOPLE_LOG_INTERVAL_USEC or more after it was last.
 *
 * Requests: approve, reject, cancel, pause, resume and amend that another
 * host's polkit allowed are rows (fleet_db_post_request()). The holder
 * takes them when the database notifies it and at each renewal, and
 * applies each through the applier the bus room installs (the same
 * decisions its own Task1 methods make), only while it holds its lease and
 * the task at the request's epoch; then marks it done. An approval or a
 * rejection answers the one breaker stop it names (fleet_people_stop()):
 * one for another stop is dropped. Each request taken is a journal entry
 * of this host: who, from which host, and what became of it. */

typedef struct Fleet Fleet;
typedef struct FleetPeople FleetPeople;

/* The bound on the tail of a task's output log the database keeps. */
#define FLEET_PEOPLE_LOG_TAIL (2u * 1024u * 1024u)
#define FLEET_PEOPLE_LOG_INTERVAL_USEC (10 * 1000 * 1000ULL)
/* How long a burst of changes is gathered into one status write. */
#define FLEET_PEOPLE_DEBOUNCE_USEC (300 * 1000ULL)
/* Bounds on what status carries of a string (the plan may be long). */
#define FLEET_PEOPLE_STRING_MAX 16384u

/* What a request asks of t, for a person the requesting host's polkit
 * allowed, as uid here (the hosts share their users). 0, or a negative
 * errno with error set when the task's own rules refuse it. */
typedef int (*fleet_people_apply_t)(Task *t, FleetRequestKind kind, const char *comment, const char *goal,
                                    const char *acceptance, uid_t uid, sd_bus_error *error);
void fleet_people_set_applier(fleet_people_apply_t apply);

int fleet_people_new(Fleet *fl, FleetPeople **ret);
FleetPeople *fleet_people_free(FleetPeople *p);

/* Hooks (fleet.c, manager.c): t changed; the database notified a request
 * for host (payload); the lease was renewed. */
void fleet_people_task_changed(FleetPeople *p, Task *t);
void fleet_task_changed(Fleet *fl, Task *t);
void fleet_people_notified(FleetPeople *p, const char *host);
void fleet_people_renewed(FleetPeople *p);

/* The breaker stop t waits at, as the fleet names it: its step then
 * (acknowledged steps + 1), 0 when it waits for none. */
uint64_t fleet_people_stop(const Task *t);
