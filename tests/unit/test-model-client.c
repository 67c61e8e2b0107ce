/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "fs-util.h"
#include "json-util.h"
#include "model-client.h"
#include "model-text-calls.h"
#include "tap.h"

/* Drives the real client against tests/model-server.py on loopback, with a
 * real sd-event loop: every fault a model server can produce must end in
 * exactly one handler call with the right error, and never in a hang. */

static char tmpdir[] = "/tmp/test-model-client-XXXXXX";
static unsigned n_servers = 0;
static int transcript_fd = -EBADF;
static bool loop_done = false;

typedef struct Server {
        pid_t pid;
        unsigned port;
        char log[256];
} Server;

static int server_start(const char *script, Server *ret) {
        char path[256];
        int fds[2];
        FILE *f;

        n_servers++;
        snprintf(path, sizeof(path), "%s/script-%u.json", tmpdir, n_servers);
        snprintf(ret->log, sizeof(ret->log), "%s/requests-%u.jsonl", tmpdir, n_servers);
        f = fopen(path, "we");
        if (!f)
                return -errno;
        fputs(script, f);
        fclose(f);

        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        ret->pid = fork();
        if (ret->pid < 0)
                return -errno;
        if (ret->pid == 0) {
                dup2(fds[1], STDOUT_FILENO);
                execl(PYTHON3, PYTHON3, MODEL_SERVER_PY, "--script", path, "--log", ret->log, (char *) NULL);
                _exit(127);
        }
        close(fds[1]);
        f = fdopen(fds[0], "re");
        if (!f)
                return -errno;
        if (fscanf(f, "%u", &ret->port) != 1) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        return 0;
}

static void server_stop(Server *s) {
        if (s->pid > 0) {
                kill(s->pid, SIGTERM);
                waitpid(s->pid, NULL, 0);
                s->pid = 0;
        }
}

/* The n-th request the server logged, or NULL. */
static json_object *server_request(Server *s, unsigned n) {
        _cleanup_free_ char *text = NULL;
        json_object *o = NULL;
        unsigned i = 0;

        if (read_file_at(AT_FDCWD, s->log, 16 * 1024 * 1024, &text, NULL) < 0)
                return NULL;
        for (char *next = text, *l; (l = strsep(&next, "\n"));) {
                if (l[0] == '\0')
                        continue;
                if (i++ == n) {
                        (void) json_parse_strict(l, strlen(l), &o);
                        return o;
                }
        }
        return NULL;
}

static unsigned server_n_requests(Server *s) {
        _cleanup_free_ char *text = NULL;
        unsigned n = 0;

        if (read_file_at(AT_FDCWD, s->log, 16 * 1024 * 1024, &text, NULL) < 0)
                return 0;
        for (char *c = text; *c; c++)
                n += *c == '\n';
        return n;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

typedef struct Result {
        unsigned calls;
        int error;
        char *error_message;
        char *content;
        char *finish_reason;
        size_t n_tool_calls;
        char *ids[4], *names[4], *args[4];
        uint64_t prompt_tokens, completion_tokens;
        unsigned attempts;
        bool stream;
        char *message;          /* serialized */
        char *raw;
        sd_event *event;
} Result;

static void result_done(Result *r) {
        free(r->error_message);
        free(r->content);
        free(r->finish_reason);
        for (size_t i = 0; i < 4; i++) {
                free(r->ids[i]);
                free(r->names[i]);
                free(r->args[i]);
        }
        free(r->message);
        free(r->raw);
        *r = (Result) {};
}

static char *dup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

static void result_fill(Result *res, int error, const char *error_message, const ModelReply *reply) {
        res->calls++;
        res->error = error;
        res->error_message = dup_or_null(error_message);
        if (!reply)
                return;
        res->content = dup_or_null(reply->content);
        res->finish_reason = dup_or_null(reply->finish_reason);
        res->n_tool_calls = reply->n_tool_calls;
        for (size_t i = 0; i < MIN(reply->n_tool_calls, (size_t) 4); i++) {
                res->ids[i] = dup_or_null(reply->tool_calls[i].id);
                res->names[i] = dup_or_null(reply->tool_calls[i].name);
                res->args[i] = dup_or_null(reply->tool_calls[i].arguments);
        }
        res->prompt_tokens = reply->prompt_tokens;
        res->completion_tokens = reply->completion_tokens;
        res->attempts = reply->attempts;
        res->stream = reply->stream;
        res->message = dup_or_null(json_to_line(reply->message));
        res->raw = dup_or_null(reply->raw);
}

#define MAX_RECORDED 16
static char *recorded[MAX_RECORDED];
static size_t n_recorded;

static void record(Result *r) {
        if (r->error == 0 && n_recorded < MAX_RECORDED && asprintf(&recorded[n_recorded], "%s|%s|%s|%" PRIu64 "|%" PRIu64 "|%u|%d|%s",
                                                                 strempty(r->content), strempty(r->finish_reason),
                                                                 strempty(r->message), r->prompt_tokens,
                                                                 r->completion_tokens, r->attempts, r->stream,
                                                                 strempty(r->raw)) >= 0)
                n_recorded++;
}

static void on_reply(ModelCall *call, int error, const char *error_message, const ModelReply *reply, void *userdata) {
        Result *res = userdata;

        result_fill(res, error, error_message, reply);
        /* Every good reply goes into the transcript that replay reads back
         * at the end. */
        if (reply && transcript_fd >= 0) {
                (void) model_transcript_append(transcript_fd, NULL, reply);
                record(res);
        }
        loop_done = true;
}

static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        bool *timed_out = userdata;
        *timed_out = loop_done = true;
        return 0;
}

