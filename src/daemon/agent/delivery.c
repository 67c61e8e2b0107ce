/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "audit.h"
#include "breakers.h"
#include "delivery.h"
#include "forge.h"
#include "fs-util.h"
#include "json-util.h"
#include "leave-out.h"
#include "log.h"
#include "review-stage.h"
#include "step-commit.h"
#include "string-util.h"
#include "summary.h"
#include "task-job.h"
#include "task-store.h"
#include "test-judge.h"
#include "time-util.h"

#define DELIVERY_REASON_MAX 1024u

/* A task's Reason from what a remote or a forge said: one line, bounded
 * (the state file takes at most 4096 bytes of it). NULL when out of memory. */
static char *delivery_reason(const char *fmt, ...) _printf_(1, 2);
static char *delivery_reason(const char *fmt, ...) {
        char *s = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        if (!s)
                return NULL;
        if (strlen(s) > DELIVERY_REASON_MAX)
                s[DELIVERY_REASON_MAX] = '\0';
        for (char *c = s; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 127)
                        *c = ' ';
        utf8_sanitize(s, strlen(s));
        return s;
}

/* Delivery beyond the factory, when the spec asks for it: pushes the
 * branch to spec.push_url, then opens a pull request on spec.forge with
 * the summary as its body and the goal's first line as its title.
 *
 * Both run in the task's job queue, in a worker thread (libgit2 and
 * libcurl's easy interface block); the forge call has bounded timeouts,
 * the push those of the transport.
 *
 * A failure here does not fail the task: the work is done, checked and
 * delivered in the factory (the branch, its export, "agentfabctl fetch"),
 * and failing it would offer only Resume(), which would redo nothing but
 * this. So the task succeeds, and the returned text (NULL: all went well
 * or nothing was asked) says what failed; it becomes the task's Reason,
 * and the journal has it too (audit_delivery_failed()). What succeeded is
 * recorded in the progress before the next part is tried, so that a
 * restart in the middle neither pushes again nor opens a second pull
 * request. */
/* The push and the pull request talk to other hosts, which may be slow or
 * hang (libgit2 1.5 has no timeout for a push): they run in a worker
 * thread. The job borrows the run's ledger for its life and owns copies of
 * everything else; if the run is stopped meanwhile, the job frees them. */
typedef struct DeliverJob {
        Ledger *ledger;
        char *push_url;
        char *token;               /* wiped */
        bool push;
        bool pull_request;
        ForgeKind kind;
        char *api, *owner, *repo, *head, *base, *title, *forge_name;
        int dir_fd;                /* the task's directory, for its summary: the pull request's body */
        char *task_id;
        char head_commit[41];
        char *diffstat;            /* for the delivered entry, computed once */
        /* Results. */
        int push_result;
        char *push_error;
        int pr_result;
        char *pr_error;
        char *pr_url;
} DeliverJob;

static void deliver_job_free(void *p) {
        DeliverJob *j = p;

        if (!j)
                return;
        ledger_free(j->ledger);
        forge_token_free(j->token);
        free(j->push_url);
        free(j->api);
        free(j->owner);
        free(j->repo);
        free(j->head);
        free(j->base);
        free(j->title);
        safe_close(j->dir_fd);
        free(j->task_id);
        free(j->forge_name);
        free(j->diffstat);
        free(j->push_error);
        free(j->pr_error);
        free(j->pr_url);
        free(j);
}

static int deliver_job_run(void *p) {
        DeliverJob *j = p;

        if (j->push) {
                /* The token only goes with an https push, which
                 * config_check_delivery() has checked is on the forge's host. */
                j->push_result = ledger_push(j->ledger, j->push_url,
                                             strneq(j->push_url, "https://", 8) ? j->token : NULL, &j->push_error);
                if (j->push_result < 0)
                        return 0;
        }
        if (j->pull_request) {
                _cleanup_free_ char *body = NULL;
                int r = summary_pull_request_body(j->dir_fd, j->task_id, &body);
                if (r < 0) {
                        j->pr_result = r;
                        if (asprintf(&j->pr_error, "cannot read the task's summary for its body: %s", strerror(-r)) < 0)
                                j->pr_error = NULL;
                        return 0;
                }
                ForgeRequest req = {
                        .kind = j->kind,
                        .api = j->api,
                        .token = j->token,
                        .owner = j->owner,
                        .repo = j->repo,
                        .head = j->head,
                        .base = j->base,
                        .title = j->title,
                        .body = body,
                };
                j->pr_result = forge_open_pull_request(&req, &j->pr_url, &j->pr_error);
        }
        return 0;
}

