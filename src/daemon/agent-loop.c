/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent-loop.h"
#include "audit.h"
#include "breakers.h"
#include "exec-session.h"
#include "forge.h"
#include "fs-util.h"
#include "json-util.h"
#include "ledger.h"
#include "log.h"
#include "manager.h"
#include "model-client.h"
#include "model-profile.h"
#include "stream.h"
#include "string-util.h"
#include "task-store.h"
#include "tools.h"
#include "worker.h"

#define CONVERSATION_MAX   (64u * 1024u * 1024u)
#define TOOL_OUTPUT_MAX    (1024u * 1024u)
#define FILE_MAX           (8u * 1024u * 1024u)
#define LIST_MAX_ENTRIES   2000u
#define SEARCH_MAX_MATCHES 200u
#define TREE_MAX_ENTRIES   300u
#define INSTRUCTIONS_MAX   (32u * 1024u)
#define KEEP_RECENT        6u   /* messages never elided at the end of the conversation */

typedef enum AgentPhase {
        PHASE_IDLE,                /* nothing in flight: agent_advance() decides */
        PHASE_PREPARE,             /* the workspace is being made, in a worker thread */
        PHASE_BASELINE,            /* the test command before any change */
        PHASE_MODEL,               /* a model call in flight */
        PHASE_TOOL,                /* a command of a tool call in flight */
        PHASE_DELIVER,             /* the push and the pull request, in a worker thread */
} AgentPhase;

struct AgentRun {
        Task *task;                /* NULL once stopped: callbacks then do nothing */
        Manager *manager;
        sd_event_source *defer;    /* runs agent_advance() */
        sd_event_source *dispose;  /* frees a stopped run outside its own callbacks */
        AgentPhase phase;

        int dir_fd;                /* tasks/<id> */
        int log_fd;                /* output.log */
        Ledger *ledger;
        SandboxSession *session;
        const ModelProfile *profile;
        char *api_key;
        char *model_name;          /* "<profile>/<model>" for trailers and the journal */
        ModelCall *call;
        Worker *worker;            /* making the workspace, or delivering to a forge */
        ModelReplay *replay;       /* with spec.replay: the recorded exchanges instead of the endpoint */
        json_object *messages;     /* the conversation: acknowledged messages, then the step in flight */
        json_object *tools;
        uint64_t clock_usec;       /* CLOCK_MONOTONIC when wall-clock use was last counted */

        /* The step in flight. */
        json_object *calls;        /* the tool calls of the model's reply */
        size_t next_call;
        char *call_id;             /* of the tool call whose command runs */
        ToolKind call_kind;
        char *call_command;
        char **commands;           /* run in this step, for the Agentfab-Command: trailers */
        char *subject;
        char *body;                /* the reply's words after its first line, and its tool calls */
        bool tests_ran;
        bool tests_passed;
        int test_exit;
        int tests_n_passed;
        bool network;              /* a command failed for want of the network */
        char *network_command;
        bool finish;               /* finish called and its tests passed */
        unsigned good_calls;       /* tool calls of this step that parsed */
        unsigned bad_calls;        /* and those that did not */
        char *finish_summary;
};

static void agent_schedule(AgentRun *run);
static void agent_fail(AgentRun *run, const char *fmt, ...) _printf_(2, 3);

static uint64_t now_monotonic(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

static void agent_step_done_reset(AgentRun *run) {
        json_object_put(run->calls);
        run->calls = NULL;
        run->next_call = 0;
        run->call_id = mfree_ptr(run->call_id);
        run->call_command = mfree_ptr(run->call_command);
        strv_free(run->commands);
        run->commands = NULL;
        run->subject = mfree_ptr(run->subject);
        run->body = mfree_ptr(run->body);
        run->tests_ran = run->tests_passed = run->network = run->finish = false;
        run->good_calls = run->bad_calls = 0;
        run->test_exit = 0;
        run->tests_n_passed = -1;
        run->network_command = mfree_ptr(run->network_command);
        run->finish_summary = mfree_ptr(run->finish_summary);
}

static AgentRun *agent_run_free(AgentRun *run);
DEFINE_TRIVIAL_CLEANUP_FUNC(AgentRun *, agent_run_free);

static AgentRun *agent_run_free(AgentRun *run) {
        if (!run)
                return NULL;
        if (run->call)
                model_call_cancel(run->call);
        worker_detach(run->worker);
        sd_event_source_disable_unref(run->defer);
        sd_event_source_disable_unref(run->dispose);
        sandbox_session_free(run->session);
        ledger_free(run->ledger);
        model_replay_free(run->replay);
        agent_step_done_reset(run);
        json_object_put(run->messages);
        json_object_put(run->tools);
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
        t->run = NULL;
        run->task = NULL;
        /* Cancel now, so that no reply or output reaches a task that moved on;
         * free later, because we may be inside a callback of the call or the
         * session. Ending the session ends the sandbox and its scope. */
        if (run->call) {
                model_call_cancel(run->call);
                run->call = NULL;
        }
        /* A clone in flight finishes on its own data and is thrown away. */
        worker_detach(run->worker);
        run->worker = NULL;
        sd_event_source_set_enabled(run->defer, SD_EVENT_OFF);
        if (sd_event_add_defer(run->manager->event, &run->dispose, on_dispose, run) < 0)
                agent_run_free(run);   /* out of memory: better now than never */
}

void agent_destroy(Task *t) {
        AgentRun *run = t->run;

        if (!run)
                return;
        t->run = NULL;
        run->task = NULL;
        agent_run_free(run);
}

/* Counts wall-clock time the agent was at work, for the budget. */
static void agent_count_clock(AgentRun *run) {
        uint64_t now = now_monotonic();
        if (run->clock_usec > 0 && now > run->clock_usec)
                run->task->progress.wall_usec += now - run->clock_usec;
        run->clock_usec = now;
}

static int agent_save(AgentRun *run) {
        agent_count_clock(run);
        return task_save(run->task);
}

static void agent_set_state(AgentRun *run, TaskState state, const char *reason) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Task *t = run->task;
        int r;

        agent_count_clock(run);
        r = task_set_state(t, state, reason, UID_INVALID, &error);
        if (r < 0)
                log_error("Task '%s': cannot become %s: %s", t->id, task_state_to_string(state),
                          error.message ?: strerror(-r));
        if (!task_state_is_active(t->state))
                agent_stop(t);
}

static void agent_fail(AgentRun *run, const char *fmt, ...) {
        _cleanup_free_ char *reason = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&reason, fmt, ap) < 0)
                reason = NULL;
        va_end(ap);
        log_error("Task '%s' failed: %s", run->task->id, strempty(reason));
        agent_set_state(run, TASK_FAILED, reason ?: "out of memory");
}

/* ---- The conversation: JSON lines, appended; the state file says how
 * many of them count. ---- */

static int conversation_append(AgentRun *run, json_object *message) {
        _cleanup_free_ char *line = NULL;
        int r;

        if (asprintf(&line, "%s\n", json_to_line(message)) < 0)
                return -ENOMEM;
        r = append_file_at(run->dir_fd, TASK_CONVERSATION_FILE, line, strlen(line), 0600);
        if (r < 0)
                return r;
        return json_object_array_add(run->messages, json_object_get(message)) < 0 ? -ENOMEM : 0;
}

/* Messages of the step in flight go to memory only; at the checkpoint they
 * are appended and counted. */
static int conversation_add(AgentRun *run, json_object *message) {
        return json_object_array_add(run->messages, message) < 0 ? -ENOMEM : 0;
}

static int conversation_load(AgentRun *run) {
        _cleanup_free_ char *text = NULL;
        unsigned want = run->task->progress.messages, n = 0;
        size_t size = 0, good = 0;
        int r;

        run->messages = json_object_new_array();
        if (!run->messages)
                return -ENOMEM;

        r = read_file_at(run->dir_fd, TASK_CONVERSATION_FILE, CONVERSATION_MAX, &text, &size);
        if (r == -ENOENT)
                return want == 0 ? 0 : -EBADMSG;
        if (r < 0)
                return r;

        for (char *p = text, *nl; n < want && p < text + size; p = nl + 1) {
                _cleanup_json_ json_object *j = NULL;

                nl = memchr(p, '\n', (size_t) (text + size - p));
                if (!nl)
                        break;   /* a torn last line is not acknowledged */
                if (json_parse_strict(p, (size_t) (nl - p), &j) < 0 || !json_object_is_type(j, json_type_object))
                        return -EBADMSG;
                if (json_object_array_add(run->messages, TAKE_PTR(j)) < 0)
                        return -ENOMEM;
                n++;
                good = (size_t) (nl + 1 - text);
        }
        if (n < want)
                return -EBADMSG;

        /* Whatever follows belongs to a step the state file never
         * acknowledged: cut it off, so it cannot count later. */
        if (good < size) {
                _cleanup_close_ int fd = openat(run->dir_fd, TASK_CONVERSATION_FILE, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 || ftruncate(fd, (off_t) good) < 0 || fsync(fd) < 0)
                        return -errno;
        }
        return 0;
}

