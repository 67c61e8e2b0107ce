/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "buf.h"
#include "fs-util.h"
#include "json-util.h"
#include "model-client.h"
#include "string-util.h"

/* Reply parsing is shared by the live client and replay, so that a replayed
 * transcript yields the very same ModelReply as the exchange it recorded. */

#define TRANSCRIPT_MAX (256U * 1024U * 1024U)

ModelReply *model_reply_free(ModelReply *r) {
        if (!r)
                return NULL;
        free(r->content);
        for (size_t i = 0; i < r->n_tool_calls; i++) {
                free(r->tool_calls[i].id);
                free(r->tool_calls[i].name);
                free(r->tool_calls[i].arguments);
        }
        free(r->tool_calls);
        free(r->finish_reason);
        json_object_put(r->message);
        json_object_put(r->request);
        free(r->raw);
        free(r);
        return NULL;
}

/* Text for people (the reply's content): a NUL, which JSON allows as
 * \u0000 but a C string ends at, becomes U+FFFD, so that nothing after it
 * is lost and the text is never empty while its JSON was not. */
static int buf_append_text(Buf *b, const char *s, size_t n) {
        while (n > 0) {
                const char *nul = memchr(s, '\0', n);
                size_t k = nul ? (size_t) (nul - s) : n;
                int r = buf_append(b, s, k);
                if (r < 0)
                        return r;
                if (!nul)
                        break;
                r = buf_append(b, "\xEF\xBF\xBD", 3);
                if (r < 0)
                        return r;
                s += k + 1;
                n -= k + 1;
        }
        return 0;
}

typedef struct PartialCall {
        int64_t index;
        Buf id, name, arguments;
} PartialCall;

typedef struct Acc {
        Buf content;
        PartialCall *calls;
        size_t n_calls;
        char *finish_reason;
        uint64_t prompt_tokens, completion_tokens, cached_tokens;
        char *error;
} Acc;

static void acc_done(Acc *a) {
        buf_done(&a->content);
        for (size_t i = 0; i < a->n_calls; i++) {
                buf_done(&a->calls[i].id);
                buf_done(&a->calls[i].name);
                buf_done(&a->calls[i].arguments);
        }
        free(a->calls);
        free(a->finish_reason);
        free(a->error);
}

_printf_(3, 4)
static int acc_fail(Acc *a, int error, const char *fmt, ...) {
        va_list ap;

        free(a->error);
        a->error = NULL;
        va_start(ap, fmt);
        if (vasprintf(&a->error, fmt, ap) < 0)
                a->error = NULL;
        va_end(ap);
        return error;
}

static json_object *get(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_is_type(o, json_type_object))
                return NULL;
        if (!json_object_object_get_ex(o, key, &v))
                return NULL;
        return v; /* NULL too for an explicit null */
}

/* Content is a string, null, or (in some servers) an array of parts of
 * which the "text" ones count. */
static int acc_add_content(Acc *a, json_object *content) {
        if (!content)
                return 0;
        if (json_object_is_type(content, json_type_string))
                return buf_append_text(&a->content, json_object_get_string(content), json_object_get_string_len(content));
        if (json_object_is_type(content, json_type_array)) {
                for (size_t i = 0; i < json_object_array_length(content); i++) {
                        json_object *t = get(json_object_array_get_idx(content, i), "text");
                        if (t && json_object_is_type(t, json_type_string)) {
                                int r = buf_append_text(&a->content, json_object_get_string(t), json_object_get_string_len(t));
                                if (r < 0)
                                        return r;
                        }
                }
                return 0;
        }
        return acc_fail(a, -EBADMSG, "Message content is neither a string nor null.");
}