static void agent_finish_delivery(AgentRun *run, const char *head, const char *diffstat, const char *problem) {
        audit_delivered(run->task, head, diffstat);
        agent_set_state_then(run, TASK_SUCCEEDED, problem);
}

static void on_deliver_done(Task *task, int result, void *p, void *userdata) {
        _cleanup_free_ char *reason = NULL;
        DeliverJob *j = p;
        AgentRun *run = userdata;
        Task *t = run->task;

        (void) task, (void) result;
        if (!agent_job_ended(run, &j->ledger))
                return;

        if (j->push) {
                if (j->push_result < 0) {
                        audit_delivery_failed(t, "push", j->push_error ?: strerror(-j->push_result));
                        reason = delivery_reason("Delivered here only: the push to '%s' failed: %s", j->push_url,
                                                 j->push_error ?: strerror(-j->push_result));
                        return agent_finish_delivery(run, j->head_commit, j->diffstat, reason);
                }
                /* Written with the final state, in one write: a crash
                 * before it pushes again (the same commit) on resume. */
                t->progress.pushed = true;
                audit_pushed(t, j->head_commit);
        }
        if (j->pull_request) {
                if (j->pr_result < 0) {
                        audit_delivery_failed(t, "pull-request", j->pr_error ?: strerror(-j->pr_result));
                        reason = delivery_reason("Pushed to '%s', but the pull request on forge '%s' failed: %s",
                                                 j->push_url, j->forge_name, j->pr_error ?: strerror(-j->pr_result));
                        return agent_finish_delivery(run, j->head_commit, j->diffstat, reason);
                }
                t->progress.pull_request = TAKE_PTR(j->pr_url);
                audit_pull_request(t, t->progress.pull_request);
        }
        agent_finish_delivery(run, j->head_commit, j->diffstat, NULL);
}

/* Starts the push and the pull request the task asks for: 1 if a job runs
 * (it finishes the delivery), 0 if there is nothing to do or it could not
 * start, with *ret_problem saying why for the task's Reason. */
static int agent_deliver_forge(AgentRun *run, const char *head, const char *diffstat, char **ret_problem) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(forge_token_freep) char *token = NULL;
        _cleanup_free_ char *message = NULL;
        Task *t = run->task;
        const ForgeConfig *f;
        DeliverJob *j;
        int r;

        *ret_problem = NULL;
        if (!t->spec.push_url)
                return 0;

        /* The configuration may have changed since the task was submitted. */
        r = config_check_delivery(&run->factory->config, &t->spec, &error);
        if (r < 0) {
                audit_delivery_failed(t, "push", error.message ?: strerror(-r));
                *ret_problem = delivery_reason("Delivered here only, not pushed: %s", error.message ?: strerror(-r));
                return 0;
        }
        f = config_find_forge(&run->factory->config, t->spec.forge);
        if (f) {
                r = config_forge_read_token(f, &token);
                if (r < 0) {
                        message = delivery_reason("cannot read credential '%s' of forge '%s': %s",
                                                  f->token_credential, f->name, strerror(-r));
                        audit_delivery_failed(t, "push", strempty(message));
                        *ret_problem = delivery_reason("Delivered here only, not pushed: %s", strempty(message));
                        return 0;
                }
        }

        j = calloc(1, sizeof(DeliverJob));
        if (!j)
                return -ENOMEM;
        j->dir_fd = -EBADF;
        j->push = !t->progress.pushed;
        j->pull_request = f && !t->progress.pull_request;
        j->push_url = strdup(t->spec.push_url);
        j->token = TAKE_PTR(token);
        snprintf(j->head_commit, sizeof(j->head_commit), "%s", head);
        j->diffstat = diffstat ? strdup(diffstat) : NULL;
        r = j->push_url && (!diffstat || j->diffstat) ? 0 : -ENOMEM;
        if (r >= 0 && j->pull_request) {
                /* The goal's first line that says something. */
                const char *goal = t->spec.goal + strspn(t->spec.goal, " \t\n");

                j->kind = f->kind;
                j->api = strdup(f->api);
                j->forge_name = strdup(f->name);
                j->head = strdup(t->branch);
                j->base = strdup(t->spec.pull_request_base ?: TASK_PULL_REQUEST_BASE_DEFAULT);
                j->title = strshorten_line(goal, 120);
                if (!j->api || !j->forge_name || !j->head || !j->base || !j->title)
                        r = -ENOMEM;
                else
                        utf8_sanitize(j->title, strlen(j->title));
                if (r >= 0)
                        r = forge_repository_split(t->spec.forge_repository, &j->owner, &j->repo);
                if (r >= 0) {
                        /* The summary is read in the job: it may be megabytes. */
                        j->task_id = strdup(t->id);
                        j->dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3);
                        if (!j->task_id)
                                r = -ENOMEM;
                        else if (j->dir_fd < 0)
                                r = -errno;
                }
                if (r < 0 && r != -ENOMEM) {
                        audit_delivery_failed(t, "pull-request", strerror(-r));
                        j->pull_request = false;
                        *ret_problem = delivery_reason("Pushed to '%s', but no pull request: %s", t->spec.push_url,
                                                       strerror(-r));
                        r = 0;
                }
        }
        if (r < 0 || (!j->push && !j->pull_request)) {
                deliver_job_free(j);
                return r;
        }

        r = agent_job_start(run, "delivery", deliver_job_run, on_deliver_done, deliver_job_free, j, &j->ledger,
                            PHASE_DELIVER);
        return r < 0 ? r : 1;
}