static json_object *message_new(const char *role, const char *content) {
        _cleanup_json_ json_object *m = json_object_new_object();
        if (!m || json_add_string(m, "role", role) < 0 ||
            json_object_object_add(m, "content", json_object_new_string(strempty(content))) < 0)
                return NULL;
        return TAKE_PTR(m);
}

static json_object *tool_message_new(const char *call_id, const char *name, const char *content) {
        _cleanup_json_ json_object *m = message_new("tool", content);
        if (!m || json_add_string(m, "tool_call_id", call_id) < 0 || json_add_string(m, "name", name) < 0)
                return NULL;
        return TAKE_PTR(m);
}

/* What is sent to the model: the conversation, with the oldest tool outputs
 * replaced by a note while it is larger than the profile's context budget
 * (about 4 bytes a token). The system prompt, the goal and the latest
 * messages are never elided; the choice depends only on the conversation,
 * so a redone step sends the same request. */
static json_object *conversation_for_model(AgentRun *run) {
        size_t n = json_object_array_length(run->messages), total = 0;
        uint64_t budget = run->profile->context_budget ? run->profile->context_budget * 4 : UINT64_MAX;
        _cleanup_json_ json_object *out = json_object_new_array();

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++)
                total += strlen(json_object_to_json_string(json_object_array_get_idx(run->messages, i)));

        for (size_t i = 0; i < n; i++) {
                json_object *m = json_object_array_get_idx(run->messages, i);
                const char *role = NULL;
                json_object *content;

                (void) json_get_string(m, "role", &role);
                if (total > budget && i >= 2 && i + KEEP_RECENT < n && streq_ptr(role, "tool") &&
                    json_object_object_get_ex(m, "content", &content) &&
                    json_object_get_string_len(content) > 200) {
                        _cleanup_json_ json_object *copy = NULL;
                        char note[128];
                        size_t len = (size_t) json_object_get_string_len(content);

                        if (json_object_deep_copy(m, &copy, NULL) < 0)
                                return NULL;
                        snprintf(note, sizeof(note), "[output of %zu bytes elided to fit the context budget]", len);
                        json_object_object_add(copy, "content", json_object_new_string(note));
                        total -= len - strlen(note);
                        if (json_object_array_add(out, TAKE_PTR(copy)) < 0)
                                return NULL;
                        continue;
                }
                if (json_object_array_add(out, json_object_get(m)) < 0)
                        return NULL;
        }
        return TAKE_PTR(out);
}

static int system_prompt(AgentRun *run, char **ret) {
        _cleanup_free_ char *tree = NULL, *instructions = NULL;
        Task *t = run->task;
        int ws = ledger_workspace_fd(run->ledger);

        (void) workspace_tree(ws, TREE_MAX_ENTRIES, &tree);
        (void) workspace_agent_instructions(ws, INSTRUCTIONS_MAX, &instructions);

        if (asprintf(ret,
                     "You are agentfab's software engineering agent. You work on a git repository checked out at "
                     "/workspace, through the tools you are given. Commands run in a sandbox without network access.\n\n"
                     "# Goal\n%s\n\n"
                     "# Acceptance criteria\n%s\n\n"
                     "# Test command\n%s\n\n"
                     "# Files\n%s\n"
                     "%s%s%s"
                     "# Rules\n"
                     "- Work in small steps. Read before you edit. Keep changes to what the goal needs.\n"
                     "- Paths are relative to the workspace. Never try to leave it.\n"
                     "- Run the tests (run_tests) to check your work; call finish with a summary when the goal is met "
                     "and the tests pass. finish runs the tests again and is refused while they fail.\n"
                     "- Changes to protected paths (authentication, payment, migrations, CI configuration, lock files), "
                     "dependency manifests and deleting tests need a human's approval; avoid them unless the goal "
                     "requires them.\n",
                     t->spec.goal,
                     isempty(t->spec.acceptance) ? "(none given: the goal and the tests decide)" : t->spec.acceptance,
                     isempty(t->spec.test_command) ? "(none: there is no test command; say in your summary how you checked your work)" : t->spec.test_command,
                     strempty(tree),
                     instructions ? "# The repository's instructions for agents\n" : "",
                     strempty(instructions), instructions ? "\n\n" : "") < 0)
                return -ENOMEM;
        return 0;
}

/* ---- Preparing: the workspace, the sandbox, the baseline. ---- */

/* Making the workspace may mean cloning a big repository, over the network
 * even: it runs in a worker thread, on data of its own, while the loop
 * serves everything else. */
typedef struct CreateJob {
        int dir_fd;
        char *source;
        char *base;
        char *branch;
        LedgerOptions options;     /* its ssh_key and ssh_known_hosts point to the two below */
        char *ssh_key;             /* secret: wiped when the job is freed */
        char *ssh_known_hosts;
        Ledger *ledger;            /* the result */
        char *error;
} CreateJob;

static int create_job_run(void *p) {
        CreateJob *j = p;

        /* A half-made workspace of an interrupted preparation goes first. */
        (void) rm_rf_at(j->dir_fd, "ledger.git");
        (void) rm_rf_at(j->dir_fd, TASK_WORKSPACE_DIR);
        return ledger_create(j->dir_fd, j->source, -EBADF, j->base, j->branch, &j->options, &j->error, &j->ledger);
}

static void create_job_free(void *p) {
        CreateJob *j = p;

        if (!j)
                return;
        ledger_free(j->ledger);
        safe_close(j->dir_fd);
        free(j->source);
        free(j->base);
        free(j->branch);
        free(j->error);
        credential_text_free(j->ssh_key);
        credential_text_free(j->ssh_known_hosts);
        free(j);
}

/* For an ssh:// repository: the [Git] credentials, read now, so a renewed
 * credential counts from the next preparation on. The key is never logged:
 * the messages name the credential only. */
