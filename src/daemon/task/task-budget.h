/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "config.h"
#include "task-resources.h"
#include "task-spec.h"

/* The budgets on what a task uses (task-resources.h): CPU time, network
 * bytes and money. A task's limit overrides the configuration's default;
 * UINT64_MAX is no budget. Pure arithmetic, no I/O: the agent feeds it
 * (agent-budget.c), unit tests too. */

/* Whether l is one of these budgets (max_cpu_sec, max_network_bytes, max_cost). */
bool task_limit_is_resource_budget(TaskLimit l);
/* Whether an approval may set l (approve --limit): the budgets the budget
 * breaker watches. The sandbox's scope limits are fixed when it is made. */
bool task_limit_is_raisable(TaskLimit l);

/* The budget in the counter's unit: µs for max_cpu_sec, bytes, millionths
 * of the currency; UINT64_MAX: none. */
uint64_t task_budget_limit(const TaskSpec *spec, const Config *c, TaskLimit l);

/* What counts against l: cpu_usec is the freshest CPU figure (a live
 * reading while a command runs, else the counter); an unknown counter is
 * 0 (a budget is not tripped on what nobody could read). */
uint64_t task_budget_used(const TaskResources *r, uint64_t cpu_usec, TaskLimit l);

/* "CPU time 2.4 s of max_cpu_sec=2", "network 12.0 MiB of
 * max_network_bytes=10485760", "cost 0.52 USD of max_cost=0.50". */
char *task_budget_describe(TaskLimit l, uint64_t used, uint64_t limit, const char *currency);

/* The first resource budget used up: its limit, and *ret_reason (may be
 * NULL) as task_budget_describe() says; _TASK_LIMIT_INVALID when none is,
 * -ENOMEM. */
TaskLimit task_budget_exceeded(const TaskSpec *spec, const Config *c, const TaskResources *r, uint64_t cpu_usec,
                               char **ret_reason);

/* A limit's value (as a task's limits hold it: seconds, bytes, millionths)
 * in the counter's unit (µs for the seconds). */
uint64_t task_limit_to_counter(TaskLimit l, uint64_t value);

/* value (as the limits hold it) as a person gives it: max_cost as an
 * amount ("0.50"), the others as the number. */
const char *task_limit_format_value(char buf[static 32], TaskLimit l, uint64_t value);

/* Whether value (as the limits hold it) may become the limit l of a task
 * that used used (in the counter's unit): only above what is used, or the
 * task would stop again at once. 0, or -ERANGE with the reason in
 * *ret_error (allocated), -ENOMEM. */
int task_budget_raise_check(TaskLimit l, uint64_t value, uint64_t used, const char *currency, char **ret_error);
