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
#include "conversation-file.h"
#include "conversation.h"
#include "delivery.h"
#include "egress.h"
#include "environment-identity.h"
#include "exec-session.h"
#include "factory.h"
#include "freezer.h"
#include "fs-util.h"
#include "json-util.h"
#include "leave-out.h"
#include "ledger.h"
#include "log.h"
#include "model-client.h"
#include "model-profile.h"
#include "review-stage.h"
#include "secret-scan.h"
#include "step-commit.h"
#include "string-util.h"
#include "task-branch.h"
#include "task-job.h"
#include "task-save.h"
#include "task-store.h"
#include "time-util.h"
#include "tools.h"
#include "trace.h"
#include "worker.h"

uint64_t agent_now_usec(void) {
        return clock_now_usec(CLOCK_MONOTONIC);
}

static void agent_step_done_reset(AgentRun *run) {
        json_object_put(run->calls);
        run->calls = NULL;
        run->next_call = 0;
        run->call_id = mfree_ptr(run->call_id);
        run->call_command = mfree_ptr(run->call_command);
        run->check_id = mfree_ptr(run->check_id);
        run->check_text = mfree_ptr(run->check_text);
        strv_free(run->commands);
        run->commands = NULL;
        run->subject = mfree_ptr(run->subject);
        run->body = mfree_ptr(run->body);
        run->tests_ran = run->tests_passed = run->network = run->finish = false;
        run->good_calls = run->bad_calls = 0;
        run->reply_malformed = run->reply_cut = run->cut_untold = false;
        run->cut_tokens = 0;
        run->test_exit = 0;
        run->tests_n_passed = -1;
        run->tests_accepted = false;
        run->gave_up = mfree_ptr(run->gave_up);
        run->stuck = mfree_ptr(run->stuck);
        run->network_command = mfree_ptr(run->network_command);
        run->finish_summary = mfree_ptr(run->finish_summary);
}

static AgentRun *agent_run_free(AgentRun *run);
DEFINE_TRIVIAL_CLEANUP_FUNC(AgentRun *, agent_run_free);

static AgentRun *agent_run_free(AgentRun *run) {
        if (!run)
                return NULL;
        agent_sandbox_release(run);
        if (run->call)
                model_call_cancel(run->call);
        worker_detach(run->worker);
        review_stage_job_free(run->review);
        model_api_key_free(run->review_api_key);
        free(run->review_model_name);
        task_job_cancel(run->job);
        step_commit_free(run->saving);
        free(run->next_reason);
        step_commit_free(run->held);
        step_commit_free(run->publishing);
        review_stage_job_free(run->held_review);
        sd_event_source_disable_unref(run->defer);
        sd_event_source_disable_unref(run->dispose);
        agent_budget_done(run);
        sandbox_session_free(run->session);
        ledger_free(run->ledger);
        model_replay_free(run->replay);
        agent_step_done_reset(run);
        json_object_put(run->messages);
        agent_context_free(run->context);
        json_object_put(run->tools);
        json_object_put(run->plan_tools);
        strv_free(run->outline_files);
        free(run->outline);
        model_api_key_free(run->api_key);
        free(run->model_name);
        safe_close(run->log_fd);
        safe_close(run->dir_fd);
        free(run);
        return NULL;
}

static int on_dispose(sd_event_source *s, void *userdata) {
        (void) s;
        agent_run_free(userdata);
        return 0;
}

void agent_stop(Task *t) {
        AgentRun *run = t->run;

        if (!run)
                return;
        /* Its sandbox ends: so does everything of it at the egress proxy,
         * once what they used is counted. */
        agent_resources_sample(run);
        egress_unregister(run->factory->egress, t->id);
        t->run = NULL;
        run->task = NULL;
        /* A step's acknowledgement being written lands all the same (and
         * memory takes it); nobody is told here. */
        task_save_forget(t, run);
        /* Cancel now, so that no reply or output reaches a task that moved on;
         * free later, because we may be inside a callback of the call or the
         * session. Ending the session ends the sandbox and its scope. */
        if (run->call) {
                model_call_cancel(run->call);
                run->call = NULL;
        }
        /* A clone or a ledger job in flight finishes on its own data and
         * is thrown away (a job keeps the task's queue busy until then). */
        worker_detach(run->worker);
        run->worker = NULL;
        task_job_cancel(run->job);
        run->job = NULL;
        step_commit_close_ledger(t, &run->ledger);   /* its index written in a thread, not here */
        sd_event_source_set_enabled(run->defer, SD_EVENT_OFF);
        /* Waiting for approval, the sandbox is kept frozen for the next
         * agent; otherwise a frozen one is thawed, so that it sees its
         * connection close and ends. A sandbox with a network is not kept:
         * its registration at the egress proxy ended above, and an approval
         * may change what it may reach, so the next agent makes a new one,
         * registered with the allowlist as it is then. */
        const Environment *env = environments_find(&run->factory->environments,
                                                   t->spec.environment ?: ENVIRONMENT_DEFAULT);
        if (t->state == TASK_AWAITING_APPROVAL && (!env || env->network == NETWORK_OFF))
                freezer_park(t, &run->session);
        else
                freezer_thaw_for_end(t, run->session);
        if (sd_event_add_defer(run->factory->event, &run->dispose, on_dispose, run) < 0)
                agent_run_free(run);   /* out of memory: better now than never */
}

