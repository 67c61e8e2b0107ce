/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <time.h>

#include "audit.h"
#include "audit-internal.h"
#include "factory.h"
#include "json-util.h"
#include "log.h"
#include "messages.h"
#include "string-util.h"
#include "task-store.h"
#include "trace.h"

/* What journald could not take (stopped, restarting, its socket gone) is
 * counted, and said in the next entry that it takes: the audit trail then
 * shows its own gap. sd_journal_send() does not block without journald: its
 * socket refuses at once. The tasks' events.jsonl keep their history
 * meanwhile. */
static unsigned journal_lost = 0;
static uint64_t journal_lost_since_usec = 0;
static int journal_lost_error = 0;

void audit_journal_sent(int r) {
        unsigned n;
        time_t since;
        struct tm tm;
        char when[64] = "";

        if (r < 0) {
                if (journal_lost++ == 0) {
                        journal_lost_since_usec = now_usec();
                        journal_lost_error = r;
                }
                return;
        }
        if (journal_lost == 0)
                return;

        n = journal_lost;
        journal_lost = 0;
        since = (time_t) (journal_lost_since_usec / USEC_PER_SEC);
        if (gmtime_r(&since, &tm))
                (void) strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
        r = sd_journal_send("MESSAGE=%u agentfab journal entries could not be recorded since %s: %s. "
                            "The tasks' events.jsonl files hold their events.", n, when, strerror(-journal_lost_error),
                            "MESSAGE_ID=" AGENTFAB_MESSAGE_JOURNAL_LOST_STR,
                            "PRIORITY=%i", LOG_WARNING,
                            "AGENTFAB_EVENT=journal-lost",
                            "AGENTFAB_LOST=%u", n,
                            "AGENTFAB_LOST_SINCE_USEC=%llu", (unsigned long long) journal_lost_since_usec,
                            "AGENTFAB_ERROR=%s", strerror(-journal_lost_error),
                            NULL);
        if (r < 0)
                journal_lost = n + 1;   /* gone again: keep counting from the same moment */
}


void audit_task_event(Task *t, const char *type, uid_t caller, const char *k1, const char *v1,
                      const char *k2, const char *v2, const char *k3, const char *v3) {
        _cleanup_json_ json_object *e = json_object_new_object();
        int r;

        if (!e ||
            json_add_string(e, "type", type) < 0 ||
            json_add_string(e, "task", t->id) < 0 ||
            json_add_uint64(e, "usec", now_usec()) < 0 ||
            (caller != UID_INVALID && json_add_uint64(e, "uid", caller) < 0) ||
            (k1 && json_add_string(e, k1, v1) < 0) ||
            (k2 && json_add_string(e, k2, v2) < 0) ||
            (k3 && json_add_string(e, k3, v3) < 0)) {
                log_oom();
                return;
        }

        r = task_append_event(t, e);
        if (r < 0 && r != -EROFS)
                log_warning_errno(r, "Failed to append event to history of task '%s', ignoring: %m", t->id);

        task_send_event(t, e);
}


void audit_task_submitted(Task *t, uid_t caller) {
        journal_send("MESSAGE=Task %s submitted by uid %u for '%s'.", t->id, (unsigned) caller, t->spec.repository,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_SUBMITTED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=submitted",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_OWNER=%u", (unsigned) t->owner,
                               "AGENTFAB_REPOSITORY=%s", t->spec.repository,
                               "AGENTFAB_BASE=%s", t->spec.base ?: "HEAD",
                               "AGENTFAB_GOAL=%s", t->spec.goal,
                               "AGENTFAB_TEST_COMMAND=%s", strempty(t->spec.test_command),
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "submitted", caller, "state", task_state_to_string(t->state),
                   "repository", t->spec.repository, "goal", t->spec.goal);
}

