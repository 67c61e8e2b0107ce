/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "micros.h"
#include "quota.h"
#include "string-util.h"
#include "task.h"
#include "time-util.h"

#define QUOTA_WAITING_PREFIX "waiting: "

int64_t quota_clock_offset_usec(void) {
        static bool read = false;
        static int64_t offset = 0;

        if (!read) {
                const char *e = secure_getenv("AGENTFAB_TEST_CLOCK_OFFSET_SEC");
                read = true;
                if (e) {
                        char *end;
                        long long s;

                        errno = 0;
                        s = strtoll(e, &end, 10);
                        if (errno != 0 || end == e || *end || s < -(100LL * 365 * 86400) || s > 100LL * 365 * 86400)
                                log_warning("AGENTFAB_TEST_CLOCK_OFFSET_SEC='%s' is not a number of seconds, ignoring.", e);
                        else {
                                offset = (int64_t) s * (int64_t) USEC_PER_SEC;
                                log_warning("AGENTFAB_TEST_CLOCK_OFFSET_SEC=%lld: the daily quotas run on a clock "
                                            "moved by that; for tests only.", s);
                        }
                }
        }
        return offset;
}

static uint64_t shifted(uint64_t realtime_usec) {
        int64_t o = quota_clock_offset_usec();

        if (o < 0 && (uint64_t) -o > realtime_usec)
                return 0;
        return realtime_usec + (uint64_t) o;
}

uint64_t quota_now_usec(void) {
        return shifted(clock_now_usec(CLOCK_REALTIME));
}

uint64_t quota_day_of(uint64_t realtime_usec) {
        return realtime_usec / USEC_PER_DAY;
}

uint64_t quota_day_of_task(const Task *t) {
        /* The submission as it was stamped: moving the test clock moves
         * today away from the tasks, as a day going by does. */
        return quota_day_of(t->created_usec);
}

uint64_t quota_today(void) {
        return quota_day_of(quota_now_usec());
}

uint64_t quota_next_day_realtime_usec(void) {
        uint64_t next = (quota_today() + 1) * USEC_PER_DAY;
        int64_t o = quota_clock_offset_usec();

        if (o > 0 && (uint64_t) o > next)
                return 0;
        return next - (uint64_t) o;
}

static uint64_t known(uint64_t v) {
        return v == TASK_RESOURCE_UNKNOWN ? 0 : v;
}

static void add(uint64_t *sum, uint64_t v) {
        v = known(v);
        *sum = v > UINT64_MAX - 1 - *sum ? UINT64_MAX - 1 : *sum + v;
}

void quota_use_add(QuotaUse *u, const TaskResources *r) {
        u->tasks++;
        add(&u->cpu_usec, r->cpu_usec);
        u->memory_peak = MAX(u->memory_peak, known(r->memory_peak));
        add(&u->net_bytes, r->net_up_bytes);
        add(&u->net_bytes, r->net_down_bytes);
        add(&u->tokens_in, r->tokens_in);
        add(&u->tokens_out, r->tokens_out);
        if (r->cost_micros != TASK_RESOURCE_UNKNOWN) {
                add(&u->cost_micros, r->cost_micros);
                if (isempty(u->currency))
                        memcpy(u->currency, r->currency, sizeof(u->currency));
                else if (!streq(u->currency, r->currency))
                        u->mixed_currencies = true;
        }
}

static int use_compare(const void *a, const void *b) {
        const QuotaUse *x = a, *y = b;
        return x->owner < y->owner ? -1 : x->owner > y->owner;
}

int quota_use_by_owner(Factory *f, uid_t owner, uint64_t since_day, uint64_t until_day, QuotaUse **ret,
                       size_t *ret_n) {
        _cleanup_free_ QuotaUse *use = NULL;
        size_t n = 0, allocated = 0;

        for (size_t i = 0; i < f->n_tasks; i++) {
                Task *t = f->tasks[i];
                uint64_t day = quota_day_of_task(t);
                QuotaUse *u = NULL;

                if (t->broken || day < since_day || day > until_day)
                        continue;
                if (owner != UID_INVALID && t->owner != owner)
                        continue;
                for (size_t j = 0; j < n; j++)
                        if (use[j].owner == t->owner) {
                                u = use + j;
                                break;
                        }
                if (!u) {
                        if (n == allocated) {
                                size_t k = MAX(allocated * 2, (size_t) 8);
                                QuotaUse *p = reallocarray(use, k, sizeof(QuotaUse));
                                if (!p)
                                        return -ENOMEM;
                                use = p;
                                allocated = k;
                        }
                        u = use + n++;
                        *u = (QuotaUse) { .owner = t->owner };
                }
                quota_use_add(u, &t->progress.resources);
        }
        if (n > 1)
                qsort(use, n, sizeof(QuotaUse), use_compare);
        *ret = TAKE_PTR(use);
        *ret_n = n;
        return 0;
}