int delivery_extra_trailers(AgentRun *run, char ***ret) {
        _cleanup_strv_free_ char **trailers = NULL;
        int r;

        /* The review stage's result ("Agentfab-Review: N errors, M
         * warnings", and "Agentfab-Reviewed-By: PROFILE/MODEL" when a
         * reviewer model approved): review-stage.c. */
        r = review_stage_trailers(run->task, &trailers);
        if (r < 0)
                return r;
        /* And every step a person let through after a breaker. */
        for (char **a = run->task->progress.approvals; a && *a; a++) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "Agentfab-Approved: %s", *a) < 0 || strv_extend(&trailers, line) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(trailers);
        return 0;
}

/* The delivery's own commits and reads of the branch run in the task's job
 * queue like a step's end (step-commit.h): on a big repository they take
 * long, and the event loop serves everyone else meanwhile. c carries
 * copies: the run may be stopped while the job runs. step 0: no
 * Agentfab-Step: trailer (the evidence commit is not a step). */
static StepCommit *delivery_step_commit(AgentRun *run, unsigned step, const char *subject) {
        _cleanup_(step_commit_freep) StepCommit *c = calloc(1, sizeof(StepCommit));
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        struct passwd *pw = getpwuid(t->owner);

        if (!c)
                return NULL;
        c->task_id = strdup(t->id);
        c->subject = strdup(subject);
        c->model = run->model_name ? strdup(run->model_name) : NULL;
        c->test_command = t->spec.test_command ? strdup(t->spec.test_command) : NULL;
        c->user_name = pw ? strdup(pw->pw_name) : NULL;
        c->environment = p->environment_identity ? strdup(p->environment_identity) : NULL;
        c->reference = t->spec.reference ? strdup(t->spec.reference) : NULL;
        c->before = p->checkpoint ? strdup(p->checkpoint) : NULL;
        c->requirement = task_requirement_version(t);
        c->step = step;
        c->uid = t->owner;
        if (agent_leave_out(run, &c->leave_out) < 0)
                return NULL;
        c->tests = "not-run";
        if (!c->task_id || !c->subject || (run->model_name && !c->model) || (t->spec.test_command && !c->test_command) ||
            (pw && !c->user_name) || (p->environment_identity && !c->environment) ||
            (t->spec.reference && !c->reference) || (p->checkpoint && !c->before))
                return NULL;
        return TAKE_PTR(c);
}

/* The summary, made and written in the task's job queue (it reads the
 * task's events and review records, and an atomic write is two fsyncs:
 * not for the loop), with what the delivery goes on with after. */
typedef struct SummaryJob {
        SummaryInput *input;
        char *head;
        char *diffstat;
} SummaryJob;