void audit_task_state(Task *t, TaskState old_state, uid_t caller) {
        _cleanup_free_ char *message = NULL, *task = NULL, *state = NULL, *old = NULL, *reason = NULL, *uid = NULL;
        _cleanup_free_ char *host = NULL, *epoch = NULL;
        struct iovec iov[12];
        size_t n = 0;

        if (asprintf(&message, "MESSAGE=Task %s is now %s%s%s.", t->id, task_state_to_string(t->state),
                     isempty(t->reason) ? "" : ": ", t->reason) < 0 ||
            asprintf(&task, "AGENTFAB_TASK=%s", t->id) < 0 ||
            asprintf(&state, "AGENTFAB_STATE=%s", task_state_to_string(t->state)) < 0 ||
            asprintf(&old, "AGENTFAB_OLD_STATE=%s", task_state_to_string(old_state)) < 0 ||
            asprintf(&reason, "AGENTFAB_REASON=%s", t->reason) < 0 ||
            (caller != UID_INVALID && asprintf(&uid, "AGENTFAB_UID=%u", (unsigned) caller) < 0) ||
            (audit_fleet_host() && (asprintf(&host, "AGENTFAB_HOST=%s", audit_fleet_host()) < 0 ||
                            asprintf(&epoch, "AGENTFAB_EPOCH=%" PRIu64, audit_task_epoch(t)) < 0))) {
                log_oom();
                return;
        }

#define IOV(s) iov[n++] = (struct iovec) { .iov_base = (char *) (s), .iov_len = strlen(s) }
        IOV(message);
        IOV("MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_STATE_STR);
        IOV(t->state == TASK_FAILED ? "PRIORITY=4" : "PRIORITY=6");
        IOV("AGENTFAB_EVENT=state");
        IOV(task);
        IOV(state);
        IOV(old);
        IOV(reason);
        /* No AGENTFAB_UID= when the daemon changed the state on its own. */
        if (uid)
                IOV(uid);
        if (host) {
                IOV(host);
                IOV(epoch);
        }
#undef IOV
        journal_sendv(iov, (int) n);

        audit_task_event(t, "state", caller, "state", task_state_to_string(t->state),
                   "old_state", task_state_to_string(old_state), "reason", t->reason);
}

#define RESOURCE_FIELDS_MAX 20U

void audit_task_resources(Task *t) {
        _cleanup_json_ json_object *j = NULL;
        _cleanup_free_ char *line = NULL, *message = NULL, *task = NULL, *host = NULL, *epoch = NULL;
        char *fields[RESOURCE_FIELDS_MAX] = {};
        struct iovec iov[RESOURCE_FIELDS_MAX + 8];
        TaskResources res = t->progress.resources;
        size_t n = 0, k = 0;

        res.wall_usec = t->progress.wall_usec;
        line = task_resources_format(&res);
        if (!line || task_resources_to_json(&res, &j) < 0 ||
            asprintf(&message, "MESSAGE=Task %s used: %s.", t->id, line) < 0 ||
            asprintf(&task, "AGENTFAB_TASK=%s", t->id) < 0 ||
            (audit_fleet_host() && (asprintf(&host, "AGENTFAB_HOST=%s", audit_fleet_host()) < 0 ||
                            asprintf(&epoch, "AGENTFAB_EPOCH=%" PRIu64, audit_task_epoch(t)) < 0))) {
                log_oom();
                return;
        }
#define IOV(s) iov[n++] = (struct iovec) { .iov_base = (char *) (s), .iov_len = strlen(s) }
        IOV(message);
        IOV("MESSAGE_ID=" AGENTFAB_MESSAGE_RESOURCES_STR);
        IOV("PRIORITY=6");
        IOV("AGENTFAB_EVENT=resources");
        IOV(task);
        if (host) {
                IOV(host);
                IOV(epoch);
        }
        /* AGENTFAB_CPU_USEC=, AGENTFAB_TOKENS_IN=, ...: the counters by
         * their JSON names, upper case; one nobody could read is left out. */
        json_object_object_foreach(j, key, v) {
                char *f = NULL;
                if (k >= RESOURCE_FIELDS_MAX)
                        break;
                if (json_object_is_type(v, json_type_int) &&
                    asprintf(&f, "AGENTFAB_%s=%" PRIu64, key, json_object_get_uint64(v)) < 0)
                        f = NULL;
                else if (json_object_is_type(v, json_type_string) &&
                         asprintf(&f, "AGENTFAB_%s=%s", key, json_object_get_string(v)) < 0)
                        f = NULL;
                if (!f)
                        continue;
                for (char *c = f + 9; *c && *c != '='; c++)
                        *c = (char) toupper((unsigned char) *c);
                fields[k++] = f;
                IOV(f);
        }
#undef IOV
        journal_sendv(iov, (int) n);
        for (size_t i = 0; i < k; i++)
                free(fields[i]);

        json_object *e = json_object_new_object();
        if (e && json_add_string(e, "type", "resources") >= 0 && json_add_string(e, "task", t->id) >= 0 &&
            json_add_uint64(e, "usec", now_usec()) >= 0 && json_object_object_add(e, "resources", TAKE_PTR(j)) >= 0) {
                int r = task_append_event(t, e);
                if (r < 0 && r != -EROFS)
                        log_warning_errno(r, "Failed to append event to history of task '%s', ignoring: %m", t->id);
                task_send_event(t, e);
        }
        json_object_put(e);
}

void audit_task_request(Task *t, const char *event, uid_t caller, const char *comment) {
        journal_send("MESSAGE=Task %s: %s requested by uid %u.", t->id, event, (unsigned) caller,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_REQUEST_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=%s", event,
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_COMMENT=%s", strempty(comment),
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "request", caller, "request", event, comment ? "comment" : NULL, comment, NULL, NULL);
}

void audit_task_reset(Task *t, uid_t caller, unsigned step, const char *commit, const char *undone) {
        journal_send("MESSAGE=Task %s reset to %s (%s%u) by uid %u.", t->id, commit,
                               step ? "step " : "base, step ", step, (unsigned) caller,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_RESET_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=reset",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_STEP=%u", step,
                               "AGENTFAB_COMMIT=%s", commit,
                               "AGENTFAB_UNDONE=%s", undone,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "reset", caller, "commit", commit, "undone", undone, NULL, NULL);
}

void audit_task_amended(Task *t, uid_t caller, unsigned version, const char *old_goal, const char *old_acceptance) {
        char version_s[16];
        const char *changed = old_goal && old_acceptance ? "goal,acceptance" : old_goal ? "goal" : "acceptance";

        snprintf(version_s, sizeof(version_s), "v%u", version);
        /* Both texts as they are now, and what they replaced: "who changed
         * what" is in the entry itself, not only in the state file. */
        (void) sd_journal_send("MESSAGE=Task %s: requirement amended to %s by uid %u (%s).", t->id, version_s,
                               (unsigned) caller, changed,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_AMENDED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=amended",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_REQUIREMENT=%s", version_s,
                               "AGENTFAB_CHANGED=%s", changed,
                               "AGENTFAB_GOAL=%s", t->spec.goal,
                               "AGENTFAB_ACCEPTANCE=%s", strempty(t->spec.acceptance),
                               "AGENTFAB_OLD_GOAL=%s", old_goal ?: t->spec.goal,
                               "AGENTFAB_OLD_ACCEPTANCE=%s", old_acceptance ?: strempty(t->spec.acceptance),
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "amended", caller, "requirement", version_s, "changed", changed, "goal", t->spec.goal);
}

void audit_verified(Task *t, const char *commit, const char *tests, int exit_code, int count) {
        char exit_s[16], count_s[16] = "";

        snprintf(exit_s, sizeof(exit_s), "%i", exit_code);
        if (count >= 0)
                snprintf(count_s, sizeof(count_s), "%i", count);
        (void) sd_journal_send("MESSAGE=Task %s: tests %s on the final tree (exit status %i)%s%s.", t->id, tests, exit_code,
                               commit ? ", recorded in commit " : ", not delivered", strempty(commit),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_VERIFIED_STR,
                               "PRIORITY=%i", streq(tests, "fail") ? LOG_WARNING : LOG_INFO,
                               "AGENTFAB_EVENT=verified",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_COMMIT=%s", strempty(commit),
                               "AGENTFAB_TESTS=%s", tests,
                               "AGENTFAB_EXIT_STATUS=%s", exit_s,
                               "AGENTFAB_TEST_COUNT=%s", count_s,
                               "AGENTFAB_TEST_COMMAND=%s", strempty(t->spec.test_command),
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "verified", UID_INVALID, "tests", tests, commit ? "commit" : NULL, commit, "exit_status", exit_s);
}

void audit_denied(const char *task_id, const char *action, uid_t caller) {
        journal_send("MESSAGE=Denied %s to uid %u on task %s.", action, (unsigned) caller, strempty(task_id),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DENIED_STR,
                               "PRIORITY=%i", LOG_WARNING,
                               "AGENTFAB_EVENT=denied",
                               "AGENTFAB_TASK=%s", strempty(task_id),
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_ACTION=%s", action,
                               FLEET_HOST_FIELD(), NULL);
}

void audit_task_broken(Task *t) {
        journal_send("MESSAGE=Task %s: %s", t->id, t->reason,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_BROKEN_STR,
                               "PRIORITY=%i", LOG_ERR,
                               "AGENTFAB_EVENT=broken",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_REASON=%s", t->reason,
                               FLEET_FIELDS(t), NULL);
}

void audit_plan(Task *t, const char *plan) {
        _cleanup_free_ char *first = strshorten_line(skip_heading(plan), 120);

        journal_send("MESSAGE=Task %s planned: %s", t->id, strempty(first),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_PLAN_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=plan",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_PLAN=%s", plan,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "plan", UID_INVALID, "plan", plan, NULL, NULL, NULL, NULL);
}

void audit_model_call(Task *t, unsigned step, const char *model, unsigned attempts, uint64_t prompt_tokens,
                      uint64_t completion_tokens, const char *finish_reason, const char *error) {
        char step_s[16];

        snprintf(step_s, sizeof(step_s), "%u", step);
        journal_send("MESSAGE=Task %s step %u: model %s %s%s.", t->id, step, model,
                               error ? "failed: " : "answered, ", error ?: strempty(finish_reason),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_MODEL_CALL_STR,
                               "PRIORITY=%i", error ? LOG_WARNING : LOG_INFO,
                               "AGENTFAB_EVENT=model-call",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_STEP=%u", step,
                               "AGENTFAB_MODEL=%s", model,
                               "AGENTFAB_ATTEMPTS=%u", attempts,
                               "AGENTFAB_PROMPT_TOKENS=%llu", (unsigned long long) prompt_tokens,
                               "AGENTFAB_COMPLETION_TOKENS=%llu", (unsigned long long) completion_tokens,
                               "AGENTFAB_FINISH_REASON=%s", strempty(finish_reason),
                               "AGENTFAB_ERROR=%s", strempty(error),
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "model-call", UID_INVALID, "step", step_s, "model", model, error ? "error" : NULL, error);
}

void audit_command(Task *t, unsigned step, const char *tool, const char *command, int status, int signal,
                   bool timed_out, uint64_t duration_usec, uint64_t output_bytes) {
        char result[64], step_s[16];

        if (timed_out)
                snprintf(result, sizeof(result), "timed out");
        else if (signal > 0)
                snprintf(result, sizeof(result), "killed by signal %i", signal);
        else
                snprintf(result, sizeof(result), "exit %i", status);
        snprintf(step_s, sizeof(step_s), "%u", step);

        journal_send("MESSAGE=Task %s step %u: %s '%s': %s.", t->id, step, tool, command, result,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_COMMAND_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=command",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_STEP=%u", step,
                               "AGENTFAB_TOOL=%s", tool,
                               "AGENTFAB_COMMAND=%s", command,
                               "AGENTFAB_EXIT_STATUS=%i", status,
                               "AGENTFAB_SIGNAL=%i", signal,
                               "AGENTFAB_TIMED_OUT=%s", timed_out ? "yes" : "no",
                               "AGENTFAB_DURATION_USEC=%llu", (unsigned long long) duration_usec,
                               "AGENTFAB_OUTPUT_BYTES=%llu", (unsigned long long) output_bytes,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "command", UID_INVALID, "step", step_s, "command", command, "result", result);
}

void audit_file_change(Task *t, unsigned step, const char *tool, const char *path) {
        char step_s[16];

        snprintf(step_s, sizeof(step_s), "%u", step);
        journal_send("MESSAGE=Task %s step %u: %s '%s'.", t->id, step, tool, path,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_FILE_CHANGE_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=file-change",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_STEP=%u", step,
                               "AGENTFAB_TOOL=%s", tool,
                               "AGENTFAB_PATH=%s", path,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "file-change", UID_INVALID, "step", step_s, "tool", tool, "path", path);
}

void audit_step(Task *t, unsigned step, const char *commit, const char *subject, const char *tests) {
        char step_s[16];

        snprintf(step_s, sizeof(step_s), "%u", step);
        journal_send("MESSAGE=Task %s step %u done%s%s: %s", t->id, step,
                               commit ? ", commit " : "", strempty(commit), subject,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_STEP_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=step",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_STEP=%u", step,
                               "AGENTFAB_COMMIT=%s", strempty(commit),
                               "AGENTFAB_SUBJECT=%s", subject,
                               "AGENTFAB_TESTS=%s", tests,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "step", UID_INVALID, "step", step_s, commit ? "commit" : NULL, commit, "subject", subject);
}

/* "'a', 'b' and 3 more": each name cut at 256 bytes, its control bytes
 * and quotes written as C escapes (a command names these files). */
static char *paths_quoted(char **paths, size_t n) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, shown = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return NULL;
        for (char **p = paths; p && *p; p++, shown++) {
                fputs(shown == 0 ? "'" : ", '", f);
                size_t i = 0;
                for (const unsigned char *c = (const unsigned char *) *p; *c && i < 256; c++, i++) {
                        if (*c == '\n')
                                fputs("\\n", f);
                        else if (*c < 0x20 || *c == 0x7f || *c == '\'' || *c == '\\')
                                fprintf(f, "\\x%02x", *c);
                        else
                                fputc(*c, f);
                }
                fputs(strlen(*p) > 256 ? "…'" : "'", f);
        }
        if (n > shown)
                fprintf(f, " and %zu more", n - shown);
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(buf);
}

