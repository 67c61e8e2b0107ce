/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "audit.h"
#include "context.h"
#include "conversation.h"
#include "fs-util.h"
#include "json-util.h"
#include "log.h"
#include "string-util.h"
#include "task-job.h"
#include "task-save.h"
#include "test-judge.h"
#include "tools.h"

#define TREE_MAX_ENTRIES   300u
#define INSTRUCTIONS_MAX   (32u * 1024u)
/* Entries of the context file kept; past them no calibration is recorded. */
#define CONTEXT_ENTRIES_MAX 4096u

/* Messages of the step in flight go to memory only; at the checkpoint they
 * are appended and counted. */
int conversation_add(AgentRun *run, json_object *message) {
        return json_object_array_add(run->messages, message) < 0 ? -ENOMEM : 0;
}

int conversation_unsaved_lines(AgentRun *run, char **ret, size_t *ret_size) {
        _cleanup_free_ char *lines = NULL;
        size_t size = 0, n = json_object_array_length(run->messages);
        FILE *f;

        f = open_memstream(&lines, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = run->task->progress.messages; i < n; i++)
                fprintf(f, "%s\n", json_to_line(json_object_array_get_idx(run->messages, i)));
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(lines);
        *ret_size = size;
        return 0;
}


/* Reading a long conversation (up to 64 MiB) and parsing it takes long:
 * it is done in the task's job queue, on data of its own. */
typedef struct LoadJob {
        int dir_fd;
        unsigned want;
        size_t size;               /* the bytes of the want messages */
        json_object *messages;
        AgentContext *context;     /* what the server showed of its context */
        conversation_loaded_t done;
} LoadJob;

static void load_job_free(void *p) {
        LoadJob *j = p;

        if (!j)
                return;
        safe_close(j->dir_fd);
        json_object_put(j->messages);
        agent_context_free(j->context);
        free(j);
}

AgentContext *agent_context_free(AgentContext *c) {
        if (!c)
                return NULL;
        free(c->entries);
        free(c);
        return NULL;
}

static AgentContext *agent_context_new(void) {
        AgentContext *c = calloc(1, sizeof(AgentContext));

        if (c)
                c->tools_bytes = SIZE_MAX;
        return c;
}

static int agent_context_add(AgentContext *c, const ContextEntry *e) {
        ContextEntry *l;

        if (c->n_entries >= CONTEXT_ENTRIES_MAX)
                return -E2BIG;
        l = reallocarray(c->entries, c->n_entries + 1, sizeof(ContextEntry));
        if (!l)
                return -ENOMEM;
        c->entries = l;
        c->entries[c->n_entries++] = *e;
        return 0;
}

/* The entries of the context file; a line that is not one (the last,
 * cut by a crash) is skipped. */
static int context_file_read(int dir_fd, AgentContext *c) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = read_file_at(dir_fd, TASK_CONTEXT_FILE, TASK_CONTEXT_FILE_MAX, &text, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        for (char *line = text, *end; line < text + size; line = end + 1) {
                _cleanup_json_ json_object *o = NULL;
                ContextEntry e;

                end = memchr(line, '\n', (size_t) (text + size - line));
                if (!end)
                        break;
                if (json_parse_strict(line, (size_t) (end - line), &o) < 0 || context_entry_from_json(o, &e) < 0)
                        continue;
                r = agent_context_add(c, &e);
                if (r == -E2BIG)
                        break;
                if (r < 0)
                        return r;
        }
        return 0;
}

static int load_job_run(void *p) {
        LoadJob *j = p;
        _cleanup_free_ char *text = NULL;
        size_t size = 0, good = 0;
        int r;

        /* What is known of the server's context is not lost with a
         * restart: the conversation is sent as it was. */
        r = context_file_read(j->dir_fd, j->context);
        if (r < 0)
                log_warning_errno(r, "Failed to read %s, ignoring: %m", TASK_CONTEXT_FILE);

        r = read_file_at(j->dir_fd, TASK_CONVERSATION_FILE, CONVERSATION_MAX, &text, &size);
        if (r == -ENOENT)
                return j->want == 0 ? 0 : -EBADMSG;
        if (r < 0)
                return r;

        r = conversation_parse(text, size, j->want, j->messages, &good);
        if (r < 0)
                return r;
        j->size = good;

        /* Whatever follows belongs to a step the state file never
         * acknowledged: cut it off, so it cannot count later. */
        if (good < size) {
                _cleanup_close_ int fd = openat(j->dir_fd, TASK_CONVERSATION_FILE, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 || ftruncate(fd, (off_t) good) < 0 || fsync(fd) < 0)
                        return -errno;
        }
        return 0;
}