static int acc_find_call(Acc *a, json_object *tc, bool delta, PartialCall **ret) {
        json_object *idx = get(tc, "index"), *id = get(tc, "id");
        int64_t index;

        if (delta && idx && json_object_is_type(idx, json_type_int)) {
                /* Servers count a reply's calls from 0. A larger number than
                 * an int holds is garbage (json-c clamps a huge one to
                 * INT64_MAX), and the next call's "last plus one" below must
                 * not overflow. */
                index = json_object_get_int64(idx);
                if (index < 0 || index > INT32_MAX)
                        return acc_fail(a, -EBADMSG, "A tool call's index is out of range: %" PRIi64 ".", index);
        } else if (delta) {
                /* No index (some older servers): a delta with a new id begins
                 * a new call, one without continues the last. */
                const char *s = id && json_object_is_type(id, json_type_string) ? json_object_get_string(id) : NULL;
                if (a->n_calls > 0 && (!s || streq_ptr(a->calls[a->n_calls - 1].id.s, s))) {
                        *ret = a->calls + a->n_calls - 1;
                        return 0;
                }
                index = a->n_calls > 0 ? a->calls[a->n_calls - 1].index + 1 : 0;
        } else
                index = (int64_t) a->n_calls; /* a complete message: each entry is a call of its own */

        for (size_t i = 0; i < a->n_calls; i++)
                if (a->calls[i].index == index) {
                        *ret = a->calls + i;
                        return 0;
                }

        if (a->n_calls >= MODEL_TOOL_CALLS_MAX)
                return acc_fail(a, -E2BIG, "More than %u tool calls in one reply.", MODEL_TOOL_CALLS_MAX);
        PartialCall *n = realloc(a->calls, (a->n_calls + 1) * sizeof(PartialCall));
        if (!n)
                return -ENOMEM;
        a->calls = n;
        a->calls[a->n_calls] = (PartialCall) { .index = index };
        *ret = a->calls + a->n_calls++;
        return 0;
}

static int acc_add_tool_call(Acc *a, json_object *tc, bool delta) {
        json_object *id, *fn, *name, *args;
        PartialCall *pc = NULL;
        int r;

        if (!json_object_is_type(tc, json_type_object))
                return acc_fail(a, -EBADMSG, "A tool call is not an object.");

        r = acc_find_call(a, tc, delta, &pc);
        if (r < 0)
                return r;

        /* A NUL in an id or a name ("\u0000") would make the C string end
         * early: an empty or other name than the one sent. */
        id = get(tc, "id");
        if (id && json_object_is_type(id, json_type_string) &&
            memchr(json_object_get_string(id), '\0', (size_t) json_object_get_string_len(id)))
                return acc_fail(a, -EBADMSG, "A tool call's id holds a NUL character.");
        if (id && json_object_is_type(id, json_type_string) && json_object_get_string_len(id) > 0 && !pc->id.s) {
                r = buf_append(&pc->id, json_object_get_string(id), json_object_get_string_len(id));
                if (r < 0)
                        return r;
        }

        fn = get(tc, "function");
        if (!fn)
                return 0;
        name = get(fn, "name");
        if (name && json_object_is_type(name, json_type_string) &&
            memchr(json_object_get_string(name), '\0', (size_t) json_object_get_string_len(name)))
                return acc_fail(a, -EBADMSG, "A tool call's function name holds a NUL character.");
        /* The name comes whole, once; servers that repeat it in every delta
         * must not make it "readread". */
        if (name && json_object_is_type(name, json_type_string) && json_object_get_string_len(name) > 0 && !pc->name.s) {
                r = buf_append(&pc->name, json_object_get_string(name), json_object_get_string_len(name));
                if (r < 0)
                        return r;
        }
        args = get(fn, "arguments");
        if (!args)
                return 0;
        if (json_object_is_type(args, json_type_string))
                return buf_append(&pc->arguments, json_object_get_string(args), json_object_get_string_len(args));

        /* Ollama and some llama.cpp versions send the arguments as an object:
         * make them the text the OpenAI API promises. */
        const char *t = json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!t)
                return -ENOMEM;
        buf_done(&pc->arguments);
        return buf_append(&pc->arguments, t, strlen(t));
}