void audit_left_out(Task *t, unsigned step, char **paths, size_t n) {
        _cleanup_free_ char *names = NULL;
        char step_s[16];

        if (n == 0)
                return;
        names = paths_quoted(paths, n);
        if (!names) {
                log_oom();
                return;
        }
        snprintf(step_s, sizeof(step_s), "%u", step);
        journal_send("MESSAGE=Task %s step %u: %zu path%s left out of the checkpoint, kept in the workspace "
                     "(build output, binaries, what the tests wrote, and what git cannot record: FIFOs, sockets, "
                     "device nodes, names git refuses, paths over 4095 bytes or 128 directories deep): %s.",
                     t->id, step, n, n == 1 ? "" : "s", names,
                     "MESSAGE_ID=" AGENTFAB_MESSAGE_LEFT_OUT_STR,
                     "PRIORITY=%i", LOG_WARNING,
                     "AGENTFAB_EVENT=left-out",
                     "AGENTFAB_TASK=%s", t->id,
                     "AGENTFAB_STEP=%u", step,
                     "AGENTFAB_COUNT=%zu", n,
                     "AGENTFAB_PATHS=%s", names,
                     FLEET_FIELDS(t), NULL);
        audit_task_event(t, "left-out", UID_INVALID, "step", step_s, "paths", names, NULL, NULL);
}

