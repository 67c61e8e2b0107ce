/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "agent-run.h"
#include "agent.h"
#include "agentfab-bus.h"
#include "audit.h"
#include "breakers.h"
#include "buf.h"
#include "exec-session.h"
#include "log.h"
#include "string-util.h"
#include "task-budget.h"
#include "time-util.h"

/* The budgets on what a task uses (task-budget.h) as the agent keeps them:
 * checked before each model call with the rest (agent-breakers.c), and
 * every AGENT_BUDGET_WATCH_USEC while a command runs, so that a command
 * spinning the CPU is stopped within a few seconds of its budget, not when
 * it ends. */

#define AGENT_BUDGET_WATCH_USEC (1 * USEC_PER_SEC)
int agent_check_resource_budget(AgentRun *run) {
        const Config *c = &run->factory->config;
        Task *t = run->task;
        _cleanup_free_ char *reason = NULL;
        TaskLimit l;

        if (task_budget_limit(&t->spec, c, TASK_LIMIT_MAX_CPU_SEC) == UINT64_MAX &&
            task_budget_limit(&t->spec, c, TASK_LIMIT_MAX_NETWORK_BYTES) == UINT64_MAX &&
            task_budget_limit(&t->spec, c, TASK_LIMIT_MAX_COST) == UINT64_MAX)
                return 0;
        l = task_budget_exceeded(&t->spec, c, &t->progress.resources, agent_resources_cpu_usec(run), &reason);
        if (l == -ENOMEM)
                return -ENOMEM;
        if (l < 0)
                return 0;
        if (c->budget_action == BUDGET_ACTION_FAIL) {
                audit_breaker(t, breaker_to_string(BREAKER_BUDGET), reason);
                agent_fail(run, "budget exhausted: %s", reason);
        } else {
                _cleanup_free_ char *text = NULL;
                if (asprintf(&text, "budget exhausted: %s; approve with --limit=%s=N to raise it", reason,
                             task_limit_to_string(l)) < 0)
                        return -ENOMEM;
                agent_trip(run, BREAKER_BUDGET, text, t->progress.checkpoint);
        }
        return 1;
}

static int on_budget_watch(sd_event_source *s, uint64_t usec, void *userdata) {
        AgentRun *run = userdata;
        int r;

        (void) s, (void) usec;
        /* Only a command of the agent's own in a running task: the trip
         * ends the sandbox, and with it the command; the step it was part
         * of is done again from the checkpoint once a person approves. */
        if (!run->task || run->task->state != TASK_RUNNING || run->phase != PHASE_TOOL)
                return 0;
        /* What went through the egress proxy is read at a command's end
         * (agent-resources.c); with a network budget, now too. */
        if (task_budget_limit(&run->task->spec, &run->factory->config, TASK_LIMIT_MAX_NETWORK_BYTES) != UINT64_MAX)
                agent_resources_sample(run);
        r = agent_check_resource_budget(run);
        if (r < 0) {
                agent_fail(run, "Out of memory.");
                return 0;
        }
        if (r == 0)
                (void) sd_event_source_set_time_relative(run->budget_timer, AGENT_BUDGET_WATCH_USEC),
                (void) sd_event_source_set_enabled(run->budget_timer, SD_EVENT_ONESHOT);
        return 0;
}

void agent_budget_watch(AgentRun *run) {
        const Config *c = &run->factory->config;
        Task *t = run->task;
        int r;

        if (task_budget_limit(&t->spec, c, TASK_LIMIT_MAX_CPU_SEC) == UINT64_MAX &&
            task_budget_limit(&t->spec, c, TASK_LIMIT_MAX_NETWORK_BYTES) == UINT64_MAX &&
            task_budget_limit(&t->spec, c, TASK_LIMIT_MAX_COST) == UINT64_MAX)
                return;
        /* The scope is read once before the command, so that what the
         * command burns counts from a known start. */
        (void) agent_resources_cpu_usec(run);
        if (!run->budget_timer) {
                r = sd_event_add_time_relative(run->factory->event, &run->budget_timer, CLOCK_MONOTONIC,
                                               AGENT_BUDGET_WATCH_USEC, 100 * USEC_PER_MSEC, on_budget_watch, run);
                if (r < 0) {
                        log_warning_errno(r, "Task '%s': cannot watch its budgets during commands, ignoring: %m",
                                          t->id);
                        return;
                }
                (void) sd_event_source_set_description(run->budget_timer, "budget-watch");
                return;
        }
        (void) sd_event_source_set_time_relative(run->budget_timer, AGENT_BUDGET_WATCH_USEC);
        (void) sd_event_source_set_enabled(run->budget_timer, SD_EVENT_ONESHOT);
}

void agent_budget_done(AgentRun *run) {
        run->budget_timer = sd_event_source_disable_unref(run->budget_timer);
}

int agent_budget_warn(AgentRun *run, Buf *b) {
        static const struct {
                TaskLimit limit;
                unsigned flag;
        } budgets[] = {
                { TASK_LIMIT_MAX_CPU_SEC,       TASK_BUDGET_WARNED_CPU },
                { TASK_LIMIT_MAX_NETWORK_BYTES, TASK_BUDGET_WARNED_NETWORK },
                { TASK_LIMIT_MAX_COST,          TASK_BUDGET_WARNED_COST },
        };
        TaskProgress *p = &run->task->progress;
        uint64_t cpu = agent_resources_cpu_usec(run);

        for (size_t i = 0; i < ELEMENTSOF(budgets); i++) {
                uint64_t limit = task_budget_limit(&run->task->spec, &run->factory->config, budgets[i].limit), used;
                _cleanup_free_ char *d = NULL;

                if ((p->budget_warned & budgets[i].flag) || limit == UINT64_MAX || limit >= UINT64_MAX / 5)
                        continue;
                used = task_budget_used(&p->resources, cpu, budgets[i].limit);
                if (used * 5 < limit * 4 || used >= limit)
                        continue;
                d = task_budget_describe(budgets[i].limit, used, limit, p->resources.currency);
                if (!d || buf_printf(b, " %s used.", d) < 0)
                        return -ENOMEM;
                p->budget_warned |= budgets[i].flag;
        }
        return 0;
}

