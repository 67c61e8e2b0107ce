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
#include "ledger.h"
#include "log.h"
#include "model-client.h"
#include "model-profile.h"
#include "model-text-calls.h"
#include "review-stage.h"
#include "step-commit.h"
#include "string-util.h"
#include "task-job.h"
#include "task-save.h"
#include "task-store.h"
#include "tools.h"
#include "trace.h"
#include "worker.h"

/* The model calls of a task: the conversation begun (or the plan's steps),
 * one call per step within the budgets, and its reply taken apart into the
 * step's subject, body and tool calls. */

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

static int agent_add_message(AgentRun *run, const char *role, const char *content) {
        json_object *m = conversation_message_new(role, content);

        if (!m || conversation_add(run, m) < 0) {
                json_object_put(m);
                return -ENOMEM;
        }
        return 0;
}

/* The messages are written and counted (and the plan, if the run was
 * planning): the plan is reported, and the run goes on. */
static void agent_messages_saved(AgentRun *run) {
        Task *t = run->task;

        if (run->saving_plan) {
                run->saving_plan = false;
                audit_plan(t, t->progress.plan);
                task_changed(t, TASK_CHANGE_PROGRESS);
        }
        agent_schedule(run);
}

static void on_messages_saved(Task *t, int r, void *userdata) {
        AgentRun *run = userdata;

        (void) t;
        run->phase = PHASE_IDLE;
        if (!run->task)
                return;
        if (r < 0)
                return agent_fail(run, "Cannot record the conversation: %s", strerror(-r));
        agent_messages_saved(run);
}

int agent_save_messages(AgentRun *run, const char *plan) {
        _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};
        _cleanup_free_ char *lines = NULL;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        size_t size = 0;
        int r;

        r = conversation_unsaved_lines(run, &lines, &size);
        if (r < 0)
                return r;
        ack = (TaskProgressAck) {
                .step = p->step,
                .messages = (unsigned) json_object_array_length(run->messages),
                .malformed = p->malformed,
                .finished = p->finished,
                .set_plan = plan,
        };
        if (plan && !(ack.plan = strdup(plan)))
                return -ENOMEM;
        run->saving_plan = plan;

        agent_count_clock(run);
        r = task_save_progress_async(t, run->factory->event, TASK_CONVERSATION_FILE, &ack, TAKE_PTR(lines), size,
                                     on_messages_saved, run);
        if (r > 0)
                run->phase = PHASE_STATE;
        if (r < 0)
                run->saving_plan = false;
        return r;
}

char *agent_cut_note(AgentRun *run, const char *tool) {
        _cleanup_free_ char *at = NULL, *limit = NULL;
        char *s;

        if (run->cut_tokens > 0 && asprintf(&at, " at %" PRIu64 " tokens", run->cut_tokens) < 0)
                return NULL;
        if (run->profile->max_tokens > 0 ? asprintf(&limit, "MaxTokens=%u", run->profile->max_tokens) < 0 :
            !(limit = strdup("the server's limit")))
                return NULL;
        if (tool ? asprintf(&s, "Your reply was cut%s (%s): the arguments of %s are incomplete, and it did not run. ",
                            strempty(at), limit, tool) < 0 :
            run->good_calls + run->bad_calls > 0 ?
            asprintf(&s, "Your reply was cut%s (%s): its last tool call was incomplete and did not run; the others "
                     "did. ", strempty(at), limit) < 0 :
            asprintf(&s, "Your reply was cut%s (%s) before any of its tool calls was complete; none ran. ", strempty(at),
                     limit) < 0)
                return NULL;
        _cleanup_free_ char *head = s;
        if (asprintf(&s, "%sWrite smaller pieces: several edit_file calls of a few lines each rather than one write_file "
                     "of a whole file, and fewer calls in one reply.", head) < 0)
                return NULL;
        return s;
}

/* What a reply that called no tool is answered with. */
static char *agent_nudge(AgentRun *run, const ModelReply *reply) {
        const char *format = run->profile->tool_calls == MODEL_TOOL_CALLS_TEXT ?
                " Call a tool by writing <tool_call>{\"name\": \"TOOL\", \"arguments\": {...}}</tool_call>." : "";
        char *s;

        if (run->reply_cut)
                return agent_cut_note(run, NULL);
        if (reply->unread_calls > 0) {
                if (asprintf(&s, "None of the %u tool calls written in your reply could be read: each must name one of "
                             "the tools and give its arguments as one JSON object, e.g. "
                             "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"README\"}}</tool_call>.",
                             reply->unread_calls) < 0)
                        return NULL;
                return s;
        }
        if (asprintf(&s, "Use the tools to work towards the goal; call finish with a summary when the tests pass.%s",
                     format) < 0)
                return NULL;
        return s;
}

