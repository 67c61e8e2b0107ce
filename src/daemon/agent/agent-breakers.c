/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "audit.h"
#include "breakers.h"
#include "buf.h"
#include "cache.h"
#include "conversation.h"
#include "delivery.h"
#include "egress.h"
#include "environment-identity.h"
#include "exec-session.h"
#include "factory.h"
#include "freezer.h"
#include "fs-util.h"
#include "json-util.h"
#include "ledger.h"
#include "log.h"
#include "model-client.h"
#include "model-profile.h"
#include "review-stage.h"
#include "step-commit.h"
#include "string-util.h"
#include "task-job.h"
#include "task-store.h"
#include "tools.h"
#include "trace.h"
#include "worker.h"

/* The circuit breakers at a step's end and the budgets before each model
 * call: a trip stops the task for a person's approval (or fails it). */

void agent_trip(AgentRun *run, Breaker b, const char *reason, const char *commit_before) {
        Task *t = run->task;

        if (free_and_strdup(&t->progress.breaker, breaker_to_string(b)) < 0 ||
            free_and_strdup(&t->progress.breaker_commit, commit_before) < 0)
                return agent_fail(run, "Out of memory.");
        audit_breaker(t, breaker_to_string(b), reason);
        agent_set_state(run, TASK_AWAITING_APPROVAL, reason);
}

static int breaker_config_from(const Config *c, BreakerConfig *b) {
        int r;

        r = breaker_config_init_defaults(b);
        if (r < 0)
                return r;
        b->max_consecutive_test_failures = c->max_test_failures;
        b->max_files_changed = c->max_files_changed;
        b->max_lines_changed = c->max_lines_changed;
        b->max_malformed = c->max_malformed;
        if (c->protected_paths_reset) {
                strv_free(b->protected_globs);
                b->protected_globs = NULL;
        }
        for (char **g = c->protected_paths; g && *g; g++)
                if (strv_extend(&b->protected_globs, *g) < 0)
                        return -ENOMEM;
        return 0;
}

static int changes_to_breaker(const FileChange *c, size_t n, BreakerChange **ret) {
        BreakerChange *b = calloc(n ?: 1, sizeof(BreakerChange));
        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                b[i] = (BreakerChange) { .path = c[i].path, .status = c[i].status, .added = c[i].added,
                                         .removed = c[i].removed, .old_path = c[i].old_path };
        *ret = b;
        return 0;
}

/* Changes against the rules of bc: 1 and *trip if one tripped. */
static int check_file_changes(const FileChange *changes, size_t n, const BreakerConfig *bc, BreakerTrip *trip) {
        _cleanup_free_ BreakerChange *bch = NULL;
        int r;

        r = changes_to_breaker(changes, n, &bch);
        if (r < 0)
                return r;
        return breakers_check_changes(bc, bch, n, trip);
}

