/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "conversation.h"
#include "fs-util.h"
#include "log.h"
#include "review-stage.h"
#include "string-util.h"
#include "task-store.h"
#include "test-judge.h"
#include "time-util.h"

/* The test command's runs (the baseline, run_tests, finish, delivery's
 * own): what its output says is read back from the task's log, not from
 * the head and tail kept for other commands, so that the runner's summary,
 * the names of the failed tests and the failures themselves are found
 * wherever they are in a long log. That reading grows with the output, so
 * it is a job of the task's queue; the run waits for it as for a command. */

/* What of a command's output is read: all of it up to this, else its
 * start and its end (the summary and, for most runners, the failures). */
#define TEST_READ_MAX  (8u * 1024u * 1024u)
#define TEST_READ_HEAD (1u * 1024u * 1024u)

typedef struct TestReadJob {
        int log_fd;                /* output.log, for reading */
        uint64_t start, size;      /* the command's output in it */
        char *fallback;            /* the escaped head and tail, should the log not hold it */
        size_t keep;               /* OutputKeepBytes= */
        TestResult result;
        agent_tests_read_t done;
} TestReadJob;

void test_result_done(TestResult *r) {
        if (!r)
                return;
        test_run_done(&r->run);
        r->text = mfree_ptr(r->text);
}

static void test_read_job_free(void *p) {
        TestReadJob *j = p;

        if (!j)
                return;
        safe_close(j->log_fd);
        free(j->fallback);
        test_result_done(&j->result);
        free(j);
}

static int read_exactly(int fd, char *buf, size_t n, uint64_t off) {
        for (size_t done = 0; done < n;) {
                ssize_t k = pread(fd, buf + done, n - done, (off_t) (off + done));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -ENODATA;
                done += (size_t) k;
        }
        return 0;
}

/* The command's output as the log holds it: all of it, or its first
 * TEST_READ_HEAD and last bytes with a line that says what is between. */
static int read_output(TestReadJob *j, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t n;
        int r;

        if (j->log_fd < 0 || j->size == 0)
                return -ENODATA;
        if (fstat(j->log_fd, &st) < 0)
                return -errno;
        if ((uint64_t) st.st_size < j->start + j->size)
                return -ENODATA;   /* the log lost some (a full disk): the kept head and tail */

        if (j->size <= TEST_READ_MAX) {
                n = (size_t) j->size;
                buf = malloc(n + 1);
                if (!buf)
                        return -ENOMEM;
                r = read_exactly(j->log_fd, buf, n, j->start);
        } else {
                char note[96];
                uint64_t skipped = j->size - TEST_READ_MAX;
                int k = snprintf(note, sizeof(note), "\n[... %llu bytes of output not read ...]\n",
                                 (unsigned long long) skipped);
                size_t tail = TEST_READ_MAX - TEST_READ_HEAD;

                n = TEST_READ_HEAD + (size_t) k + tail;
                buf = malloc(n + 1);
                if (!buf)
                        return -ENOMEM;
                r = read_exactly(j->log_fd, buf, TEST_READ_HEAD, j->start);
                memcpy(buf + TEST_READ_HEAD, note, (size_t) k);
                if (r >= 0)
                        r = read_exactly(j->log_fd, buf + TEST_READ_HEAD + k, tail, j->start + j->size - tail);
        }
        if (r < 0)
                return r;
        buf[n] = '\0';
        *ret = TAKE_PTR(buf);
        *ret_size = n;
        return 0;
}

static int test_read_job_run(void *p) {
        TestReadJob *j = p;
        _cleanup_free_ char *text = NULL;
        const char *t;
        size_t n = 0;
        int r;

        r = read_output(j, &text, &n);
        if (r == -ENOMEM)
                return r;
        t = text;
        if (r < 0) {
                t = strempty(j->fallback);
                n = strlen(t);
        }
        r = test_run_parse_full(j->result.status, t, n, &j->result.run);
        if (r < 0)
                return r;
        return test_output_excerpt(t, n, j->result.run.runner, MAX(j->keep, (size_t) 1024), &j->result.text);
}