static void summary_job_free(void *p) {
        SummaryJob *j = p;

        if (!j)
                return;
        summary_input_free(j->input);
        free(j->head);
        free(j->diffstat);
        free(j);
}

static int summary_job_run(void *p) {
        SummaryJob *j = p;

        return summary_write(j->input);
}

/* The summary is written: the push and the pull request if the spec asks
 * for them, then the last word. */
static void on_summary_written(Task *task, int r, void *p, void *userdata) {
        _cleanup_free_ char *problem = NULL;
        SummaryJob *j = p;
        AgentRun *run = userdata;

        (void) task;
        if (!agent_job_ended(run, NULL))
                return;
        if (r < 0)
                return agent_fail(run, "Cannot write the summary: %s", strerror(-r));

        r = agent_deliver_forge(run, j->head, j->diffstat, &problem);
        if (r > 0)
                return;   /* on_deliver_done() finishes */
        if (r < 0 && !problem)
                problem = delivery_reason("Delivered here only: the push could not start: %s", strerror(-r));
        agent_finish_delivery(run, j->head, j->diffstat, problem);
}

/* The local part of the delivery, once the tip carries its evidence: the
 * summary, then the push and the pull request if the spec asks for them.
 * c holds what the job read of the branch (head, diffstat, checkpoints). */
static void delivery_finish(AgentRun *run, StepCommit *c) {
        SummaryJob *j;
        Task *t = run->task;
        int r;

        if (c->head_result < 0)
                return agent_fail(run, "Cannot read the branch: %s", strerror(-c->head_result));
        (void) free_and_strdup(&t->progress.head, c->head);

        j = calloc(1, sizeof(SummaryJob));
        if (!j)
                return agent_fail(run, "Out of memory.");
        *j = (SummaryJob) {
                .head = strdup(c->head),
                .diffstat = c->diffstat ? strdup(c->diffstat) : NULL,
        };
        r = !j->head || (c->diffstat && !j->diffstat) ? -ENOMEM :
                summary_input_new(run, c->diffstat, c->checkpoints, &j->input);
        if (r < 0) {
                summary_job_free(j);
                return agent_fail(run, "Cannot write the summary: %s", strerror(-r));
        }
        r = agent_job_start(run, "summary", summary_job_run, on_summary_written, summary_job_free, j, NULL, PHASE_DELIVER);
        if (r < 0)
                return agent_fail(run, "Cannot write the summary: %s", strerror(-r));
}

static void on_delivery_read_done(AgentRun *run, StepCommit *c) {
        if (c->result < 0)
                return agent_fail(run, "Cannot read the branch: %s", strerror(-c->result));
        delivery_finish(run, c);
}

/* The tip is delivered as it is: only what the summary needs is read. */
static void delivery_read(AgentRun *run) {
        StepCommit *c = delivery_step_commit(run, 0, "Delivery");
        int r;

        if (!c)
                return agent_fail(run, "Out of memory.");
        c->no_commit = true;
        c->delivery = true;
        r = step_commit_start(run, c, on_delivery_read_done);
        if (r < 0)
                return agent_fail(run, "Cannot read the branch: %s", strerror(-r));
}

static void on_delivery_record_saved(AgentRun *run, StepCommit *c) {
        audit_verified(run->task, c->commit, c->tests, c->test_exit, c->have_test_count ? (int) c->test_count : -1);
        task_changed(run->task, TASK_CHANGE_PROGRESS);
        delivery_finish(run, c);
}

static void on_delivery_record_done(AgentRun *run, StepCommit *c) {
        _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};

        if (c->result < 0)
                return agent_fail(run, "Cannot record the verification on the branch: %s",
                                  c->error ?: strerror(-c->result));

        /* Acknowledged like a step: a crash before this save resets the
         * branch to the checkpoint, and the verification runs again. */
        agent_progress_ack_init(run, &ack);
        ack.set_verified = ack.verified = true;
        if (task_progress_ack_set_checkpoint(&ack, c->commit) < 0)
                return agent_fail(run, "Out of memory.");
        agent_save_progress_then(run, &ack, NULL, 0, c, on_delivery_record_saved);
}

static void on_verified_saved(AgentRun *run, StepCommit *c) {
        delivery_read(run);
}

/* Records the evidence on the branch: a commit with the tip's own tree and
 * the trailers of what verified it, made after the verification ran, so
 * that the delivered tip says what verified exactly its tree. */