int agent_check_breakers(AgentRun *run, const StepCommit *c) {
        const char *commit_before = c->before;
        _cleanup_(breaker_config_done) BreakerConfig bc = {};
        _cleanup_(breaker_trip_done) BreakerTrip trip = {};
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        int r;

        /* keep_file of a binary: a person decides before it is committed. */
        if (p->keep_pending) {
                _cleanup_free_ char *reason = NULL;
                if (asprintf(&reason, "The agent asks to commit the binary file %s", strempty(p->keep_reason)) < 0)
                        return -ENOMEM;
                agent_trip(run, BREAKER_BINARY_FILE, reason, commit_before);
                return 1;
        }

        r = breaker_config_from(&run->factory->config, &bc);
        if (r < 0)
                return r;

        /* The model gave up: a person reads why. */
        if (run->gave_up) {
                r = breakers_check_gave_up(&bc, run->gave_up, &trip);
                if (r != 0)
                        return r < 0 ? r : (agent_trip(run, trip.breaker, trip.reason, commit_before), 1);
        }

        /* In allowlist mode the egress proxy's refusal names the host, and
         * the approver may allow it (approve --allow-host=). */
        _cleanup_free_ char *refused_host = NULL, *refused_reason = NULL;
        if (egress_take_refusal(run->factory->egress, t->id, &refused_host, &refused_reason) > 0) {
                _cleanup_free_ char *reason = NULL;
                if (asprintf(&reason, "the egress proxy refused a connection to %s (%s); approve with --allow-host=%s "
                             "to allow it", refused_host, refused_reason, refused_host) < 0)
                        return -ENOMEM;
                agent_trip(run, BREAKER_NETWORK, reason, commit_before);
                return 1;
        }

        if (run->network) {
                _cleanup_free_ char *reason = NULL;
                if (asprintf(&reason, "command needed the network, which the sandbox does not have: %s",
                             strempty(run->network_command)) < 0)
                        return -ENOMEM;
                agent_trip(run, BREAKER_NETWORK, reason, commit_before);
                return 1;
        }

        if (p->malformed >= bc.max_malformed) {
                _cleanup_free_ char *reason = NULL;
                if (asprintf(&reason, "the model sent %u replies in a row without a usable tool call (malformed, cut at "
                             "its token limit, or none at all)", p->malformed) < 0)
                        return -ENOMEM;
                agent_trip(run, BREAKER_MALFORMED_OUTPUT, reason, commit_before);
                return 1;
        }

        if (run->stuck) {
                r = breakers_check_stuck(&bc, bc.max_repeated_calls, run->stuck, &trip);
                if (r != 0)
                        return r < 0 ? r : (agent_trip(run, trip.breaker, trip.reason, commit_before), 1);
        }

        if (run->tests_ran) {
                if (!run->tests_passed && p->test_failures >= bc.max_consecutive_test_failures) {
                        _cleanup_free_ char *reason = NULL;
                        if (asprintf(&reason, "the same tests failed %u times in a row (last exit status %i)",
                                     p->test_failures, run->test_exit) < 0)
                                return -ENOMEM;
                        agent_trip(run, BREAKER_TESTS_FAILING, reason, commit_before);
                        return 1;
                }
                /* Mid-work breakage is the failing breaker's business; a run
                 * finish accepts (green, or red only as at the start) with
                 * fewer passing tests means tests were dropped. */
                if (run->tests_accepted && p->baseline_passed >= 0 && run->tests_n_passed >= 0 &&
                    run->tests_n_passed < p->baseline_passed) {
                        _cleanup_free_ char *reason = NULL;
                        if (asprintf(&reason, "fewer tests pass than at the start: %i, before %i",
                                     run->tests_n_passed, p->baseline_passed) < 0)
                                return -ENOMEM;
                        agent_trip(run, BREAKER_TESTS_REGRESSED, reason, commit_before);
                        return 1;
                }
        }

        /* This step's own changes: protected paths, manifests, deleted tests. */
        BreakerConfig step_only = bc;
        step_only.max_files_changed = UINT_MAX;
        step_only.max_lines_changed = UINT_MAX;
        if (!c->step_known)
                return -EIO;
        r = check_file_changes(c->step_changes, c->n_step_changes, &step_only, &trip);
        if (r != 0)
                return r < 0 ? r : (agent_trip(run, trip.breaker, trip.reason, commit_before), 1);

        /* Everything since the base: size. */
        BreakerConfig size_only = bc;
        for (int i = 0; i < _BREAKER_MAX; i++)
                size_only.enabled[i] = i == BREAKER_FILES_CHANGED || i == BREAKER_LINES_CHANGED;
        size_only.max_files_changed += (unsigned) MIN(p->extra_files, (uint64_t) UINT_MAX / 2);
        size_only.max_lines_changed += (unsigned) MIN(p->extra_lines, (uint64_t) UINT_MAX / 2);
        if (c->all_result < 0)
                return c->all_result;
        r = check_file_changes(c->all_changes, c->n_all_changes, &size_only, &trip);
        if (r != 0)
                return r < 0 ? r : (agent_trip(run, trip.breaker, trip.reason, commit_before), 1);
        return 0;
}

/* The tool call being answered: the reply's call at next_call - 1. */
static const char *current_call_arguments(AgentRun *run) {
        json_object *call, *fn, *v;

        if (!run->calls || run->next_call == 0 || run->next_call > json_object_array_length(run->calls))
                return NULL;
        call = json_object_array_get_idx(run->calls, run->next_call - 1);
        if (!json_object_object_get_ex(call, "function", &fn) || !json_object_object_get_ex(fn, "arguments", &v))
                return NULL;
        return json_object_get_string(v);
}

