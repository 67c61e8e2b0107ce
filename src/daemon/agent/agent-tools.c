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
#include "path-glob.h"
#include "review-settings.h"
#include "review-stage.h"
#include "step-commit.h"
#include "string-util.h"
#include "syntax-check.h"
#include "task-job.h"
#include "task-store.h"
#include "time-util.h"
#include "tools.h"
#include "trace.h"
#include "worker.h"
#include "workspace-path.h"

#define TOOL_OUTPUT_MAX    (1024u * 1024u)
#define FILE_MAX           (8u * 1024u * 1024u)
#define LIST_MAX_ENTRIES   2000u
#define SEARCH_MAX_MATCHES 200u

/* The model's tool calls, one after the other: the file tools in the
 * daemon, commands and tests in the sandbox; their results go back into
 * the conversation, and the last one ends the step. */

/* Whether the task's commands reach a network through the egress proxy:
 * then a command's failure to connect is no sign of the sandbox lacking
 * one, and the proxy's refusals speak for themselves. */
static bool agent_has_network(AgentRun *run) {
        const Environment *e = environments_find(&run->factory->environments,
                                                 run->task->spec.environment ?: ENVIRONMENT_DEFAULT);
        return e && e->network != NETWORK_OFF;
}

static void on_command_output(const char *stream, const char *data, size_t size, void *userdata) {
        AgentRun *run = userdata;
        (void) stream;
        if (run->task)
                task_send_output(run->task, data, size);
}

int agent_add_kept_note(TaskProgress *p, const char *what) {
        _cleanup_free_ char *n = NULL;

        /* Bounded as the state file reads it; past that the journal has it. */
        if (strlen(strempty(p->kept_note)) + strlen(what) > 60000)
                return 0;
        if (asprintf(&n, "%s%sKept on purpose: %s", strempty(p->kept_note), p->kept_note ? "\n" : "", what) < 0)
                return -ENOMEM;
        free(p->kept_note);
        p->kept_note = TAKE_PTR(n);
        return 0;
}

/* keep_file, on the loop: the file is committed from this step on and the
 * commit says why; a binary stops the task at the step's end for a person
 * (the binary-file breaker), whose rejection undoes the step. */
static int agent_keep_file(AgentRun *run, const char *path, const char *reason, bool binary, uint64_t size,
                           char **ret_text) {
        TaskProgress *p = &run->task->progress;
        _cleanup_free_ char *why = NULL, *note = NULL;
        int r;

        why = strshorten_line(strempty(reason), 200);
        if (!why)
                return -ENOMEM;
        if (binary) {
                if (p->keep_pending && !streq(p->keep_pending, path))
                        return asprintf(ret_text, "keep_file: '%s' waits for a person's approval already; ask for "
                                        "one binary at a time.", p->keep_pending) < 0 ? -ENOMEM : -EBUSY;
                if (free_and_strdup(&p->keep_pending, path) < 0 ||
                    asprintf(&note, "'%s' (binary, %" PRIu64 " bytes): %s", path, size, why) < 0)
                        return -ENOMEM;
                free(p->keep_reason);
                p->keep_reason = TAKE_PTR(note);
                /* Committed with the step, which the binary-file breaker
                 * then holds for a person: a rejection undoes it. */
                ledger_note_path(run->ledger, path);
                if (asprintf(&note, "%s; a person is asked to approve it (binary-file)", p->keep_reason) < 0)
                        return -ENOMEM;
                r = agent_add_kept_note(p, note);
                if (r < 0)
                        return r;
                return asprintf(ret_text, "'%s' is a binary file (%" PRIu64 " bytes): this step's commit records it, "
                                "and the task stops at its end for a person to approve or reject it.", path, size) < 0 ?
                        -ENOMEM : 0;
        }
        r = task_progress_add_kept(p, path);
        if (r == -E2BIG)
                return asprintf(ret_text, "keep_file: at most %u files are kept on purpose in a task.",
                                TASK_KEPT_MAX) < 0 ? -ENOMEM : r;
        if (r < 0)
                return r;
        ledger_note_path(run->ledger, path);
        if (asprintf(&note, "'%s': %s", path, why) < 0)
                return -ENOMEM;
        r = agent_add_kept_note(p, note);
        if (r < 0)
                return r;
        return asprintf(ret_text, "'%s' is kept: this step's commit records it, and says why.", path) < 0 ? -ENOMEM : 0;
}

