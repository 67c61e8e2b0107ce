/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Model replies, as model_reply_parse() reads what the server sent.
 *
 * Input, by its first byte:
 *  - even: the rest is a reply body, parsed as one JSON object and as an SSE
 *    stream. Invariants: at most MODEL_TOOL_CALLS_MAX calls, each with an
 *    id, a name and arguments; raw kept byte for byte; and the reply written
 *    to a transcript and replayed from it is the same reply.
 *  - odd: the rest describes a reply (content, tool calls with names and
 *    arguments, usage, finish reason, and where to cut). It is sent once as
 *    one JSON body and once as a stream whose deltas are cut at those places
 *    (on character boundaries, as servers cut), with CRLF or LF, with or
 *    without the space after "data:", with comments and a usage-only chunk.
 *    Invariant: both parse to the same content, calls, usage and finish
 *    reason. */
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "json-util.h"
#include "model-client.h"
#include "string-util.h"

static int memfd = -EBADF;
static char memfd_path[PATH_MAX];

static void cleanup(void) {
        (void) unlink(memfd_path);
}

/* The transcript of the round trip: a real file (replay opens it by name,
 * never through a symlink), on tmpfs when there is one. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        snprintf(memfd_path, sizeof(memfd_path), "%s/fuzz-model-reply-XXXXXX",
                 getenv("TMPDIR") ?: access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        memfd = mkostemp(memfd_path, O_CLOEXEC);
        if (memfd < 0)
                abort();
        atexit(cleanup);
        return 0;
}

static void check_same(const ModelReply *a, const ModelReply *b, const char *what) {
        FUZZ_CHECK(fuzz_streq_ptr(a->content, b->content), "%s: content '%s' vs '%s'", what, strempty(a->content),
                   strempty(b->content));
        FUZZ_CHECK(fuzz_streq_ptr(a->finish_reason, b->finish_reason), "%s: finish reason", what);
        FUZZ_CHECK(a->prompt_tokens == b->prompt_tokens && a->completion_tokens == b->completion_tokens, "%s: usage", what);
        FUZZ_CHECK(a->n_tool_calls == b->n_tool_calls, "%s: %zu vs %zu tool calls", what, a->n_tool_calls, b->n_tool_calls);
        for (size_t i = 0; i < a->n_tool_calls; i++) {
                FUZZ_CHECK(streq(a->tool_calls[i].name, b->tool_calls[i].name), "%s: name of call %zu", what, i);
                FUZZ_CHECK(streq(a->tool_calls[i].arguments, b->tool_calls[i].arguments), "%s: arguments of call %zu: '%s' vs '%s'",
                           what, i, a->tool_calls[i].arguments, b->tool_calls[i].arguments);
        }
}

static void check_reply(const ModelReply *r, const char *raw, size_t size, bool stream) {
        FUZZ_CHECK(r->n_tool_calls <= MODEL_TOOL_CALLS_MAX, "%zu tool calls", r->n_tool_calls);
        FUZZ_CHECK(r->n_tool_calls > 0 || (r->content && *r->content), "content or calls");
        FUZZ_CHECK(r->raw_size == size && memcmp(r->raw, raw, size) == 0 && r->raw[size] == '\0', "raw kept");
        FUZZ_CHECK(!r->content || strlen(r->content) <= size, "content bounded by the body");
        for (size_t i = 0; i < r->n_tool_calls; i++) {
                const ModelToolCall *t = &r->tool_calls[i];
                FUZZ_CHECK(t->id && *t->id && t->name && *t->name && t->arguments, "call %zu complete", i);
                /* Arguments sent as an object are serialized, which may
                 * spell numbers out; never much more than the body. */
                FUZZ_CHECK(strlen(t->arguments) <= 2 * size + 2, "arguments of call %zu bounded", i);
        }
        json_object *role = NULL;
        FUZZ_CHECK(r->message && json_object_object_get_ex(r->message, "role", &role) &&
                   streq(json_object_get_string(role), "assistant"), "an assistant message");

        /* Transcript round trip: what replay yields is what was received. */
        ModelReply *copy = NULL;
        ModelReplay *rp = NULL;
        FUZZ_CHECK(ftruncate(memfd, 0) == 0 && lseek(memfd, 0, SEEK_SET) == 0, "memfd reset");
        FUZZ_CHECK(model_transcript_append(memfd, NULL, r) == 0, "transcript written");
        FUZZ_CHECK(model_replay_open(memfd_path, &rp) == 0, "transcript opened");
        FUZZ_CHECK(model_replay_next(rp, &copy, NULL) == 0, "the exchange replays");
        FUZZ_CHECK(copy->stream == stream || copy->stream == r->stream, "stream flag");
        check_same(r, copy, "replay");
        for (size_t i = 0; i < r->n_tool_calls; i++)
                FUZZ_CHECK(streq(r->tool_calls[i].id, copy->tool_calls[i].id), "replayed call %zu keeps its id", i);
        ModelReply *none = NULL;
        FUZZ_CHECK(model_replay_next(rp, &none, NULL) == -ENODATA, "one exchange only");
        model_reply_free(copy);
        model_replay_free(rp);
}