/* The tools offered while planning: the read-only ones, until the looks
 * are spent; then none, and the reply is the plan. */
static json_object *agent_plan_tools_now(AgentRun *run) {
        return run->plan_looks < PLAN_LOOKS_MAX ? run->plan_tools : NULL;
}

static void on_model_reply(ModelCall *call, int error, const char *error_message, const ModelReply *reply, void *userdata) {
        _cleanup_(model_reply_freep) ModelReply *read = NULL;
        AgentRun *run = userdata;
        Task *t = run->task;
        TaskProgress *p;
        bool planning;
        int r;

        (void) call;
        if (!t)
                return;
        run->call = NULL;
        run->phase = PHASE_IDLE;
        p = &t->progress;
        planning = !p->plan;

        if (reply)
                p->tokens += reply->prompt_tokens + reply->completion_tokens;
        agent_resources_model_call(t, run->profile, reply);
        audit_model_call(t, p->step + 1, run->model_name, reply ? reply->attempts : 0,
                         reply ? reply->prompt_tokens : 0, reply ? reply->completion_tokens : 0,
                         reply ? reply->finish_reason : NULL, error < 0 ? (error_message ?: strerror(-error)) : NULL);

        if (reply && reply->raw) {
                _cleanup_close_ int fd = openat(run->dir_fd, TASK_TRANSCRIPT_FILE,
                                                O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd >= 0)
                        (void) model_transcript_append(fd, NULL, reply);
        }

        /* A request too long for the server, refused or cut by it: asked
         * again, compacted harder, a few times (conversation.h). */
        _cleanup_free_ char *context_reason = NULL;
        r = conversation_context_answered(run, error, error_message, reply, &context_reason);
        if (r < 0)
                return agent_fail(run, "%s", context_reason ?: "Out of memory.");
        if (r > 0)
                return agent_schedule(run);

        if (error < 0) {
                /* Garbage is the model's fault and counts towards its breaker;
                 * an endpoint that stays unreachable after the retries fails
                 * the task, which Resume() can restart. */
                if (error == -EBADMSG || error == -EPIPE || error == -EFBIG) {
                        if (p->malformed + 1 >= run->factory->config.max_malformed) {
                                /* The breaker's pause writes the count. */
                                _cleanup_free_ char *reason = NULL;
                                p->malformed++;
                                if (asprintf(&reason, "the model sent %u malformed replies in a row (last: %s)",
                                             p->malformed, error_message ?: strerror(-error)) < 0)
                                        return agent_fail(run, "Out of memory.");
                                return agent_trip(run, BREAKER_MALFORMED_OUTPUT, reason, p->checkpoint);
                        }
                        /* Counted once the state file has it (in a worker
                         * thread): a restart does not forget it. */
                        _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};
                        agent_progress_ack_init(run, &ack);
                        ack.malformed++;
                        return agent_save_progress_then(run, &ack, NULL, 0, NULL, agent_saved_go_on);
                }
                return agent_fail(run, "The model endpoint failed: %s", error_message ?: strerror(-error));
        }

        /* The reply as the conversation keeps it: without thinking, and
         * with the calls a model wrote in its text as its tool calls
         * (model-text-calls.h), which then run like any others. */
        r = model_reply_read_text(reply, run->profile->tool_calls, planning ? agent_plan_tools_now(run) : run->tools,
                                  &read);
        if (r < 0)
                return agent_fail(run, "Out of memory.");
        if (read)
                reply = read;

        /* Looking before the plan: the read-only calls run, their results
         * are written, and the plan is asked for again. */
        if (planning && reply->n_tool_calls > 0 && agent_plan_tools_now(run)) {
                json_object *calls;
                if (!json_object_object_get_ex(reply->message, "tool_calls", &calls) ||
                    !json_object_is_type(calls, json_type_array))
                        return agent_fail(run, "The model's reply has tool calls in an unknown shape.");
                if (conversation_add(run, json_object_get(reply->message)) < 0)
                        return agent_fail(run, "Out of memory.");
                run->plan_looks++;
                run->planning_look = true;
                json_object_put(run->calls);
                run->calls = json_object_get(calls);
                run->next_call = 0;
                return agent_next_tool(run);
        }

        if (planning) {
                json_object *m = conversation_message_new("assistant", reply->content);
                if (!m || conversation_add(run, m) < 0) {
                        json_object_put(m);
                        return agent_fail(run, "Cannot record the plan.");
                }
                r = agent_save_messages(run, isempty(reply->content) ? "(the model gave no plan)" : reply->content);
                if (r < 0)
                        return agent_fail(run, "Cannot save the task's state: %s", strerror(-r));
                if (r == 0)
                        agent_messages_saved(run);   /* written here */
                return;   /* else on_messages_saved() goes on */
        }

        /* The step: the assistant's message, then its tool calls. */
        if (conversation_add(run, json_object_get(reply->message)) < 0)
                return agent_fail(run, "Out of memory.");
        run->subject = step_subject_from(reply, p->step + 1);
        run->body = step_body_from(reply);
        /* A reply cut at its token limit is told as that, and counts as
         * malformed: a model that writes too much at once would else be
         * cut again and again. */
        run->reply_cut = streq_ptr(reply->finish_reason, "length");
        run->cut_tokens = reply->completion_tokens ?: run->profile->max_tokens;
        run->reply_malformed = run->reply_cut;
        run->cut_untold = run->reply_cut && reply->text_calls && reply->unread_calls > 0;

        if (reply->n_tool_calls == 0) {
                /* Nudged, and counted: MaxMalformedReplies= such replies in
                 * a row stop the task for a person. */
                _cleanup_free_ char *text = agent_nudge(run, reply);
                json_object *nudge = text ? conversation_message_new("user", text) : NULL;
                run->reply_malformed = true;
                if (!nudge || conversation_add(run, nudge) < 0) {
                        json_object_put(nudge);
                        return agent_fail(run, "Out of memory.");
                }
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

void agent_call_model(AgentRun *run) {
        _cleanup_json_ json_object *messages = NULL;
        Task *t = run->task;
        bool planning = !t->progress.plan;
        int r;

        if (!planning && agent_check_budget(run) != 0)
                return;

        messages = conversation_for_model(run);
        if (!messages)
                return agent_fail(run, "Out of memory.");
        /* With AGENTFAB_TRACE=1: how long a task took from its agent's start
         * (at a restart, say) to its first model call. */
        if (run->trace_start_usec > 0) {
                log_info("Task %s at work: its first model call %.1f ms after its agent started (trace; sandbox %s).",
                         t->id, (double) (trace_now_usec() - run->trace_start_usec) / 1000.0,
                         run->trace_sandbox ?: "made anew");
                run->trace_start_usec = 0;
        }

        run->phase = PHASE_MODEL;
        if (run->replay)
                r = model_client_chat_replay(run->factory->model, run->replay, on_model_reply, run, &run->call);
        else
                r = model_client_chat(run->factory->model, run->profile, run->api_key, messages,
                                      planning ? agent_plan_tools_now(run) : run->tools, on_model_reply, run, &run->call);
        if (r < 0) {
                run->phase = PHASE_IDLE;
                return agent_fail(run, "Cannot call the model: %s", strerror(-r));
        }
}

void agent_plan_look_done(AgentRun *run) {
        int r;

        run->planning_look = false;
        json_object_put(run->calls);
        run->calls = NULL;
        r = agent_save_messages(run, NULL);
        if (r < 0)
                return agent_fail(run, "Cannot save the task's state: %s", strerror(-r));
        if (r == 0)
                agent_messages_saved(run);   /* written here */
}

/* The first messages: the system prompt and the request for a plan. */
int agent_begin_conversation(AgentRun *run) {
        _cleanup_free_ char *prompt = NULL;
        int r;

        if (json_object_array_length(run->messages) > 0)
                return 0;

        r = agent_outline_start(run);
        if (r != 0)
                return r;   /* ctags runs, or memory is out */
        r = conversation_system_prompt(run, &prompt);
        if (r < 0)
                return r;
        r = agent_add_message(run, "system", prompt);
        if (r < 0)
                return r;
        r = agent_add_message(run, "user",
                        "First write a plan: the steps you intend to take, the ambiguities you see in the goal, and "
                        "the risks. You may look at the code first with read_file, list_files and search; then answer "
                        "with the plan only, without tool calls.");
        if (r < 0)
                return r;
        return agent_save_messages(run, NULL);
}

int agent_start_plan_steps(AgentRun *run) {
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

        r = agent_add_message(run, "user", "Now carry out the plan, step by step, with the tools.");
        if (r < 0)
                return r;
        return agent_save_messages(run, NULL);
}