int agent_note_call(AgentRun *run, const char *name, const char *text, char **ret_text) {
        TaskProgress *p = &run->task->progress;
        const char *args = current_call_arguments(run);
        uint64_t sig = tool_call_signature(name, args, text);
        unsigned k = tool_call_repeats(p->recent_calls, p->n_recent_calls, sig) + 1;

        *ret_text = NULL;
        if (p->n_recent_calls >= TASK_RECENT_CALLS_MAX) {
                memmove(p->recent_calls, p->recent_calls + 1, sizeof(uint64_t) * (TASK_RECENT_CALLS_MAX - 1));
                p->n_recent_calls--;
        }
        p->recent_calls[p->n_recent_calls++] = sig;

        if (k >= BREAKER_MAX_REPEATED_CALLS) {
                free(run->stuck);
                if (asprintf(&run->stuck, "%s %s", strempty(name), strempty(args)) < 0) {
                        run->stuck = NULL;
                        return -ENOMEM;
                }
                if (asprintf(ret_text, "%s\n\n[agentfab: this is the %u. time you made this call with this result "
                             "since a tool last changed the workspace. The task stops at the end of this step for a "
                             "person (breaker stuck).]", text, k) < 0)
                        return -ENOMEM;
        } else if (k >= BREAKER_WARN_REPEATED_CALLS) {
                if (asprintf(ret_text, "%s\n\n[agentfab: warning: you made this same call with the same result %u "
                             "times since a tool last changed the workspace; doing it again will not change the result. "
                             "Try something else. At %u times the task stops for a person (breaker stuck).]", text, k,
                             BREAKER_MAX_REPEATED_CALLS) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Told once per budget, before the next model call: what is left, when 80 %
 * of it is spent. */
static int agent_warn_budget(AgentRun *run, uint64_t steps, uint64_t tokens, uint64_t wall) {
        TaskProgress *p = &run->task->progress;
        _cleanup_(buf_done) Buf b = {};
        json_object *m;
        int r = 0;

        if (!(p->budget_warned & TASK_BUDGET_WARNED_STEPS) && steps > 0 && (uint64_t) p->step * 5 >= steps * 4) {
                r = buf_printf(&b, " %llu of %llu steps left.", (unsigned long long) (steps - p->step),
                               (unsigned long long) steps);
                p->budget_warned |= TASK_BUDGET_WARNED_STEPS;
        }
        if (r >= 0 && !(p->budget_warned & TASK_BUDGET_WARNED_TOKENS) && tokens > 0 && tokens < UINT64_MAX / 5 &&
            p->tokens * 5 >= tokens * 4) {
                r = buf_printf(&b, " %llu of %llu tokens left.", (unsigned long long) (tokens - p->tokens),
                               (unsigned long long) tokens);
                p->budget_warned |= TASK_BUDGET_WARNED_TOKENS;
        }
        if (r >= 0 && !(p->budget_warned & TASK_BUDGET_WARNED_WALL) && wall > 0 && wall < UINT64_MAX / 5 &&
            p->wall_usec * 5 >= wall * 4) {
                r = buf_printf(&b, " %llu of %llu s of wall-clock time left.",
                               (unsigned long long) ((wall - p->wall_usec) / USEC_PER_SEC),
                               (unsigned long long) (wall / USEC_PER_SEC));
                p->budget_warned |= TASK_BUDGET_WARNED_WALL;
        }
        if (r >= 0)
                r = agent_budget_warn(run, &b);
        if (r < 0)
                return -ENOMEM;
        if (!b.s)
                return 0;
        _cleanup_free_ char *text = NULL;
        if (asprintf(&text, "[agentfab: 80 %% or more of a budget of this task is spent:%s When one runs out, the "
                     "task stops for a person. Finish what matters most, run the tests, and call finish; or give "
                     "up (finish with cannot_complete) if the task cannot be done.]", b.s) < 0)
                return -ENOMEM;
        m = conversation_message_new("user", text);
        if (!m || conversation_add(run, m) < 0) {
                json_object_put(m);
                return -ENOMEM;
        }
        return 0;
}

int agent_check_budget(AgentRun *run) {
        const Config *c = &run->factory->config;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        _cleanup_free_ char *reason = NULL;

#define LIMIT(l, dflt) (t->spec.limits[l] != TASK_LIMIT_UNSET ? t->spec.limits[l] : (dflt))
        uint64_t steps = LIMIT(TASK_LIMIT_MAX_STEPS, c->max_steps) + p->extra_steps;
        uint64_t tokens = LIMIT(TASK_LIMIT_MAX_TOKENS, c->max_tokens) + p->extra_tokens;
        uint64_t commands = LIMIT(TASK_LIMIT_MAX_COMMANDS, c->max_commands) + p->extra_commands;
        uint64_t wall = agent_wall_budget_usec(run);
#undef LIMIT

        agent_count_clock(run);
        if (p->step >= steps)
                (void) asprintf(&reason, "step budget exhausted: %u of %llu steps", p->step, (unsigned long long) steps);
        else if (p->tokens >= tokens)
                (void) asprintf(&reason, "token budget exhausted: %llu of %llu tokens",
                                (unsigned long long) p->tokens, (unsigned long long) tokens);
        else if (p->commands >= commands)
                (void) asprintf(&reason, "command budget exhausted: %llu of %llu commands",
                                (unsigned long long) p->commands, (unsigned long long) commands);
        else if (p->wall_usec >= wall)
                (void) asprintf(&reason, "wall-clock budget exhausted: %llu of %llu s",
                                (unsigned long long) (p->wall_usec / USEC_PER_SEC), (unsigned long long) (wall / USEC_PER_SEC));
        else {
                int r = agent_check_resource_budget(run);
                if (r != 0)
                        return r;
                return agent_warn_budget(run, steps, tokens, wall) < 0 ? (agent_fail(run, "Out of memory."), 1) : 0;
        }

        if (!reason)
                return -ENOMEM;
        if (c->budget_action == BUDGET_ACTION_FAIL) {
                audit_breaker(t, breaker_to_string(BREAKER_BUDGET), reason);
                agent_fail(run, "%s", reason);
        } else
                agent_trip(run, BREAKER_BUDGET, reason, p->checkpoint);
        return 1;
}