static void on_load_done(Task *t, int r, void *p, void *userdata) {
        LoadJob *j = p;
        AgentRun *run = userdata;

        if (!agent_job_ended(run, NULL))
                return;
        if (r >= 0) {
                run->messages = TAKE_PTR(j->messages);
                agent_context_free(run->context);
                run->context = TAKE_PTR(j->context);
                /* Known now if the state file did not say (an older one);
                 * its next write has it. */
                run->task->progress.conversation_size = j->size;
        }
        j->done(run, r);
}

int conversation_load(AgentRun *run, conversation_loaded_t done) {
        LoadJob *j;

        assert(!run->job && !run->messages);
        j = calloc(1, sizeof(LoadJob));
        if (!j)
                return -ENOMEM;
        *j = (LoadJob) {
                .dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3),
                .want = run->task->progress.messages,
                .messages = json_object_new_array(),
                .context = agent_context_new(),
                .done = done,
        };
        if (j->dir_fd < 0 || !j->messages || !j->context) {
                load_job_free(j);
                return -ENOMEM;
        }
        return agent_job_start(run, "conversation", load_job_run, on_load_done, load_job_free, j, NULL, PHASE_LEDGER);
}



static AgentContext *agent_context(AgentRun *run) {
        if (!run->context)
                run->context = agent_context_new();
        return run->context;
}

/* Appends e to the run's entries and to the context file, on the loop: a
 * line of ~200 bytes, now and then. */
static void agent_context_record(AgentRun *run, const ContextEntry *e) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *line = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = agent_context_add(run->context, e);
        if (r == -E2BIG)
                return;
        if (r >= 0)
                r = context_entry_to_json(e, &o);
        if (r >= 0 && asprintf(&line, "%s\n", json_to_line(o)) < 0)
                r = -ENOMEM;
        if (r >= 0) {
                fd = openat(run->dir_fd, TASK_CONTEXT_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t) strlen(line))
                        r = fd < 0 ? -errno : -EIO;
        }
        if (r < 0)
                log_warning_errno(r, "Failed to record what the model server showed of its context for task '%s', "
                                  "ignoring: %m", run->task->id);
}

/* What is sent to the model: the conversation compacted to the budget's
 * bytes (context.h). The budget depends on the conversation's steps and
 * the context file only, so a redone step sends the same request. */
json_object *conversation_for_model(AgentRun *run) {
        Task *t = run->task;
        bool tools = t->progress.plan && run->tools;
        AgentContext *c = agent_context(run);
        json_object *out = NULL;
        ContextStats stats;
        size_t budget, tools_bytes;

        if (!c)
                return NULL;
        if (c->tools_bytes == SIZE_MAX)
                c->tools_bytes = run->tools ? strlen(json_to_line(run->tools)) : 0;
        /* Before the plan only the read-only tools go (agent-run.h). */
        tools_bytes = tools ? c->tools_bytes : run->plan_tools ? strlen(json_to_line(run->plan_tools)) : 0;

        context_gauge_from(&c->gauge, run->profile->context_budget, c->entries, c->n_entries, t->progress.step);
        budget = context_message_budget(c->gauge.budget, c->gauge.bytes_per_token_milli, run->profile->max_tokens,
                                        tools_bytes);
        if (context_compact(run->messages, budget, t->spec.goal, &out, &stats) < 0)
                return NULL;
        c->step = t->progress.step;
        c->sent_bytes = stats.bytes + tools_bytes;
        if (stats.condensed > 0 || stats.shrunk > 0)
                log_debug("Task %s step %u: %zu of %zu bytes of messages sent (budget %zu bytes, %" PRIu64 " tokens at "
                          "%u.%03u bytes a token): %zu shrunk, %zu condensed, %zu cut.", t->id, t->progress.step + 1,
                          stats.bytes, stats.full_bytes, budget, c->gauge.budget, c->gauge.bytes_per_token_milli / 1000,
                          c->gauge.bytes_per_token_milli % 1000, stats.shrunk, stats.condensed, stats.clipped);
        return out;
}