void agent_destroy(Task *t) {
        AgentRun *run = t->run;

        if (!run)
                return;
        egress_unregister(run->factory->egress, t->id);
        t->run = NULL;
        run->task = NULL;
        task_save_forget(t, run);
        agent_run_free(run);
}

/* Counts wall-clock time the agent was at work, for the budget; paused
 * time is not. */
void agent_count_clock(AgentRun *run) {
        uint64_t now = agent_now_usec();

        if (run->task && run->task->state == TASK_PAUSED) {
                run->clock_usec = 0;
                return;
        }
        if (run->clock_usec > 0 && now > run->clock_usec)
                run->task->progress.wall_usec += now - run->clock_usec;
        run->task->progress.resources.wall_usec = run->task->progress.wall_usec;
        run->clock_usec = now;
}

void agent_fail(AgentRun *run, const char *fmt, ...) {
        _cleanup_free_ char *reason = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&reason, fmt, ap) < 0)
                reason = NULL;
        va_end(ap);
        log_error("Task '%s' failed: %s", run->task->id, strempty(reason));
        agent_set_state(run, TASK_FAILED, reason ?: "out of memory");
}

uint64_t agent_wall_budget_usec(AgentRun *run) {
        Task *t = run->task;

        return (t->spec.limits[TASK_LIMIT_MAX_WALL_CLOCK_SEC] != TASK_LIMIT_UNSET ?
                t->spec.limits[TASK_LIMIT_MAX_WALL_CLOCK_SEC] * USEC_PER_SEC : run->factory->config.max_wall_clock_usec) +
                t->progress.extra_wall_usec;
}

uint64_t agent_command_timeout_usec(AgentRun *run) {
        Task *t = run->task;

        return t->spec.limits[TASK_LIMIT_COMMAND_TIMEOUT_SEC] != TASK_LIMIT_UNSET ?
                t->spec.limits[TASK_LIMIT_COMMAND_TIMEOUT_SEC] * USEC_PER_SEC : run->factory->config.command_timeout_usec;
}

/* ---- The step's end: checkpoint, acknowledgement, breakers. ---- */

static void agent_end_step_done(AgentRun *run, StepCommit *c);

/* The commit, the step's change lists and those since the base are made in
 * a worker thread (step-commit.h); agent_end_step_done() acknowledges them. */