bool agent_tool_reads_only(ToolKind k) {
        return IN_SET(k, TOOL_READ_FILE, TOOL_LIST_FILES, TOOL_SEARCH);
}

json_object *agent_plan_tools(json_object *schema) {
        _cleanup_json_ json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < json_object_array_length(schema); i++) {
                json_object *tool = json_object_array_get_idx(schema, i), *f, *name;
                if (json_object_object_get_ex(tool, "function", &f) && json_object_object_get_ex(f, "name", &name) &&
                    agent_tool_reads_only(tool_kind_from_string(json_object_get_string(name))) &&
                    json_object_array_add(a, json_object_get(tool)) < 0)
                        return NULL;
        }
        return TAKE_PTR(a);
}

/* The test command ended (or never ran): its window is kept with the task. */
void agent_tests_ended(AgentRun *run) {
        int r;

        if (run->tests_started == 0 || !run->task)
                return;
        r = task_progress_add_test_window(&run->task->progress, run->tests_started, clock_now_usec(CLOCK_REALTIME));
        if (r < 0)
                log_warning_errno(r, "Task '%s': cannot keep when the tests ran, ignoring: %m", run->task->id);
        run->tests_started = 0;
}

/* A file the agent wrote through its tools is its own, whoever touches it
 * later (leave-out.h). */
void agent_note_written(AgentRun *run, const char *path) {
        _cleanup_free_ char *p = NULL;
        int r;

        /* The workspace changed: calls made before may give other results. */
        run->task->progress.n_recent_calls = 0;
        r = workspace_path_normalize(path, &p);
        if (r >= 0)
                r = task_progress_add_written(&run->task->progress, p);
        if (r == -E2BIG)
                log_debug("Task '%s': more than %u files written, '%s' not remembered.", run->task->id,
                          TASK_WRITTEN_MAX, path);
        else if (r < 0)
                log_warning_errno(r, "Task '%s': cannot remember that '%s' was written, ignoring: %m", run->task->id, path);
}

int agent_run_command(AgentRun *run, const char *tool, const char *command, uint64_t timeout_sec) {
        const Config *c = &run->factory->config;
        Task *t = run->task;
        uint64_t timeout = agent_command_timeout_usec(run);
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) command, NULL };
        _cleanup_free_ char *banner = NULL;

        if (timeout_sec > 0 && timeout_sec * USEC_PER_SEC < timeout)
                timeout = timeout_sec * USEC_PER_SEC;

        if (asprintf(&banner, "\n$ %s\n", command) >= 0)
                (void) write(run->log_fd, banner, strlen(banner));
        ledger_note_all(run->ledger);   /* A command may change anything in the workspace. */
        /* What the test command writes is not the change (leave-out.h):
         * its window on the clock that stamps inodes. */
        if (IN_SET(run->call_kind, _TOOL_KIND_INVALID, TOOL_RUN_TESTS, TOOL_FINISH)) {
                run->tests_started = clock_now_usec(CLOCK_REALTIME);
                /* Its output is read back from the log (agent-tests.c). */
                agent_note_output_start(run);
        }

        ExecRequest req = {
                .argv = argv,
                .timeout_usec = timeout,
        };
        t->progress.commands++;
        (void) tool;
        int r = sandbox_session_exec(run->session, &req, run->log_fd, c->output_keep_bytes, on_command_output,
                                     agent_on_command_done, run);
        if (r >= 0)
                agent_budget_watch(run);
        return r;
}

static char *command_result_text(const ExecResult *r) {
        char *s;
        if (asprintf(&s, "%s\n[%s; %.1f s]",
                     strempty(r->output),
                     r->timed_out ? "timed out: the command and everything it started were killed" :
                     r->limit_killed ? "killed: the sandbox's memory limit was reached" :
                     r->signal > 0 ? "killed by a signal" : r->status == 0 ? "exit status 0" : "failed",
                     (double) r->duration_usec / USEC_PER_SEC) < 0)
                return NULL;
        return s;
}

