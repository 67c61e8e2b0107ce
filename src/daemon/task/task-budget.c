/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>

#include "macro.h"
#include "micros.h"
#include "string-util.h"
#include "task-budget.h"
#include "time-util.h"

bool task_limit_is_resource_budget(TaskLimit l) {
        return IN_SET(l, TASK_LIMIT_MAX_CPU_SEC, TASK_LIMIT_MAX_NETWORK_BYTES, TASK_LIMIT_MAX_COST);
}

bool task_limit_is_raisable(TaskLimit l) {
        return task_limit_is_resource_budget(l) ||
               IN_SET(l, TASK_LIMIT_MAX_STEPS, TASK_LIMIT_MAX_TOKENS, TASK_LIMIT_MAX_COMMANDS,
                      TASK_LIMIT_MAX_WALL_CLOCK_SEC);
}

uint64_t task_limit_to_counter(TaskLimit l, uint64_t value) {
        if (value == TASK_LIMIT_UNSET)
                return UINT64_MAX;
        if (IN_SET(l, TASK_LIMIT_MAX_CPU_SEC, TASK_LIMIT_MAX_WALL_CLOCK_SEC))
                return value > UINT64_MAX / USEC_PER_SEC ? UINT64_MAX - 1 : value * USEC_PER_SEC;
        return value;
}

uint64_t task_budget_limit(const TaskSpec *spec, const Config *c, TaskLimit l) {
        if (spec->limits[l] != TASK_LIMIT_UNSET)
                return task_limit_to_counter(l, spec->limits[l]);
        switch (l) {
        case TASK_LIMIT_MAX_CPU_SEC:       return c->max_cpu_usec;
        case TASK_LIMIT_MAX_NETWORK_BYTES: return c->max_network_bytes;
        case TASK_LIMIT_MAX_COST:          return c->max_cost;
        default:                           return UINT64_MAX;
        }
}

static uint64_t known(uint64_t v) {
        return v == TASK_RESOURCE_UNKNOWN ? 0 : v;
}

uint64_t task_budget_used(const TaskResources *r, uint64_t cpu_usec, TaskLimit l) {
        switch (l) {
        case TASK_LIMIT_MAX_CPU_SEC:
                return MAX(known(cpu_usec), known(r->cpu_usec));
        case TASK_LIMIT_MAX_NETWORK_BYTES: {
                uint64_t up = known(r->net_up_bytes), down = known(r->net_down_bytes);
                return up > UINT64_MAX - down ? UINT64_MAX - 1 : up + down;
        }
        case TASK_LIMIT_MAX_COST:
                return known(r->cost_micros);
        default:
                return 0;
        }
}

static void format_bytes(char buf[static 32], uint64_t v) {
        if (v < 1024)
                snprintf(buf, 32, "%llu B", (unsigned long long) v);
        else if (v < 1024 * 1024)
                snprintf(buf, 32, "%.1f KiB", (double) v / 1024);
        else if (v < 1024ULL * 1024 * 1024)
                snprintf(buf, 32, "%.1f MiB", (double) v / (1024 * 1024));
        else
                snprintf(buf, 32, "%.1f GiB", (double) v / (1024.0 * 1024 * 1024));
}

/* The limit as a person gives it (--limit=NAME=VALUE, approve --limit). */
static void format_limit(char buf[static 32], TaskLimit l, uint64_t counter) {
        if (l == TASK_LIMIT_MAX_COST)
                (void) format_micros(buf, counter);
        else if (IN_SET(l, TASK_LIMIT_MAX_CPU_SEC, TASK_LIMIT_MAX_WALL_CLOCK_SEC)) {
                if (counter % USEC_PER_SEC == 0)
                        snprintf(buf, 32, "%llu", (unsigned long long) (counter / USEC_PER_SEC));
                else
                        snprintf(buf, 32, "%.1f", (double) counter / USEC_PER_SEC);
        } else
                snprintf(buf, 32, "%llu", (unsigned long long) counter);
}

static void format_used(char buf[static 48], TaskLimit l, uint64_t used, const char *currency) {
        char b[32];

        switch (l) {
        case TASK_LIMIT_MAX_CPU_SEC:
                snprintf(buf, 48, "CPU time %.1f s", (double) used / USEC_PER_SEC);
                break;
        case TASK_LIMIT_MAX_WALL_CLOCK_SEC:
                snprintf(buf, 48, "wall-clock time %llu s", (unsigned long long) (used / USEC_PER_SEC));
                break;
        case TASK_LIMIT_MAX_NETWORK_BYTES:
                format_bytes(b, used);
                snprintf(buf, 48, "network %s", b);
                break;
        case TASK_LIMIT_MAX_COST:
                snprintf(buf, 48, "cost %s%s%s", format_micros(b, used), isempty(currency) ? "" : " ",
                         strempty(currency));
                break;
        case TASK_LIMIT_MAX_STEPS:
                snprintf(buf, 48, "%llu steps", (unsigned long long) used);
                break;
        case TASK_LIMIT_MAX_TOKENS:
                snprintf(buf, 48, "%llu tokens", (unsigned long long) used);
                break;
        case TASK_LIMIT_MAX_COMMANDS:
                snprintf(buf, 48, "%llu commands", (unsigned long long) used);
                break;
        default:
                snprintf(buf, 48, "%llu", (unsigned long long) used);
        }
}

char *task_budget_describe(TaskLimit l, uint64_t used, uint64_t limit, const char *currency) {
        char u[48], v[32];
        char *s;

        format_used(u, l, used, currency);
        format_limit(v, l, limit);
        if (asprintf(&s, "%s of %s=%s", u, task_limit_to_string(l), v) < 0)
                return NULL;
        return s;
}

TaskLimit task_budget_exceeded(const TaskSpec *spec, const Config *c, const TaskResources *r, uint64_t cpu_usec,
                               char **ret_reason) {
        static const TaskLimit order[] = { TASK_LIMIT_MAX_CPU_SEC, TASK_LIMIT_MAX_NETWORK_BYTES, TASK_LIMIT_MAX_COST };

        for (size_t i = 0; i < ELEMENTSOF(order); i++) {
                TaskLimit l = order[i];
                uint64_t limit = task_budget_limit(spec, c, l), used;

                if (limit == UINT64_MAX)
                        continue;
                used = task_budget_used(r, cpu_usec, l);
                if (used < limit)
                        continue;
                if (ret_reason) {
                        *ret_reason = task_budget_describe(l, used, limit, r->currency);
                        if (!*ret_reason)
                                return -ENOMEM;
                }
                return l;
        }
        return _TASK_LIMIT_INVALID;
}

const char *task_limit_format_value(char buf[static 32], TaskLimit l, uint64_t value) {
        if (l == TASK_LIMIT_MAX_COST)
                return format_micros(buf, value);
        snprintf(buf, 32, "%llu", (unsigned long long) value);
        return buf;
}

int task_budget_raise_check(TaskLimit l, uint64_t value, uint64_t used, const char *currency, char **ret_error) {
        char u[48], v[32];

        *ret_error = NULL;
        if (task_limit_to_counter(l, value) > used)
                return 0;
        format_used(u, l, used, currency);
        if (asprintf(ret_error, "%s=%s is not above what the task has used (%s)", task_limit_to_string(l),
                     task_limit_format_value(v, l, value), u) < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return -ERANGE;
}
