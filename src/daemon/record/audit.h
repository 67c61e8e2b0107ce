/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "task.h"

/* The audit trail. One emitter per event kind, each with a fixed set of
 * fields and its own MESSAGE_ID (messages.h, explained in agentfab.catalog).
 * Each writes one structured journal entry and, for task events, appends the
 * same event to the task's events.jsonl and sends it to the task's watchers
 * on the stream socket. caller is UID_INVALID when no request caused it. */

/* In a fleet (fleet.h), every entry gains AGENTFAB_HOST= (this host's name)
 * and an entry of a task AGENTFAB_EPOCH= (the epoch of this host's claim on
 * it, from epoch()); host NULL: none, as on a host alone. */
void audit_set_fleet(const char *host, uint64_t (*epoch)(const char *id, void *userdata), void *userdata);
/* A host of the fleet took the task over (its own entry, AGENTFAB_EVENT=takeover):
 * from_host held it at from_epoch; this host holds it now at epoch and goes
 * on after step, the last acknowledged one, whose checkpoint is checkpoint
 * (NULL: the base). audit --verify accepts a change of epoch only where
 * such an entry marks it. Defined in audit-fleet.c. */
void audit_takeover(Task *t, const char *from_host, uint64_t from_epoch, uint64_t epoch, unsigned step,
                    const char *checkpoint);

void audit_task_submitted(Task *t, uid_t caller);
void audit_task_state(Task *t, TaskState old_state, uid_t caller);
/* Once, when the task ends: what it used (TaskResources), a field per
 * counter that is known. */
void audit_task_resources(Task *t);
/* event: "cancel", "approve", "reject", "resume" */
void audit_task_request(Task *t, const char *event, uid_t caller, const char *comment);
void audit_task_reset(Task *t, uid_t caller, unsigned step, const char *commit, const char *undone);
/* Amend(): the requirement is now version; old_goal / old_acceptance are
 * the texts replaced (NULL: that part did not change). */
void audit_task_amended(Task *t, uid_t caller, unsigned version, const char *old_goal, const char *old_acceptance);
/* Delivery's own test run on the final tree (tests: "pass", "fail", or
 * "not-run" without a test command), recorded by commit (NULL: not
 * recorded, as when the run failed). */
void audit_verified(Task *t, const char *commit, const char *tests, int exit_code, int count);
void audit_denied(const char *task_id, const char *action, uid_t caller);
void audit_task_broken(Task *t);
/* The agent at work (agent-loop.c). */
void audit_plan(Task *t, const char *plan);
void audit_model_call(Task *t, unsigned step, const char *model, unsigned attempts, uint64_t prompt_tokens,
                      uint64_t completion_tokens, const char *finish_reason, const char *error);
void audit_command(Task *t, unsigned step, const char *tool, const char *command, int status, int signal,
                   bool timed_out, uint64_t duration_usec, uint64_t output_bytes);
void audit_file_change(Task *t, unsigned step, const char *tool, const char *path);
void audit_step(Task *t, unsigned step, const char *commit, const char *subject, const char *tests);
/* What a step's checkpoint left out (ledger_take_left_out()): n paths in
 * all, the first of them in paths, each "path" or "path (reason)". */
void audit_left_out(Task *t, unsigned step, char **paths, size_t n);
/* The model's server refused a request of sent_bytes as longer than the
 * model's context (error: its words); the context budget of the task goes
 * from budget_before to budget tokens, and the step is asked again
 * (attempt: how many of its requests were refused or cut). */
void audit_context_refused(Task *t, unsigned step, const char *model, uint64_t sent_bytes, uint64_t budget_before,
                           uint64_t budget, unsigned attempt, const char *error);
/* The server counted prompt_tokens of a request of sent_bytes, about
 * estimated_tokens: it cut the prompt, and its context window is smaller
 * than the profile's ContextBudget= (profile_budget). The budget is now
 * budget tokens. */
void audit_context_truncated(Task *t, unsigned step, const char *model, uint64_t sent_bytes, uint64_t estimated_tokens,
                             uint64_t prompt_tokens, uint64_t profile_budget, uint64_t budget);
/* AGENTFAB_TRACE=1 (trace.h): `_cleanup_(audit_trace_end) AuditTrace x =
 * audit_trace_begin(t, step);` journals, when x goes out of scope, how long
 * the scope took and the phases traced meanwhile on this thread. */
typedef struct AuditTrace {
        char *task;
        unsigned step;
        uint64_t start;
} AuditTrace;
AuditTrace audit_trace_begin(Task *t, unsigned step);
void audit_trace_end(AuditTrace *a);
void audit_breaker(Task *t, const char *breaker, const char *reason);
/* The review stage (review-stage.c): one entry per finding, then one for
 * the whole review. The strings come escaped and bounded from the review
 * engine (finding.h); a secret's value is never among them. */
void audit_review_finding(Task *t, const char *kind, const char *severity, const char *file, unsigned line,
                          const char *rule, const char *message);
void audit_review_verdict(Task *t, const char *model, const char *verdict, unsigned n_comments, const char *summary);
void audit_reviewed(Task *t, const char *commit, uint64_t duration_usec, size_t n_errors, size_t n_warnings, const char *breaker,
                    const char *reason);
void audit_sandbox(Task *t, const char *unit, pid_t pid, uid_t uid);
/* A running sandbox taken up again from the fd store after a restart
 * (freezer.c); usec: how long its checks took. */
void audit_sandbox_reattached(Task *t, const char *unit, pid_t pid, uid_t uid, uint64_t usec);
/* The sandbox was frozen (why: "pause" or "approval"; method: "systemd" or
 * "cgroup"; usec: how long freezing took), thawed after frozen_usec, or
 * torn down after MaxPausedSec= (released_after_usec). */
void audit_sandbox_frozen(Task *t, const char *why, const char *method, uint64_t usec);
void audit_sandbox_thawed(Task *t, uint64_t frozen_usec);
void audit_sandbox_released(Task *t, uint64_t paused_usec);
void audit_delivered(Task *t, const char *head, const char *diffstat);
/* Delivery to a forge (never with the token): the branch was pushed to
 * spec.push_url; a pull request was opened at url; or either failed
 * (what: "push" or "pull-request"). */
void audit_pushed(Task *t, const char *head);
void audit_pull_request(Task *t, const char *url);
void audit_delivery_failed(Task *t, const char *what, const char *error);

/* A client that asks faster than it reads was dropped (transport: "bus",
 * its calls refused, or "stream", its connection closed): queued bytes
 * were held for peer (a unique bus name or "pid N"), past max (the
 * setting or constant named by limit). */
void audit_client_dropped(const char *transport, const char *peer, uid_t uid, uint64_t queued, uint64_t max,
                          const char *limit);

void audit_daemon_started(unsigned n_tasks);
void audit_daemon_idle(void);

/* An approval added hosts to the task's allowlist (approve --allow-host). */
void audit_allow_hosts(Task *t, uid_t caller, const char *hosts);
/* An approval set limits of the task (approve --limit): "max_cpu_sec=600, ...". */
void audit_limits_raised(Task *t, uid_t caller, const char *limits);
