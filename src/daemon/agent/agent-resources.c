/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "agent-run.h"
#include "egress.h"
#include "log.h"
#include "sandbox-usage.h"
#include "task-resources.h"

/* What the task's sandboxes, model calls and connections used, added to
 * TaskProgress.resources as it happens: after each command, when a
 * sandbox goes away, after each model call. The scope's cgroup counts from
 * the sandbox's making; the run keeps what it last read of it, so that
 * each reading adds only what is new. A sandbox the run took up (thawed
 * after an approval, or left by a daemon that restarted) counts from the
 * run's first reading: what it did before was counted by the run that made
 * it (which reads it when it stops, and a pause, before its state is
 * written), or, for the commands of a step no state file acknowledged, is
 * lost with that step. */

#define CGROUP_ROOT "/sys/fs/cgroup"

static void delta(uint64_t *total, uint64_t now, uint64_t *seen) {
        if (now == TASK_RESOURCE_UNKNOWN) {
                /* Nothing counted and nothing to read: not known, rather than 0. */
                if (*total == 0)
                        *total = TASK_RESOURCE_UNKNOWN;
                return;
        }
        if (*seen == TASK_RESOURCE_UNKNOWN) {
                /* Not read when the sandbox was taken up: from here on. */
                *seen = now;
                return;
        }
        if (now < *seen)
                *seen = 0;
        task_resource_add(total, now - *seen);
        *seen = now;
}

static int read_usage(AgentRun *run, pid_t *ret_pid, SandboxUsage *ret) {
        pid_t pid;
        int r;

        if (!run->task || !run->session || !sandbox_session_is_ready(run->session))
                return -ENOTCONN;
        pid = sandbox_session_get_pid(run->session);
        if (pid <= 1)
                return -ESRCH;
        *ret_pid = pid;
        r = sandbox_usage_read(CGROUP_ROOT, pid, NULL, run->task->id, ret);
        if (r < 0)
                return r;
        ret->processes = sandbox_session_get_last_pid(run->session);
        return 0;
}

void agent_resources_sandbox_new(AgentRun *run) {
        run->usage_pid = run->session ? sandbox_session_get_pid(run->session) : 0;
        run->usage_seen = (SandboxUsage) {};
}

void agent_resources_sandbox_taken(AgentRun *run) {
        SandboxUsage u;
        pid_t pid;

        /* Not readable now: the first reading counts from there. */
        if (read_usage(run, &pid, &u) < 0) {
                run->usage_pid = -1;
                return;
        }
        run->usage_pid = pid;
        run->usage_seen = u;
}

void agent_resources_sample(AgentRun *run) {
        Task *t = run->task;
        TaskResources *res;
        SandboxUsage u;
        pid_t pid;
        int r;

        if (!t)
                return;
        res = &t->progress.resources;
        egress_account(run->factory->egress, t);

        r = read_usage(run, &pid, &u);
        if (r < 0) {
                if (r != -ENOTCONN)
                        log_debug_errno(r, "Task '%s': cannot read what its sandbox used, ignoring: %m", t->id);
                return;
        }
        if (pid != run->usage_pid) {
                /* A sandbox this run did not see made: from here on. */
                run->usage_pid = pid;
                run->usage_seen = u;
                return;
        }
        delta(&res->cpu_usec, u.cpu_usec, &run->usage_seen.cpu_usec);
        delta(&res->io_read_bytes, u.io_read_bytes, &run->usage_seen.io_read_bytes);
        delta(&res->io_write_bytes, u.io_write_bytes, &run->usage_seen.io_write_bytes);
        if (u.memory_peak == TASK_RESOURCE_UNKNOWN) {
                if (res->memory_peak == 0)
                        res->memory_peak = TASK_RESOURCE_UNKNOWN;
        } else
                task_resource_max(&res->memory_peak, u.memory_peak);
        delta(&res->processes, u.processes, &run->usage_seen.processes);
        task_changed(t, TASK_CHANGE_RESOURCES);
}

uint64_t agent_resources_cpu_usec(AgentRun *run) {
        const TaskResources *res = &run->task->progress.resources;
        uint64_t counted = res->cpu_usec == TASK_RESOURCE_UNKNOWN ? 0 : res->cpu_usec;
        SandboxUsage u;
        pid_t pid;

        if (read_usage(run, &pid, &u) < 0)
                return counted;
        if (pid != run->usage_pid) {
                /* A sandbox this run did not see made: from here on, as
                 * agent_resources_sample() takes it up. */
                run->usage_pid = pid;
                run->usage_seen = u;
                return counted;
        }
        if (u.cpu_usec == TASK_RESOURCE_UNKNOWN || run->usage_seen.cpu_usec == TASK_RESOURCE_UNKNOWN ||
            u.cpu_usec < run->usage_seen.cpu_usec)
                return counted;
        return counted + (u.cpu_usec - run->usage_seen.cpu_usec);
}

void agent_resources_model_call(Task *t, const ModelProfile *profile, const ModelReply *reply) {
        TaskResources *res = &t->progress.resources;

        task_resource_add(&res->model_calls, 1);
        if (reply) {
                task_resource_add(&res->tokens_in, reply->prompt_tokens);
                task_resource_add(&res->tokens_out, reply->completion_tokens);
                task_resource_add(&res->tokens_cached, reply->cached_tokens);
                if (model_profile_has_prices(profile)) {
                        uint64_t pin = profile->price_input_micros == UINT64_MAX ? 0 : profile->price_input_micros,
                                 pout = profile->price_output_micros == UINT64_MAX ? 0 : profile->price_output_micros;

                        /* Each call at its own profile's prices: the
                         * reviewer's may differ from the agent's. */
                        task_resource_add(&res->cost_micros,
                                          task_resources_cost(reply->prompt_tokens, reply->completion_tokens, pin, pout));
                        if (res->currency[0] == '\0') {
                                const char *c = profile->currency[0] ? profile->currency : "USD";
                                /* Both hold at most TASK_CURRENCY_MAX - 1 letters. */
                                memcpy(res->currency, c, MIN(strlen(c), sizeof(res->currency) - 1));
                        }
                }
        }
        task_changed(t, TASK_CHANGE_RESOURCES);
}