static void on_test_read_done(Task *task, int r, void *p, void *userdata) {
        TestReadJob *j = p;
        AgentRun *run = userdata;

        (void) task;
        if (!agent_job_ended(run, NULL))
                return;
        if (r < 0)
                return agent_fail(run, "Cannot read the test command's output: %s", strerror(-r));
        j->done(run, &j->result);
}

void agent_note_output_start(AgentRun *run) {
        off_t o = lseek(run->log_fd, 0, SEEK_END);

        run->output_start = o < 0 ? UINT64_MAX : (uint64_t) o;
}

int agent_read_tests(AgentRun *run, const ExecResult *result, AgentPhase phase, agent_tests_read_t done) {
        TestReadJob *j;

        j = calloc(1, sizeof(TestReadJob));
        if (!j)
                return -ENOMEM;
        *j = (TestReadJob) {
                .log_fd = run->output_start == UINT64_MAX ? -EBADF :
                        openat(run->dir_fd, TASK_LOG_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY),
                .start = run->output_start,
                .size = result->output_bytes,
                .fallback = strdup(strempty(result->output)),
                .keep = (size_t) run->factory->config.output_keep_bytes,
                .result = {
                        .status = result->signal > 0 ? 128 + result->signal : result->status,
                        .signal = result->signal,
                        .timed_out = result->timed_out,
                        .limit_killed = result->limit_killed,
                        .duration_usec = result->duration_usec,
                },
                .done = done,
        };
        if (!j->fallback) {
                test_read_job_free(j);
                return -ENOMEM;
        }
        return agent_job_start(run, "tests", test_read_job_run, on_test_read_done, test_read_job_free, j, NULL, phase);
}

/* ---- Against the baseline ---- */

void agent_baseline_view(const TaskProgress *p, TestRun *ret) {
        *ret = (TestRun) {
                .exit_code = p->baseline_exit,
                .n_passed = p->baseline_passed,
                .n_failed = p->baseline_failed,
                .n_skipped = -1,
                .runner = _TEST_RUNNER_INVALID,
                .failed = p->baseline_failures,
                .n_failed_names = strv_length(p->baseline_failures),
                .failed_complete = p->baseline_failures_complete,
        };
        ret->passed = ret->exit_code == 0 && ret->n_failed <= 0;
}

char *agent_requirement(Task *t) {
        char *s;

        if (asprintf(&s, "%s\n%s", strempty(t->spec.goal), strempty(t->spec.acceptance)) < 0)
                return NULL;
        return s;
}

int agent_judge_tests(AgentRun *run, const TestRun *tr, char **ret_why) {
        _cleanup_free_ char *req = agent_requirement(run->task);
        TestRun base;

        if (!req)
                return -ENOMEM;
        agent_baseline_view(&run->task->progress, &base);
        return test_run_judge(run->task->progress.baseline_recorded ? &base : NULL, tr, req, ret_why);
}

/* The baseline's coverage report is kept (or there was none): running. */
static void agent_baseline_done(AgentRun *run) {
        Task *t = run->task;

        /* Paused meanwhile: the resume finds the baseline done and makes the
         * task running then (agent_advance()). */
        if (t->state == TASK_PAUSED)
                return;
        agent_set_state(run, TASK_RUNNING, NULL);
        if (t->run)
                agent_schedule(run);
}

static void on_baseline_read(AgentRun *run, TestResult *r) {
        TaskProgress *p = &run->task->progress;

        p->baseline_passed = r->run.n_passed;
        p->baseline_exit = r->status;
        p->baseline_failed = r->run.n_failed;
        strv_free(p->baseline_failures);
        p->baseline_failures = TAKE_PTR(r->run.failed);
        r->run.n_failed_names = 0;
        p->baseline_failures_complete = r->run.failed_complete;
        p->baseline_recorded = true;
        p->baseline_done = true;
        (void) free_and_strdup(&p->last_tests, r->run.passed ? "pass" : "fail");
        p->last_test_exit = r->status;
        run->call_command = mfree_ptr(run->call_command);
        /* Then the state change writes all this down (once). */
        review_stage_keep_base_coverage(run, agent_baseline_done);
}