void agent_end_step(AgentRun *run) {
        _cleanup_(step_commit_freep) StepCommit *c = NULL;
        struct passwd *pw;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        unsigned step = p->step + 1;
        int r;

        if (!run->subject && asprintf(&run->subject, "Step %u", step) < 0)
                return agent_fail(run, "Out of memory.");

        c = calloc(1, sizeof(StepCommit));
        if (!c)
                return agent_fail(run, "Out of memory.");
        pw = getpwuid(t->owner);
        c->task_id = strdup(t->id);
        c->subject = strdup(run->subject);
        if (p->kept_note) {
                if (asprintf(&c->body, "%s%s%s", strempty(run->body), run->body ? "\n\n" : "", p->kept_note) < 0)
                        c->body = NULL;
        } else
                c->body = run->body ? strdup(run->body) : NULL;
        c->model = strdup(run->model_name);
        c->test_command = t->spec.test_command ? strdup(t->spec.test_command) : NULL;
        c->user_name = pw ? strdup(pw->pw_name) : NULL;
        for (char **cmd = run->commands; cmd && *cmd; cmd++)
                if (strv_extend(&c->commands, *cmd) < 0)
                        return agent_fail(run, "Out of memory.");
        c->before = p->checkpoint ? strdup(p->checkpoint) : NULL;
        c->tests = run->tests_ran ? (run->tests_passed ? "pass" : "fail") : "not-run";
        c->step = step;
        c->test_exit = run->test_exit;
        c->uid = t->owner;
        c->environment = p->environment_identity ? strdup(p->environment_identity) : NULL;
        c->reference = t->spec.reference ? strdup(t->spec.reference) : NULL;
        c->requirement = task_requirement_version(t);
        c->changes = true;
        c->review = run->finish;
        c->review_seen = p->diff_shown ? strdup(p->diff_shown) : NULL;
        c->review_max = (size_t) run->factory->config.output_keep_bytes;
        c->trace_start = trace_enabled() ? trace_now_usec() : 0;
        if (agent_leave_out(run, &c->leave_out) < 0)
                return agent_fail(run, "Out of memory.");
        if (!c->task_id || !c->subject || ((run->body || p->kept_note) && !c->body) || !c->model ||
            (t->spec.test_command && !c->test_command) || (pw && !c->user_name) || (p->checkpoint && !c->before) ||
            (p->environment_identity && !c->environment) || (t->spec.reference && !c->reference) ||
            (p->diff_shown && !c->review_seen))
                return agent_fail(run, "Out of memory.");

        r = step_commit_start(run, TAKE_PTR(c), agent_end_step_done);
        if (r < 0)
                return agent_fail(run, "Cannot commit step %u: %s", step, strerror(-r));
}

static void agent_step_acked(AgentRun *run, StepCommit *c);

/* The state file holds the step. On a host of a fleet it counts once the
 * fleet's database holds it too (agent.h, agent_set_publisher()). */
static void agent_step_saved(AgentRun *run, StepCommit *c) {
        agent_publish_step(run, c, agent_step_acked);
}

/* The model's whole change, for it to review before its finish counts. */
static int agent_show_diff(AgentRun *run, const char *diff) {
        _cleanup_free_ char *text = NULL, *redacted = NULL;
        json_object *m;

        /* SECURITY: a secret in the change is only ever shown redacted,
         * to the model too (secret-scan.h). */
        redacted = secret_redact_text(NULL, diff);
        if (!redacted)
                return -ENOMEM;
        if (asprintf(&text, "Before your work is delivered, review your whole change once. This is its diff against "
                     "the base (what the task started from), as your branch holds it now:\n\n%s\n"
                     "Read it as a reviewer would: does it do what the goal and the acceptance criteria ask, with "
                     "nothing left over from debugging, no unrelated change, nothing missing? If it is right, call "
                     "finish again: it is accepted as long as nothing changed since this review. If not, change what "
                     "is wrong and call finish when done; a changed work is shown to you again.", redacted) < 0)
                return -ENOMEM;
        m = conversation_message_new("user", text);
        if (!m)
                return -ENOMEM;
        return conversation_add(run, m);
}