void audit_context_refused(Task *t, unsigned step, const char *model, uint64_t sent_bytes, uint64_t budget_before,
                           uint64_t budget, unsigned attempt, const char *error) {
        char step_s[16], budget_s[32];

        snprintf(step_s, sizeof(step_s), "%u", step);
        snprintf(budget_s, sizeof(budget_s), "%" PRIu64, budget);
        journal_send("MESSAGE=Task %s step %u: model %s refused a request of %" PRIu64 " bytes as longer than its "
                     "context; the task's context budget is now %" PRIu64 " tokens (was %" PRIu64 "), and the step is "
                     "asked again, shorter.", t->id, step, model, sent_bytes, budget, budget_before,
                     "MESSAGE_ID=" AGENTFAB_MESSAGE_CONTEXT_REFUSED_STR,
                     "PRIORITY=%i", LOG_WARNING,
                     "AGENTFAB_EVENT=context-refused",
                     "AGENTFAB_TASK=%s", t->id,
                     "AGENTFAB_STEP=%u", step,
                     "AGENTFAB_MODEL=%s", model,
                     "AGENTFAB_REQUEST_BYTES=%" PRIu64, sent_bytes,
                     "AGENTFAB_CONTEXT_BUDGET_BEFORE=%" PRIu64, budget_before,
                     "AGENTFAB_CONTEXT_BUDGET=%" PRIu64, budget,
                     "AGENTFAB_ATTEMPT=%u", attempt,
                     "AGENTFAB_ERROR=%s", strempty(error),
                     FLEET_FIELDS(t), NULL);
        audit_task_event(t, "context-refused", UID_INVALID, "step", step_s, "budget", budget_s, "error", strempty(error));
}