/* "[exit status 1; 2.3 s]": how the command ended, as for other commands. */
static const char *ending(const TestResult *r) {
        return r->timed_out ? "timed out: the command and everything it started were killed" :
                r->limit_killed ? "killed: the sandbox's memory limit was reached" :
                r->signal > 0 ? "killed by a signal" : r->status == 0 ? "exit status 0" : "failed";
}

static void on_tests_read(AgentRun *run, TestResult *r) {
        _cleanup_free_ char *headline = NULL, *why = NULL, *text = NULL;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        const char *verdict_line = "";
        TestRun base;
        int verdict;

        agent_baseline_view(p, &base);
        verdict = agent_judge_tests(run, &r->run, &why);
        if (verdict < 0)
                return agent_fail(run, "Out of memory.");

        run->tests_ran = true;
        run->tests_passed = r->run.passed;
        run->tests_accepted = verdict != TEST_VERDICT_REFUSE;
        run->test_exit = r->status;
        run->tests_n_passed = r->run.n_passed;
        p->last_test_exit = r->status;
        (void) free_and_strdup(&p->last_tests, r->run.passed ? "pass" : "fail");
        /* "The same tests failing": a run that fails the way the last one
         * did extends the streak; a new failure starts a new one; a run
         * finish would accept (failing only as at the start, not in the
         * task's tests) ends it. */
        if (run->tests_accepted)
                p->test_failures = 0;
        else if (p->test_failures > 0 && r->run.signature == p->test_signature)
                p->test_failures++;
        else
                p->test_failures = 1;
        p->test_signature = r->run.signature;

        if (test_run_headline(&r->run, p->baseline_recorded ? &base : NULL, p->test_failures,
                              run->factory->config.max_test_failures, &headline) < 0)
                return agent_fail(run, "Out of memory.");

        if (run->call_kind == TOOL_FINISH) {
                if (run->tests_accepted) {
                        run->finish = true;
                        if (asprintf(&text, "%s\nfinish accepted: %s. Your work is delivered once you have reviewed your whole "
                                     "change as it is now: if you have not, its diff is shown to you next.",
                                     headline, why) < 0)
                                return agent_fail(run, "Out of memory.");
                } else if (asprintf(&text, "%s\nfinish refused: %s.\n\n%s\n[%s; %.1f s]", headline, why, r->text,
                                    ending(r), (double) r->duration_usec / USEC_PER_SEC) < 0)
                        return agent_fail(run, "Out of memory.");
        } else {
                if (!r->run.passed && run->tests_accepted)
                        verdict_line = "\nfinish would accept this: the failures are as at the start, and not the task's.";
                if (asprintf(&text, "%s%s\n\n%s\n[%s; %.1f s]", headline, verdict_line, r->text, ending(r),
                             (double) r->duration_usec / USEC_PER_SEC) < 0)
                        return agent_fail(run, "Out of memory.");
        }

        agent_tool_result(run, run->call_id, tool_kind_to_string(run->call_kind), text);
        if (!run->task)
                return;
        run->call_id = mfree_ptr(run->call_id);
        run->call_command = mfree_ptr(run->call_command);
        if (t->state == TASK_PAUSED) {
                /* Read while the task was paused: the next call waits for
                 * the resume (task_unpaused()). */
                run->tools_held = true;
                run->phase = PHASE_TOOL;
                return;
        }
        agent_next_tool(run);
}

int agent_tests_command_done(AgentRun *run, const ExecResult *result) {
        if (run->call_kind == _TOOL_KIND_INVALID)
                return agent_read_tests(run, result, PHASE_BASELINE, on_baseline_read);
        return agent_read_tests(run, result, PHASE_TOOL, on_tests_read);
}