/* Runs the loop until a handler says stop, at most 10 s. Not
 * sd_event_exit(): a loop that has exited cannot run again. */
static int run_loop(sd_event *e) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *w = NULL;
        bool timed_out = false;
        int r;

        r = sd_event_add_time_relative(e, &w, CLOCK_MONOTONIC, 10 * USEC_PER_SEC, 0, on_watchdog, &timed_out);
        if (r < 0)
                return r;
        loop_done = false;
        while (!loop_done) {
                r = sd_event_run(e, UINT64_MAX);
                if (r < 0)
                        return r;
        }
        return timed_out ? -ETIME : 0;
}

static void profile_init(ModelProfile *p, Server *s, char *endpoint, size_t n) {
        snprintf(endpoint, n, "http://127.0.0.1:%u/v1/", s->port);
        *p = (ModelProfile) {
                .name = (char *) "test",
                .kind = MODEL_KIND_OPENAI,
                .endpoint = endpoint,
                .model = (char *) "test-model",
                .timeout_usec = 5 * USEC_PER_SEC,
                .connect_timeout_usec = 2 * USEC_PER_SEC,
                .max_tokens = 512,
                .temperature = 0.2,
                .max_retries = 2,
                .retry_base_usec = 50 * USEC_PER_MSEC,
                .max_reply_bytes = 1024 * 1024,
        };
}

static json_object *messages_new(void) {
        json_object *m = NULL;
        const char *t = "[{\"role\":\"system\",\"content\":\"You write code.\"},"
                        "{\"role\":\"user\",\"content\":\"Fix the bug.\"}]";
        (void) json_parse_strict(t, strlen(t), &m);
        return m;
}

static json_object *tools_new(void) {
        json_object *m = NULL;
        const char *t = "[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":\"Read a file\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}}]";
        (void) json_parse_strict(t, strlen(t), &m);
        return m;
}

/* One request against a fresh server with the given script. */
static int chat_once(ModelClient *c, sd_event *e, const char *script, ModelProfile *p_override, bool stream,
                     const char *key, Result *res, Server *ret_server) {
        _cleanup_json_ json_object *m = messages_new(), *t = tools_new();
        char endpoint[128];
        ModelProfile p;
        int r;

        r = server_start(script, ret_server);
        if (r < 0)
                return r;
        profile_init(&p, ret_server, endpoint, sizeof(endpoint));
        if (p_override) {
                p.timeout_usec = p_override->timeout_usec ?: p.timeout_usec;
                p.max_retries = p_override->max_retries;
                p.retry_base_usec = p_override->retry_base_usec ?: p.retry_base_usec;
                p.max_reply_bytes = p_override->max_reply_bytes ?: p.max_reply_bytes;
                p.tool_calls = p_override->tool_calls;
        }
        p.stream = stream;

        *res = (Result) { .event = e };
        r = model_client_chat(c, &p, key, m, t, on_reply, res, NULL);
        if (r < 0)
                return r;
        return run_loop(e);
}

