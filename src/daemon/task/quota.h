/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "factory.h"
#include "task-resources.h"

/* What each owner used, and the daily quotas on it ([Daemon]
 * MaxCPUSecPerUserPerDay=, MaxCostPerUserPerDay=). A task's use counts to
 * the UTC day it was submitted on, all of it, whenever it was spent: a
 * day's sum is then a plain sum over the owner's tasks of that day, the
 * same in usage and in the quota, and a task never counts twice. An owner
 * past a quota has their new (queued) tasks held until the next UTC day;
 * tasks already at work go on, under their own budgets. */

#define USEC_PER_DAY (86400ULL * 1000000ULL)

/* CLOCK_REALTIME µs as the quotas see it: the system clock, moved by
 * AGENTFAB_TEST_CLOCK_OFFSET_SEC= (a signed number of seconds) when the
 * daemon's environment sets it, which only a test's unit drop-in does
 * (root's; agentfabd logs a warning when it is set). It moves "today" and
 * nothing else: tasks keep the times they were stamped with, so a test
 * moves the daemon a day ahead as if the day had gone by. */
uint64_t quota_now_usec(void);
/* The offset in effect (0 without the variable); logs the warning once. */
int64_t quota_clock_offset_usec(void);

/* Days since the epoch, UTC, of a CLOCK_REALTIME µs time (system clock). */
uint64_t quota_day_of(uint64_t realtime_usec);
/* The day a task's use counts to: its submission (as stamped, by the
 * system clock). */
uint64_t quota_day_of_task(const Task *t);
/* The quotas' today. */
uint64_t quota_today(void);
/* The system clock's µs at which the quotas' next day begins. */
uint64_t quota_next_day_realtime_usec(void);

typedef struct QuotaUse {
        uid_t owner;
        unsigned tasks;
        uint64_t cpu_usec;
        uint64_t memory_peak;           /* the largest of the tasks' */
        uint64_t net_bytes;             /* up and down */
        uint64_t tokens_in, tokens_out;
        uint64_t cost_micros;
        char currency[TASK_CURRENCY_MAX]; /* the first task's that had a price; "" none */
        bool mixed_currencies;          /* cost_micros then adds different currencies */
} QuotaUse;

/* Adds one task's counters (unknown ones count 0). */
void quota_use_add(QuotaUse *u, const TaskResources *r);

/* The sums per owner of the tasks whose day is in [since_day, until_day]
 * (UINT64_MAX until: no end), of owner only unless it is UID_INVALID: an
 * array sorted by uid, which the caller frees. */
int quota_use_by_owner(Factory *f, uid_t owner, uint64_t since_day, uint64_t until_day, QuotaUse **ret,
                       size_t *ret_n);

/* Whether u (one owner's today) is past a quota of c: 0 no, 1 yes with
 * *ret_reason ("waiting: alice used 3612 s CPU of MaxCPUSecPerUserPerDay=3600
 * today (UTC); ..."), -ENOMEM. */
int quota_exceeded(const Config *c, const QuotaUse *u, const char *owner_name, char **ret_reason);

/* The scheduler's question for a queued task t: 1 if its owner is past a
 * quota today (t's reason then says so, and changes announced), 0 if it
 * may start (a "waiting:" reason is cleared), -ENOMEM. use holds the sums
 * of today per owner (quota_use_by_owner()), n of them. */
int quota_hold(Task *t, const QuotaUse *use, size_t n);

/* One round of the scheduler: today's sums, worked out once (nothing to do
 * when no quota is set). holds() is quota_hold() for a queued task; held
 * says whether any was, so that the scheduler wakes at the next day. */
typedef struct QuotaRound {
        bool active;
        bool held;
        QuotaUse *use;
        size_t n;
} QuotaRound;

int quota_round_begin(Factory *f, QuotaRound *q);
bool quota_round_holds(QuotaRound *q, Task *t);
void quota_round_done(QuotaRound *q);