void audit_context_truncated(Task *t, unsigned step, const char *model, uint64_t sent_bytes, uint64_t estimated_tokens,
                             uint64_t prompt_tokens, uint64_t profile_budget, uint64_t budget) {
        char step_s[16], budget_s[32], tokens_s[32];

        snprintf(step_s, sizeof(step_s), "%u", step);
        snprintf(budget_s, sizeof(budget_s), "%" PRIu64, budget);
        snprintf(tokens_s, sizeof(tokens_s), "%" PRIu64, prompt_tokens);
        journal_send("MESSAGE=Task %s step %u: the server of model %s took %" PRIu64 " prompt tokens of a request of "
                     "%" PRIu64 " bytes (about %" PRIu64 " tokens): it cut the prompt, and its context window is smaller "
                     "than the profile's ContextBudget=%" PRIu64 ". The task now fills %" PRIu64 " tokens.",
                     t->id, step, model, prompt_tokens, sent_bytes, estimated_tokens, profile_budget, budget,
                     "MESSAGE_ID=" AGENTFAB_MESSAGE_CONTEXT_TRUNCATED_STR,
                     "PRIORITY=%i", LOG_WARNING,
                     "AGENTFAB_EVENT=context-truncated",
                     "AGENTFAB_TASK=%s", t->id,
                     "AGENTFAB_STEP=%u", step,
                     "AGENTFAB_MODEL=%s", model,
                     "AGENTFAB_REQUEST_BYTES=%" PRIu64, sent_bytes,
                     "AGENTFAB_ESTIMATED_TOKENS=%" PRIu64, estimated_tokens,
                     "AGENTFAB_PROMPT_TOKENS=%" PRIu64, prompt_tokens,
                     "AGENTFAB_PROFILE_BUDGET=%" PRIu64, profile_budget,
                     "AGENTFAB_CONTEXT_BUDGET=%" PRIu64, budget,
                     FLEET_FIELDS(t), NULL);
        audit_task_event(t, "context-truncated", UID_INVALID, "step", step_s, "prompt_tokens", tokens_s, "budget", budget_s);
}