static int acc_add_message(Acc *a, json_object *m, bool delta) {
        json_object *tcs;
        int r;

        if (!m)
                return 0;
        if (!json_object_is_type(m, json_type_object))
                return acc_fail(a, -EBADMSG, "Message is not an object.");

        r = acc_add_content(a, get(m, "content"));
        if (r < 0)
                return r;

        tcs = get(m, "tool_calls");
        if (!tcs)
                return 0;
        if (!json_object_is_type(tcs, json_type_array))
                return acc_fail(a, -EBADMSG, "tool_calls is not an array.");
        for (size_t i = 0; i < json_object_array_length(tcs); i++) {
                r = acc_add_tool_call(a, json_object_array_get_idx(tcs, i), delta);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void acc_add_usage(Acc *a, json_object *o) {
        json_object *u = get(o, "usage");
        uint64_t v;

        if (!u)
                return;
        if (json_get_uint64(u, "prompt_tokens", &v) >= 0)
                a->prompt_tokens = v;
        if (json_get_uint64(u, "completion_tokens", &v) >= 0)
                a->completion_tokens = v;
        /* Servers that cache prompt prefixes say how much of the prompt
         * they had (OpenAI's field; others leave it out). */
        json_object *d = get(u, "prompt_tokens_details");
        if (d && json_get_uint64(d, "cached_tokens", &v) >= 0)
                a->cached_tokens = v;
}

static int acc_check_error(Acc *a, json_object *o) {
        json_object *e = get(o, "error"), *m;

        if (!e)
                return 0;
        m = json_object_is_type(e, json_type_string) ? e : get(e, "message");
        _cleanup_free_ char *s = strshorten_line(m && json_object_is_type(m, json_type_string) ?
                                                 json_object_get_string(m) : "(no message)", 200);
        if (!s)
                return -ENOMEM;
        return acc_fail(a, -EBADMSG, "Model server reported an error: %s", s);
}

/* One object: a whole reply, or one chunk of a stream. */
static int acc_add_object(Acc *a, json_object *o, bool delta) {
        json_object *choices, *choice, *fr;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return acc_fail(a, -EBADMSG, "Reply is not a JSON object.");
        r = acc_check_error(a, o);
        if (r < 0)
                return r;

        acc_add_usage(a, o);

        choices = get(o, "choices");
        if (!choices) {
                if (delta)
                        return 0; /* e.g. the usage-only last chunk */
                return acc_fail(a, -EBADMSG, "Reply has no choices.");
        }
        if (!json_object_is_type(choices, json_type_array))
                return acc_fail(a, -EBADMSG, "choices is not an array.");
        if (json_object_array_length(choices) == 0) {
                if (delta)
                        return 0;
                return acc_fail(a, -EBADMSG, "Reply has no choices.");
        }
        /* We never ask for n > 1: only the first choice counts. */
        choice = json_object_array_get_idx(choices, 0);

        r = acc_add_message(a, get(choice, delta ? "delta" : "message"), delta);
        if (r < 0)
                return r;
        if (delta && !get(choice, "delta")) {
                r = acc_add_message(a, get(choice, "message"), false);
                if (r < 0)
                        return r;
        }

        fr = get(choice, "finish_reason");
        if (fr && json_object_is_type(fr, json_type_string) && json_object_get_string_len(fr) > 0)
                if (free_and_strdup(&a->finish_reason, json_object_get_string(fr)) < 0)
                        return -ENOMEM;
        return 0;
}

static int acc_add_sse_event(Acc *a, json_tokener *tok, const char *data, size_t n, bool *done) {
        _cleanup_json_ json_object *o = NULL;
        int r;

        if (n == 6 && memcmp(data, "[DONE]", 6) == 0) {
                *done = true;
                return 0;
        }
        r = json_parse_strict_with(tok, data, n, &o);
        if (r < 0)
                return acc_fail(a, -EBADMSG, "A stream event is not JSON.");
        return acc_add_object(a, o, true);
}

static void json_tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

static int acc_parse_sse(Acc *a, const char *raw, size_t size) {
        /* One tokener for all the events of a stream, not one per event. */
        _cleanup_(json_tokener_freep) json_tokener *tok = json_tokener_new_ex(JSON_PARSE_DEPTH);
        Buf data = {};
        bool done = false, any = false;
        const char *p = raw, *end = raw + size;
        int r = 0;

        if (!tok)
                return -ENOMEM;

        /* Server-sent events: "data:" lines, several of which make one event
         * until a blank line; comments (":") and other fields are ignored. */
        while (p < end && !done) {
                const char *nl = memchr(p, '\n', end - p);
                const char *le = nl ?: end;
                size_t l = le - p;

                if (l > 0 && p[l - 1] == '\r')
                        l--;

                if (l == 0) {
                        if (data.s) {
                                r = acc_add_sse_event(a, tok, data.s, data.n, &done);
                                any = true;
                                buf_done(&data);
                                if (r < 0)
                                        break;
                        }
                } else if (l >= 5 && memcmp(p, "data:", 5) == 0) {
                        const char *v = p + 5;
                        size_t vl = l - 5;
                        if (vl > 0 && *v == ' ')
                                v++, vl--;
                        if (data.s && (r = buf_append(&data, "\n", 1)) < 0)
                                break;
                        if ((r = buf_append(&data, v, vl)) < 0)
                                break;
                }
                p = nl ? nl + 1 : end;
        }
        if (r >= 0 && data.s && !done) {
                /* The last event without its blank line: use it, whether the
                 * stream is complete is decided below. */
                r = acc_add_sse_event(a, tok, data.s, data.n, &done);
                any = true;
        }
        buf_done(&data);
        if (r < 0)
                return r;

        if (!any)
                return acc_fail(a, -EBADMSG, "Stream has no events.");
        /* SECURITY/robustness: a stream that stops without [DONE] or a
         * finish reason was cut; half a tool call must not be executed. */
        if (!done && !a->finish_reason)
                return acc_fail(a, -EPIPE, "Stream ended before it was complete.");
        return 0;
}

static uint32_t fnv1a(const char *s, size_t n) {
        uint32_t h = 2166136261U;
        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char) s[i];
                h *= 16777619U;
        }
        return h;
}