void agent_tool_result(AgentRun *run, const char *call_id, const char *name, const char *text) {
        _cleanup_free_ char *noted = NULL;
        json_object *m;

        /* The same call with the same result again: the model is warned,
         * and the stuck breaker counts it. */
        if (agent_note_call(run, name, text, &noted) < 0)
                return agent_fail(run, "Out of memory.");
        m = conversation_tool_message_new(call_id, name, noted ?: text);
        if (!m || conversation_add(run, m) < 0)
                return agent_fail(run, "Out of memory.");
}

void agent_on_command_done(SandboxSession *s, int error, const ExecResult *result, void *userdata) {
        _cleanup_free_ char *text = NULL, *tool_name = NULL;
        AgentRun *run = userdata;
        Task *t = run->task;
        int status;

        (void) s;
        if (!t)
                return;
        run->phase = PHASE_IDLE;
        agent_tests_ended(run);
        /* The proxy tells of a refusal before it answers the command's
         * client: whatever the command met is in our socket by now. */
        egress_poll(run->factory->egress);
        agent_resources_sample(run);

        if (error < 0) {
                if (error == -ECONNRESET || error == -EPIPE)
                        return agent_fail(run, "The task's sandbox ended unexpectedly.");
                return agent_fail(run, "Cannot run a command in the sandbox: %s", strerror(-error));
        }

        status = result->signal > 0 ? 128 + result->signal : result->status;
        tool_name = strdup(run->call_kind == _TOOL_KIND_INVALID ? "baseline" : tool_kind_to_string(run->call_kind));
        audit_command(t, t->progress.step + 1, strempty(tool_name), run->call_command, result->status, result->signal,
                      result->timed_out, result->duration_usec, result->output_bytes);

        if (run->call_kind != _TOOL_KIND_INVALID)
                (void) strv_extend(&run->commands, run->call_command);

        /* The test command's runs, the baseline's before the first step
         * included: read back from the log, judged against the baseline,
         * told to the model (agent-tests.c). */
        if (IN_SET(run->call_kind, _TOOL_KIND_INVALID, TOOL_RUN_TESTS, TOOL_FINISH)) {
                int r = agent_tests_command_done(run, result);
                if (r < 0)
                        return agent_fail(run, "Cannot read the test command's output: %s", strerror(-r));
                return;
        }

        text = command_result_text(result);
        if (!text)
                return agent_fail(run, "Out of memory.");
        if (status != 0 && !agent_has_network(run) && command_output_needs_network(run->call_command, result->output)) {
                run->network = true;
                (void) free_and_strdup(&run->network_command, run->call_command);
        }

        agent_tool_result(run, run->call_id, tool_kind_to_string(run->call_kind), text);
        if (!run->task)
                return;
        run->call_id = mfree_ptr(run->call_id);
        run->call_command = mfree_ptr(run->call_command);
        agent_next_tool(run);
}

static const char *tool_call_field(json_object *call, const char *key) {
        json_object *fn, *v;
        if (streq(key, "id"))
                return json_object_object_get_ex(call, "id", &v) ? json_object_get_string(v) : NULL;
        if (!json_object_object_get_ex(call, "function", &fn) || !json_object_object_get_ex(fn, key, &v))
                return NULL;
        return json_object_get_string(v);
}

/* ---- The file tools, in a worker thread ---- */

/* A file tool reads or writes the workspace: on a big tree a search reads
 * up to 256 MiB and a listing walks thousands of directories, a write may
 * be 8 MiB. Done in a job of the task's queue (task-job.h), on a workspace
 * fd of its own, so that the loop serves everything else meanwhile and no
 * other job (a reset by hand, an export) works on the workspace at the
 * same time. The step waits for it like for a command. */