AuditTrace audit_trace_begin(Task *t, unsigned step) {
        TracePhase stale[TRACE_PHASES_MAX];

        if (!trace_enabled())
                return (AuditTrace) {};
        (void) trace_take(stale);       /* What ran before is not this step's. */
        return (AuditTrace) { .task = strdup(t->id), .step = step, .start = trace_now_usec() };
}

void audit_trace_end(AuditTrace *a) {
        TracePhase p[TRACE_PHASES_MAX];
        struct iovec iov[8 + TRACE_PHASES_MAX];
        char *fields[4 + TRACE_PHASES_MAX] = {};
        /* Declared before the first "goto finish": a cleanup variable whose
         * declaration a goto jumps over is freed uninitialized (clang
         * refuses to compile it). */
        _cleanup_free_ char *summary = NULL;
        size_t n = 0, nf = 0;

        if (!a->task)
                return;
        uint64_t total = trace_now_usec() - a->start;
        size_t np = trace_take(p);
        _cleanup_free_ char *text = trace_format(p, np);

        if (asprintf(&fields[nf++], "MESSAGE=Task %s step %u ended in %.3f ms: %s", a->task, a->step, (double) total / 1000.0,
                     strempty(text)) < 0 ||
            asprintf(&fields[nf++], "AGENTFAB_TASK=%s", a->task) < 0 ||
            asprintf(&fields[nf++], "AGENTFAB_STEP=%u", a->step) < 0 ||
            asprintf(&fields[nf++], "AGENTFAB_TRACE_TOTAL_USEC=%" PRIu64, total) < 0)
                goto finish;
        for (size_t i = 0; i < np; i++) {
                char name[TRACE_PHASE_NAME_MAX];
                for (size_t k = 0; k < sizeof(name); k++)
                        name[k] = (char) toupper((unsigned char) p[i].name[k]);
                if (asprintf(&fields[nf++], "AGENTFAB_TRACE_%s_USEC=%" PRIu64, name, p[i].usec) < 0)
                        goto finish;
        }
        if (asprintf(&summary, "AGENTFAB_TRACE=%s", strempty(text)) < 0)
                goto finish;

        iov[n++] = (struct iovec) { .iov_base = (char *) "MESSAGE_ID=" AGENTFAB_MESSAGE_TRACE_STR,
                                    .iov_len = strlen("MESSAGE_ID=" AGENTFAB_MESSAGE_TRACE_STR) };
        iov[n++] = (struct iovec) { .iov_base = (char *) "PRIORITY=7", .iov_len = strlen("PRIORITY=7") };
        iov[n++] = (struct iovec) { .iov_base = (char *) "AGENTFAB_EVENT=trace", .iov_len = strlen("AGENTFAB_EVENT=trace") };
        iov[n++] = (struct iovec) { .iov_base = summary, .iov_len = strlen(summary) };
        for (size_t i = 0; i < nf; i++)
                iov[n++] = (struct iovec) { .iov_base = fields[i], .iov_len = strlen(fields[i]) };
        (void) sd_journal_sendv(iov, (int) n);
finish:
        for (size_t i = 0; i < nf; i++)
                free(fields[i]);
        a->task = mfree_ptr(a->task);
}