static int context_give_up(AgentRun *run, char **ret_reason, const char *fmt, ...) _printf_(3, 4);
static int context_give_up(AgentRun *run, char **ret_reason, const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (r < 0 ||
            asprintf(ret_reason, "%s Set ContextBudget= of model profile '%s' to the server's context size (Ollama's "
                     "num_ctx, llama.cpp's -c, vLLM's --max-model-len), or give the server a larger one.",
                     what, run->profile->name) < 0)
                *ret_reason = NULL;
        return -E2BIG;
}

int conversation_context_answered(AgentRun *run, int error, const char *error_message, const ModelReply *reply,
                                  char **ret_reason) {
        AgentContext *c = run->context;
        Task *t = run->task;
        uint64_t profile_budget = run->profile->context_budget, estimate = 0, before;
        ContextEntry e;

        *ret_reason = NULL;
        /* A replayed exchange answers another request than this one: its
         * recorded usage says nothing of this conversation's size. */
        if (!c || run->replay)
                return 0;
        before = c->gauge.budget;

        if (error == -EMSGSIZE) {
                uint64_t named = 0, budget, used;

                if (c->tries + 1 >= CONTEXT_TRIES_MAX)
                        return context_give_up(run, ret_reason, "The model server refused %u requests of step %u in a "
                                               "row as longer than the model's context, the last of %" PRIu64 " bytes "
                                               "with a context budget of %" PRIu64 " tokens: %s.", c->tries + 1,
                                               c->step + 1, c->sent_bytes, before, strempty(error_message));
                if (c->refused_bytes > 0 && c->sent_bytes >= c->refused_bytes)
                        return context_give_up(run, ret_reason, "The model server refused a request of %" PRIu64 " bytes "
                                               "as longer than the model's context (%s), and the conversation cannot be "
                                               "made shorter: that is its system prompt, the tools and the latest "
                                               "messages.", c->sent_bytes, strempty(error_message));

                /* Half of what the refused request took of the budget (a
                 * conversation shorter than the budget took less than it),
                 * or the context length the server named if that is less:
                 * the estimate of tokens may be off as well. */
                used = c->sent_bytes * 1000 / MAX(c->gauge.bytes_per_token_milli, 1u) +
                        MIN((uint64_t) run->profile->max_tokens, before / 2) + before / 10;
                budget = MIN(before, used) / 2;
                (void) model_error_is_context_overflow(error_message, &named);
                if (named > 0 && named < budget)
                        budget = named;
                budget = MAX(budget, (uint64_t) CONTEXT_BUDGET_MIN);
                if (budget >= before)
                        return context_give_up(run, ret_reason, "The model server refused a request of %" PRIu64 " bytes "
                                               "as longer than the model's context (%s), with the smallest context "
                                               "budget, %" PRIu64 " tokens, already.", c->sent_bytes,
                                               strempty(error_message), before);

                e = (ContextEntry) {
                        .cause = CONTEXT_REFUSED,
                        .step = c->step,
                        .profile_budget = profile_budget,
                        .sent_bytes = c->sent_bytes,
                        .budget = budget,
                };
                agent_context_record(run, &e);
                c->tries++;
                c->refused_bytes = c->sent_bytes;
                audit_context_refused(t, c->step + 1, run->model_name, c->sent_bytes, before, budget, c->tries,
                                      error_message);
                return 1;
        }
        if (error < 0 || !reply)
                return 0;
        if (reply->prompt_tokens == 0) {
                /* A server that counts nothing: nothing to learn. */
                c->tries = 0;
                c->refused_bytes = 0;
                return 0;
        }

        if (context_truncated(&c->gauge, c->sent_bytes, reply->prompt_tokens, &estimate)) {
                uint64_t budget = MIN(before, reply->prompt_tokens);

                audit_context_truncated(t, c->step + 1, run->model_name, c->sent_bytes, estimate, reply->prompt_tokens,
                                        profile_budget, budget);
                if (budget < before) {
                        if (c->tries + 1 >= CONTEXT_TRIES_MAX)
                                return context_give_up(run, ret_reason, "The model server cut %u requests of step %u in "
                                                       "a row: it took only %" PRIu64 " tokens of about %" PRIu64 ".",
                                                       c->tries + 1, c->step + 1, reply->prompt_tokens, estimate);
                        e = (ContextEntry) {
                                .cause = CONTEXT_TRUNCATED,
                                .step = c->step,
                                .profile_budget = profile_budget,
                                .sent_bytes = c->sent_bytes,
                                .prompt_tokens = reply->prompt_tokens,
                                .budget = budget,
                        };
                        agent_context_record(run, &e);
                        c->tries++;
                        /* The reply was written without the beginning of
                         * the conversation (the goal, the rules): asked
                         * again within what the server takes. */
                        return 1;
                }
                return 0;
        }

        if (context_calibrate(&c->gauge, c->step, profile_budget, c->sent_bytes, reply->prompt_tokens, &e))
                agent_context_record(run, &e);
        c->tries = 0;
        c->refused_bytes = 0;
        return 0;
}