typedef struct FileToolJob {
        int ws_fd;
        ToolCallArgs args;
        size_t keep;
        char *id;
        char *out;
        /* keep_file: the path as the ledger names it, and what it is. */
        char *kept;
        bool binary;
        uint64_t size;
        /* apply_patch: every path it names, once it began writing. */
        char **patched;
        /* A write: the ledger borrowed, to read the base's .agentfab.md,
         * and the script of the syntax checks of what was written (NULL:
         * none is known). */
        Ledger *ledger;
        char *check_script;
        bool check_repository;     /* a check of the repository's own may write anything */
} FileToolJob;

static void file_tool_job_free(void *p) {
        FileToolJob *j = p;

        if (!j)
                return;
        safe_close(j->ws_fd);
        tool_call_args_done(&j->args);
        free(j->id);
        free(j->out);
        free(j->kept);
        strv_free(j->patched);
        ledger_free(j->ledger);
        free(j->check_script);
        free(j);
}

/* keep_file: the file must be there, a regular file of the workspace. */
static int tool_keep_file(FileToolJob *j) {
        _cleanup_close_ int dir_fd = -EBADF;
        _cleanup_free_ char *name = NULL;
        struct stat st;
        int r;

        r = workspace_path_normalize(j->args.path, &j->kept);
        if (r >= 0)
                r = workspace_open_parent(j->ws_fd, j->kept, false, &dir_fd, &name);
        if (r < 0)
                return workspace_path_error(j->args.path, r, &j->out);
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return workspace_path_error(j->args.path, -errno, &j->out);
        if (!S_ISREG(st.st_mode)) {
                if (asprintf(&j->out, "keep_file: '%s' is not a regular file; only files are committed.", j->kept) < 0)
                        j->out = NULL;
                return -EINVAL;
        }
        j->binary = ledger_file_is_binary(dir_fd, name, &j->size);
        return 0;
}

static bool tool_writes(ToolKind k) {
        return IN_SET(k, TOOL_WRITE_FILE, TOOL_EDIT_FILE, TOOL_APPLY_PATCH);
}

/* After a write, in the job's thread: the syntax checks of the files it
 * wrote, by the base's .agentfab.md (SECURITY: the base's, never the
 * task's, as for its other keys; the check runs in the sandbox all the
 * same) or by the defaults. A failure here only leaves the check out. */
static int file_tool_pick_checks(FileToolJob *j) {
        _cleanup_(review_repo_settings_done) ReviewRepoSettings s = {};
        _cleanup_strv_free_ char **one = NULL, **paths = NULL, **labels = NULL, **snippets = NULL;
        _cleanup_free_ char *text = NULL, *normalized = NULL;
        size_t size = 0, n = 0;
        int r;

        if (j->ledger && ledger_read_file(j->ledger, false, ".agentfab.md", REVIEW_SETTINGS_SIZE_MAX, &text, &size) >= 0 &&
            text)
                (void) review_repo_settings_parse(text, size, &s);
        if (!j->patched) {
                r = workspace_path_normalize(j->args.path, &normalized);
                if (r < 0)
                        return r;
                r = strv_extend(&one, normalized);
                if (r < 0)
                        return r;
        }
        for (char **path = j->patched ?: one; path && *path && n < SYNTAX_CHECK_FILES_MAX; path++) {
                _cleanup_free_ char *label = NULL, *snippet = NULL;

                r = syntax_check_pick(*path, s.syntax_checks, &label, &snippet);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                for (char **c = s.syntax_checks; c && c[0] && c[1]; c += 2)
                        if (path_glob_match(c[0], *path))
                                j->check_repository = true;
                if (strv_extend(&paths, *path) < 0 || strv_extend(&labels, label) < 0 ||
                    strv_extend(&snippets, snippet) < 0)
                        return -ENOMEM;
                n++;
        }
        if (n == 0)
                return 0;
        return syntax_check_script(paths, labels, snippets, n, &j->check_script);
}