static void agent_end_step_done(AgentRun *run, StepCommit *c) {
        _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};
        _cleanup_free_ char *lines = NULL;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        unsigned step = c->step;
        size_t lines_size = 0;

        if (c->result < 0) {
                _unused_ _cleanup_(audit_trace_end) AuditTrace trace = audit_trace_begin(t, step);
                for (size_t i = 0; i < c->n_trace; i++)
                        trace_add(c->trace[i].name, c->trace[i].usec);
                return agent_fail(run, "Cannot commit step %u: %s", step, c->error ?: strerror(-c->result));
        }
        if (c->step_known)
                (void) free_and_strdup(&run->body, c->body);

        /* A reply that called no tool, one cut at its token limit and one
         * whose tool calls were all garbage count towards the breaker, so
         * that a model is not nudged without end; one that the tools could
         * use starts the count again. */
        ack.malformed = run->reply_malformed || (run->good_calls == 0 && run->bad_calls > 0) ? p->malformed + 1 :
                run->good_calls > 0 ? 0 : p->malformed;

        /* Before a finish is accepted the model reviews its whole change
         * once: the diff is this step's last message, and the finish waits
         * for the next step's. The tip it was shown is acknowledged with
         * the step, so that a restart neither shows it again nor skips it;
         * a finish on another tip shows that one. */
        if (run->finish && c->review_result < 0)
                log_warning_errno(c->review_result, "Task '%s': cannot read the diff for the model to review, "
                                  "accepting its finish without: %m", t->id);
        else if (run->finish && c->review_diff) {
                log_info("Task '%s': finish of step %u waits for the model's review of its diff.", t->id, step);
                if (agent_show_diff(run, c->review_diff) < 0)
                        return agent_fail(run, "Out of memory.");
                run->finish = false;
                ack.set_diff_shown = true;
                ack.diff_shown = strdup(c->review_tip);
                if (!ack.diff_shown)
                        return agent_fail(run, "Out of memory.");
        }

        /* The messages of the step join the conversation file first, then
         * the state file acknowledges them, the commit and the step in one
         * atomic write. A crash in between leaves the old state: the step
         * is redone, and the extra lines and the commit are cut off then.
         * Both writes happen in a worker thread (task-save.h): memory
         * takes the step once the file holds it, and only then is it
         * reported and do the breakers look at it. */
        size_t n = json_object_array_length(run->messages);
        if (conversation_unsaved_lines(run, &lines, &lines_size) < 0)
                return agent_fail(run, "Out of memory.");

        ack.step = step;
        ack.messages = (unsigned) n;
        ack.finished = p->finished || run->finish;
        if (c->committed && task_progress_ack_set_checkpoint(&ack, c->commit) < 0)
                return agent_fail(run, "Out of memory.");
        if (run->finish) {
                ack.set_summary = true;
                if (run->finish_summary && !(ack.summary = strdup(run->finish_summary)))
                        return agent_fail(run, "Out of memory.");
        }

        agent_save_progress_then(run, &ack, TAKE_PTR(lines), lines_size, c, agent_step_saved);
}

/* The model hears what its step's commit left out, so that nothing is
 * hidden from it either: the files are still there, and keep_file commits
 * one on purpose. */
static int agent_tell_left_out(AgentRun *run, unsigned step, char **paths, size_t n) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        FILE *f;

        if (n == 0)
                return 0;
        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "Left out of step %u's commit (still in the workspace, not on the branch): ", step);
        for (size_t i = 0; paths && paths[i]; i++)
                fprintf(f, "%s%s", i > 0 ? ", " : "", paths[i]);
        if (n > strv_length(paths))
                fprintf(f, " and %zu more", n - strv_length(paths));
        fprintf(f, ". Build output, binaries and what the test command writes are never part of the change. "
                "If one of them belongs to it (a generated file the project tracks, a fixture), call keep_file "
                "with its path and the reason.");
        if (fclose(f) != 0)
                return -ENOMEM;
        json_object *m = conversation_message_new("user", text);
        if (!m)
                return -ENOMEM;
        return conversation_add(run, m);
}

/* The step is acknowledged: reported, and its breakers checked. */
static void agent_step_acked(AgentRun *run, StepCommit *c) {
        Task *t = run->task;
        unsigned step = c->step;
        _cleanup_(audit_trace_end) AuditTrace trace = audit_trace_begin(t, step);
        int r;

        /* The trace counts from the step's end, with what the worker did
         * and the write of the state file. */
        if (trace.task && c->trace_start > 0)
                trace.start = c->trace_start;
        for (size_t i = 0; i < c->n_trace; i++)
                trace_add(c->trace[i].name, c->trace[i].usec);
        if (trace.task && c->save_usec > 0)
                trace_add("state_save", c->save_usec);

        audit_step(t, step, c->committed ? c->commit : NULL, run->subject, c->tests);
        audit_left_out(t, step, c->left_out, c->n_left_out);
        /* The commit said why its kept files are there. */
        if (c->committed)
                t->progress.kept_note = mfree_ptr(t->progress.kept_note);
        r = agent_tell_left_out(run, step, c->left_out, c->n_left_out);
        if (r < 0)
                return agent_fail(run, "Out of memory.");
        if (c->committed && c->checkpoints)
                task_branch_checkpoints_set(t, c->checkpoints);
        task_changed(t, TASK_CHANGE_PROGRESS);

        r = agent_check_breakers(run, c);
        if (r < 0)
                return agent_fail(run, "Cannot check the step's changes: %s", strerror(-r));
        agent_step_done_reset(run);
        if (r > 0)
                return;

        /* A finish goes through the review stage first; agent_advance()
         * delivers a reviewed one. */
        agent_schedule(run);
}

/* ---- The driver ---- */