int quota_exceeded(const Config *c, const QuotaUse *u, const char *owner_name, char **ret_reason) {
        char a[32], b[32];
        int r = 0;

        *ret_reason = NULL;
        if (c->max_cpu_usec_per_user_per_day != UINT64_MAX && u->cpu_usec >= c->max_cpu_usec_per_user_per_day)
                r = asprintf(ret_reason, QUOTA_WAITING_PREFIX "%s used %llu s CPU of MaxCPUSecPerUserPerDay=%llu today "
                             "(UTC); new tasks start after 00:00 UTC", owner_name,
                             (unsigned long long) (u->cpu_usec / USEC_PER_SEC),
                             (unsigned long long) (c->max_cpu_usec_per_user_per_day / USEC_PER_SEC));
        else if (c->max_cost_per_user_per_day != UINT64_MAX && u->cost_micros >= c->max_cost_per_user_per_day)
                r = asprintf(ret_reason, QUOTA_WAITING_PREFIX "%s used %s%s%s of MaxCostPerUserPerDay=%s today (UTC); "
                             "new tasks start after 00:00 UTC", owner_name, format_micros(a, u->cost_micros),
                             isempty(u->currency) ? "" : " ", u->currency,
                             format_micros(b, c->max_cost_per_user_per_day));
        else
                return 0;
        if (r < 0) {
                *ret_reason = NULL;
                return -ENOMEM;
        }
        return 1;
}

int quota_hold(Task *t, const QuotaUse *use, size_t n) {
        const Config *c = &t->factory->config;
        _cleanup_free_ char *reason = NULL, *name = NULL;
        const QuotaUse *u = NULL;
        int r;

        for (size_t i = 0; i < n; i++)
                if (use[i].owner == t->owner)
                        u = use + i;
        if (u) {
                const struct passwd *pw = getpwuid(t->owner);
                if (pw && pw->pw_name && string_is_safe(pw->pw_name, false))
                        name = strdup(pw->pw_name);
                else if (asprintf(&name, "uid %u", (unsigned) t->owner) < 0)
                        name = NULL;
                if (!name)
                        return -ENOMEM;
                r = quota_exceeded(c, u, name, &reason);
                if (r < 0)
                        return r;
        }
        /* The reason is the task's word while it waits; it is not a
         * change of state, and is worked out again at each start. */
        if (!reason) {
                if (t->reason && strncmp(t->reason, QUOTA_WAITING_PREFIX, strlen(QUOTA_WAITING_PREFIX)) == 0) {
                        t->reason = mfree_ptr(t->reason);
                        task_changed(t, TASK_CHANGE_STATE);
                }
                return 0;
        }
        if (!streq_ptr(t->reason, reason)) {
                free(t->reason);
                t->reason = TAKE_PTR(reason);
                task_changed(t, TASK_CHANGE_STATE);
        }
        return 1;
}

int quota_round_begin(Factory *f, QuotaRound *q) {
        uint64_t today;

        *q = (QuotaRound) {};
        (void) quota_clock_offset_usec();   /* says so in the log, should a test clock be set */
        if (f->config.max_cpu_usec_per_user_per_day == UINT64_MAX && f->config.max_cost_per_user_per_day == UINT64_MAX)
                return 0;
        today = quota_today();
        q->active = true;
        return quota_use_by_owner(f, UID_INVALID, today, today, &q->use, &q->n);
}

bool quota_round_holds(QuotaRound *q, Task *t) {
        int r;

        if (!q || !q->active)
                return false;
        r = quota_hold(t, q->use, q->n);
        if (r < 0) {
                /* Without its figures a quota holds nothing back. */
                log_warning_errno(r, "Cannot check the daily quotas of task '%s', ignoring: %m", t->id);
                return false;
        }
        if (r > 0)
                q->held = true;
        return r > 0;
}

void quota_round_done(QuotaRound *q) {
        q->use = mfree_ptr(q->use);
        q->n = 0;
}