static int file_tool_job_run(void *p) {
        FileToolJob *j = p;
        int r;

        switch (j->args.kind) {
        case TOOL_READ_FILE:
                return tool_read_file(j->ws_fd, &j->args, j->keep, &j->out);
        case TOOL_WRITE_FILE:
        case TOOL_EDIT_FILE:
        case TOOL_APPLY_PATCH:
                r = j->args.kind == TOOL_WRITE_FILE ? tool_write_file(j->ws_fd, &j->args, FILE_MAX, &j->out) :
                        j->args.kind == TOOL_EDIT_FILE ? tool_edit_file(j->ws_fd, &j->args, FILE_MAX, &j->out) :
                        tool_apply_patch(j->ws_fd, &j->args, FILE_MAX, &j->patched, &j->out);
                if (r >= 0 && file_tool_pick_checks(j) < 0)
                        j->check_script = mfree_ptr(j->check_script);
                return r;
        case TOOL_LIST_FILES:
                return tool_list_files(j->ws_fd, &j->args, LIST_MAX_ENTRIES, j->keep, &j->out);
        case TOOL_SEARCH:
                return tool_search(j->ws_fd, &j->args, SEARCH_MAX_MATCHES, j->keep, &j->out);
        case TOOL_KEEP_FILE:
                return tool_keep_file(j);
        default:
                return -EINVAL;
        }
}

/* A file tool's answer: the next call follows, or waits for the resume. */
static void file_tool_answer(AgentRun *run, const char *id, ToolKind kind, const char *text) {
        agent_tool_result(run, id, tool_kind_to_string(kind), text);
        if (!run->task)
                return;
        if (run->task->state == TASK_PAUSED) {
                /* The next call waits for the resume (task_unpaused()). */
                run->tools_held = true;
                run->phase = PHASE_TOOL;
                return;
        }
        agent_next_tool(run);
}

static void on_syntax_check_done(SandboxSession *s, int error, const ExecResult *result, void *userdata) {
        _cleanup_free_ char *id = NULL, *text = NULL, *report = NULL, *joined = NULL;
        AgentRun *run = userdata;
        Task *t = run->task;

        (void) s;
        if (!t)
                return;
        run->phase = PHASE_IDLE;
        id = TAKE_PTR(run->check_id);
        text = TAKE_PTR(run->check_text);
        if (error < 0) {
                if (error == -ECONNRESET || error == -EPIPE)
                        return agent_fail(run, "The task's sandbox ended unexpectedly.");
                return agent_fail(run, "Cannot run a syntax check in the sandbox: %s", strerror(-error));
        }
        audit_command(t, t->progress.step + 1, "syntax-check", "syntax check", result->status, result->signal,
                      result->timed_out, result->duration_usec, result->output_bytes);
        if (syntax_check_report(result->output, result->signal > 0 ? 128 + result->signal : result->status,
                                result->timed_out, &report) < 0 ||
            (report && asprintf(&joined, "%s%s", strempty(text), report) < 0))
                return agent_fail(run, "Out of memory.");
        file_tool_answer(run, strempty(id), run->check_kind, joined ?: strempty(text));
}

/* The syntax check of what a write changed, in the sandbox like any
 * command, but not one of the task's commands (max_commands): the model did
 * not ask for it. Bounded in time and in what is told. The edit's answer
 * waits in run->check_text. */
static int agent_syntax_check_start(AgentRun *run, const char *script, bool repository) {
        const Config *c = &run->factory->config;
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) script, (char *) "agentfab-syntax-check", NULL };
        uint64_t timeout = MIN(SYNTAX_CHECK_TIMEOUT_USEC, agent_command_timeout_usec(run));
        static const char banner[] = "\n$ # agentfabd: the syntax check of what was written\n";

        if (!run->session)
                return -ENOTCONN;
        (void) write(run->log_fd, banner, strlen(banner));
        /* A repository's checker may write (a cache beside the file). */
        if (repository)
                ledger_note_all(run->ledger);
        ExecRequest req = {
                .argv = argv,
                .timeout_usec = timeout,
        };
        return sandbox_session_exec(run->session, &req, run->log_fd, MIN(c->output_keep_bytes, (uint64_t) 16384),
                                    on_command_output, on_syntax_check_done, run);
}