static void on_begin_reset_done(AgentRun *run, int r) {
        if (r < 0)
                return agent_fail(run, "Cannot reset the workspace to its last checkpoint: %s", strerror(-r));
        run->at_checkpoint = true;
        agent_schedule(run);
}

static void on_conversation_loaded(AgentRun *run, int r) {
        if (r < 0)
                return agent_fail(run, "The conversation record is damaged: %s", strerror(-r));
        agent_schedule(run);
}

/* 0: the run may go on; 1: a reset or the conversation's reading runs in a
 * worker thread (agent_advance() runs again when it is done); negative: the
 * task failed. */
static int agent_begin_running(AgentRun *run) {
        Task *t = run->task;
        int r;

        if (!run->ledger && agent_open_workspace(run, false) < 0)
                return -EIO;   /* only opened here, never made: 0 or failed */

        if (!run->messages) {
                /* Resume from the acknowledged checkpoint: no trace of a
                 * half-done step, in the workspace or the branch. */
                if (!run->at_checkpoint) {
                        r = step_reset_start(run, t->progress.checkpoint, on_begin_reset_done);
                        if (r < 0) {
                                agent_fail(run, "Cannot reset the workspace to its last checkpoint: %s", strerror(-r));
                                return r;
                        }
                        return 1;
                }
                /* A rejected step is gone from the branch now. */
                if (!streq_ptr(t->progress.head, t->progress.checkpoint)) {
                        r = free_and_strdup(&t->progress.head, t->progress.checkpoint);
                        if (r < 0)
                                return agent_fail(run, "Out of memory."), r;
                        task_changed(t, TASK_CHANGE_PROGRESS);
                }
                r = conversation_load(run, on_conversation_loaded);
                if (r < 0) {
                        agent_fail(run, "Cannot read the conversation record: %s", strerror(-r));
                        return r;
                }
                return 1;
        }
        return 0;
}

static void agent_advance(AgentRun *run) {
        Task *t = run->task;
        int r;

        if (!t || run->phase != PHASE_IDLE)
                return;
        /* An export, a reset by hand or a job of a run stopped before is at
         * work on the ledger: agent_wake() comes when it is done. */
        if (task_job_busy(t))
                return;

        switch (t->state) {
        case TASK_QUEUED:
                return agent_set_state_then(run, TASK_PREPARING, NULL);
        case TASK_PREPARING:
                /* Before the first step the workspace may be made (again, if
                 * an earlier try was cut short); after it, only found. */
                r = agent_open_workspace(run, t->progress.step == 0);
                if (r != 0)
                        return;   /* failed, or continues when the workspace is made */
                if (agent_open_sandbox(run) != 0)
                        return;   /* failed, or continues when the sandbox is there */
                if (!t->progress.baseline_done && !isempty(t->spec.test_command)) {
                        run->call_kind = _TOOL_KIND_INVALID;
                        if (free_and_strdup(&run->call_command, t->spec.test_command) < 0)
                                return agent_fail(run, "Out of memory.");
                        run->phase = PHASE_BASELINE;
                        r = agent_run_command(run, "baseline", t->spec.test_command, 0);
                        if (r < 0) {
                                run->phase = PHASE_IDLE;
                                return agent_fail(run, "Cannot run the tests in the sandbox: %s", strerror(-r));
                        }
                        return;   /* continues in agent_on_command_done() */
                }
                t->progress.baseline_done = true;
                return agent_set_state_then(run, TASK_RUNNING, NULL);
        case TASK_RUNNING:
                if (agent_begin_running(run) != 0)
                        return;
                if (t->progress.finished) {
                        /* The review stage first, while the task still runs (a
                         * breaker may stop it for a person); it schedules us
                         * again when it passes. */
                        if (!t->progress.reviewed)
                                return review_stage_start(run);
                        return agent_set_state_then(run, TASK_DELIVERING, NULL);
                }
                if (agent_open_sandbox(run) != 0)
                        return;   /* failed, or continues when the sandbox is there */
                r = agent_begin_conversation(run);
                if (r == 0)
                        r = agent_start_plan_steps(run);
                if (r < 0)
                        return agent_fail(run, "Cannot record the conversation: %s", strerror(-r));
                if (r > 0)
                        return;   /* being written: then we come back here */
                return agent_call_model(run);

        case TASK_DELIVERING:
                if (agent_begin_running(run) != 0)
                        return;
                return delivery_start(run);

        case TASK_PAUSED:
                return;   /* task_unpaused() schedules us again */

        default:
                agent_stop(t);
        }
}