static void parse_raw(const char *raw, size_t size) {
        for (int stream = 0; stream < 2; stream++) {
                ModelReply *r = NULL;
                char *error = NULL;
                int k = model_reply_parse(raw, size, stream, &r, &error);
                if (k < 0) {
                        FUZZ_CHECK(!r && (error || k == -ENOMEM), "a refusal says why");
                        FUZZ_CHECK(!error || !strchr(error, '\n'), "one line: '%s'", error);
                } else {
                        FUZZ_CHECK(!error, "no error on success");
                        check_reply(r, raw, size, stream);
                }
                free(error);
                model_reply_free(r);
        }
}

/* ---- the differential part ---- */

typedef struct Out {
        char *s;
        size_t n, a;
} Out;

static void out_add(Out *o, const char *s, size_t n) {
        if (o->n + n + 1 > o->a) {
                o->a = (o->n + n + 1) * 2;
                o->s = realloc(o->s, o->a);
                if (!o->s)
                        abort();
        }
        memcpy(o->s + o->n, s, n);
        o->n += n;
        o->s[o->n] = '\0';
}

static void out_event(Out *o, json_object *j, uint8_t style) {
        const char *t = json_to_line(j);
        const char *nl = style & 1 ? "\r\n" : "\n";
        if (style & 2)
                out_add(o, ": keep-alive\n", 13);
        out_add(o, style & 4 ? "data:" : "data: ", style & 4 ? 5 : 6);
        out_add(o, t, strlen(t));
        out_add(o, nl, strlen(nl));
        out_add(o, nl, strlen(nl));
}

/* A valid UTF-8 string from the input, and cut points on its characters. */
static char *text_from(FuzzInput *in) {
        size_t n;
        char *s = fuzz_string(in, &n);
        utf8_sanitize(s, n);
        /* No NUL: the parser stops strings there, both ways alike, but the
         * comparison would not see beyond it. */
        return s;
}

/* At most this many deltas a reply: each costs a dozen json-c objects,
 * which under ASan made long inputs run at a few dozen a second. */
#define CUTS_MAX 24U
static unsigned cuts;

static size_t next_cut(FuzzInput *in, const char *s, size_t pos, size_t len) {
        if (++cuts > CUTS_MAX)
                return len;
        size_t step = 1 + fuzz_u8(in) % 32, c = pos + step;
        if (c >= len)
                return len;
        while (c < len && ((unsigned char) s[c] & 0xC0) == 0x80)
                c++;
        return c;
}

static json_object *chunk_new(void) {
        json_object *o = json_object_new_object(), *choices = json_object_new_array(), *c = json_object_new_object(),
                    *d = json_object_new_object();
        json_object_object_add(c, "delta", d);
        json_object_array_add(choices, c);
        json_object_object_add(o, "choices", choices);
        return o;
}

static json_object *chunk_delta(json_object *o) {
        return json_object_object_get(json_object_array_get_idx(json_object_object_get(o, "choices"), 0), "delta");
}