static int create_job_read_ssh(CreateJob *j, const Config *c, char **ret_error) {
        int r;

        if (!strneq(j->source, "ssh://", 6))
                return 0;
        /* SECURITY: without known hosts, no ssh connection at all. */
        if (!c->ssh_known_hosts_credential)
                return asprintf(ret_error, "ssh:// repositories need [Git] SSHKnownHostsCredential= in the daemon's "
                                "configuration.") < 0 ? -ENOMEM : -EPERM;
        r = config_read_credential(c->ssh_known_hosts_credential, CONFIG_SSH_KNOWN_HOSTS_MAX, &j->ssh_known_hosts);
        if (r < 0)
                return asprintf(ret_error, "Cannot read the known hosts credential '%s': %s",
                                c->ssh_known_hosts_credential, strerror(-r)) < 0 ? -ENOMEM : r;
        if (c->ssh_key_credential) {
                r = config_read_credential(c->ssh_key_credential, CONFIG_SSH_KEY_MAX, &j->ssh_key);
                if (r < 0)
                        return asprintf(ret_error, "Cannot read the ssh key credential '%s': %s",
                                        c->ssh_key_credential, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        j->options.ssh_key = j->ssh_key;
        j->options.ssh_known_hosts = j->ssh_known_hosts;
        return 0;
}

static void on_create_done(Worker *w, int r, void *p, void *userdata) {
        CreateJob *j = p;
        AgentRun *run = userdata;

        (void) w;
        run->worker = NULL;
        run->phase = PHASE_IDLE;
        if (!run->task)
                return;
        if (r < 0)
                return agent_fail(run, "Cannot prepare the workspace: %s", j->error ?: strerror(-r));
        run->ledger = TAKE_PTR(j->ledger);
        agent_schedule(run);
}

/* 0: the workspace is there; 1: it is being made (agent_advance() runs
 * again when it is); negative: the task failed. */
static int agent_open_workspace(AgentRun *run, bool create) {
        Task *t = run->task;
        CreateJob *j;
        int r;

        if (run->ledger)
                return 0;

        r = ledger_open(run->dir_fd, t->branch, &run->ledger);
        if (r >= 0 || !create) {
                if (r < 0)
                        agent_fail(run, "Cannot open the task's workspace: %s", strerror(-r));
                return r;
        }

        j = calloc(1, sizeof(CreateJob));
        if (!j)
                return agent_fail(run, "Out of memory."), -ENOMEM;
        *j = (CreateJob) {
                .dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3),
                .source = strdup(t->spec.repository),
                .base = strdup(t->spec.base ?: "HEAD"),
                .branch = strdup(t->branch),
                .options = { .max_bytes = run->manager->config.max_repository_size, .submodules = t->spec.submodules },
        };
        if (j->dir_fd < 0 || !j->source || !j->base || !j->branch) {
                create_job_free(j);
                return agent_fail(run, "Cannot prepare the workspace: out of resources."), -ENOMEM;
        }
        _cleanup_free_ char *ssh_error = NULL;
        r = create_job_read_ssh(j, &run->manager->config, &ssh_error);
        if (r < 0) {
                create_job_free(j);
                return agent_fail(run, "Cannot prepare the workspace: %s", ssh_error ?: strerror(-r)), r;
        }
        r = worker_start(run->manager->event, create_job_run, on_create_done, create_job_free, j, run, &run->worker);
        if (r < 0) {
                create_job_free(j);
                return agent_fail(run, "Cannot start preparing the workspace: %s", strerror(-r)), r;
        }
        run->phase = PHASE_PREPARE;
        return 1;
}

static uint64_t agent_wall_budget_usec(AgentRun *run) {
        Task *t = run->task;

        return (t->spec.limits[TASK_LIMIT_MAX_WALL_CLOCK_SEC] != TASK_LIMIT_UNSET ?
                t->spec.limits[TASK_LIMIT_MAX_WALL_CLOCK_SEC] * USEC_PER_SEC : run->manager->config.max_wall_clock_usec) +
                t->progress.extra_wall_usec;
}

static uint64_t agent_command_timeout_usec(AgentRun *run) {
        Task *t = run->task;

        return t->spec.limits[TASK_LIMIT_COMMAND_TIMEOUT_SEC] != TASK_LIMIT_UNSET ?
                t->spec.limits[TASK_LIMIT_COMMAND_TIMEOUT_SEC] * USEC_PER_SEC : run->manager->config.command_timeout_usec;
}

static int agent_open_sandbox(AgentRun *run) {
        _cleanup_free_ char *error = NULL;
        const Config *c = &run->manager->config;
        Task *t = run->task;
        int r;

        if (run->session)
                return 0;

        SandboxLimits limits = {
                .memory_max = t->spec.limits[TASK_LIMIT_MEMORY_MAX] != TASK_LIMIT_UNSET ?
                        t->spec.limits[TASK_LIMIT_MEMORY_MAX] : c->memory_max,
                .tasks_max = t->spec.limits[TASK_LIMIT_TASKS_MAX] != TASK_LIMIT_UNSET ?
                        t->spec.limits[TASK_LIMIT_TASKS_MAX] : c->tasks_max,
                .cpu_quota_percent = t->spec.limits[TASK_LIMIT_CPU_QUOTA_PERCENT] != TASK_LIMIT_UNSET ?
                        t->spec.limits[TASK_LIMIT_CPU_QUOTA_PERCENT] : c->cpu_quota_percent,
        };
        /* The task's wall-clock budget is checked between steps; the scope's
         * RuntimeMaxSec= is the backstop that ends the sandbox even if a step
         * never ends: what is left of the budget, plus one command's time. */
        uint64_t wall = agent_wall_budget_usec(run), used = t->progress.wall_usec;
        limits.runtime_max_sec = ((wall > used ? wall - used : 0) + agent_command_timeout_usec(run)) / USEC_PER_SEC + 60;
        r = sandbox_session_open(run->manager->event, c->launcher_socket ?: SANDBOX_LAUNCHER_SOCKET, t->id,
                                 ledger_workspace_fd(run->ledger), &limits, NULL, &error, &run->session);
        if (r < 0) {
                agent_fail(run, "Cannot start the task's sandbox: %s", error ?: strerror(-r));
                return r;
        }
        audit_sandbox(t, sandbox_session_get_unit(run->session), sandbox_session_get_pid(run->session),
                      sandbox_session_get_uid(run->session));
        return 0;
}

static void on_command_output(const char *stream, const char *data, size_t size, void *userdata) {
        AgentRun *run = userdata;
        (void) stream;
        if (run->task && run->manager->stream)
                stream_server_task_output(run->manager->stream, run->task, data, size);
}

static void on_command_done(SandboxSession *s, int error, const ExecResult *result, void *userdata);

static int agent_run_command(AgentRun *run, const char *tool, const char *command, uint64_t timeout_sec) {
        const Config *c = &run->manager->config;
        Task *t = run->task;
        uint64_t timeout = agent_command_timeout_usec(run);
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) command, NULL };
        _cleanup_free_ char *banner = NULL;

        if (timeout_sec > 0 && timeout_sec * USEC_PER_SEC < timeout)
                timeout = timeout_sec * USEC_PER_SEC;

        if (asprintf(&banner, "\n$ %s\n", command) >= 0)
                (void) write(run->log_fd, banner, strlen(banner));

        ExecRequest req = {
                .argv = argv,
                .timeout_usec = timeout,
        };
        t->progress.commands++;
        (void) tool;
        return sandbox_session_exec(run->session, &req, run->log_fd, c->output_keep_bytes, on_command_output,
                                    on_command_done, run);
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

/* ---- Breakers ---- */

