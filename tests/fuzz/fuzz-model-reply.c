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
 *    without the space after "data:", with comments and a usage-only chunk,
 *    strings spelled with or without \/, \u00XX and \uXXXX escapes.
 *    Invariant: both parse to the same content, calls, usage and finish
 *    reason; for one input in REPLAY_EVERY, also the transcript round trip
 *    of both (see replay_sampled()). */
#include <fcntl.h>
#include <inttypes.h>
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

static void check_reply(const ModelReply *r, const char *raw, size_t size, bool stream, bool replay) {
        FUZZ_CHECK(r->n_tool_calls <= MODEL_TOOL_CALLS_MAX, "%zu tool calls", r->n_tool_calls);
        FUZZ_CHECK(r->n_tool_calls > 0 || (r->content && *r->content), "content or calls");
        FUZZ_CHECK(r->raw_size == size && memcmp(r->raw, raw, size) == 0 && r->raw[size] == '\0', "raw kept");
        FUZZ_CHECK(!r->content || strlen(r->content) <= size, "content bounded by the body");
        for (size_t i = 0; i < r->n_tool_calls; i++) {
                const ModelToolCall *t = &r->tool_calls[i];
                FUZZ_CHECK(t->id && *t->id && t->name && *t->name && t->arguments, "call %zu complete", i);
                /* Arguments sent as an object are serialized, which may
                 * spell numbers out (1e-7: 9.9999999999999995e-08) and
                 * escapes a raw control byte in a string as \u00XX: six
                 * bytes for one at most. */
                FUZZ_CHECK(strlen(t->arguments) <= 6 * size + 2, "arguments of call %zu bounded", i);
        }
        json_object *role = NULL;
        FUZZ_CHECK(r->message && json_object_object_get_ex(r->message, "role", &role) &&
                   streq(json_object_get_string(role), "assistant"), "an assistant message");

        if (!replay)
                return;

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
                /* A body that is read the same way asked for a stream or not
                 * (most are: a JSON object, or "data:" lines) is parsed once;
                 * the second time would run the very same code on it. */
                if (stream && model_reply_is_stream(raw, size, true) == model_reply_is_stream(raw, size, false))
                        break;
                int k = model_reply_parse(raw, size, stream, &r, &error);
                if (k < 0) {
                        FUZZ_CHECK(!r && (error || k == -ENOMEM), "a refusal says why");
                        FUZZ_CHECK(!error || !strchr(error, '\n'), "one line: '%s'", error);
                } else {
                        FUZZ_CHECK(!error, "no error on success");
                        check_reply(r, raw, size, stream, true);
                }
                free(error);
                model_reply_free(r);
        }
}

/* ---- the differential part ---- */

/* The bodies are written here as text, not built with json-c and printed:
 * a dozen json-c objects a delta were a third of the target's time under
 * ASan, and the text can spell strings in ways json-c never prints. */
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

static void out_str(Out *o, const char *s) {
        out_add(o, s, strlen(s));
}

static void out_uint(Out *o, uint64_t v) {
        char b[24];
        out_add(o, b, (size_t) snprintf(b, sizeof(b), "%" PRIu64, v));
}

/* How strings are spelled, from the style byte. */
#define STYLE_CRLF 1U
#define STYLE_COMMENTS 2U
#define STYLE_NO_SPACE 4U
#define STYLE_ESCAPE_SLASH 8U        /* "\/", as json-c prints by default */
#define STYLE_ESCAPE_UNICODE 16U     /* "\u00e9", surrogate pairs past U+FFFF */
#define STYLE_ESCAPE_CONTROL_HEX 32U /* "\u000a" rather than "\n" */

static void out_u_escape(Out *o, unsigned v) {
        char b[8];
        snprintf(b, sizeof(b), "\\u%04x", v);
        out_add(o, b, 6);
}

/* The code point of a UTF-8 sequence json-c decodes \u escapes to, or -1
 * for what utf8_sanitize() lets through but no escape spells (surrogates,
 * overlong forms, past U+10FFFF): those stay raw bytes. */