static void delivery_record(AgentRun *run, const TestRun *tr, int status, bool ran, const char *accepted) {
        _cleanup_strv_free_ char **trailers = NULL;
        StepCommit *c;
        int r;

        r = delivery_extra_trailers(run, &trailers);
        if (r < 0)
                return agent_fail(run, "Cannot collect the review's result: %s", strerror(-r));
        if (!ran && (!trailers || !trailers[0])) {
                /* No test command and nothing else to record: the tip stays. */
                _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};
                agent_progress_ack_init(run, &ack);
                ack.set_verified = ack.verified = true;
                return agent_save_progress_then(run, &ack, NULL, 0, NULL, on_verified_saved);
        }

        /* What the task used up to its verification, on the tip that
         * delivers it (task-resources.h's one line). */
        TaskResources res = run->task->progress.resources;
        res.wall_usec = run->task->progress.wall_usec;
        _cleanup_free_ char *used = task_resources_format(&res), *used_line = NULL;
        if (!used || asprintf(&used_line, "Agentfab-Resources: %s", used) < 0 || strv_extend(&trailers, used_line) < 0)
                return agent_fail(run, "Out of memory.");

        /* Not a step of the model's: no Agentfab-Step: trailer, and not a
         * checkpoint to reset to. */
        c = delivery_step_commit(run, 0, !ran ? "Reviewed: this tree" :
                                 accepted ? "Verified: the task's tests pass, others fail as at the start" :
                                 "Verified: the tests pass on this tree");
        if (!c)
                return agent_fail(run, "Out of memory.");
        c->record = true;
        c->delivery = true;
        c->trailers = TAKE_PTR(trailers);
        if (ran) {
                c->tests = "pass";
                c->test_exit = status;
                if (tr->n_passed >= 0) {
                        c->have_test_count = true;
                        c->test_count = (unsigned) tr->n_passed + (unsigned) MAX(tr->n_failed, 0);
                }
                if (asprintf(&c->body, "agentfabd ran the test command itself at delivery, in the task's sandbox, on "
                             "the tree of this commit (its parent's: this commit changes nothing).%s%s%s",
                             accepted ? "\n\nNot all of them pass: " : "", strempty(accepted), accepted ? "." : "") < 0)
                        c->body = NULL;
                if (!c->body) {
                        step_commit_free(c);
                        return agent_fail(run, "Out of memory.");
                }
        }
        r = step_commit_start(run, c, on_delivery_record_done);
        if (r < 0)
                return agent_fail(run, "Cannot record the verification on the branch: %s", strerror(-r));
}

static void on_verify_output(const char *stream, const char *data, size_t size, void *userdata) {
        AgentRun *run = userdata;
        (void) stream;
        if (run->task)
                task_send_output(run->task, data, size);
}

/* The output of delivery's run, read back from the log (agent-tests.c):
 * judged by finish's rule against the baseline. */
static void on_verify_read(AgentRun *run, TestResult *r) {
        _cleanup_free_ char *why = NULL;
        Task *t = run->task;
        int verdict;

        t->progress.last_test_exit = r->status;
        (void) free_and_strdup(&t->progress.last_tests, r->run.passed ? "pass" : "fail");

        /* SECURITY: the judge's word decides, not the model's. A tree whose
         * tests fail now (flaky tests, or a test that depends on what ran
         * before) is not delivered as a success: the task fails with the
         * reason, and a person decides (Resume() runs the tests again,
         * Amend() sends the task back to the model). It is the rule finish
         * was accepted by: red only as at the start, not in the tests the
         * requirement names. */
        verdict = agent_judge_tests(run, &r->run, &why);
        if (verdict < 0)
                return agent_fail(run, "Out of memory.");
        if (verdict == TEST_VERDICT_REFUSE) {
                audit_verified(t, NULL, "fail", r->status,
                               r->run.n_passed >= 0 ? r->run.n_passed + MAX(r->run.n_failed, 0) : -1);
                return agent_fail(run, "The tests fail on the final tree (%s, exit %i%s): %s. Not delivered. "
                                  "Resume runs them again; Amend sends the task back to the model.",
                                  t->spec.test_command, r->status, r->timed_out ? ", timed out" : "", why);
        }
        delivery_record(run, &r->run, r->status, true, verdict == TEST_VERDICT_ACCEPT ? why : NULL);
}