static void on_file_tool_done(Task *task, int r, void *p, void *userdata) {
        FileToolJob *j = p;
        AgentRun *run = userdata;
        Task *t = run->task;

        (void) task;
        /* Only a write borrowed the ledger: any other gives none back. */
        if (!agent_job_ended(run, tool_writes(j->args.kind) ? &j->ledger : NULL))
                return;
        /* Written or not, the path is looked at at the step's end. */
        if (IN_SET(j->args.kind, TOOL_WRITE_FILE, TOOL_EDIT_FILE)) {
                ledger_note_path(run->ledger, j->args.path);
                if (r >= 0) {
                        audit_file_change(t, t->progress.step + 1, tool_kind_to_string(j->args.kind), j->args.path);
                        agent_note_written(run, j->args.path);
                }
        }
        /* A patch names its paths itself; each is noted, audited and the
         * agent's own as one write_file would be. */
        for (char **path = j->patched; path && *path; path++) {
                ledger_note_path(run->ledger, *path);
                if (r >= 0) {
                        audit_file_change(t, t->progress.step + 1, tool_kind_to_string(j->args.kind), *path);
                        agent_note_written(run, *path);
                }
        }
        if (j->args.kind == TOOL_KEEP_FILE && r >= 0)
                r = agent_keep_file(run, j->kept, j->args.reason, j->binary, j->size, &j->out);
        if (r < 0 && !j->out)
                j->out = strdup(strerror(-r));
        if (r >= 0 && j->check_script && j->out) {
                int k;

                free(run->check_id);
                free(run->check_text);
                run->check_id = TAKE_PTR(j->id);
                run->check_text = TAKE_PTR(j->out);
                run->check_kind = j->args.kind;
                run->phase = PHASE_TOOL;
                k = agent_syntax_check_start(run, j->check_script, j->check_repository);
                if (k >= 0)
                        return;   /* continues in on_syntax_check_done() */
                run->phase = PHASE_IDLE;
                log_warning_errno(k, "Task '%s': cannot run the syntax check, ignoring: %m", t->id);
                j->id = TAKE_PTR(run->check_id);
                j->out = TAKE_PTR(run->check_text);
        }
        file_tool_answer(run, strempty(j->id), j->args.kind, j->out ?: "out of memory");
}

/* Takes *a. */
static int agent_file_tool_start(AgentRun *run, const char *id, ToolCallArgs *a) {
        FileToolJob *j;
        int r;

        j = calloc(1, sizeof(FileToolJob));
        if (!j)
                return -ENOMEM;
        j->ws_fd = fcntl(ledger_workspace_fd(run->ledger), F_DUPFD_CLOEXEC, 3);
        j->id = strdup(id);
        j->keep = (size_t) run->factory->config.output_keep_bytes;
        j->args = *a;
        *a = (ToolCallArgs) { .kind = _TOOL_KIND_INVALID };
        if (j->ws_fd < 0 || !j->id) {
                r = j->ws_fd < 0 ? -errno : -ENOMEM;
                file_tool_job_free(j);
                return r;
        }
        /* A write borrows the ledger: the base's .agentfab.md names its
         * syntax checks. */
        return agent_job_start(run, "tool", file_tool_job_run, on_file_tool_done, file_tool_job_free, j,
                               tool_writes(j->args.kind) ? &j->ledger : NULL, PHASE_TOOL);
}

void agent_take_held_tools(AgentRun *run) {
        run->tools_held = false;
        run->phase = PHASE_IDLE;
        agent_next_tool(run);
}

/* Runs the tool calls of the reply one after another; commands go to the
 * sandbox and continue in agent_on_command_done(), the file tools to a
 * worker thread and continue in on_file_tool_done(). */