static long utf8_scalar(const unsigned char *s, size_t k) {
        long v = k == 2 ? s[0] & 0x1F : k == 3 ? s[0] & 0x0F : s[0] & 0x07;
        for (size_t j = 1; j < k; j++)
                v = v << 6 | (s[j] & 0x3F);
        if ((k == 3 && v < 0x800) || (k == 4 && v < 0x10000) || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                return -1;
        return v;
}

/* s is valid UTF-8 as utf8_sanitize() makes it: no NUL, whole sequences. */
static void out_json_string(Out *o, const char *s, size_t n, uint8_t style) {
        const unsigned char *u = (const unsigned char *) s;

        out_add(o, "\"", 1);
        for (size_t i = 0; i < n;) {
                unsigned char c = u[i];
                size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
                const char *e = NULL;

                if (c == '"')
                        e = "\\\"";
                else if (c == '\\')
                        e = "\\\\";
                else if (c == '/' && (style & STYLE_ESCAPE_SLASH))
                        e = "\\/";
                else if (c < 0x20 && !(style & STYLE_ESCAPE_CONTROL_HEX))
                        e = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
                if (e)
                        out_str(o, e);
                else if (c < 0x20)
                        out_u_escape(o, c);
                else if (k > 1 && (style & STYLE_ESCAPE_UNICODE) && utf8_scalar(u + i, k) >= 0) {
                        long v = utf8_scalar(u + i, k);
                        if (v >= 0x10000) {
                                out_u_escape(o, 0xD800 + (unsigned) ((v - 0x10000) >> 10));
                                out_u_escape(o, 0xDC00 + (unsigned) ((v - 0x10000) & 0x3FF));
                        } else
                                out_u_escape(o, (unsigned) v);
                } else
                        out_add(o, s + i, k);
                i += k;
        }
        out_add(o, "\"", 1);
}

static void out_event_begin(Out *o, uint8_t style) {
        if (style & STYLE_COMMENTS)
                out_str(o, ": keep-alive\n");
        out_str(o, style & STYLE_NO_SPACE ? "data:" : "data: ");
}

static void out_event_end(Out *o, uint8_t style) {
        out_str(o, style & STYLE_CRLF ? "\r\n\r\n" : "\n\n");
}

/* A valid UTF-8 string from the input, and cut points on its characters. */
static char *text_from(FuzzInput *in) {
        size_t n;
        char *s = fuzz_string(in, &n);
        /* Also no NUL (it becomes '?'): the parser stops strings there,
         * both ways alike, but the comparison would not see beyond it. */
        utf8_sanitize(s, n);
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

/* Which differential inputs also go through the transcript round trip: one
 * in REPLAY_EVERY, by a hash of the whole input, so that an input either
 * always does or never does. The round trip (written, read back, parsed a
 * second time) took more than half of the time of this half, and it is a
 * function of the body alone: the raw half makes it on every body it gets,
 * and those are arbitrary bytes, where these are well-formed JSON of valid
 * UTF-8 that the raw half can be handed as well (its seeds hold such
 * bodies and streams). */
#define REPLAY_EVERY 8U

static bool replay_sampled(const FuzzInput *in) {
        uint32_t h = 2166136261U;
        for (size_t i = 0; i < in->size; i++)
                h = (h ^ in->data[i]) * 16777619U;
        return h % REPLAY_EVERY == 0;
}

static void differential(FuzzInput *in) {
        bool replay = replay_sampled(in);
        cuts = 0;
        uint8_t flags = fuzz_u8(in), style = fuzz_u8(in);
        char *content = text_from(in);
        const char *finish = NULL;
        size_t n_calls = fuzz_u8(in) % 5;
        char *names[4] = {}, *args[4] = {};
        uint64_t pt = fuzz_u64(in, 2), ct = fuzz_u64(in, 2);

        for (size_t i = 0; i < n_calls; i++) {
                names[i] = text_from(in);
                args[i] = text_from(in);
        }
        if (flags & 1)
                finish = n_calls > 0 ? "tool_calls" : "stop";

        /* The whole body. */
        Out w = {};
        out_str(&w, "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":");
        if ((flags & 2) && !*content)
                out_str(&w, "null");
        else
                out_json_string(&w, content, strlen(content), style);
        if (n_calls > 0) {
                out_str(&w, ",\"tool_calls\":[");
                for (size_t i = 0; i < n_calls; i++) {
                        out_str(&w, i > 0 ? ",{\"id\":" : "{\"id\":");
                        out_json_string(&w, names[i][0] ? names[i] : "x", names[i][0] ? strlen(names[i]) : 1, style);
                        out_str(&w, ",\"type\":\"function\",\"function\":{\"name\":");
                        out_json_string(&w, names[i], strlen(names[i]), style);
                        out_str(&w, ",\"arguments\":");
                        out_json_string(&w, args[i], strlen(args[i]), style);
                        out_str(&w, "}}");
                }
                out_str(&w, "]");
        }
        out_str(&w, "}");
        if (finish) {
                out_str(&w, ",\"finish_reason\":\"");
                out_str(&w, finish);
                out_str(&w, "\"");
        }
        out_str(&w, "}],\"usage\":{\"prompt_tokens\":");
        out_uint(&w, pt);
        out_str(&w, ",\"completion_tokens\":");
        out_uint(&w, ct);
        out_str(&w, "}}");

        /* The same as a stream. */
        Out s = {};
        out_event_begin(&s, style);
        out_str(&s, "{\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}");
        out_event_end(&s, style);
        size_t len = strlen(content);
        for (size_t p = 0; p < len;) {
                size_t e = next_cut(in, content, p, len);
                out_event_begin(&s, style);
                out_str(&s, "{\"choices\":[{\"delta\":{\"content\":");
                out_json_string(&s, content + p, e - p, style);
                out_str(&s, "}}]}");
                out_event_end(&s, style);
                p = e;
        }
        for (size_t i = 0; i < n_calls; i++) {
                size_t al = strlen(args[i]);
                bool first = true;
                for (size_t p = 0; first || p < al;) {
                        size_t e = next_cut(in, args[i], p, al);
                        out_event_begin(&s, style);
                        out_str(&s, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":");
                        out_uint(&s, i);
                        if (first) {
                                out_str(&s, ",\"id\":");
                                out_json_string(&s, names[i][0] ? names[i] : "x", names[i][0] ? strlen(names[i]) : 1, style);
                        }
                        out_str(&s, ",\"function\":{");
                        /* Some servers repeat the name in every delta. */
                        if (first || (flags & 4)) {
                                out_str(&s, "\"name\":");
                                out_json_string(&s, names[i], strlen(names[i]), style);
                                out_str(&s, ",");
                        }
                        out_str(&s, "\"arguments\":");
                        out_json_string(&s, args[i] + p, e - p, style);
                        out_str(&s, "}}]}}]}");
                        out_event_end(&s, style);
                        p = e;
                        first = false;
                }
        }
        out_event_begin(&s, style);
        out_str(&s, "{\"choices\":[{\"delta\":{}");
        if (finish) {
                out_str(&s, ",\"finish_reason\":\"");
                out_str(&s, finish);
                out_str(&s, "\"");
        }
        out_str(&s, "}]}");
        out_event_end(&s, style);
        out_event_begin(&s, style);
        out_str(&s, "{\"choices\":[],\"usage\":{\"prompt_tokens\":");
        out_uint(&s, pt);
        out_str(&s, ",\"completion_tokens\":");
        out_uint(&s, ct);
        out_str(&s, "}}");
        out_event_end(&s, style);
        if (!(flags & 8) || !finish)
                out_str(&s, "data: [DONE]\n\n");

        ModelReply *a = NULL, *b = NULL;
        char *ea = NULL, *eb = NULL;
        int ka = model_reply_parse(w.s, w.n, false, &a, &ea);
        int kb = model_reply_parse(s.s, s.n, true, &b, &eb);
        FUZZ_CHECK((ka < 0) == (kb < 0), "whole %d (%s) and stream %d (%s) agree\n%s\n%s", ka, strempty(ea), kb, strempty(eb),
                   w.s, s.s);
        if (ka >= 0) {
                check_same(a, b, "whole vs stream");
                check_reply(a, w.s, w.n, false, replay);
                check_reply(b, s.s, s.n, true, replay);
        }
        model_reply_free(a);
        model_reply_free(b);
        free(ea);
        free(eb);
        free(s.s);
        free(w.s);
        for (size_t i = 0; i < n_calls; i++) {
                free(names[i]);
                free(args[i]);
        }
        free(content);
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