static void on_verify_done(SandboxSession *s, int error, const ExecResult *result, void *userdata) {
        AgentRun *run = userdata;
        Task *t = run->task;
        int r;

        (void) s;
        if (!t)
                return;
        run->phase = PHASE_IDLE;
        agent_tests_ended(run);
        agent_resources_sample(run);
        if (error < 0)
                return agent_fail(run, "Cannot run the tests on the final tree: %s",
                                  error == -ECONNRESET || error == -EPIPE ? "the task's sandbox ended unexpectedly" :
                                  strerror(-error));

        audit_command(t, t->progress.step + 1, "verify", t->spec.test_command, result->status, result->signal,
                      result->timed_out, result->duration_usec, result->output_bytes);
        r = agent_read_tests(run, result, PHASE_VERIFY, on_verify_read);
        if (r < 0)
                return agent_fail(run, "Cannot read the output of the tests on the final tree: %s", strerror(-r));
}

/* Runs the task's test command on the final tree in the task's sandbox:
 * delivery's own evidence, whatever the model's last run said. */
static void delivery_verify(AgentRun *run) {
        _cleanup_free_ char *banner = NULL;
        Task *t = run->task;
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", t->spec.test_command, NULL };
        int r;

        if (isempty(t->spec.test_command))
                return delivery_record(run, NULL, 0, false, NULL);
        if (agent_open_sandbox(run) != 0)
                return;   /* failed, or delivery starts again when the sandbox is there */

        if (asprintf(&banner, "\n$ %s    # agentfabd's own run on the final tree\n", t->spec.test_command) >= 0)
                (void) write(run->log_fd, banner, strlen(banner));
        agent_note_output_start(run);
        ExecRequest req = {
                .argv = argv,
                .timeout_usec = agent_command_timeout_usec(run),
        };
        t->progress.commands++;
        /* A test run may write into the workspace: the ledger's change
         * tracking must not trust its notes past it. */
        ledger_note_all(run->ledger);
        run->tests_started = clock_now_usec(CLOCK_REALTIME);
        run->phase = PHASE_VERIFY;
        r = sandbox_session_exec(run->session, &req, run->log_fd, run->factory->config.output_keep_bytes,
                                 on_verify_output, on_verify_done, run);
        if (r < 0) {
                run->phase = PHASE_IDLE;
                return agent_fail(run, "Cannot run the tests on the final tree: %s", strerror(-r));
        }
}

static void on_delivery_final_saved(AgentRun *run, StepCommit *c) {
        /* Every commit on the branch has its journal entry. */
        audit_step(run->task, c->step, c->commit, c->subject, c->tests);
        audit_left_out(run->task, c->step, c->left_out, c->n_left_out);
        delivery_verify(run);
}

static void on_delivery_final_done(AgentRun *run, StepCommit *c) {
        _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};

        if (c->result < 0)
                return agent_fail(run, "Cannot commit the final state: %s", c->error ?: strerror(-c->result));
        if (!c->committed)
                return delivery_verify(run);
        agent_progress_ack_init(run, &ack);
        ack.step = c->step;
        if (task_progress_ack_set_checkpoint(&ack, c->commit) < 0)
                return agent_fail(run, "Out of memory.");
        agent_save_progress_then(run, &ack, NULL, 0, c, on_delivery_final_saved);
}

void delivery_start(AgentRun *run) {
        Task *t = run->task;
        const char *last = t->progress.last_tests;
        StepCommit *c;
        int r;

        if (t->progress.verified)
                return delivery_read(run);

        /* Anything left uncommitted is committed as a last step, found
         * by a scan of the whole tree: the last word does not rest on
         * what the watch saw. */
        ledger_note_rescan(run->ledger);
        c = delivery_step_commit(run, t->progress.step + 1, "Final state of the workspace");
        if (!c)
                return agent_fail(run, "Out of memory.");
        /* A literal: the job may outlive the progress' string. */
        c->tests = streq_ptr(last, "pass") ? "pass" : streq_ptr(last, "fail") ? "fail" : "not-run";
        c->test_exit = t->progress.last_test_exit;
        r = step_commit_start(run, c, on_delivery_final_done);
        if (r < 0)
                return agent_fail(run, "Cannot commit the final state: %s", strerror(-r));
}