int model_reply_build_message(ModelReply *r) {
        _cleanup_json_ json_object *m = json_object_new_object(), *tcs = NULL;

        if (!m)
                return -ENOMEM;
        if (json_add_string(m, "role", "assistant") < 0)
                return -ENOMEM;
        /* null goes with tool calls only: servers refuse an assistant
         * message with neither (one whose text was all thinking). */
        if (json_object_object_add(m, "content", r->content ? json_object_new_string(r->content) :
                                   r->n_tool_calls == 0 ? json_object_new_string("") : NULL) < 0)
                return -ENOMEM;

        if (r->n_tool_calls > 0) {
                tcs = json_object_new_array();
                if (!tcs)
                        return -ENOMEM;
                for (size_t i = 0; i < r->n_tool_calls; i++) {
                        _cleanup_json_ json_object *tc = json_object_new_object(), *fn = json_object_new_object();
                        if (!tc || !fn)
                                return -ENOMEM;
                        if (json_add_string(fn, "name", r->tool_calls[i].name) < 0 ||
                            json_add_string(fn, "arguments", r->tool_calls[i].arguments) < 0 ||
                            json_add_string(tc, "id", r->tool_calls[i].id) < 0 ||
                            json_add_string(tc, "type", "function") < 0 ||
                            json_object_object_add(tc, "function", fn) < 0)
                                return -ENOMEM;
                        fn = NULL;
                        if (json_object_array_add(tcs, tc) < 0)
                                return -ENOMEM;
                        tc = NULL;
                }
                if (json_object_object_add(m, "tool_calls", tcs) < 0)
                        return -ENOMEM;
                tcs = NULL;
        }
        r->message = TAKE_PTR(m);
        return 0;
}