static void differential(FuzzInput *in) {
        cuts = 0;
        uint8_t flags = fuzz_u8(in), style = fuzz_u8(in);
        char *content = text_from(in), *finish = NULL;
        size_t n_calls = fuzz_u8(in) % 5;
        char *names[4] = {}, *args[4] = {};
        uint64_t pt = fuzz_u64(in, 2), ct = fuzz_u64(in, 2);

        for (size_t i = 0; i < n_calls; i++) {
                names[i] = text_from(in);
                args[i] = text_from(in);
        }
        if (flags & 1)
                finish = strdup(n_calls > 0 ? "tool_calls" : "stop");

        /* The whole body. */
        json_object *whole = json_object_new_object(), *choices = json_object_new_array(), *choice = json_object_new_object(),
                    *msg = json_object_new_object();
        json_object_object_add(msg, "role", json_object_new_string("assistant"));
        json_object_object_add(msg, "content", (flags & 2) && !*content ? NULL : json_object_new_string(content));
        if (n_calls > 0) {
                json_object *tcs = json_object_new_array();
                for (size_t i = 0; i < n_calls; i++) {
                        json_object *tc = json_object_new_object(), *fn = json_object_new_object();
                        json_object_object_add(tc, "id", json_object_new_string(names[i][0] ? names[i] : "x"));
                        json_object_object_add(tc, "type", json_object_new_string("function"));
                        json_object_object_add(fn, "name", json_object_new_string(names[i]));
                        json_object_object_add(fn, "arguments", json_object_new_string(args[i]));
                        json_object_object_add(tc, "function", fn);
                        json_object_array_add(tcs, tc);
                }
                json_object_object_add(msg, "tool_calls", tcs);
        }
        json_object_object_add(choice, "message", msg);
        if (finish)
                json_object_object_add(choice, "finish_reason", json_object_new_string(finish));
        json_object_array_add(choices, choice);
        json_object_object_add(whole, "choices", choices);
        json_object *usage = json_object_new_object();
        json_object_object_add(usage, "prompt_tokens", json_object_new_uint64(pt));
        json_object_object_add(usage, "completion_tokens", json_object_new_uint64(ct));
        json_object_object_add(whole, "usage", usage);
        const char *body = json_to_line(whole);

        /* The same as a stream. */
        Out s = {};
        json_object *c = chunk_new();
        json_object_object_add(chunk_delta(c), "role", json_object_new_string("assistant"));
        out_event(&s, c, style);
        json_object_put(c);
        size_t len = strlen(content);
        for (size_t p = 0; p < len;) {
                size_t e = next_cut(in, content, p, len);
                c = chunk_new();
                json_object_object_add(chunk_delta(c), "content", json_object_new_string_len(content + p, (int) (e - p)));
                out_event(&s, c, style);
                json_object_put(c);
                p = e;
        }
        for (size_t i = 0; i < n_calls; i++) {
                size_t al = strlen(args[i]);
                bool first = true;
                for (size_t p = 0; first || p < al;) {
                        size_t e = next_cut(in, args[i], p, al);
                        json_object *tcs = json_object_new_array(), *tc = json_object_new_object(), *fn = json_object_new_object();
                        c = chunk_new();
                        json_object_object_add(tc, "index", json_object_new_int((int) i));
                        if (first) {
                                json_object_object_add(tc, "id", json_object_new_string(names[i][0] ? names[i] : "x"));
                                json_object_object_add(fn, "name", json_object_new_string(names[i]));
                        } else if (flags & 4)
                                /* Some servers repeat the name in every delta. */
                                json_object_object_add(fn, "name", json_object_new_string(names[i]));
                        json_object_object_add(fn, "arguments", json_object_new_string_len(args[i] + p, (int) (e - p)));
                        json_object_object_add(tc, "function", fn);
                        json_object_array_add(tcs, tc);
                        json_object_object_add(chunk_delta(c), "tool_calls", tcs);
                        out_event(&s, c, style);
                        json_object_put(c);
                        p = e;
                        first = false;
                }
        }
        c = chunk_new();
        if (finish)
                json_object_object_add(json_object_array_get_idx(json_object_object_get(c, "choices"), 0), "finish_reason",
                                       json_object_new_string(finish));
        out_event(&s, c, style);
        json_object_put(c);
        c = json_object_new_object();
        json_object_object_add(c, "choices", json_object_new_array());
        json_object_object_add(c, "usage", json_object_get(usage));
        out_event(&s, c, style);
        json_object_put(c);
        if (!(flags & 8) || !finish)
                out_add(&s, "data: [DONE]\n\n", 14);

        ModelReply *a = NULL, *b = NULL;
        char *ea = NULL, *eb = NULL;
        int ka = model_reply_parse(body, strlen(body), false, &a, &ea);
        int kb = model_reply_parse(s.s, s.n, true, &b, &eb);
        FUZZ_CHECK((ka < 0) == (kb < 0), "whole %d (%s) and stream %d (%s) agree\n%s\n%s", ka, strempty(ea), kb, strempty(eb),
                   body, s.s);
        if (ka >= 0) {
                check_same(a, b, "whole vs stream");
                check_reply(a, body, strlen(body), false);
                check_reply(b, s.s, s.n, true);
        }
        model_reply_free(a);
        model_reply_free(b);
        free(ea);
        free(eb);
        free(s.s);
        json_object_put(whole);
        for (size_t i = 0; i < n_calls; i++) {
                free(names[i]);
                free(args[i]);
        }
        free(content);
        free(finish);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        if (data[0] & 1) {
                FuzzInput in = { .data = data + 1, .size = size - 1 };
                differential(&in);
        } else
                parse_raw((const char *) data + 1, size - 1);
        return 0;
}