int conversation_system_prompt(AgentRun *run, char **ret) {
        _cleanup_free_ char *tree = NULL, *instructions = NULL, *baseline = NULL, *req = NULL;
        Task *t = run->task;
        int ws = ledger_workspace_fd(run->ledger);

        (void) workspace_tree(ws, TREE_MAX_ENTRIES, &tree);
        (void) workspace_agent_instructions(ws, INSTRUCTIONS_MAX, &instructions);
        /* What failed before the agent changed anything, so that it knows
         * from the start what is its to fix and what finish asks of it. */
        if (t->progress.baseline_recorded) {
                TestRun base;
                agent_baseline_view(&t->progress, &base);
                req = agent_requirement(t);
                if (!req || test_run_baseline_text(&base, req, &baseline) < 0)
                        return -ENOMEM;
        }

        if (asprintf(ret,
                     "You are agentfab's software engineering agent. You work on a git repository checked out at "
                     "/workspace, through the tools you are given. Commands run in a sandbox without network access.\n\n"
                     "# Goal\n%s\n\n"
                     "# Acceptance criteria\n%s\n\n"
                     "# Test command\n%s\n\n"
                     "%s%s%s"
                     "# Files\n%s\n"
                     "%s%s%s"
                     "%s%s%s"
                     "# Rules\n"
                     "- Work in small steps. Read before you edit. Keep changes to what the goal needs.\n"
                     "- Paths are relative to the workspace. Never try to leave it.\n"
                     "- Run the tests (run_tests) to check your work: each result begins with a line that compares it "
                     "with the start. Call finish with a summary when the goal is met: it runs the tests again and is "
                     "accepted when nothing fails that passed before you started and the tests the task is about pass "
                     "(those the goal and acceptance criteria name; if they name none, every test that failed at the "
                     "start).\n"
                     "- If the task cannot be done (impossible as asked, or blocked by something outside the "
                     "workspace), give up honestly: finish with cannot_complete true and a summary that says why. A "
                     "person decides what happens next.\n"
                     "- Do not repeat a call that gave the same result before: it will give it again.\n"
                     "- Changes to protected paths (authentication, payment, migrations, CI configuration, lock files), "
                     "dependency manifests and deleting tests need a human's approval; avoid them unless the goal "
                     "requires them.\n",
                     t->spec.goal,
                     isempty(t->spec.acceptance) ? "(none given: the goal and the tests decide)" : t->spec.acceptance,
                     isempty(t->spec.test_command) ? "(none: there is no test command; say in your summary how you checked your work)" : t->spec.test_command,
                     baseline ? "# Tests at the start\n" : "", strempty(baseline), baseline ? "\n\n" : "",
                     strempty(tree),
                     run->outline ? "# Symbols of the files the task points to (universal-ctags: kind, name, line)\n" : "",
                     strempty(run->outline), run->outline ? "\n" : "",
                     instructions ? "# The repository's instructions for agents\n" : "",
                     strempty(instructions), instructions ? "\n\n" : "") < 0)
                return -ENOMEM;
        return 0;
}



