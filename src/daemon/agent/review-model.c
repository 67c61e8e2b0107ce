/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "conversation.h"
#include "fs-util.h"
#include "json-util.h"
#include "log.h"
#include "model-text-calls.h"
#include "review-model.h"
#include "secret-scan.h"
#include "string-util.h"
#include "task-store.h"

#define REVIEW_MODEL_SUMMARY_MAX 2048U
#define REVIEW_MODEL_COMMENT_MAX 1024U
#define REVIEW_MODEL_FILE_MAX    (1024U * 1024U)

bool review_model_wanted(AgentRun *run) {
        const Config *c = &run->factory->config;
        return c->review_model && !run->task->spec.replay;
}

json_object *review_model_tools(void) {
        static const char schema[] =
                "[{\"type\":\"function\",\"function\":{\"name\":\"review_verdict\","
                "\"description\":\"Your verdict on the change: approve it, or request changes. Tie each comment to a "
                "file and line of the diff where you can.\","
                "\"parameters\":{\"type\":\"object\",\"properties\":{"
                "\"verdict\":{\"type\":\"string\",\"enum\":[\"approve\",\"request_changes\"]},"
                "\"summary\":{\"type\":\"string\",\"description\":\"One paragraph: why.\"},"
                "\"comments\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
                "\"file\":{\"type\":\"string\"},\"line\":{\"type\":\"integer\"},\"comment\":{\"type\":\"string\"}},"
                "\"required\":[\"comment\"]}}},"
                "\"required\":[\"verdict\"]}}}]";
        json_object *j = NULL;

        return json_parse_strict(schema, strlen(schema), &j) < 0 ? NULL : j;
}

/* A string of the model's, escaped and bounded as a finding's (one line, no
 * control characters, valid UTF-8), so that it may go in the journal, the
 * summary and a trailer's neighbourhood as it is. */
static int add_escaped(json_object *o, const char *key, const char *s, size_t max) {
        _cleanup_free_ char *e = NULL;

        if (!s)
                return 0;
        e = finding_escape(s, strlen(s), max);
        if (!e)
                return -ENOMEM;
        return json_add_string(o, key, e);
}