static bool looks_like_sse(const char *raw, size_t size) {
        size_t i = 0;
        while (i < size && strchr(" \t\r\n", raw[i]))
                i++;
        return i >= size || raw[i] != '{';
}

bool model_reply_is_stream(const char *raw, size_t size, bool asked) {
        assert(raw || size == 0);

        /* A server that was asked for a stream may still answer with one
         * object; then the object is the reply. */
        if (asked)
                return looks_like_sse(raw, size);
        /* And one that streams although not asked to (some proxies do). */
        return size >= 5 && memcmp(raw, "data:", 5) == 0;
}

int model_reply_parse(const char *raw, size_t size, bool stream, ModelReply **ret, char **ret_error_message) {
        _cleanup_(model_reply_freep) ModelReply *reply = NULL;
        Acc a = {};
        int r;

        assert(raw || size == 0);
        assert(ret);

        stream = model_reply_is_stream(raw, size, stream);

        if (memchr(raw, '\0', size))
                r = acc_fail(&a, -EBADMSG, "Reply contains a NUL byte.");
        else if (stream)
                r = acc_parse_sse(&a, raw, size);
        else {
                _cleanup_json_ json_object *o = NULL;
                r = json_parse_strict(raw, size, &o);
                if (r < 0)
                        r = acc_fail(&a, -EBADMSG, "Reply is not JSON.");
                else
                        r = acc_add_object(&a, o, false);
        }

        if (r >= 0 && a.n_calls == 0 && a.content.n == 0)
                r = acc_fail(&a, -EBADMSG, "Reply has neither content nor tool calls.");
        for (size_t i = 0; r >= 0 && i < a.n_calls; i++)
                if (a.calls[i].name.n == 0)
                        r = acc_fail(&a, -EBADMSG, "Tool call without a function name.");
        if (r < 0)
                goto fail;

        r = -ENOMEM;
        reply = calloc(1, sizeof(ModelReply));
        if (!reply)
                goto fail;
        reply->stream = stream;
        reply->raw = malloc(size + 1);
        if (!reply->raw)
                goto fail;
        memcpy(reply->raw, raw, size);
        reply->raw[size] = '\0';
        reply->raw_size = size;
        reply->content = a.content.n > 0 ? TAKE_PTR(a.content.s) : NULL;
        reply->finish_reason = TAKE_PTR(a.finish_reason);
        reply->prompt_tokens = a.prompt_tokens;
        reply->completion_tokens = a.completion_tokens;
        reply->cached_tokens = a.cached_tokens;
        if (a.n_calls > 0) {
                reply->tool_calls = calloc(a.n_calls, sizeof(ModelToolCall));
                if (!reply->tool_calls)
                        goto fail;
                reply->n_tool_calls = a.n_calls;
                for (size_t i = 0; i < a.n_calls; i++) {
                        ModelToolCall *t = reply->tool_calls + i;

                        if (a.calls[i].id.n > 0)
                                t->id = TAKE_PTR(a.calls[i].id.s);
                        /* llama.cpp and Ollama may send no id; the conversation
                         * needs one to tie the tool result to the call. Derived
                         * from the body, so a replay generates the same. */
                        else if (asprintf(&t->id, "call_%08x_%zu", fnv1a(raw, size), i) < 0)
                                t->id = NULL;
                        t->name = TAKE_PTR(a.calls[i].name.s);
                        t->arguments = a.calls[i].arguments.n > 0 ? TAKE_PTR(a.calls[i].arguments.s) : strdup("{}");
                        if (!t->id || !t->name || !t->arguments)
                                goto fail;
                }
        }
        r = model_reply_build_message(reply);
        if (r < 0)
                goto fail;

        acc_done(&a);
        *ret = TAKE_PTR(reply);
        if (ret_error_message)
                *ret_error_message = NULL;
        return 0;

fail:
        if (ret_error_message)
                *ret_error_message = a.error ? TAKE_PTR(a.error) : strdup(strerror(-r));
        acc_done(&a);
        return r;
}