static int on_defer(sd_event_source *s, void *userdata) {
        (void) s;
        agent_advance(userdata);
        return 0;
}

void agent_schedule(AgentRun *run) {
        if (run->task)
                (void) sd_event_source_set_enabled(run->defer, SD_EVENT_ONESHOT);
}

int agent_job_start(AgentRun *run, const char *what, task_job_run_t fn, task_job_done_t done, task_job_free_t free_job,
                    void *job, Ledger **ledger, AgentPhase phase) {
        int r;

        if (ledger)
                *ledger = TAKE_PTR(run->ledger);
        r = task_job_enqueue(run->task, what, fn, done, free_job, job, run, &run->job);
        if (r < 0) {
                if (ledger)
                        run->ledger = TAKE_PTR(*ledger);
                free_job(job);
                return r;
        }
        run->phase = phase;
        return 0;
}

bool agent_job_ended(AgentRun *run, Ledger **ledger) {
        run->job = NULL;
        run->phase = PHASE_IDLE;
        if (ledger)
                run->ledger = TAKE_PTR(*ledger);   /* back from the job */
        return run->task;
}

void agent_wake(Task *t) {
        if (t->run)
                agent_schedule(t->run);
}

/* Recorded exchanges instead of the endpoint: those of the task to replay
 * (spec.replay), or the transcript of a replay profile. The cursor is the
 * task's own, from where it got to: every exchange it completed is in its
 * own transcript, so after a restart the cursor skips as many as that
 * holds. */