void audit_breaker(Task *t, const char *breaker, const char *reason) {
        journal_send("MESSAGE=Task %s paused by breaker %s: %s", t->id, breaker, reason,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_BREAKER_STR,
                               "PRIORITY=%i", LOG_WARNING,
                               "AGENTFAB_EVENT=breaker",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_BREAKER=%s", breaker,
                               "AGENTFAB_REASON=%s", reason,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "breaker", UID_INVALID, "breaker", breaker, "reason", reason, NULL, NULL);
}

void audit_review_finding(Task *t, const char *kind, const char *severity, const char *file, unsigned line,
                          const char *rule, const char *message) {
        char line_str[12] = "";

        if (line > 0)
                (void) snprintf(line_str, sizeof line_str, "%u", line);
        (void) sd_journal_send("MESSAGE=Task %s review %s (%s)%s%s%s%s: %s", t->id, severity, kind,
                               file ? " in " : "", strempty(file), line > 0 ? ":" : "", line_str, message,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_REVIEW_FINDING_STR,
                               "PRIORITY=%i", streq(severity, "error") ? LOG_WARNING : LOG_INFO,
                               "AGENTFAB_EVENT=review-finding",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_FINDING_KIND=%s", kind,
                               "AGENTFAB_FINDING_SEVERITY=%s", severity,
                               "AGENTFAB_FILE=%s", strempty(file),
                               "AGENTFAB_LINE=%s", line_str,
                               "AGENTFAB_RULE=%s", strempty(rule),
                               "AGENTFAB_REASON=%s", message,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "review-finding", UID_INVALID, "severity", severity, "message", message, NULL, NULL);
}

void audit_review_verdict(Task *t, const char *model, const char *verdict, unsigned n_comments, const char *summary) {
        (void) sd_journal_send("MESSAGE=Task %s: the reviewer model %s says %s (%u comments): %s", t->id, model, verdict,
                               n_comments, summary,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_REVIEW_VERDICT_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=review-verdict",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_MODEL=%s", model,
                               "AGENTFAB_VERDICT=%s", verdict,
                               "AGENTFAB_COMMENTS=%u", n_comments,
                               "AGENTFAB_REASON=%s", summary,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "review-verdict", UID_INVALID, "model", model, "verdict", verdict, "summary", summary);
}

void audit_reviewed(Task *t, const char *commit, uint64_t duration_usec, size_t n_errors, size_t n_warnings, const char *breaker,
                    const char *reason) {
        (void) sd_journal_send("MESSAGE=Task %s reviewed at %s: %zu errors, %zu warnings%s%s%s%s", t->id, commit,
                               n_errors, n_warnings, breaker ? "; breaker " : "", strempty(breaker),
                               reason ? ": " : "", strempty(reason),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_REVIEWED_STR,
                               "PRIORITY=%i", breaker ? LOG_WARNING : LOG_NOTICE,
                               "AGENTFAB_EVENT=reviewed",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_COMMIT=%s", commit,
                               "AGENTFAB_ERRORS=%zu", n_errors,
                               "AGENTFAB_WARNINGS=%zu", n_warnings,
                               "AGENTFAB_DURATION_USEC=%" PRIu64, duration_usec,
                               "AGENTFAB_BREAKER=%s", strempty(breaker),
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "reviewed", UID_INVALID, "commit", commit, "breaker", breaker, NULL, NULL);
}

void audit_delivered(Task *t, const char *head, const char *diffstat) {
        journal_send("MESSAGE=Task %s delivered branch %s at %s.", t->id, t->branch, head,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DELIVERED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=delivered",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_BRANCH=%s", t->branch,
                               "AGENTFAB_COMMIT=%s", head,
                               "AGENTFAB_DIFFSTAT=%s", strempty(diffstat),
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "delivered", UID_INVALID, "branch", t->branch, "commit", head, NULL, NULL);
}