int model_transcript_append(int fd, json_object *request, const ModelReply *reply) {
        _cleanup_json_ json_object *o = json_object_new_object(), *rep = json_object_new_object();
        _cleanup_free_ char *line = NULL;
        const char *s;
        size_t n;

        assert(fd >= 0);
        assert(reply);

        if (!o || !rep)
                return -ENOMEM;
        if (!request)
                request = reply->request;
        if (json_object_object_add(o, "request", request ? json_object_get(request) : NULL) < 0)
                return -ENOMEM;
        if (json_object_object_add(rep, "raw", json_object_new_string_len(reply->raw ?: "", (int) reply->raw_size)) < 0 ||
            json_object_object_add(rep, "stream", json_object_new_boolean(reply->stream)) < 0 ||
            json_add_uint64(rep, "attempts", reply->attempts) < 0)
                return -ENOMEM;
        if (json_object_object_add(o, "reply", rep) < 0)
                return -ENOMEM;
        rep = NULL;

        s = json_to_line(o);
        if (!s)
                return -ENOMEM;
        n = strlen(s);
        line = malloc(n + 1);
        if (!line)
                return -ENOMEM;
        memcpy(line, s, n);
        line[n++] = '\n';

        /* One write() for the line, so that concurrent appenders on an
         * O_APPEND file do not interleave; a short write is finished, and a
         * failed one cut off (a full disk must not leave a torn line). */
        return append_whole(fd, line, n);
}

struct ModelReplay {
        char *text;
        size_t size, offset, position;
};

ModelReplay *model_replay_free(ModelReplay *r) {
        if (!r)
                return NULL;
        free(r->text);
        free(r);
        return NULL;
}

int model_replay_open(const char *path, ModelReplay **ret) {
        _cleanup_(model_replay_freep) ModelReplay *r = NULL;
        int k;

        assert(path);
        assert(ret);

        r = calloc(1, sizeof(ModelReplay));
        if (!r)
                return -ENOMEM;
        k = read_file_at(AT_FDCWD, path, TRANSCRIPT_MAX, &r->text, &r->size);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(r);
        return 0;
}

size_t model_replay_position(const ModelReplay *r) {
        return r->position;
}

int model_replay_next(ModelReplay *r, ModelReply **ret, json_object **ret_request) {
        _cleanup_json_ json_object *o = NULL;
        json_object *rep, *raw, *stream, *req;
        ModelReply *reply;
        uint64_t attempts = 1;
        int k;

        assert(r);
        assert(ret);

        for (;;) {
                if (r->offset >= r->size)
                        return -ENODATA;
                char *line = r->text + r->offset, *nl = memchr(line, '\n', r->size - r->offset);
                size_t l = nl ? (size_t) (nl - line) : r->size - r->offset;
                r->offset += l + (nl ? 1 : 0);
                if (l == 0)
                        continue;
                /* A broken exchange counts too: the next call moves on. */
                r->position++;
                k = json_parse_strict(line, l, &o);
                if (k < 0)
                        return k;
                break;
        }

        rep = get(o, "reply");
        raw = get(rep, "raw");
        stream = get(rep, "stream");
        if (!raw || !json_object_is_type(raw, json_type_string))
                return -EBADMSG;
        (void) json_get_uint64(rep, "attempts", &attempts);

        k = model_reply_parse(json_object_get_string(raw), json_object_get_string_len(raw),
                              stream && json_object_get_boolean(stream), &reply, NULL);
        if (k < 0)
                return k;
        reply->attempts = (unsigned) attempts;
        req = get(o, "request");
        reply->request = req ? json_object_get(req) : NULL;
        if (ret_request)
                *ret_request = req ? json_object_get(req) : NULL;
        *ret = reply;
        return 0;
}