static int agent_open_replay(AgentRun *run, const char *path) {
        _cleanup_free_ char *own = NULL;
        size_t size = 0, done = 0;
        int r;

        r = model_replay_open(path, &run->replay);
        if (r < 0)
                return r;

        r = read_file_at(run->dir_fd, TASK_TRANSCRIPT_FILE, 256u * 1024u * 1024u, &own, &size);
        if (r < 0 && r != -ENOENT)
                return r;
        for (size_t i = 0; own && i < size; i++)
                if (own[i] == '\n')
                        done++;
        for (size_t i = 0; i < done; i++) {
                _cleanup_(model_reply_freep) ModelReply *skip = NULL;
                r = model_replay_next(run->replay, &skip, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int agent_start(Task *t) {
        _cleanup_(agent_run_freep) AgentRun *run = NULL;
        Factory *f = t->factory;
        int r;

        if (t->run || t->broken)
                return 0;
        if (!IN_SET(t->state, TASK_QUEUED, TASK_PREPARING, TASK_RUNNING, TASK_DELIVERING))
                return 0;

        run = calloc(1, sizeof(AgentRun));
        if (!run)
                return -ENOMEM;
        run->trace_start_usec = TRACE_BEGIN();
        run->trace_sandbox = t->sandbox ? (sandbox_session_is_frozen(t->sandbox) ? "frozen, kept" : "taken up again") : NULL;
        run->factory = f;
        run->dir_fd = run->log_fd = -EBADF;
        run->tests_n_passed = -1;
        run->clock_usec = agent_now_usec();

        run->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (run->dir_fd < 0)
                return log_error_errno(errno, "Failed to open directory of task '%s': %m", t->id);
        run->log_fd = openat(run->dir_fd, TASK_LOG_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (run->log_fd < 0)
                return log_error_errno(errno, "Failed to open output log of task '%s': %m", t->id);

        run->profile = model_profiles_find(&f->profiles, t->spec.model);
        run->task = t;
        if (t->spec.replay) {
                _cleanup_free_ char *path = NULL;
                if (asprintf(&path, "%s/tasks/%s/" TASK_TRANSCRIPT_FILE, f->state_dir, t->spec.replay) < 0)
                        return -ENOMEM;
                r = agent_open_replay(run, path);
                if (r < 0) {
                        t->run = TAKE_PTR(run);
                        agent_fail(t->run, "Cannot replay task '%s': %s", t->spec.replay, strerror(-r));
                        return 0;
                }
        } else if (run->profile && run->profile->kind == MODEL_KIND_REPLAY) {
                r = agent_open_replay(run, strempty(run->profile->replay_path));
                if (r < 0) {
                        t->run = TAKE_PTR(run);
                        agent_fail(t->run, "Cannot open the transcript '%s' of replay profile '%s': %s",
                                   strempty(t->run->profile->replay_path), t->run->profile->name, strerror(-r));
                        return 0;
                }
        }
        if (!run->profile) {
                t->run = TAKE_PTR(run);
                agent_fail(t->run, "There is no model profile '%s'.", strempty(t->spec.model));
                return 0;
        }
        if (t->spec.replay ? asprintf(&run->model_name, "replay/%s", t->spec.replay) < 0 :
            asprintf(&run->model_name, "%s/%s", run->profile->name,
                     run->profile->kind == MODEL_KIND_REPLAY ? "replay" : strempty(run->profile->model)) < 0)
                return -ENOMEM;
        r = model_profile_read_api_key(run->profile, &run->api_key);
        if (r < 0) {
                t->run = TAKE_PTR(run);
                agent_fail(t->run, "Cannot read the API key of model profile '%s': %s", t->run->profile->name, strerror(-r));
                return 0;
        }
        run->tools = tools_schema();
        if (!run->tools)
                return -ENOMEM;
        run->plan_tools = agent_plan_tools(run->tools);
        if (!run->plan_tools)
                return -ENOMEM;

        r = sd_event_add_defer(f->event, &run->defer, on_defer, run);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(run->defer, "agent");

        t->run = TAKE_PTR(run);
        return 0;
}

/* Who let what through, for the delivered tip's trailers: git log alone
 * then says that a person approved the step, not only the journal. */
static int approvals_add(TaskProgress *p, const char *breaker, const char *limits, uid_t uid) {
        _cleanup_free_ char *entry = NULL;
        const struct passwd *pw;

        if (strv_length(p->approvals) >= TASK_APPROVALS_MAX)
                return 0;
        pw = getpwuid(uid);
        if (asprintf(&entry, "step %u, breaker %s%s%s, by %s (uid %u)", p->step, breaker ?: "none",
                     limits ? ", limits " : "", strempty(limits),
                     pw && pw->pw_name ? pw->pw_name : "unknown", (unsigned) uid) < 0)
                return -ENOMEM;
        /* One line of bounded text, whatever the user database holds. */
        for (char *c = entry; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 127)
                        *c = '?';
        if (strlen(entry) > TASK_APPROVAL_TEXT_MAX)
                entry[TASK_APPROVAL_TEXT_MAX] = '\0';
        return strv_extend(&p->approvals, entry);
}

int agent_decide(Task *t, bool approve, const char *comment, uid_t uid, const char *limits, char **ret_reason) {
        _cleanup_free_ char *text = NULL, *breaker = NULL;
        TaskProgress *p = &t->progress;
        const Config *c = &t->factory->config;
        Breaker b;
        int r;

        breaker = p->breaker ? strdup(p->breaker) : NULL;
        b = breaker ? breaker_from_string(breaker) : _BREAKER_INVALID;

        /* The review stage's breakers: approval passes the review, rejection
         * sends its findings back to the model (review-stage.c). */
        r = review_stage_decide(t, approve, &text);
        if (r < 0)
                return r;

        if (approve) {
                /* Let it go on, with room for what tripped. */
                switch (b) {
                case BREAKER_TESTS_FAILING:   p->test_failures = 0; break;
                case BREAKER_MALFORMED_OUTPUT: p->malformed = 0; break;
                case BREAKER_STUCK:           p->n_recent_calls = 0; break;
                case BREAKER_TESTS_REGRESSED: p->baseline_passed = -1; break;
                case BREAKER_FILES_CHANGED:   p->extra_files += c->max_files_changed; break;
                case BREAKER_BINARY_FILE:
                        /* The step that committed it stands; it stays kept. */
                        if (p->keep_pending) {
                                r = task_progress_add_kept(p, p->keep_pending);
                                if (r < 0 && r != -E2BIG)
                                        return r;
                        }
                        p->keep_pending = mfree_ptr(p->keep_pending);
                        p->keep_reason = mfree_ptr(p->keep_reason);
                        break;
                case BREAKER_LINES_CHANGED:   p->extra_lines += c->max_lines_changed; break;
                case BREAKER_BUDGET:
                        p->extra_steps += t->spec.limits[TASK_LIMIT_MAX_STEPS] != TASK_LIMIT_UNSET ?
                                t->spec.limits[TASK_LIMIT_MAX_STEPS] : c->max_steps;
                        p->extra_tokens += t->spec.limits[TASK_LIMIT_MAX_TOKENS] != TASK_LIMIT_UNSET ?
                                t->spec.limits[TASK_LIMIT_MAX_TOKENS] : c->max_tokens;
                        p->extra_commands += t->spec.limits[TASK_LIMIT_MAX_COMMANDS] != TASK_LIMIT_UNSET ?
                                t->spec.limits[TASK_LIMIT_MAX_COMMANDS] : c->max_commands;
                        p->extra_wall_usec += t->spec.limits[TASK_LIMIT_MAX_WALL_CLOCK_SEC] != TASK_LIMIT_UNSET ?
                                t->spec.limits[TASK_LIMIT_MAX_WALL_CLOCK_SEC] * USEC_PER_SEC : c->max_wall_clock_usec;
                        agent_budget_extend(t);
                        /* Told again when 80 % of the larger budget is spent. */
                        p->budget_warned = 0;
                        break;
                default: break;
                }
                if (!text && b == BREAKER_GAVE_UP &&
                    asprintf(&text, "A person (uid %u) read why you gave up and lets you go on%s%s. The goal and the "
                             "acceptance criteria may have been amended: look at them again. Call finish when the "
                             "task is done; give up again only if it still cannot be, saying what is new.",
                             (unsigned) uid, isempty(comment) ? "" : ": ", strempty(comment)) < 0)
                        return -ENOMEM;
                if (!text && asprintf(&text, "A human reviewer (uid %u) approved what stopped you (%s)%s%s. Continue.",
                             (unsigned) uid, strempty(breaker), isempty(comment) ? "" : ": ", strempty(comment)) < 0)
                        return -ENOMEM;
                r = approvals_add(p, breaker, limits, uid);
                if (r < 0)
                        return r;
        } else {
                p->rejections++;
                if (p->rejections > c->max_rejections) {
                        if (asprintf(ret_reason, "rejected %u times (breaker %s)", p->rejections, strempty(breaker)) < 0)
                                return -ENOMEM;
                        return 1;
                }
                /* Undo the step that tripped the breaker: the next run resets
                 * the workspace and the branch to this checkpoint. */
                r = free_and_strdup(&p->checkpoint, p->breaker_commit);
                if (r < 0)
                        return r;
                if (b == BREAKER_TESTS_FAILING)
                        p->test_failures = 0;
                if (b == BREAKER_MALFORMED_OUTPUT)
                        p->malformed = 0;
                if (b == BREAKER_STUCK)
                        p->n_recent_calls = 0;
                if (b == BREAKER_BINARY_FILE) {
                        p->keep_pending = mfree_ptr(p->keep_pending);
                        p->keep_reason = mfree_ptr(p->keep_reason);
                }
                if (text) {
                        /* The work stays (breaker_commit is the checkpoint the review saw). */
                        _cleanup_free_ char *findings = TAKE_PTR(text);
                        if (asprintf(&text, "A human reviewer (uid %u) rejected your finished work (%s)%s%s.\n\n%s",
                                     (unsigned) uid, strempty(breaker), isempty(comment) ? "" : ". Their comment: ",
                                     strempty(comment), findings) < 0)
                                return -ENOMEM;
                } else if (asprintf(&text, "A human reviewer (uid %u) rejected your last step (%s: %s)%s%s. Its changes were "
                             "undone. Choose another way.", (unsigned) uid, strempty(breaker), strempty(t->reason),
                             isempty(comment) ? "" : ". Their comment: ", strempty(comment)) < 0)
                        return -ENOMEM;
        }

        p->breaker = mfree_ptr(p->breaker);
        p->breaker_commit = mfree_ptr(p->breaker_commit);

        /* The decision reaches the model as a message of its conversation. */
        return conversation_append_user(t, text);
}

void agent_prepare_resume(Task *t) {
        /* Back to queued: it is prepared again (workspace and sandbox kept or
         * made) and goes on from its acknowledged checkpoint. */
        t->progress.breaker = mfree_ptr(t->progress.breaker);
        t->progress.breaker_commit = mfree_ptr(t->progress.breaker_commit);
        t->progress.malformed = 0;
        /* Whatever it does from here on is pushed again at delivery (a
         * fast-forward of what was pushed, if anything was); a pull request
         * already opened follows the branch by itself. */
        t->progress.pushed = false;
        /* And its evidence is made again, for the tree it delivers then. */
        t->progress.verified = false;
}