static void agent_trip(AgentRun *run, Breaker b, const char *reason, const char *commit_before) {
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

/* The changes from commit from (NULL: the base) to the workspace, against
 * the rules of bc. */
static int check_changes(AgentRun *run, const char *from, const BreakerConfig *bc, BreakerTrip *trip) {
        FileChange *changes = NULL;
        size_t n = 0;
        int r;

        r = ledger_changes(run->ledger, from, &changes, &n);
        if (r < 0)
                return r;
        r = check_file_changes(changes, n, bc, trip);
        file_changes_free(changes, n);
        return r;
}

typedef struct StepChanges {
        FileChange *c;
        size_t n;
        bool known;                /* false: ledger_changes() failed, ask again */
} StepChanges;

static void step_changes_done(StepChanges *s) {
        file_changes_free(s->c, s->n);
}

#define STEP_BODY_FILES_MAX 50U

/* Appends the files the step changed to the commit body. */
static int step_body_add_changes(AgentRun *run, const FileChange *changes, size_t n) {
        char *buf = NULL;
        size_t size = 0;

        FILE *f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        fputs(strempty(run->body), f);
        if (n > 0)
                fputs(run->body ? "\nFiles:\n" : "Files:\n", f);
        for (size_t i = 0; i < n && i < STEP_BODY_FILES_MAX; i++)
                fprintf(f, "  %c %s%s%s\n", changes[i].status, changes[i].old_path ?: "", changes[i].old_path ? " -> " : "",
                        changes[i].path);
        if (n > STEP_BODY_FILES_MAX)
                fprintf(f, "  and %zu more\n", n - STEP_BODY_FILES_MAX);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        free(run->body);
        run->body = buf;
        return 0;
}

/* Checks after a step. Path rules look at what this step changed (step,
 * from commit_before); size rules at everything since the base, with the
 * allowance approvals added. Returns 1 if a breaker tripped (the task is
 * paused). */
static int agent_check_breakers(AgentRun *run, const char *commit_before, const StepChanges *step) {
        _cleanup_(breaker_config_done) BreakerConfig bc = {};
        _cleanup_(breaker_trip_done) BreakerTrip trip = {};
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        int r;

        r = breaker_config_from(&run->manager->config, &bc);
        if (r < 0)
                return r;

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
                if (asprintf(&reason, "the model sent %u malformed replies or tool calls in a row", p->malformed) < 0)
                        return -ENOMEM;
                agent_trip(run, BREAKER_MALFORMED_OUTPUT, reason, commit_before);
                return 1;
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
                /* Mid-work breakage is the failing breaker's business; a green
                 * run with fewer passing tests means tests were dropped. */
                if (run->tests_passed && p->baseline_passed >= 0 && run->tests_n_passed >= 0 &&
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
        r = step->known ? check_file_changes(step->c, step->n, &step_only, &trip) :
                          check_changes(run, commit_before, &step_only, &trip);
        if (r != 0)
                return r < 0 ? r : (agent_trip(run, trip.breaker, trip.reason, commit_before), 1);

        /* Everything since the base: size. */
        BreakerConfig size_only = bc;
        for (int i = 0; i < _BREAKER_MAX; i++)
                size_only.enabled[i] = i == BREAKER_FILES_CHANGED || i == BREAKER_LINES_CHANGED;
        size_only.max_files_changed += (unsigned) MIN(p->extra_files, (uint64_t) UINT_MAX / 2);
        size_only.max_lines_changed += (unsigned) MIN(p->extra_lines, (uint64_t) UINT_MAX / 2);
        r = check_changes(run, NULL, &size_only, &trip);
        if (r != 0)
                return r < 0 ? r : (agent_trip(run, trip.breaker, trip.reason, commit_before), 1);
        return 0;
}

/* Budgets, before each model call. Returns 1 if one is exhausted (the task
 * is paused or failed). */
static int agent_check_budget(AgentRun *run) {
        const Config *c = &run->manager->config;
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
        else
                return 0;

        if (!reason)
                return -ENOMEM;
        if (c->budget_action == BUDGET_ACTION_FAIL) {
                audit_breaker(t, breaker_to_string(BREAKER_BUDGET), reason);
                agent_fail(run, "%s", reason);
        } else
                agent_trip(run, BREAKER_BUDGET, reason, p->checkpoint);
        return 1;
}

/* ---- The step's end: checkpoint, acknowledgement, breakers. ---- */

static void agent_end_step(AgentRun *run) {
        _cleanup_free_ char *error = NULL, *commit_before = NULL, *subject = NULL;
        _cleanup_(step_changes_done) StepChanges changes = {};
        struct passwd *pw;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        char commit[41] = "";
        unsigned step = p->step + 1;
        int r;

        commit_before = p->checkpoint ? strdup(p->checkpoint) : NULL;
        if (p->checkpoint && !commit_before)
                return agent_fail(run, "Out of memory.");

        if (!run->subject && asprintf(&run->subject, "Step %u", step) < 0)
                return agent_fail(run, "Out of memory.");
        /* What the step changed: for a reviewer reading git log, and for the
         * breakers' path rules below (the commit leaves the workspace as it is). */
        changes.known = ledger_changes(run->ledger, commit_before, &changes.c, &changes.n) >= 0;
        if (changes.known && step_body_add_changes(run, changes.c, changes.n) < 0)
                return agent_fail(run, "Out of memory.");

        pw = getpwuid(t->owner);
        Checkpoint cp = {
                .task_id = t->id,
                .step = step,
                .subject = run->subject,
                .body = run->body,
                .model = run->model_name,
                .commands = run->commands,
                .tests = run->tests_ran ? (run->tests_passed ? "pass" : "fail") : "not-run",
                .test_command = t->spec.test_command,
                .test_exit = run->test_exit,
                .uid = t->owner,
                .user_name = pw ? pw->pw_name : NULL,
        };
        r = ledger_checkpoint(run->ledger, &cp, commit, &error);
        if (r < 0)
                return agent_fail(run, "Cannot commit step %u: %s", step, error ?: strerror(-r));
        bool committed = r > 0;

        /* A reply whose tool calls were all garbage counts towards the
         * breaker; one that the tools could use starts the count again. */
        if (run->good_calls > 0)
                p->malformed = 0;
        else if (run->bad_calls > 0)
                p->malformed++;

        /* The messages of the step join the conversation file first, then
         * the state file acknowledges them, the commit and the step in one
         * atomic write. A crash in between leaves the old state: the step
         * is redone, and the extra lines and the commit are cut off then. */
        size_t n = json_object_array_length(run->messages);
        for (size_t i = p->messages; i < n; i++) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "%s\n", json_to_line(json_object_array_get_idx(run->messages, i))) < 0)
                        return agent_fail(run, "Out of memory.");
                r = append_file_at(run->dir_fd, TASK_CONVERSATION_FILE, line, strlen(line), 0600);
                if (r < 0)
                        return agent_fail(run, "Cannot record the conversation: %s", strerror(-r));
        }

        p->step = step;
        p->messages = (unsigned) n;
        if (committed && (free_and_strdup(&p->checkpoint, commit) < 0 || free_and_strdup(&p->head, commit) < 0))
                return agent_fail(run, "Out of memory.");
        if (run->finish) {
                p->finished = true;
                (void) free_and_strdup(&p->summary, run->finish_summary);
        }
        r = agent_save(run);
        if (r < 0)
                return agent_fail(run, "Cannot save the task's state: %s", strerror(-r));

        audit_step(t, step, commit[0] ? commit : NULL, run->subject, cp.tests);
        task_bus_send_progress(t);

        r = agent_check_breakers(run, commit_before, &changes);
        if (r < 0)
                return agent_fail(run, "Cannot check the step's changes: %s", strerror(-r));
        agent_step_done_reset(run);
        if (r > 0)
                return;

        if (p->finished) {
                agent_set_state(run, TASK_DELIVERING, NULL);
                if (!t->run)
                        return;
        }
        agent_schedule(run);
}

/* ---- Tool calls ---- */

static void agent_next_tool(AgentRun *run);

static void agent_tool_result(AgentRun *run, const char *call_id, const char *name, const char *text) {
        json_object *m = tool_message_new(call_id, name, text);
        if (!m || conversation_add(run, m) < 0)
                return agent_fail(run, "Out of memory.");
}

static void agent_record_tests(AgentRun *run, int exit_code, const char *output) {
        TestRun tr = {};
        Task *t = run->task;

        (void) test_run_parse(exit_code, output, &tr);
        run->tests_ran = true;
        run->tests_passed = tr.passed;
        run->test_exit = exit_code;
        run->tests_n_passed = tr.n_passed;
        t->progress.last_test_exit = exit_code;
        (void) free_and_strdup(&t->progress.last_tests, tr.passed ? "pass" : "fail");
        /* "The same tests failing": a run that fails the way the last one
         * did extends the streak; a new failure starts a new one. */
        if (tr.passed)
                t->progress.test_failures = 0;
        else if (t->progress.test_failures > 0 && tr.signature == t->progress.test_signature)
                t->progress.test_failures++;
        else
                t->progress.test_failures = 1;
        t->progress.test_signature = tr.signature;
}