void agent_budget_extend(Task *t) {
        const Config *c = &t->factory->config;
        TaskProgress *p = &t->progress;

        /* A plain approval of an exhausted budget gives as much again as
         * it was; approve --limit= sets it instead. The raised limit is the
         * task's own from then on (its Limits property shows it). */
        for (TaskLimit l = 0; l < _TASK_LIMIT_MAX; l++) {
                uint64_t limit, used, value;

                if (!task_limit_is_resource_budget(l))
                        continue;
                limit = task_budget_limit(&t->spec, c, l);
                if (limit == UINT64_MAX)
                        continue;
                used = task_budget_used(&p->resources, p->resources.cpu_usec, l);
                if (used < limit)
                        continue;
                value = t->spec.limits[l] != TASK_LIMIT_UNSET ? t->spec.limits[l] :
                        l == TASK_LIMIT_MAX_CPU_SEC ? (limit + USEC_PER_SEC - 1) / USEC_PER_SEC : limit;
                while (task_limit_to_counter(l, value) <= used && value < UINT64_MAX / 4)
                        value *= 2;
                t->spec.limits[l] = value;
        }
}

static uint64_t limit_used(Task *t, TaskLimit l) {
        TaskProgress *p = &t->progress;

        switch (l) {
        case TASK_LIMIT_MAX_STEPS:          return p->step;
        case TASK_LIMIT_MAX_TOKENS:         return p->tokens;
        case TASK_LIMIT_MAX_COMMANDS:       return p->commands;
        case TASK_LIMIT_MAX_WALL_CLOCK_SEC: return p->wall_usec;
        default:
                return task_budget_used(&p->resources, t->run ? agent_resources_cpu_usec(t->run) : p->resources.cpu_usec, l);
        }
}

int agent_limits_check(Task *t, char **names, const uint64_t *values, sd_bus_error *error) {
        size_t n = strv_length(names);

        for (size_t i = 0; i < n; i++) {
                TaskLimit l = task_limit_from_string(names[i]);
                _cleanup_free_ char *why = NULL;
                int r;

                if (l < 0) {
                        _cleanup_(buf_done) Buf known = {};
                        for (TaskLimit k = 0; k < _TASK_LIMIT_MAX; k++)
                                if (task_limit_is_raisable(k) &&
                                    buf_printf(&known, "%s%s", known.s ? ", " : "", task_limit_to_string(k)) < 0)
                                        return -ENOMEM;
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Unknown limit '%s'; an approval may set: %s.",
                                                 task_limit_name_is_valid(names[i]) ? names[i] : "?", strempty(known.s));
                }
                if (!task_limit_is_raisable(l))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Limit '%s' is the sandbox's, fixed when it is made: an approval "
                                                 "cannot change it.", names[i]);
                for (size_t j = 0; j < i; j++)
                        if (streq(names[j], names[i]))
                                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                         "Limit '%s' given more than once.", names[i]);
                if (values[i] == 0 || values[i] == TASK_LIMIT_UNSET)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Limit '%s' must be a positive number.", names[i]);
                r = task_budget_raise_check(l, values[i], limit_used(t, l), t->progress.resources.currency, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s.", why);
        }
        return 0;
}

int agent_limits_format(char **names, const uint64_t *values, char **ret) {
        _cleanup_(buf_done) Buf b = {};

        for (size_t i = 0; names && names[i]; i++) {
                char v[32];
                if (buf_printf(&b, "%s%s=%s", b.s ? ", " : "", names[i],
                               task_limit_format_value(v, task_limit_from_string(names[i]), values[i])) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(b.s);
        return 0;
}

void agent_limits_apply(Task *t, char **names, const uint64_t *values, uid_t uid) {
        TaskProgress *p = &t->progress;
        _cleanup_free_ char *text = NULL;

        for (size_t i = 0; names && names[i]; i++) {
                TaskLimit l = task_limit_from_string(names[i]);
                if (l < 0)
                        continue;
                t->spec.limits[l] = values[i];
                /* The limit set is the budget, with no extension on top. */
                switch (l) {
                case TASK_LIMIT_MAX_STEPS:          p->extra_steps = 0; p->budget_warned &= ~TASK_BUDGET_WARNED_STEPS; break;
                case TASK_LIMIT_MAX_TOKENS:         p->extra_tokens = 0; p->budget_warned &= ~TASK_BUDGET_WARNED_TOKENS; break;
                case TASK_LIMIT_MAX_COMMANDS:       p->extra_commands = 0; break;
                case TASK_LIMIT_MAX_WALL_CLOCK_SEC: p->extra_wall_usec = 0; p->budget_warned &= ~TASK_BUDGET_WARNED_WALL; break;
                case TASK_LIMIT_MAX_CPU_SEC:        p->budget_warned &= ~TASK_BUDGET_WARNED_CPU; break;
                case TASK_LIMIT_MAX_NETWORK_BYTES:  p->budget_warned &= ~TASK_BUDGET_WARNED_NETWORK; break;
                case TASK_LIMIT_MAX_COST:           p->budget_warned &= ~TASK_BUDGET_WARNED_COST; break;
                default: break;
                }
        }
        if (agent_limits_format(names, values, &text) >= 0 && text)
                audit_limits_raised(t, uid, text);
}