int review_model_parse_verdict(const char *arguments, json_object **ret) {
        _cleanup_json_ json_object *a = NULL, *out = json_object_new_object(), *comments = json_object_new_array();
        const char *verdict = NULL, *summary = NULL;
        json_object *list;

        if (!out || !comments)
                return -ENOMEM;
        if (!arguments || json_parse_strict(arguments, strlen(arguments), &a) < 0 ||
            !json_object_is_type(a, json_type_object))
                return -EBADMSG;
        if (json_get_string(a, "verdict", &verdict) < 0 || (!streq(verdict, "approve") && !streq(verdict, "request_changes")))
                return -EBADMSG;
        (void) json_get_string(a, "summary", &summary);
        if (json_add_string(out, "verdict", verdict) < 0 ||
            add_escaped(out, "summary", summary, REVIEW_MODEL_SUMMARY_MAX) < 0)
                return -ENOMEM;
        if (json_object_object_get_ex(a, "comments", &list)) {
                if (!json_object_is_type(list, json_type_array))
                        return -EBADMSG;
                for (size_t i = 0; i < json_object_array_length(list) && i < REVIEW_MODEL_COMMENTS_MAX; i++) {
                        json_object *c = json_object_array_get_idx(list, i), *line;
                        _cleanup_json_ json_object *o = json_object_new_object();
                        const char *file = NULL, *comment = NULL;

                        if (!o)
                                return -ENOMEM;
                        if (!json_object_is_type(c, json_type_object) || json_get_string(c, "comment", &comment) < 0)
                                return -EBADMSG;
                        (void) json_get_string(c, "file", &file);
                        if (add_escaped(o, "file", file, FINDING_FILE_MAX) < 0 ||
                            add_escaped(o, "comment", comment, REVIEW_MODEL_COMMENT_MAX) < 0)
                                return -ENOMEM;
                        if (json_object_object_get_ex(c, "line", &line) && json_object_is_type(line, json_type_int)) {
                                int64_t n = json_object_get_int64(line);
                                if (n > 0 && n < INT32_MAX && json_add_uint64(o, "line", (uint64_t) n) < 0)
                                        return -ENOMEM;
                        }
                        if (json_object_array_add(comments, TAKE_PTR(o)) < 0)
                                return -ENOMEM;
                }
        }
        if (json_object_object_add(out, "comments", TAKE_PTR(comments)) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(out);
        return 0;
}

/* "- file:line: comment" lines, for the worker and the summary. */
static char *comments_text(json_object *verdict) {
        json_object *list = NULL;
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return NULL;
        (void) json_object_object_get_ex(verdict, "comments", &list);
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                json_object *c = json_object_array_get_idx(list, i);
                const char *file = NULL, *comment = NULL;
                uint64_t line = 0;

                (void) json_get_string(c, "file", &file);
                (void) json_get_string(c, "comment", &comment);
                (void) json_get_uint64(c, "line", &line);
                if (file && line > 0)
                        fprintf(f, "- `%s:%llu`: %s\n", file, (unsigned long long) line, strempty(comment));
                else if (file)
                        fprintf(f, "- `%s`: %s\n", file, strempty(comment));
                else
                        fprintf(f, "- %s\n", strempty(comment));
        }
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

static int review_model_save(AgentRun *run, json_object *verdict) {
        const char *text = json_object_to_json_string_ext(verdict, JSON_C_TO_STRING_PLAIN);
        return write_file_atomic(run->dir_fd, REVIEW_MODEL_FILE, text, strlen(text), 0600);
}

static void on_reviewer_reply(ModelCall *call, int error, const char *error_message, const ModelReply *reply,
                              void *userdata) {
        _cleanup_json_ json_object *verdict = NULL;
        _cleanup_free_ char *reason = NULL, *comments = NULL, *text = NULL;
        AgentRun *run = userdata;
        Task *t = run->task;
        TaskProgress *p;
        const Config *c;
        const char *v = NULL, *summary = NULL;
        int r;

        (void) call;
        run->call = NULL;
        run->phase = PHASE_IDLE;
        if (!t)
                return;
        p = &t->progress;
        c = &run->factory->config;

        agent_resources_model_call(t, model_profiles_find(&run->factory->profiles, c->review_model),
                                   error < 0 ? NULL : reply);
        /* Fail closed: a reviewer that cannot answer leaves the decision to
         * a person, never to nobody. */
        if (error < 0) {
                if (asprintf(&reason, "the reviewer model (%s) did not answer: %s", c->review_model,
                             error_message ?: strerror(-error)) < 0)
                        return agent_fail(run, "Out of memory.");
                return agent_trip(run, BREAKER_REVIEW, reason, p->checkpoint);
        }
        p->tokens += reply->prompt_tokens + reply->completion_tokens;
        /* An open model may write its verdict in its text, as a call of
         * review_verdict in its family's format (model-text-calls.h). */
        _cleanup_json_ json_object *tools = review_model_tools();
        _cleanup_(model_reply_freep) ModelReply *read = NULL;
        const ModelProfile *profile = model_profiles_find(&run->factory->profiles, c->review_model);
        if (!tools || model_reply_read_text(reply, profile ? profile->tool_calls : MODEL_TOOL_CALLS_AUTO, tools, &read) < 0)
                return agent_fail(run, "Out of memory.");
        if (read)
                reply = read;
        for (size_t i = 0; i < reply->n_tool_calls && !verdict; i++)
                if (streq_ptr(reply->tool_calls[i].name, "review_verdict") &&
                    review_model_parse_verdict(reply->tool_calls[i].arguments, &verdict) == -ENOMEM)
                        return agent_fail(run, "Out of memory.");
        if (!verdict) {
                if (asprintf(&reason, "the reviewer model (%s) gave no usable review_verdict", c->review_model) < 0)
                        return agent_fail(run, "Out of memory.");
                return agent_trip(run, BREAKER_REVIEW, reason, p->checkpoint);
        }

        (void) json_get_string(verdict, "verdict", &v);
        (void) json_get_string(verdict, "summary", &summary);
        if (json_add_string(verdict, "model", run->review_model_name) < 0 ||
            json_add_string(verdict, "commit", p->checkpoint) < 0 ||
            json_add_uint64(verdict, "round", p->review_rounds + 1) < 0)
                return agent_fail(run, "Out of memory.");
        r = review_model_save(run, verdict);
        if (r < 0)
                return agent_fail(run, "Cannot keep the reviewer's verdict: %s", strerror(-r));
        audit_review_verdict(t, run->review_model_name, v, (unsigned) json_object_array_length(
                                     json_object_object_get(verdict, "comments")), strempty(summary));

        if (streq(v, "approve")) {
                _cleanup_(task_progress_ack_done) TaskProgressAck ack = {};
                agent_progress_ack_init(run, &ack);
                ack.set_reviewed = ack.reviewed = true;
                return agent_save_progress_then(run, &ack, NULL, 0, NULL, agent_saved_go_on);
        }

        p->review_rounds++;
        comments = comments_text(verdict);
        if (!comments)
                return agent_fail(run, "Out of memory.");
        if (p->review_rounds > c->max_review_rounds) {
                if (asprintf(&reason, "the reviewer model (%s) requested changes %u times: %s",
                             run->review_model_name, p->review_rounds, strempty(summary)) < 0)
                        return agent_fail(run, "Out of memory.");
                return agent_trip(run, BREAKER_REVIEW, reason, p->checkpoint);
        }

        /* Back to the worker: the model goes on from here, and its next
         * finish is reviewed again. */
        if (asprintf(&text, "A reviewer (%s) requested changes to your finished work (round %u of %u):\n\n%s\n\n%s\n"
                     "Make them, run the tests and call finish again.", run->review_model_name, p->review_rounds,
                     c->max_review_rounds, strempty(summary), comments) < 0)
                return agent_fail(run, "Out of memory.");
        json_object *m = conversation_message_new("user", text);
        if (!m || conversation_add(run, m) < 0) {
                json_object_put(m);
                return agent_fail(run, "Out of memory.");
        }
        /* The message and the state that counts it are written in a worker
         * thread, as the plan's are; the run goes on when they are. */
        p->finished = false;
        r = agent_save_messages(run, NULL);
        if (r < 0)
                return agent_fail(run, "Cannot record the conversation: %s", strerror(-r));
        if (r == 0)
                agent_schedule(run);   /* written here */
}

void review_model_start(AgentRun *run, const char *diff, const FindingList *findings) {
        _cleanup_json_ json_object *messages = json_object_new_array(), *tools = review_model_tools();
        _cleanup_free_ char *md = NULL, *user = NULL, *redacted = NULL;
        const Config *c = &run->factory->config;
        const ModelProfile *profile;
        Task *t = run->task;
        int r;

        profile = model_profiles_find(&run->factory->profiles, c->review_model);
        if (!profile || profile->kind == MODEL_KIND_REPLAY)
                return agent_fail(run, "[Review] Model= names '%s', which is not a [Model] profile that calls a model.",
                                  c->review_model);
        if (!messages || !tools)
                return agent_fail(run, "Out of memory.");
        if (!run->review_api_key) {
                r = model_profile_read_api_key(profile, &run->review_api_key);
                if (r < 0)
                        return agent_fail(run, "Cannot read the API key of model profile '%s': %s", profile->name,
                                          strerror(-r));
        }
        free(run->review_model_name);
        if (asprintf(&run->review_model_name, "%s/%s", profile->name, strempty(profile->model)) < 0)
                return agent_fail(run, "Out of memory.");

        r = finding_list_to_markdown(findings, "Findings of the automatic review", &md);
        if (r < 0)
                return agent_fail(run, "Out of memory.");
        /* SECURITY: the reviewer may be another, remote model: what the secret
         * scan would flag goes to it only as its redacted prefix. */
        redacted = secret_redact_text(NULL, strempty(diff));
        if (!redacted)
                return agent_fail(run, "Out of memory.");
        if (asprintf(&user, "Review this change before it is delivered.\n\n## Goal\n\n%s\n\n## Acceptance criteria\n\n%s\n\n"
                     "%s\n## The change (unified diff, base to final tree%s)\n\n```diff\n%s\n```\n",
                     t->spec.goal, isempty(t->spec.acceptance) ? "(none given)" : t->spec.acceptance, md,
                     strlen(strempty(diff)) >= REVIEW_MODEL_DIFF_MAX ? "; cut" : "", redacted) < 0)
                return agent_fail(run, "Out of memory.");
        _cleanup_json_ json_object *sys = conversation_message_new("system",
                "You are a code reviewer. An AI agent made the change below to meet the goal. Check that it meets the "
                "goal and the acceptance criteria, and that it is correct, safe and maintainable. Answer by calling "
                "the tool review_verdict exactly once: approve, or request_changes with comments tied to files and "
                "lines. The findings of the automatic checks are listed; a person sees them too.");
        _cleanup_json_ json_object *u = conversation_message_new("user", user);
        if (!sys || !u || json_object_array_add(messages, TAKE_PTR(sys)) < 0 ||
            json_object_array_add(messages, TAKE_PTR(u)) < 0)
                return agent_fail(run, "Out of memory.");

        run->phase = PHASE_REVIEW;
        r = model_client_chat(run->factory->model, profile, run->review_api_key, messages, tools, on_reviewer_reply,
                              run, &run->call);
        if (r < 0) {
                run->phase = PHASE_IDLE;
                return agent_fail(run, "Cannot call the reviewer model: %s", strerror(-r));
        }
}

int review_model_markdown(int dir_fd, char **ret) {
        _cleanup_json_ json_object *j = NULL;
        _cleanup_free_ char *comments = NULL;
        const char *model = NULL, *verdict = NULL, *summary = NULL;
        uint64_t round = 0;

        *ret = NULL;
        if (task_read_json_at(dir_fd, REVIEW_MODEL_FILE, REVIEW_MODEL_FILE_MAX, &j) < 0)
                return 0;
        (void) json_get_string(j, "model", &model);
        (void) json_get_string(j, "verdict", &verdict);
        (void) json_get_string(j, "summary", &summary);
        (void) json_get_uint64(j, "round", &round);
        comments = comments_text(j);
        if (!comments)
                return -ENOMEM;
        /* The model's words are escaped (one line each), not made safe for
         * markdown: they sit in a quote block. */
        if (asprintf(ret, "### Reviewer model\n\n%s (round %llu): **%s**\n\n> %s\n\n%s\n", strempty(model),
                     (unsigned long long) round, streq_ptr(verdict, "approve") ? "approved" : "requested changes",
                     isempty(summary) ? "(no summary)" : summary, comments) < 0)
                return -ENOMEM;
        return 0;
}

int review_model_trailers(Task *t, char ***ret) {
        _cleanup_json_ json_object *j = NULL;
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_free_ char *s = NULL;
        const char *model = NULL, *verdict = NULL, *commit = NULL;

        *ret = NULL;
        if (task_read_json(t, REVIEW_MODEL_FILE, REVIEW_MODEL_FILE_MAX, &j) < 0)
                return 0;
        (void) json_get_string(j, "model", &model);
        (void) json_get_string(j, "verdict", &verdict);
        (void) json_get_string(j, "commit", &commit);
        /* Only a verdict that let the task go on: each review round
         * overwrites the record, and a person's approval after a request
         * for changes is no reviewer's approval. */
        (void) commit;
        if (!t->progress.reviewed || !streq_ptr(verdict, "approve") || !model)
                return 0;
        if (asprintf(&s, "Agentfab-Reviewed-By: %s", model) < 0 || strv_extend(&l, s) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}