static void on_command_done(SandboxSession *s, int error, const ExecResult *result, void *userdata) {
        _cleanup_free_ char *text = NULL, *tool_name = NULL;
        AgentRun *run = userdata;
        Task *t = run->task;
        int status;

        (void) s;
        if (!t)
                return;
        run->phase = PHASE_IDLE;

        if (error < 0) {
                if (error == -ECONNRESET || error == -EPIPE)
                        return agent_fail(run, "The task's sandbox ended unexpectedly.");
                return agent_fail(run, "Cannot run a command in the sandbox: %s", strerror(-error));
        }

        status = result->signal > 0 ? 128 + result->signal : result->status;
        tool_name = strdup(run->call_kind == _TOOL_KIND_INVALID ? "baseline" : tool_kind_to_string(run->call_kind));
        audit_command(t, t->progress.step + 1, strempty(tool_name), run->call_command, result->status, result->signal,
                      result->timed_out, result->duration_usec, result->output_bytes);

        /* The baseline run before the first step. */
        if (run->call_kind == _TOOL_KIND_INVALID) {
                TestRun tr = {};
                (void) test_run_parse(status, result->output, &tr);
                t->progress.baseline_passed = tr.n_passed;
                t->progress.baseline_done = true;
                (void) free_and_strdup(&t->progress.last_tests, tr.passed ? "pass" : "fail");
                t->progress.last_test_exit = status;
                (void) agent_save(run);
                run->call_command = mfree_ptr(run->call_command);
                agent_set_state(run, TASK_RUNNING, NULL);
                if (t->run)
                        agent_schedule(run);
                return;
        }

        (void) strv_extend(&run->commands, run->call_command);
        text = command_result_text(result);
        if (!text)
                return agent_fail(run, "Out of memory.");

        if (run->call_kind == TOOL_RUN_TESTS || run->call_kind == TOOL_FINISH)
                agent_record_tests(run, status, result->output);
        else if (status != 0 && command_output_needs_network(run->call_command, result->output)) {
                run->network = true;
                (void) free_and_strdup(&run->network_command, run->call_command);
        }

        if (run->call_kind == TOOL_FINISH) {
                if (run->tests_passed) {
                        run->finish = true;
                        free(text);
                        text = strdup("The tests pass. Your work is accepted and will be delivered.");
                } else {
                        _cleanup_free_ char *t2 = NULL;
                        if (asprintf(&t2, "finish refused: the tests fail.\n%s", text) < 0)
                                return agent_fail(run, "Out of memory.");
                        free(text);
                        text = TAKE_PTR(t2);
                }
                if (!text)
                        return agent_fail(run, "Out of memory.");
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

/* Runs the tool calls of the reply one after another; commands go to the
 * sandbox and continue in on_command_done(). */
static void agent_next_tool(AgentRun *run) {
        Task *t = run->task;
        int ws = ledger_workspace_fd(run->ledger);
        const Config *c = &run->manager->config;
        size_t keep = (size_t) c->output_keep_bytes;

        while (run->task && run->calls && run->next_call < json_object_array_length(run->calls)) {
                _cleanup_(tool_call_args_done) ToolCallArgs a = {};
                _cleanup_free_ char *out = NULL, *error = NULL;
                json_object *call = json_object_array_get_idx(run->calls, run->next_call++);
                const char *id = tool_call_field(call, "id"), *name = tool_call_field(call, "name"),
                        *args = tool_call_field(call, "arguments");
                int r;

                if (!id)
                        id = "call";
                r = tool_call_parse(name, args ?: "{}", &a, &error);
                if (r < 0) {
                        run->bad_calls++;
                        agent_tool_result(run, id, strempty(name), error ?: "malformed tool call");
                        continue;
                }
                run->good_calls++;

                switch (a.kind) {
                case TOOL_RUN_COMMAND:
                case TOOL_RUN_TESTS:
                case TOOL_FINISH: {
                        const char *command = a.kind == TOOL_RUN_COMMAND ? a.command : t->spec.test_command;

                        if (a.kind == TOOL_FINISH && a.summary)
                                (void) free_and_strdup(&run->finish_summary, a.summary);
                        if (isempty(command)) {
                                if (a.kind == TOOL_FINISH) {
                                        run->finish = true;
                                        agent_tool_result(run, id, "finish",
                                                          "There is no test command; your work is accepted for a human's review.");
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
                        return;   /* continues in on_command_done() */
                }
                case TOOL_READ_FILE:
                        r = tool_read_file(ws, &a, keep, &out);
                        break;
                case TOOL_WRITE_FILE:
                        r = tool_write_file(ws, &a, FILE_MAX, &out);
                        if (r >= 0)
                                audit_file_change(t, t->progress.step + 1, "write_file", a.path);
                        break;
                case TOOL_EDIT_FILE:
                        r = tool_edit_file(ws, &a, FILE_MAX, &out);
                        if (r >= 0)
                                audit_file_change(t, t->progress.step + 1, "edit_file", a.path);
                        break;
                case TOOL_LIST_FILES:
                        r = tool_list_files(ws, &a, LIST_MAX_ENTRIES, keep, &out);
                        break;
                case TOOL_SEARCH:
                        r = tool_search(ws, &a, SEARCH_MAX_MATCHES, keep, &out);
                        break;
                default:
                        r = -EINVAL;
                }
                if (r < 0 && !out)
                        out = strdup(strerror(-r));
                agent_tool_result(run, id, tool_kind_to_string(a.kind), out ?: "out of memory");
        }

        if (run->task)
                agent_end_step(run);
}

/* ---- Model calls ---- */

static char *step_subject_from(const ModelReply *reply, unsigned step) {
        _cleanup_free_ char *names = NULL;
        char *s;

        if (!isempty(reply->content)) {
                _cleanup_free_ char *line = strshorten_line(reply->content, 72);
                if (line && !isempty(line))
                        return TAKE_PTR(line);
        }
        for (size_t i = 0; i < reply->n_tool_calls && i < 4; i++) {
                _cleanup_free_ char *n = NULL;
                if (asprintf(&n, "%s%s%s", strempty(names), names ? ", " : "", strempty(reply->tool_calls[i].name)) < 0)
                        return NULL;
                free(names);
                names = TAKE_PTR(n);
        }
        if (asprintf(&s, "Step %u: %s", step, names ?: "no tool calls") < 0)
                return NULL;
        return s;
}

#define STEP_BODY_WORDS_MAX 4096U
#define STEP_BODY_CALLS_MAX 16U

/* The commit body's first part: what the model said beyond the subject line
 * (bounded), then the tools it called. The ledger sanitizes it. */
static char *step_body_from(const ModelReply *reply) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return NULL;
        const char *nl = reply->content ? strchr(reply->content, '\n') : NULL;
        if (nl) {
                nl += strspn(nl, "\n");
                if (*nl)
                        fprintf(f, "%.*s%s\n\n", (int) MIN(strlen(nl), (size_t) STEP_BODY_WORDS_MAX), nl,
                                strlen(nl) > STEP_BODY_WORDS_MAX ? " [...]" : "");
        }
        if (reply->n_tool_calls > 0) {
                fputs("Tool calls:", f);
                for (size_t i = 0; i < reply->n_tool_calls && i < STEP_BODY_CALLS_MAX; i++)
                        fprintf(f, "%s %s", i ? "," : "", strempty(reply->tool_calls[i].name));
                if (reply->n_tool_calls > STEP_BODY_CALLS_MAX)
                        fprintf(f, " and %zu more", reply->n_tool_calls - STEP_BODY_CALLS_MAX);
                fputs(".\n", f);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

static void on_model_reply(ModelCall *call, int error, const char *error_message, const ModelReply *reply, void *userdata) {
        AgentRun *run = userdata;
        Task *t = run->task;
        TaskProgress *p;
        bool planning;

        (void) call;
        if (!t)
                return;
        run->call = NULL;
        run->phase = PHASE_IDLE;
        p = &t->progress;
        planning = !p->plan;

        if (reply)
                p->tokens += reply->prompt_tokens + reply->completion_tokens;
        audit_model_call(t, p->step + 1, run->model_name, reply ? reply->attempts : 0,
                         reply ? reply->prompt_tokens : 0, reply ? reply->completion_tokens : 0,
                         reply ? reply->finish_reason : NULL, error < 0 ? (error_message ?: strerror(-error)) : NULL);

        if (reply && reply->raw) {
                _cleanup_close_ int fd = openat(run->dir_fd, TASK_TRANSCRIPT_FILE,
                                                O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd >= 0)
                        (void) model_transcript_append(fd, NULL, reply);
        }

        if (error < 0) {
                /* Garbage is the model's fault and counts towards its breaker;
                 * an endpoint that stays unreachable after the retries fails
                 * the task, which Resume() can restart. */
                if (error == -EBADMSG || error == -EPIPE || error == -EFBIG) {
                        p->malformed++;
                        (void) agent_save(run);
                        if (p->malformed >= run->manager->config.max_malformed) {
                                _cleanup_free_ char *reason = NULL;
                                if (asprintf(&reason, "the model sent %u malformed replies in a row (last: %s)",
                                             p->malformed, error_message ?: strerror(-error)) < 0)
                                        return agent_fail(run, "Out of memory.");
                                return agent_trip(run, BREAKER_MALFORMED_OUTPUT, reason, p->checkpoint);
                        }
                        return agent_schedule(run);
                }
                return agent_fail(run, "The model endpoint failed: %s", error_message ?: strerror(-error));
        }

        if (planning) {
                json_object *m = message_new("assistant", reply->content);
                if (!m || conversation_append(run, m) < 0) {
                        json_object_put(m);
                        return agent_fail(run, "Cannot record the plan.");
                }
                json_object_put(m);
                p->messages = (unsigned) json_object_array_length(run->messages);
                if (free_and_strdup(&p->plan, isempty(reply->content) ? "(the model gave no plan)" : reply->content) < 0)
                        return agent_fail(run, "Out of memory.");
                if (agent_save(run) < 0)
                        return agent_fail(run, "Cannot save the task's state.");
                audit_plan(t, p->plan);
                task_bus_send_progress(t);
                return agent_schedule(run);
        }

        /* The step: the assistant's message, then its tool calls. */
        if (conversation_add(run, json_object_get(reply->message)) < 0)
                return agent_fail(run, "Out of memory.");
        run->subject = step_subject_from(reply, p->step + 1);
        run->body = step_body_from(reply);

        if (reply->n_tool_calls == 0) {
                json_object *nudge = message_new("user",
                        "Use the tools to work towards the goal; call finish with a summary when the tests pass.");
                if (!nudge || conversation_add(run, nudge) < 0)
                        return agent_fail(run, "Out of memory.");
                return agent_end_step(run);
        }

        json_object *calls;
        if (!json_object_object_get_ex(reply->message, "tool_calls", &calls) ||
            !json_object_is_type(calls, json_type_array))
                return agent_fail(run, "The model's reply has tool calls in an unknown shape.");
        run->calls = json_object_get(calls);
        run->next_call = 0;
        agent_next_tool(run);
}

static void agent_call_model(AgentRun *run) {
        _cleanup_json_ json_object *messages = NULL;
        Task *t = run->task;
        bool planning = !t->progress.plan;
        int r;

        if (!planning && agent_check_budget(run) != 0)
                return;

        messages = conversation_for_model(run);
        if (!messages)
                return agent_fail(run, "Out of memory.");

        run->phase = PHASE_MODEL;
        if (run->replay)
                r = model_client_chat_replay(run->manager->model, run->replay, on_model_reply, run, &run->call);
        else
                r = model_client_chat(run->manager->model, run->profile, run->api_key, messages,
                                      planning ? NULL : run->tools, on_model_reply, run, &run->call);
        if (r < 0) {
                run->phase = PHASE_IDLE;
                return agent_fail(run, "Cannot call the model: %s", strerror(-r));
        }
}

/* The first messages: the system prompt and the request for a plan. */
static int agent_begin_conversation(AgentRun *run) {
        _cleanup_free_ char *prompt = NULL;
        json_object *m;
        int r;

        if (json_object_array_length(run->messages) > 0)
                return 0;

        r = system_prompt(run, &prompt);
        if (r < 0)
                return r;
        m = message_new("system", prompt);
        if (!m)
                return -ENOMEM;
        r = conversation_append(run, m);
        json_object_put(m);
        if (r < 0)
                return r;
        m = message_new("user",
                        "First write a plan: the steps you intend to take, the ambiguities you see in the goal, and "
                        "the risks. Do not call tools yet; answer with the plan only.");
        if (!m)
                return -ENOMEM;
        r = conversation_append(run, m);
        json_object_put(m);
        if (r < 0)
                return r;
        run->task->progress.messages = (unsigned) json_object_array_length(run->messages);
        return agent_save(run);
}

static int agent_start_plan_steps(AgentRun *run) {
        /* After the plan, one message asks for the work. Added once, right
         * after the plan, in the same way on every resume. */
        Task *t = run->task;
        json_object *last;
        const char *role = NULL;
        size_t n = json_object_array_length(run->messages);
        int r;

        if (!t->progress.plan || t->progress.step > 0 || n == 0)
                return 0;
        last = json_object_array_get_idx(run->messages, n - 1);
        (void) json_get_string(last, "role", &role);
        if (!streq_ptr(role, "assistant"))
                return 0;

        json_object *m = message_new("user", "Now carry out the plan, step by step, with the tools.");
        if (!m)
                return -ENOMEM;
        r = conversation_append(run, m);
        json_object_put(m);
        if (r < 0)
                return r;
        t->progress.messages = (unsigned) json_object_array_length(run->messages);
        return agent_save(run);
}

/* ---- Delivery ---- */

static int summary_write(AgentRun *run, const char *diffstat) {
        _cleanup_json_ json_object *checkpoints = NULL;
        _cleanup_free_ char *events = NULL;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        FILE *f;
        char *text = NULL;
        size_t size = 0;
        int r;

        (void) ledger_checkpoints(run->ledger, &checkpoints);
        (void) read_file_at(run->dir_fd, TASK_EVENTS_FILE, 16 * 1024 * 1024, &events, NULL);

        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "# agentfab task %s\n\n## Goal\n\n%s\n\n", t->id, t->spec.goal);
        if (!isempty(p->summary))
                fprintf(f, "## What the agent says it did\n\n%s\n\n", p->summary);
        if (!isempty(p->plan))
                fprintf(f, "## Plan\n\n%s\n\n", p->plan);

        fprintf(f, "## Steps\n\n");
        for (size_t i = 0; checkpoints && i < json_object_array_length(checkpoints); i++) {
                json_object *c = json_object_array_get_idx(checkpoints, i);
                const char *commit = NULL, *subject = NULL;
                uint64_t step = 0;
                (void) json_get_string(c, "commit", &commit);
                (void) json_get_string(c, "subject", &subject);
                (void) json_get_uint64(c, "step", &step);
                fprintf(f, "- step %llu, %.12s: %s\n", (unsigned long long) step, strempty(commit), strempty(subject));
        }

        fprintf(f, "\n## Files changed\n\n```\n%s```\n\n", strempty(diffstat));
        fprintf(f, "## Tests\n\n");
        if (isempty(t->spec.test_command))
                fprintf(f, "No test command was given.\n\n");
        else
                fprintf(f, "`%s`: %s (exit status %i)\n\n", t->spec.test_command, strempty(p->last_tests),
                        p->last_test_exit);

        /* Breakers and decisions, from the task's own history. */
        fprintf(f, "## Breakers and approvals\n\n");
        bool any = false, approved = false;
        for (char *line = events, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                _cleanup_json_ json_object *e = NULL;
                const char *type = NULL, *what = NULL, *reason = NULL, *comment = NULL;
                uint64_t uid = UINT64_MAX, usec = 0;

                nl = strchr(line, '\n');
                if (json_parse_strict(line, nl ? (size_t) (nl - line) : strlen(line), &e) < 0)
                        continue;
                (void) json_get_string(e, "type", &type);
                (void) json_get_uint64(e, "uid", &uid);
                (void) json_get_uint64(e, "usec", &usec);
                if (streq_ptr(type, "breaker")) {
                        (void) json_get_string(e, "breaker", &what);
                        (void) json_get_string(e, "reason", &reason);
                        fprintf(f, "- breaker **%s**: %s\n", strempty(what), strempty(reason));
                        any = true;
                } else if (streq_ptr(type, "request")) {
                        (void) json_get_string(e, "request", &what);
                        (void) json_get_string(e, "comment", &comment);
                        if (!streq_ptr(what, "approve") && !streq_ptr(what, "reject"))
                                continue;
                        time_t when = (time_t) (usec / USEC_PER_SEC);
                        struct tm tm;
                        char ts[64] = "";
                        if (gmtime_r(&when, &tm))
                                strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S UTC", &tm);
                        struct passwd *pw = uid != UINT64_MAX ? getpwuid((uid_t) uid) : NULL;
                        fprintf(f, "- %s by %s (uid %llu) at %s%s%s\n", streq(what, "approve") ? "approved" : "rejected",
                                pw ? pw->pw_name : "?", (unsigned long long) uid, ts,
                                comment ? ": " : "", strempty(comment));
                        if (streq(what, "approve"))
                                approved = true;
                        any = true;
                }
        }
        if (!any)
                fprintf(f, "None.\n");

        fprintf(f, "\n## Budget used\n\n- steps: %u\n- model tokens: %llu\n- commands: %llu\n- wall clock: %llu s\n",
                p->step, (unsigned long long) p->tokens, (unsigned long long) p->commands,
                (unsigned long long) (p->wall_usec / USEC_PER_SEC));

        fprintf(f, "\n## Needs human confirmation\n\n");
        bool needs = false;
        if (isempty(t->spec.test_command)) {
                fprintf(f, "- There is no test command: nothing checked the change automatically.\n");
                needs = true;
        }
        if (approved) {
                fprintf(f, "- A breaker stopped this task and a person let it go on: review those steps above all.\n");
                needs = true;
        }
        if (isempty(t->spec.acceptance)) {
                fprintf(f, "- No acceptance criteria were given: check that the change does what was meant.\n");
                needs = true;
        }
        if (!needs)
                fprintf(f, "- Review the diff as you would any contribution.\n");

        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        r = write_file_atomic(run->dir_fd, TASK_SUMMARY_FILE, text, size, 0600);
        free(text);
        return r;
}

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

/* The pull request's body: the summary as written, bounded (forges refuse
 * very long bodies) and valid UTF-8 (it goes into JSON). */
static int pull_request_body(AgentRun *run, char **ret) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = read_file_at(run->dir_fd, TASK_SUMMARY_FILE, 16u * 1024u * 1024u, &text, &size);
        if (r < 0)
                return r;
        if (size > FORGE_BODY_MAX - 256) {
                size = FORGE_BODY_MAX - 256;
                text[size] = '\0';
                utf8_sanitize(text, size);
                char *cut = NULL;
                if (asprintf(&cut, "%s\n\n*(The summary is cut here: \"agentfabctl summary %s\" shows all of it.)*\n",
                             text, run->task->id) < 0)
                        return -ENOMEM;
                *ret = cut;
                return 0;
        }
        utf8_sanitize(text, size);
        *ret = TAKE_PTR(text);
        return 0;
}

/* Delivery beyond the factory, when the spec asks for it: pushes the
 * branch to spec.push_url, then opens a pull request on spec.forge with
 * the summary as its body and the goal's first line as its title.
 *
 * Both block the event loop (libgit2 and libcurl's easy interface); the
 * forge call has bounded timeouts, the push those of the transport.
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
        char *api, *owner, *repo, *head, *base, *title, *body, *forge_name;
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
        free(j->body);
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
                 * manager_check_delivery() has checked is on the forge's host. */
                j->push_result = ledger_push(j->ledger, j->push_url,
                                             strneq(j->push_url, "https://", 8) ? j->token : NULL, &j->push_error);
                if (j->push_result < 0)
                        return 0;
        }
        if (j->pull_request) {
                ForgeRequest req = {
                        .kind = j->kind,
                        .api = j->api,
                        .token = j->token,
                        .owner = j->owner,
                        .repo = j->repo,
                        .head = j->head,
                        .base = j->base,
                        .title = j->title,
                        .body = j->body,
                };
                j->pr_result = forge_open_pull_request(&req, &j->pr_url, &j->pr_error);
        }
        return 0;
}

static void agent_finish_delivery(AgentRun *run, const char *head, const char *diffstat, const char *problem) {
        audit_delivered(run->task, head, diffstat);
        agent_set_state(run, TASK_SUCCEEDED, problem);
}

static void on_deliver_done(Worker *w, int result, void *p, void *userdata) {
        _cleanup_free_ char *reason = NULL;
        DeliverJob *j = p;
        AgentRun *run = userdata;
        Task *t = run->task;
        int r;

        (void) w, (void) result;
        run->worker = NULL;
        run->phase = PHASE_IDLE;
        run->ledger = TAKE_PTR(j->ledger);   /* back from the job */
        if (!t)
                return;

        if (j->push) {
                if (j->push_result < 0) {
                        audit_delivery_failed(t, "push", j->push_error ?: strerror(-j->push_result));
                        reason = delivery_reason("Delivered here only: the push to '%s' failed: %s", j->push_url,
                                                 j->push_error ?: strerror(-j->push_result));
                        return agent_finish_delivery(run, j->head_commit, j->diffstat, reason);
                }
                t->progress.pushed = true;
                r = agent_save(run);
                if (r < 0)
                        log_warning_errno(r, "Failed to record the push of task '%s', ignoring: %m", t->id);
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
                r = agent_save(run);
                if (r < 0)
                        log_warning_errno(r, "Failed to record the pull request of task '%s', ignoring: %m", t->id);
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
        r = manager_check_delivery(&run->manager->config, &t->spec, &error);
        if (r < 0) {
                audit_delivery_failed(t, "push", error.message ?: strerror(-r));
                *ret_problem = delivery_reason("Delivered here only, not pushed: %s", error.message ?: strerror(-r));
                return 0;
        }
        f = config_find_forge(&run->manager->config, t->spec.forge);
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
                if (r >= 0)
                        r = pull_request_body(run, &j->body);
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

        j->ledger = TAKE_PTR(run->ledger);
        r = worker_start(run->manager->event, deliver_job_run, on_deliver_done, deliver_job_free, j, run, &run->worker);
        if (r < 0) {
                run->ledger = TAKE_PTR(j->ledger);
                deliver_job_free(j);
                return r;
        }
        run->phase = PHASE_DELIVER;
        return 1;
}

static void agent_deliver(AgentRun *run) {
        _cleanup_free_ char *error = NULL, *diffstat = NULL, *problem = NULL;
        Task *t = run->task;
        char commit[41] = "", head[41] = "";
        int r;

        /* Anything left uncommitted is committed as a last step. */
        Checkpoint cp = {
                .task_id = t->id,
                .step = t->progress.step + 1,
                .subject = "Final state of the workspace",
                .model = run->model_name,
                .tests = t->progress.last_tests ?: "not-run",
                .test_command = t->spec.test_command,
                .test_exit = t->progress.last_test_exit,
                .uid = t->owner,
        };
        r = ledger_checkpoint(run->ledger, &cp, commit, &error);
        if (r < 0)
                return agent_fail(run, "Cannot commit the final state: %s", error ?: strerror(-r));
        if (r > 0) {
                t->progress.step++;
                (void) free_and_strdup(&t->progress.checkpoint, commit);
        }
        r = ledger_head(run->ledger, head);
        if (r < 0)
                return agent_fail(run, "Cannot read the branch: %s", strerror(-r));
        (void) free_and_strdup(&t->progress.head, head);
        (void) ledger_diffstat(run->ledger, &diffstat);

        r = summary_write(run, diffstat);
        if (r < 0)
                return agent_fail(run, "Cannot write the summary: %s", strerror(-r));

        r = agent_deliver_forge(run, head, diffstat, &problem);
        if (r > 0)
                return;   /* on_deliver_done() finishes */
        if (r < 0 && !problem)
                problem = delivery_reason("Delivered here only: the push could not start: %s", strerror(-r));
        agent_finish_delivery(run, head, diffstat, problem);
}

/* ---- The driver ---- */

static int agent_begin_running(AgentRun *run) {
        Task *t = run->task;
        int r;

        if (!run->ledger && agent_open_workspace(run, false) < 0)
                return -EIO;   /* only opened here, never made: 0 or failed */

        if (!run->messages) {
                /* Resume from the acknowledged checkpoint: no trace of a
                 * half-done step, in the workspace or the branch. */
                char base[41];

                if (!t->progress.checkpoint) {
                        r = ledger_base(run->ledger, base);
                        if (r < 0) {
                                agent_fail(run, "Cannot read the task's base commit: %s", strerror(-r));
                                return r;
                        }
                }
                r = ledger_reset(run->ledger, t->progress.checkpoint ?: base);
                if (r < 0) {
                        agent_fail(run, "Cannot reset the workspace to its last checkpoint: %s", strerror(-r));
                        return r;
                }
                /* A rejected step is gone from the branch now. */
                if (!streq_ptr(t->progress.head, t->progress.checkpoint)) {
                        r = free_and_strdup(&t->progress.head, t->progress.checkpoint);
                        if (r < 0)
                                return agent_fail(run, "Out of memory."), r;
                        task_bus_send_progress(t);
                }
                r = conversation_load(run);
                if (r < 0) {
                        agent_fail(run, "The conversation record is damaged: %s", strerror(-r));
                        return r;
                }
        }
        return 0;
}

static void agent_advance(AgentRun *run) {
        Task *t = run->task;
        int r;

        if (!t || run->phase != PHASE_IDLE)
                return;

        switch (t->state) {
        case TASK_QUEUED:
                agent_set_state(run, TASK_PREPARING, NULL);
                if (!t->run)
                        return;
                _fallthrough_;
        case TASK_PREPARING:
                /* Before the first step the workspace may be made (again, if
                 * an earlier try was cut short); after it, only found. */
                r = agent_open_workspace(run, t->progress.step == 0);
                if (r != 0)
                        return;   /* failed, or continues when the workspace is made */
                if (agent_open_sandbox(run) < 0)
                        return;
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
                        return;   /* continues in on_command_done() */
                }
                t->progress.baseline_done = true;
                agent_set_state(run, TASK_RUNNING, NULL);
                if (!t->run)
                        return;
                _fallthrough_;
        case TASK_RUNNING:
                if (agent_begin_running(run) < 0)
                        return;
                if (t->progress.finished) {
                        agent_set_state(run, TASK_DELIVERING, NULL);
                        if (t->run)
                                agent_schedule(run);
                        return;
                }
                if (agent_open_sandbox(run) < 0)
                        return;
                r = agent_begin_conversation(run);
                if (r >= 0)
                        r = agent_start_plan_steps(run);
                if (r < 0)
                        return agent_fail(run, "Cannot record the conversation: %s", strerror(-r));
                return agent_call_model(run);

        case TASK_DELIVERING:
                if (agent_begin_running(run) < 0)
                        return;
                return agent_deliver(run);

        default:
                agent_stop(t);
        }
}

static int on_defer(sd_event_source *s, void *userdata) {
        (void) s;
        agent_advance(userdata);
        return 0;
}

static void agent_schedule(AgentRun *run) {
        if (run->task)
                (void) sd_event_source_set_enabled(run->defer, SD_EVENT_ONESHOT);
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
        Manager *m = t->manager;
        int r;

        if (t->run || t->broken)
                return 0;
        if (!IN_SET(t->state, TASK_QUEUED, TASK_PREPARING, TASK_RUNNING, TASK_DELIVERING))
                return 0;

        run = calloc(1, sizeof(AgentRun));
        if (!run)
                return -ENOMEM;
        run->manager = m;
        run->dir_fd = run->log_fd = -EBADF;
        run->tests_n_passed = -1;
        run->clock_usec = now_monotonic();

        run->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (run->dir_fd < 0)
                return log_error_errno(errno, "Failed to open directory of task '%s': %m", t->id);
        run->log_fd = openat(run->dir_fd, TASK_LOG_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (run->log_fd < 0)
                return log_error_errno(errno, "Failed to open output log of task '%s': %m", t->id);

        run->profile = model_profiles_find(&m->profiles, t->spec.model);
        run->task = t;
        if (t->spec.replay) {
                _cleanup_free_ char *path = NULL;
                if (asprintf(&path, "%s/tasks/%s/" TASK_TRANSCRIPT_FILE, m->state_dir, t->spec.replay) < 0)
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

        r = sd_event_add_defer(m->event, &run->defer, on_defer, run);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(run->defer, "agent");

        t->run = TAKE_PTR(run);
        return 0;
}

/* Adds a user message to a task's conversation file (no run holds it):
 * what the state file does not acknowledge is cut first. */
static int conversation_append_user(Task *t, const char *text) {
        _cleanup_json_ json_object *m = message_new("user", text);
        _cleanup_free_ char *line = NULL, *conv = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        TaskProgress *p = &t->progress;
        size_t size = 0, good = 0;
        unsigned lines = 0;
        int r;

        if (!m || asprintf(&line, "%s\n", json_to_line(m)) < 0)
                return -ENOMEM;
        dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;

        /* Cut what the state file does not acknowledge first, then append. */
        r = read_file_at(dir_fd, TASK_CONVERSATION_FILE, CONVERSATION_MAX, &conv, &size);
        if (r < 0 && r != -ENOENT)
                return r;
        for (size_t i = 0; conv && i < size && lines < p->messages; i++)
                if (conv[i] == '\n') {
                        lines++;
                        good = i + 1;
                }
        if (lines != p->messages)
                return -EBADMSG;
        if (conv && good < size) {
                _cleanup_close_ int fd = openat(dir_fd, TASK_CONVERSATION_FILE, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 || ftruncate(fd, (off_t) good) < 0)
                        return -errno;
        }
        r = append_file_at(dir_fd, TASK_CONVERSATION_FILE, line, strlen(line), 0600);
        if (r < 0)
                return r;
        p->messages++;
        return 0;
}

int agent_decide(Task *t, bool approve, const char *comment, uid_t uid, char **ret_reason) {
        _cleanup_free_ char *text = NULL, *breaker = NULL;
        TaskProgress *p = &t->progress;
        const Config *c = &t->manager->config;
        Breaker b;
        int r;

        breaker = p->breaker ? strdup(p->breaker) : NULL;
        b = breaker ? breaker_from_string(breaker) : _BREAKER_INVALID;

        if (approve) {
                /* Let it go on, with room for what tripped. */
                switch (b) {
                case BREAKER_TESTS_FAILING:   p->test_failures = 0; break;
                case BREAKER_MALFORMED_OUTPUT: p->malformed = 0; break;
                case BREAKER_TESTS_REGRESSED: p->baseline_passed = -1; break;
                case BREAKER_FILES_CHANGED:   p->extra_files += c->max_files_changed; break;
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
                        break;
                default: break;
                }
                if (asprintf(&text, "A human reviewer (uid %u) approved what stopped you (%s)%s%s. Continue.",
                             (unsigned) uid, strempty(breaker), isempty(comment) ? "" : ": ", strempty(comment)) < 0)
                        return -ENOMEM;
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
                if (asprintf(&text, "A human reviewer (uid %u) rejected your last step (%s: %s)%s%s. Its changes were "
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
}

int agent_read_summary(Task *t, char **ret) {
        _cleanup_close_ int dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;
        return read_file_at(dir_fd, TASK_SUMMARY_FILE, 4 * 1024 * 1024, ret, NULL);
}

static int task_ledger_open(Task *t, Ledger **ret) {
        _cleanup_close_ int dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;
        return ledger_open(dir_fd, t->branch, ret);
}

int agent_export(Task *t, const char *format, int *ret_fd, sd_bus_error *error) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!streq(format, "bundle") && !streq(format, "mbox") && !streq(format, "diff"))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Unknown export format '%s': use bundle, mbox or diff.", format);
        if (!t->progress.checkpoint && !t->progress.head)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' has no commits yet.", t->id);

        r = task_ledger_open(t, &l);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot open the ledger of task '%s': %m", t->id);

        /* A memfd holds the export, so that the caller reads it at its own
         * pace and the daemon never blocks on a slow reader. */
        fd = memfd_create("agentfab-export", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = streq(format, "bundle") ? ledger_export_bundle(l, fd) :
                streq(format, "mbox") ? ledger_export_mbox(l, fd) : ledger_export_diff(l, fd);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot export task '%s': %m", t->id);
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int agent_base_commit(Task *t, char ret[static 41]) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        int r;

        r = task_ledger_open(t, &l);
        if (r < 0)
                return r;
        return ledger_base(l, ret);
}

int agent_checkpoints(Task *t, json_object **ret) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        int r;

        r = task_ledger_open(t, &l);
        if (r < 0)
                return r;
        return ledger_checkpoints(l, ret);
}

int agent_reset_to(Task *t, const char *rev, uid_t uid, char ret_commit[static 41], char ret_undone[static 41],
                   sd_bus_error *error) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_json_ json_object *list = NULL;
        _cleanup_free_ char *text = NULL;
        char base[41], found[41] = "";
        unsigned found_step = 0;
        size_t n = rev ? strlen(rev) : 0;
        int r;

        /* A commit id of the branch, abbreviated to no less than 7 digits, or "base". */
        if (!rev || (!streq(rev, "base") && (n < 7 || n > 40 || strspn(rev, "0123456789abcdef") != n)))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "'%s' is neither 'base' nor a commit id of 7 to 40 lowercase hex digits.", strempty(rev));

        r = task_ledger_open(t, &l);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot open the ledger of task '%s': %m", t->id);
        r = ledger_base(l, base);
        if (r >= 0)
                r = ledger_checkpoints(l, &list);
        /* The tip that goes off the branch, for the journal: its objects stay. */
        if (r >= 0)
                r = ledger_head(l, ret_undone);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot read the checkpoints of task '%s': %m", t->id);

        if (streq(rev, "base") || strneq(base, rev, n))
                memcpy(found, base, sizeof(found));
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *c = json_object_array_get_idx(list, i);
                const char *commit;
                uint64_t step;

                if (json_get_string(c, "commit", &commit) < 0 || json_get_uint64(c, "step", &step) < 0 ||
                    streq(rev, "base") || !strneq(commit, rev, n))
                        continue;
                if (found[0] && !streq(found, commit))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "'%s' is ambiguous among the checkpoints of task '%s'.", rev, t->id);
                strncpy(found, commit, sizeof(found) - 1);
                found_step = (unsigned) step;
        }
        if (!found[0])
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "'%s' is not the base nor a checkpoint of task '%s' (see its Checkpoints).", rev, t->id);

        /* Resume goes on from here; the model hears what is gone. */
        TaskProgress *p = &t->progress;
        if (free_and_strdup(&p->checkpoint, found) < 0 || free_and_strdup(&p->head, found) < 0)
                return -ENOMEM;
        if (found_step > 0)
                r = asprintf(&text, "A human (uid %u) reset the workspace and the branch to the checkpoint of step %u "
                             "(commit %s): everything you did after it is undone. Continue from there.",
                             (unsigned) uid, found_step, found);
        else
                r = asprintf(&text, "A human (uid %u) reset the workspace and the branch to where the task started "
                             "(commit %s): everything you did is undone. Start again from there.", (unsigned) uid, found);
        if (r < 0)
                return -ENOMEM;
        r = conversation_append_user(t, text);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot tell the model about the reset of task '%s': %m", t->id);
        /* Acknowledged first: should the reset itself fail, a resume makes
         * the workspace match this checkpoint anyway. */
        r = task_save(t);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot save task '%s': %m", t->id);
        r = ledger_reset(l, found);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot reset the workspace of task '%s' to %s: %m", t->id, found);
        memcpy(ret_commit, found, 41);
        return found_step;
}