void audit_pushed(Task *t, const char *head) {
        journal_send("MESSAGE=Task %s pushed branch %s at %s to '%s'.", t->id, t->branch, head, t->spec.push_url,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_PUSHED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=pushed",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_BRANCH=%s", t->branch,
                               "AGENTFAB_COMMIT=%s", head,
                               "AGENTFAB_PUSH_URL=%s", t->spec.push_url,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "pushed", UID_INVALID, "branch", t->branch, "commit", head, "push_url", t->spec.push_url);
}

void audit_pull_request(Task *t, const char *url) {
        journal_send("MESSAGE=Task %s opened pull request %s on forge %s.", t->id, url, strempty(t->spec.forge),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_PULL_REQUEST_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=pull-request",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_URL=%s", url,
                               "AGENTFAB_FORGE=%s", strempty(t->spec.forge),
                               "AGENTFAB_FORGE_REPOSITORY=%s", strempty(t->spec.forge_repository),
                               "AGENTFAB_BRANCH=%s", t->branch,
                               "AGENTFAB_BASE_BRANCH=%s", t->spec.pull_request_base ?: TASK_PULL_REQUEST_BASE_DEFAULT,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "pull-request", UID_INVALID, "url", url, "forge", strempty(t->spec.forge), "branch", t->branch);
}

void audit_delivery_failed(Task *t, const char *what, const char *error) {
        journal_send("MESSAGE=Task %s: %s failed: %s", t->id, what, error,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DELIVERY_FAILED_STR,
                               "PRIORITY=%i", LOG_WARNING,
                               "AGENTFAB_EVENT=%s-failed", what,
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_BRANCH=%s", t->branch,
                               "AGENTFAB_PUSH_URL=%s", strempty(t->spec.push_url),
                               "AGENTFAB_FORGE=%s", strempty(t->spec.forge),
                               "AGENTFAB_ERROR=%s", error,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "delivery-failed", UID_INVALID, "what", what, "error", error, NULL, NULL);
}

void audit_client_dropped(const char *transport, const char *peer, uid_t uid, uint64_t queued, uint64_t max,
                          const char *limit) {
        journal_send("MESSAGE=Dropped %s client %s (uid %u): %" PRIu64 " bytes queued for it, past %s=%" PRIu64 ".",
                     transport, peer, (unsigned) uid, queued, limit, max,
                     "MESSAGE_ID=" AGENTFAB_MESSAGE_CLIENT_DROPPED_STR,
                     "PRIORITY=%i", LOG_WARNING,
                     "AGENTFAB_EVENT=client-dropped",
                     "AGENTFAB_TRANSPORT=%s", transport,
                     "AGENTFAB_PEER=%s", peer,
                     "AGENTFAB_UID=%u", (unsigned) uid,
                     "AGENTFAB_QUEUED_BYTES=%" PRIu64, queued,
                     "AGENTFAB_LIMIT_BYTES=%" PRIu64, max,
                     "AGENTFAB_LIMIT=%s", limit,
                     NULL);
}

void audit_daemon_started(unsigned n_tasks) {
        journal_send("MESSAGE=agentfabd started with %u task records.", n_tasks,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DAEMON_STARTED_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=started",
                               "AGENTFAB_TASKS=%u", n_tasks,
                               FLEET_HOST_FIELD(), NULL);
}

void audit_daemon_idle(void) {
        journal_send("MESSAGE=agentfabd idle, exiting.",
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DAEMON_IDLE_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=idle-exit",
                               FLEET_HOST_FIELD(), NULL);
}

void audit_allow_hosts(Task *t, uid_t caller, const char *hosts) {
        (void) sd_journal_send("MESSAGE=Task %s may now reach %s: allowed by uid %u.", t->id, hosts, (unsigned) caller,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_ALLOW_HOST_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=allow-host",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_HOSTS=%s", hosts,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "allow-host", caller, "hosts", hosts, NULL, NULL, NULL, NULL);
}

void audit_limits_raised(Task *t, uid_t caller, const char *limits) {
        journal_send("MESSAGE=Task %s goes on with %s: set by uid %u with its approval.", t->id, limits,
                               (unsigned) caller,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_LIMIT_RAISED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=limit",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_LIMITS=%s", limits,
                               FLEET_FIELDS(t), NULL);
        audit_task_event(t, "limit", caller, "limits", limits, NULL, NULL, NULL, NULL);
}