void agent_next_tool(AgentRun *run) {
        Task *t = run->task;

        while (run->task && run->calls && run->next_call < json_object_array_length(run->calls)) {
                _cleanup_(tool_call_args_done) ToolCallArgs a = {};
                _cleanup_free_ char *error = NULL;
                json_object *call = json_object_array_get_idx(run->calls, run->next_call++);
                const char *id = tool_call_field(call, "id"), *name = tool_call_field(call, "name"),
                        *args = tool_call_field(call, "arguments");
                int r;

                if (!id)
                        id = "call";
                r = tool_call_parse(name, args ?: "{}", &a, &error);
                if (r < 0) {
                        _cleanup_json_ json_object *o = NULL;
                        run->bad_calls++;
                        /* Arguments cut at the reply's token limit are
                         * that, not "invalid JSON" the model should fix. */
                        if (run->reply_cut && json_parse_strict(args ?: "{}", strlen(args ?: "{}"), &o) < 0) {
                                free(error);
                                error = agent_cut_note(run, name);
                        }
                        agent_tool_result(run, id, strempty(name), error ?: "malformed tool call");
                        continue;
                }
                run->good_calls++;

                if (run->planning_look && !agent_tool_reads_only(a.kind)) {
                        agent_tool_result(run, id, strempty(name), "Only read_file, list_files and search may be "
                                          "called before the plan. Write the plan first; the work comes after it.");
                        continue;
                }

                switch (a.kind) {
                case TOOL_RUN_COMMAND:
                case TOOL_RUN_TESTS:
                case TOOL_FINISH: {
                        const char *command = a.kind == TOOL_RUN_COMMAND ? a.command : t->spec.test_command;

                        if (a.kind == TOOL_FINISH && a.summary)
                                (void) free_and_strdup(&run->finish_summary, a.summary);
                        /* Giving up: no tests, the task stops at the step's
                         * end for a person (the gave-up breaker). */
                        if (a.kind == TOOL_FINISH && a.cannot_complete) {
                                if (free_and_strdup(&run->gave_up, a.summary) < 0)
                                        return agent_fail(run, "Out of memory.");
                                agent_tool_result(run, id, "finish",
                                                  "You gave up. At the end of this step the task stops for a person, "
                                                  "who reads your summary as the reason: they may amend the goal or "
                                                  "the acceptance criteria, let you go on, or cancel the task.");
                                continue;
                        }
                        if (isempty(command)) {
                                if (a.kind == TOOL_FINISH) {
                                        run->finish = true;
                                        agent_tool_result(run, id, "finish",
                                                          "There is no test command; your work is accepted for a human's review, "
                                                          "once you have reviewed your whole change as it is now: if "
                                                          "you have not, its diff is shown to you next.");
                                } else
                                        agent_tool_result(run, id, tool_kind_to_string(a.kind),
                                                          "This task has no test command.");
                                continue;
                        }
                        if (free_and_strdup(&run->call_id, id) < 0 || free_and_strdup(&run->call_command, command) < 0)
                                return agent_fail(run, "Out of memory.");
                        run->call_kind = a.kind;
                        run->phase = PHASE_TOOL;
                        r = agent_run_command(run, tool_kind_to_string(a.kind), command, a.timeout_sec);
                        if (r < 0) {
                                run->phase = PHASE_IDLE;
                                return agent_fail(run, "Cannot run a command in the sandbox: %s", strerror(-r));
                        }
                        return;   /* continues in agent_on_command_done() */
                }
                default: {
                        /* The file tools read and write the workspace: in a
                         * worker thread, and the next call when it is done. */
                        const char *tool = strempty(tool_kind_to_string(a.kind));

                        r = agent_file_tool_start(run, id, &a);
                        if (r < 0)
                                return agent_fail(run, "Cannot run the tool %s: %s", tool, strerror(-r));
                        return;   /* continues in on_file_tool_done() */
                }
                }
        }

        if (!run->task)
                return;
        /* A call written in the text and cut at the reply's token limit has
         * no id to answer: the model hears of it after the others' results. */
        if (run->cut_untold) {
                _cleanup_free_ char *text = agent_cut_note(run, NULL);
                json_object *m = text ? conversation_message_new("user", text) : NULL;
                run->cut_untold = false;
                if (!m || conversation_add(run, m) < 0) {
                        json_object_put(m);
                        return agent_fail(run, "Out of memory.");
                }
        }
        if (run->planning_look)
                return agent_plan_look_done(run);
        agent_end_step(run);
}