static const char *json_str(json_object *o, const char *path1, const char *path2) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, path1, &v))
                return NULL;
        if (path2 && !json_object_object_get_ex(v, path2, &v))
                return NULL;
        return v ? json_object_get_string(v) : NULL;
}

static void on_cancelled(ModelCall *call, int error, const char *error_message, const ModelReply *reply, void *userdata) {
        unsigned *n = userdata;
        (*n)++;
}

typedef struct CancelOther {
        ModelCall *other;
        Result res;
} CancelOther;

static void on_reply_cancel_other(ModelCall *call, int error, const char *error_message, const ModelReply *reply,
                                  void *userdata) {
        CancelOther *co = userdata;

        /* Cancelling itself and another call from within a handler. */
        model_call_cancel(call);
        model_call_cancel(co->other);
        on_reply(call, error, error_message, reply, &co->res);
}

int main(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(model_client_freep) ModelClient *c = NULL;
        ModelProfile o;
        Result res;
        Server s = {};
        char path[256];
        uint64_t t0;
        int r;

        signal(SIGPIPE, SIG_IGN);
        if (!mkdtemp(tmpdir))
                return 1;
        snprintf(path, sizeof(path), "%s/transcript.jsonl", tmpdir);
        transcript_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

        CHECK(sd_event_new(&e) >= 0, "event loop");
        CHECK(model_client_new(e, &c) >= 0, "client created");

        /* The common case: one plain answer; and what we send is what the
         * OpenAI API expects, with the key only in the header. */
        r = chat_once(c, e, "[{\"reply\":{\"content\":\"Hello there.\",\"usage\":{\"prompt_tokens\":21,\"completion_tokens\":4}}}]",
                      NULL, false, "sekrit-key", &res, &s);
        CHECK(r >= 0 && res.calls == 1 && res.error == 0, "plain reply: success (%s)", strempty(res.error_message));
        CHECK(streq_ptr(res.content, "Hello there.") && streq_ptr(res.finish_reason, "stop"), "plain reply: content, finish reason");
        CHECK(res.prompt_tokens == 21 && res.completion_tokens == 4, "plain reply: usage figures");
        CHECK(res.attempts == 1 && res.n_tool_calls == 0 && !res.stream, "plain reply: one attempt, no tool calls");
        CHECK(res.message && strstr(res.message, "\"role\":\"assistant\"") && !strstr(res.message, "tool_calls"),
              "plain reply: normalized message %s", strempty(res.message));
        {
                _cleanup_json_ json_object *req = server_request(&s, 0);
                json_object *v;
                CHECK(streq_ptr(json_str(req, "body", "model"), "test-model"), "request: model");
                CHECK(req && json_object_object_get_ex(json_object_object_get(req, "body"), "messages", &v) &&
                      json_object_array_length(v) == 2, "request: messages");
                CHECK(req && json_object_object_get_ex(json_object_object_get(req, "body"), "tools", &v) &&
                      json_object_array_length(v) == 1, "request: tools");
                CHECK(streq_ptr(json_str(req, "body", "stream"), "false"), "request: stream false");
                CHECK(streq_ptr(json_str(req, "body", "max_tokens"), "512"), "request: max_tokens");
                CHECK(streq_ptr(json_str(req, "path", NULL), "/v1/chat/completions"), "request: path, trailing slash of endpoint dropped");
                CHECK(streq_ptr(json_str(req, "headers", "authorization"), "Bearer sekrit-key"), "request: Authorization header with key");
                CHECK(streq_ptr(json_str(req, "headers", "content-type"), "application/json"), "request: content type");
                CHECK(!strstr(strempty(json_str(req, "body", NULL)), "sekrit"), "request: key not in the body");
        }
        server_stop(&s);
        result_done(&res);

        /* Tool calls in a plain reply, content null. */
        r = chat_once(c, e, "[{\"reply\":{\"content\":null,\"tool_calls\":["
                            "{\"id\":\"call_a\",\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\": \\\"a.c\\\"}\"},"
                            "{\"id\":\"call_b\",\"name\":\"run\",\"arguments\":\"{\\\"cmd\\\": \\\"make\\\"}\"}]}}]",
                      NULL, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == 0, "tool calls: success (%s)", strempty(res.error_message));
        CHECK(!res.content && res.n_tool_calls == 2 && streq_ptr(res.finish_reason, "tool_calls"), "tool calls: content null, two calls");
        CHECK(streq_ptr(res.ids[0], "call_a") && streq_ptr(res.names[0], "read_file") &&
              streq_ptr(res.args[0], "{\"path\": \"a.c\"}"), "tool calls: first call");
        CHECK(streq_ptr(res.ids[1], "call_b") && streq_ptr(res.names[1], "run") &&
              streq_ptr(res.args[1], "{\"cmd\": \"make\"}"), "tool calls: second call");
        CHECK(res.message && strstr(res.message, "\"content\":null") && strstr(res.message, "\"tool_calls\":[{"),
              "tool calls: message keeps content null and the calls");
        {
                _cleanup_json_ json_object *req = server_request(&s, 0);
                CHECK(req && !json_str(req, "headers", "authorization"), "request: no Authorization header without a key");
        }
        server_stop(&s);
        result_done(&res);

        /* Ollama and llama.cpp shapes: no ids, arguments as an object. */
        r = chat_once(c, e, "[{\"reply\":{\"content\":\"\",\"omit_ids\":true,\"tool_calls\":["
                            "{\"name\":\"read_file\",\"arguments\":{\"path\":\"b.c\"}},{\"name\":\"list\"}]}}]",
                      NULL, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == 0 && res.n_tool_calls == 2, "missing ids: success (%s)", strempty(res.error_message));
        CHECK(res.ids[0] && res.ids[1] && !streq(res.ids[0], res.ids[1]) && strneq(res.ids[0], "call_", 5),
              "missing ids: generated, distinct (%s, %s)", strempty(res.ids[0]), strempty(res.ids[1]));
        CHECK(streq_ptr(res.args[0], "{\"path\":\"b.c\"}"), "object arguments serialized: %s", strempty(res.args[0]));
        CHECK(streq_ptr(res.args[1], "{}"), "absent arguments: {}");
        server_stop(&s);
        result_done(&res);

        /* A stream: content and two tool calls, arguments over many small
         * deltas, usage in the last chunk. */
        r = chat_once(c, e, "[{\"chunk\":2,\"reply\":{\"content\":\"Let me look at it.\",\"tool_calls\":["
                            "{\"id\":\"c1\",\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\": \\\"src/main.c\\\", \\\"lines\\\": [1, 2, 3]}\"},"
                            "{\"id\":\"c2\",\"name\":\"grep\",\"arguments\":\"{\\\"pattern\\\": \\\"foo\\\\\\\\s+bar\\\"}\"}],"
                            "\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":42}}}]",
                      NULL, true, NULL, &res, &s);
        CHECK(r >= 0 && res.error == 0 && res.stream, "stream: success (%s)", strempty(res.error_message));
        CHECK(streq_ptr(res.content, "Let me look at it."), "stream: content assembled");
        CHECK(res.n_tool_calls == 2 && streq_ptr(res.ids[0], "c1") && streq_ptr(res.names[0], "read_file") &&
              streq_ptr(res.args[0], "{\"path\": \"src/main.c\", \"lines\": [1, 2, 3]}"), "stream: first call assembled: %s", strempty(res.args[0]));
        CHECK(streq_ptr(res.ids[1], "c2") && streq_ptr(res.names[1], "grep") &&
              streq_ptr(res.args[1], "{\"pattern\": \"foo\\\\s+bar\"}"), "stream: second call assembled: %s", strempty(res.args[1]));
        CHECK(res.prompt_tokens == 100 && res.completion_tokens == 42, "stream: usage from the last chunk");
        CHECK(streq_ptr(res.finish_reason, "tool_calls"), "stream: finish reason");
        {
                _cleanup_json_ json_object *req = server_request(&s, 0);
                CHECK(streq_ptr(json_str(req, "body", "stream"), "true") &&
                      streq_ptr(json_str(req, "headers", "accept"), "text/event-stream"), "request: stream true");
        }
        server_stop(&s);
        result_done(&res);

        /* Deltas without "index" and with an object as arguments. */
        r = chat_once(c, e, "[{\"reply\":{\"content\":null,\"omit_index\":true,\"tool_calls\":["
                            "{\"id\":\"x1\",\"name\":\"a\",\"arguments\":\"{\\\"n\\\": 1}\"},{\"id\":\"x2\",\"name\":\"b\",\"arguments\":{\"m\":2}}]}}]",
                      NULL, true, NULL, &res, &s);
        CHECK(r >= 0 && res.error == 0 && res.n_tool_calls == 2 && streq_ptr(res.args[0], "{\"n\": 1}") &&
              streq_ptr(res.args[1], "{\"m\":2}"), "stream without index: calls kept apart (%s)", strempty(res.error_message));
        server_stop(&s);
        result_done(&res);

        /* ToolCalls=text: no tools in the request but their description
         * in the system prompt; a reply that writes its call in its text
         * (streamed in pieces, after thinking, as a server without a parser
         * for the model's format sends it) is read by model_reply_read_text(). */
        {
                ModelProfile tp = { .tool_calls = MODEL_TOOL_CALLS_TEXT, .max_retries = 2 };
                r = chat_once(c, e, "[{\"chunk\":3,\"text_calls\":\"hermes\",\"think\":\"Read it first.\",\"reply\":{"
                                    "\"content\":\"Reading.\",\"tool_calls\":[{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.c\"}}]}}]",
                              &tp, true, NULL, &res, &s);
                CHECK(r >= 0 && res.error == 0 && res.n_tool_calls == 0 && res.content && strstr(res.content, "<think>") &&
                      strstr(res.content, "<tool_call>") && streq_ptr(res.finish_reason, "stop"),
                      "text calls: the call in the content, streamed (%s)", strempty(res.error_message));
                _cleanup_json_ json_object *req = server_request(&s, 0), *body = NULL, *msgs = NULL, *t = tools_new();
                body = req ? json_object_get(json_object_object_get(req, "body")) : NULL;
                msgs = body ? json_object_get(json_object_object_get(body, "messages")) : NULL;
                const char *sys = msgs ? json_object_get_string(json_object_object_get(json_object_array_get_idx(msgs, 0), "content")) : NULL;
                CHECK(body && !json_object_object_get_ex(body, "tools", NULL) && !json_object_object_get_ex(body, "tool_choice", NULL),
                      "ToolCalls=text: no tools in the request");
                CHECK(sys && strstr(sys, "You write code.") && strstr(sys, "<tool_call>{\"name\": \"TOOL\", \"arguments\": {...}}</tool_call>") &&
                      strstr(sys, "## read_file"), "ToolCalls=text: the system prompt describes the tools and the format");
                _cleanup_(model_reply_freep) ModelReply *raw = NULL, *read = NULL;
                CHECK(res.raw && model_reply_parse(res.raw, strlen(res.raw), true, &raw, NULL) == 0 &&
                      model_reply_read_text(raw, MODEL_TOOL_CALLS_TEXT, t, &read) == 1 && read && read->n_tool_calls == 1 &&
                      streq_ptr(read->tool_calls[0].name, "read_file") && streq_ptr(read->tool_calls[0].arguments, "{\"path\":\"a.c\"}") &&
                      streq_ptr(read->content, "Reading."), "text calls: read from the streamed reply, thinking dropped");
        }
        server_stop(&s);
        result_done(&res);

        /* A server that answers a stream request with a plain object. */
        r = chat_once(c, e, "[{\"stream\":false,\"reply\":{\"content\":\"plain anyway\"}}]", NULL, true, NULL, &res, &s);
        CHECK(r >= 0 && res.error == 0 && streq_ptr(res.content, "plain anyway") && !res.stream, "stream asked, plain given");
        server_stop(&s);
        result_done(&res);

        /* A transient server error is retried, with backoff. */
        o = (ModelProfile) { .max_retries = 2, .retry_base_usec = 50 * USEC_PER_MSEC };
        r = chat_once(c, e, "[{\"status\":500},{\"reply\":{\"content\":\"second time lucky\"}}]", &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == 0 && res.attempts == 2 && streq_ptr(res.content, "second time lucky"),
              "500 then success: attempts == 2 (%u)", res.attempts);
        CHECK_INT_EQ(server_n_requests(&s), 2, "500 then success: two requests");
        server_stop(&s);
        result_done(&res);

        /* Rate limiting: Retry-After is honoured. */
        t0 = now_usec();
        r = chat_once(c, e, "[{\"status\":429,\"retry_after\":1},{\"reply\":{\"content\":\"ok\"}}]", &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == 0 && res.attempts == 2, "429: retried");
        CHECK(now_usec() - t0 >= USEC_PER_SEC, "429: waited Retry-After (%" PRIu64 " ms)", (now_usec() - t0) / USEC_PER_MSEC);
        server_stop(&s);
        result_done(&res);

        /* Retries are bounded. */
        o = (ModelProfile) { .max_retries = 1, .retry_base_usec = 10 * USEC_PER_MSEC };
        r = chat_once(c, e, "[{\"status\":503},{\"status\":502},{\"reply\":{\"content\":\"too late\"}}]", &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == -EREMOTEIO && server_n_requests(&s) == 2, "5xx: max_retries honoured (%s)", strempty(res.error_message));
        CHECK(res.error_message && strstr(res.error_message, "502"), "5xx: message has the status");
        server_stop(&s);
        result_done(&res);

        /* A client error is final; the message says why, briefly. */
        o = (ModelProfile) { .max_retries = 3 };
        r = chat_once(c, e, "[{\"status\":400,\"body\":\"{\\\"error\\\":{\\\"message\\\":\\\"context length exceeded\\\\nby a lot\\\"}}\"},"
                            "{\"reply\":{\"content\":\"no\"}}]", &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == -EINVAL && server_n_requests(&s) == 1, "400: not retried");
        CHECK(res.error_message && strstr(res.error_message, "400") && strstr(res.error_message, "context length exceeded") &&
              !strchr(res.error_message, '\n'), "400: message '%s'", strempty(res.error_message));
        server_stop(&s);
        result_done(&res);

        /* A request longer than the model's context, in each server's
         * words: -EMSGSIZE, at once, even from a 500 (llama.cpp), so that
         * the agent compacts and asks again instead of failing. */
        {
                static const char *const refusals[] = {
                        "[{\"status\":400,\"body\":\"{\\\"error\\\":{\\\"message\\\":\\\"This model's maximum context "
                        "length is 4096 tokens.\\\",\\\"code\\\":\\\"context_length_exceeded\\\"}}\"}]",
                        "[{\"status\":400,\"body\":\"{\\\"error\\\":{\\\"code\\\":400,\\\"message\\\":\\\"request (5000 "
                        "tokens) exceeds the available context size (4096 tokens), try increasing it\\\",\\\"type\\\":"
                        "\\\"exceed_context_size_error\\\"}}\"}]",
                        "[{\"status\":500,\"body\":\"{\\\"error\\\":{\\\"code\\\":500,\\\"message\\\":\\\"context shift "
                        "is disabled\\\"}}\"},{\"reply\":{\"content\":\"no\"}}]",
                        "[{\"status\":400,\"body\":\"{\\\"error\\\":{\\\"message\\\":\\\"the input length exceeds the "
                        "context length\\\"}}\"}]",
                        "[{\"status\":413,\"body\":\"<html>Request Entity Too Large</html>\"}]",
                };
                for (size_t i = 0; i < ELEMENTSOF(refusals); i++) {
                        r = chat_once(c, e, refusals[i], &o, false, NULL, &res, &s);
                        CHECK(r >= 0 && res.error == -EMSGSIZE && server_n_requests(&s) == 1 && res.error_message &&
                              strstr(res.error_message, "longer than the model's context"),
                              "too long for the context (%zu): -EMSGSIZE, not retried: '%s'", i, strempty(res.error_message));
                        server_stop(&s);
                        result_done(&res);
                }
        }

        /* An error body that echoes the key does not put it in the message. */
        r = chat_once(c, e, "[{\"status\":401,\"body\":\"bad key Bearer sekrit-key\"}]", &o, false, "sekrit-key", &res, &s);
        CHECK(r >= 0 && res.error == -EACCES && res.error_message && !strstr(res.error_message, "sekrit"),
              "401: key scrubbed from '%s'", strempty(res.error_message));
        server_stop(&s);
        result_done(&res);

        r = chat_once(c, e, "[{\"garbage\":true}]", &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.calls == 1 && res.error == -EBADMSG, "garbage body: -EBADMSG");
        server_stop(&s);
        result_done(&res);

        r = chat_once(c, e, "[{\"body\":\"{\\\"choices\\\":[{\\\"message\\\":{\\\"role\\\":\\\"assistant\\\",\\\"content\\\":\\\"\\\"},\\\"finish_reason\\\":\\\"stop\\\"}]}\"}]",
                      &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == -EBADMSG, "neither content nor tool calls: -EBADMSG");
        server_stop(&s);
        result_done(&res);

        /* A stream cut before its end is an error, never half a tool call. */
        r = chat_once(c, e, "[{\"cut_stream_after\":3,\"reply\":{\"content\":null,\"tool_calls\":[{\"name\":\"rm\",\"arguments\":\"{\\\"path\\\": \\\"/tmp/x\\\"}\"}]}}]",
                      &o, true, NULL, &res, &s);
        CHECK(r >= 0 && res.calls == 1 && res.error == -EPIPE && server_n_requests(&s) == 1, "stream cut: -EPIPE, not retried (%s)",
              strempty(res.error_message));
        server_stop(&s);
        result_done(&res);

        /* More than we are willing to hold, plain (Content-Length) and as a stream. */
        o = (ModelProfile) { .max_reply_bytes = 16 * 1024 };
        r = chat_once(c, e, "[{\"huge\":100000}]", &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == -EFBIG, "oversized plain reply: -EFBIG");
        server_stop(&s);
        result_done(&res);
        r = chat_once(c, e, "[{\"huge\":100000,\"chunk\":1000}]", &o, true, NULL, &res, &s);
        CHECK(r >= 0 && res.error == -EFBIG, "oversized stream: -EFBIG");
        server_stop(&s);
        result_done(&res);

        /* A server that does not answer in time: three tries of 300 ms end
         * long before its answer would come. The bound is loose on purpose (a
         * loaded machine under ASan is slow); what it proves is that the
         * client did not wait for the reply. */
        o = (ModelProfile) { .timeout_usec = 300 * USEC_PER_MSEC, .max_retries = 2 };
        t0 = now_usec();
        r = chat_once(c, e, "[{\"delay\":60,\"reply\":{\"content\":\"late\"}}]", &o, false, NULL, &res, &s);
        CHECK(r >= 0 && res.error == -ETIMEDOUT && now_usec() - t0 < 30 * USEC_PER_SEC,
              "timeout: -ETIMEDOUT before the late reply (%" PRIu64 " ms)", (now_usec() - t0) / USEC_PER_MSEC);
        server_stop(&s);
        result_done(&res);

        /* Nobody listening: retried, then a clear error. */
        {
                struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                socklen_t sl = sizeof(sa);
                _cleanup_json_ json_object *m = messages_new();
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                char endpoint[128];
                ModelProfile p;
                Server dead = {};

                bind(fd, (struct sockaddr *) &sa, sizeof(sa));
                getsockname(fd, (struct sockaddr *) &sa, &sl);
                dead.port = ntohs(sa.sin_port);
                close(fd);
                profile_init(&p, &dead, endpoint, sizeof(endpoint));
                p.retry_base_usec = 10 * USEC_PER_MSEC;
                res = (Result) { .event = e };
                CHECK(model_client_chat(c, &p, NULL, m, NULL, on_reply, &res, NULL) >= 0 && run_loop(e) >= 0 &&
                      res.error == -ECONNREFUSED, "connection refused: -ECONNREFUSED (%s)", strempty(res.error_message));
                result_done(&res);
        }

        /* Cancellation: a cancelled call's handler never runs, also when
         * the cancel comes from another call's handler. */
        {
                _cleanup_json_ json_object *m = messages_new();
                char endpoint[128], endpoint2[128];
                ModelProfile p, p2;
                unsigned n_cancelled = 0;
                ModelCall *a = NULL;
                CancelOther co = { .res = { .event = e } };
                Server s2 = {};

                /* Two servers, so that which call finishes first is certain. */
                CHECK(server_start("[{\"delay\":0.2,\"reply\":{\"content\":\"first\"}}]", &s) >= 0 &&
                      server_start("[{\"delay\":1.5,\"reply\":{\"content\":\"slow\"}}]", &s2) >= 0,
                      "servers for cancellation");
                profile_init(&p, &s, endpoint, sizeof(endpoint));
                profile_init(&p2, &s2, endpoint2, sizeof(endpoint2));
                CHECK(model_client_chat(c, &p, NULL, m, NULL, on_cancelled, &n_cancelled, &a) >= 0, "call to cancel started");
                model_call_cancel(a);
                CHECK(model_client_chat(c, &p, NULL, m, NULL, on_reply_cancel_other, &co, NULL) >= 0 &&
                      model_client_chat(c, &p2, NULL, m, NULL, on_cancelled, &n_cancelled, &co.other) >= 0, "two more calls");
                CHECK(run_loop(e) >= 0 && co.res.calls == 1 && co.res.error == 0 && streq_ptr(co.res.content, "first"),
                      "first call answered");
                CHECK_INT_EQ(n_cancelled, 0, "cancelled handlers not called");
                server_stop(&s2);
                server_stop(&s);
                result_done(&co.res);
        }

        /* Replay: the transcript written above gives the very same replies,
         * in order, still asynchronously. */
        {
                ModelProfile p = { .name = (char *) "replay", .kind = MODEL_KIND_REPLAY, .replay_path = path };
                _cleanup_json_ json_object *m = messages_new();
                bool same = true;
                size_t i;

                transcript_fd = safe_close(transcript_fd); /* nothing more to record */

                for (i = 0; i < n_recorded; i++) {
                        _cleanup_free_ char *x = NULL;

                        res = (Result) { .event = e };
                        if (model_client_chat(c, &p, NULL, m, NULL, on_reply, &res, NULL) < 0) {
                                same = false;
                                break;
                        }
                        CHECK_INT_EQ(res.calls, 0, "replay %zu: not delivered synchronously", i);
                        if (run_loop(e) < 0 || res.error != 0)
                                same = false;
                        record(&res);
                        x = recorded[--n_recorded];
                        recorded[n_recorded] = NULL;
                        if (!streq_ptr(x, recorded[i])) {
                                printf("# replay %zu differs\n", i);
                                same = false;
                        }
                        result_done(&res);
                }
                CHECK(same && i >= 9, "replay of %zu recorded exchanges gives identical replies", i);

                res = (Result) { .event = e };
                CHECK(model_client_chat(c, &p, NULL, m, NULL, on_reply, &res, NULL) >= 0 && run_loop(e) >= 0 &&
                      res.error == -ENODATA, "replay past the end: -ENODATA");
                result_done(&res);

                model_client_replay_reset(c, path);
                res = (Result) { .event = e };
                CHECK(model_client_chat(c, &p, NULL, m, NULL, on_reply, &res, NULL) >= 0 && run_loop(e) >= 0 &&
                      res.error == 0 && streq_ptr(res.content, "Hello there."), "replay reset starts over");
                result_done(&res);

                /* An explicit cursor, as a task would keep one. */
                _cleanup_(model_replay_freep) ModelReplay *rp = NULL;
                ModelReply *reply = NULL;
                json_object *req = NULL;
                CHECK(model_replay_open(path, &rp) >= 0 && model_replay_next(rp, &reply, &req) >= 0 && req &&
                      streq_ptr(json_str(req, "model", NULL), "test-model") && model_replay_position(rp) == 1,
                      "replay cursor: recorded request available");
                json_object_put(req);
                model_reply_free(reply);
                res = (Result) { .event = e };
                CHECK(model_client_chat_replay(c, rp, on_reply, &res, NULL) >= 0 && run_loop(e) >= 0 && res.error == 0 &&
                      res.n_tool_calls == 2 && streq_ptr(res.ids[0], "call_a"), "replay cursor: second exchange");
                result_done(&res);

                p.replay_path = (char *) "/nonexistent/transcript";
                CHECK_ERRNO(model_client_chat(c, &p, NULL, m, NULL, on_reply, &res, NULL), -ENOENT, "replay of a missing file fails at once");
        }

        for (size_t i = 0; i < n_recorded; i++)
                free(recorded[i]);
        c = model_client_free(c);
        (void) rm_rf_at(AT_FDCWD, tmpdir);
        return tap_done();
}
