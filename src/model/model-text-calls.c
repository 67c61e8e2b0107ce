/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json-util.h"
#include "model-text-calls.h"
#include "string-util.h"

/* One pass over the text, left to right. What begins a call is looked for
 * only at the characters that can begin one ('<', '[', '`', '{'); what
 * lies between is text and kept as it is. A block that yields no call
 * (broken, cut, an unknown tool, past the limit) is kept as text too, so
 * that the conversation shows the model what did not run; a block that
 * yields calls, and all thinking, are taken out. */

#define NPOS SIZE_MAX
#define NAME_MAX_LEN 64U
#define PARAMETERS_MAX 64U
/* Bare JSON (a '{' or '[' that begins a line) is tried this often a reply
 * at most: each try may read to the end of the text. */
#define BARE_TRIES_MAX 32U

typedef struct Scan {
        const char *s;
        size_t n;
        json_object *tools;        /* NULL: no calls are read, only thinking is stripped */
        ModelTextCalls *out;
        Buf rest;
        unsigned bare_tries;
} Scan;

void model_text_calls_done(ModelTextCalls *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n_calls; i++) {
                free(c->calls[i].name);
                free(c->calls[i].arguments);
        }
        free(c->text);
        *c = (ModelTextCalls) {};
}

static json_object *get(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return v;
}

static const char *get_string(json_object *o, const char *key) {
        json_object *v = get(o, key);
        return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The "function" object of the tool named name in an OpenAI "tools" array. */
static json_object *tool_find(json_object *tools, const char *name) {
        if (!tools || !json_object_is_type(tools, json_type_array) || !name)
                return NULL;
        for (size_t i = 0; i < json_object_array_length(tools); i++) {
                json_object *fn = get(json_object_array_get_idx(tools, i), "function");
                if (streq_ptr(get_string(fn, "name"), name))
                        return fn;
        }
        return NULL;
}

static bool at(const Scan *sc, size_t i, const char *lit) {
        size_t l = strlen(lit);
        return i <= sc->n && sc->n - i >= l && memcmp(sc->s + i, lit, l) == 0;
}

static size_t find(const Scan *sc, size_t from, size_t end, const char *lit) {
        const char *p;

        if (from >= end)
                return NPOS;
        p = memmem(sc->s + from, end - from, lit, strlen(lit));
        return p ? (size_t) (p - sc->s) : NPOS;
}

static bool is_space(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static size_t skip_space(const Scan *sc, size_t i, size_t end) {
        while (i < end && is_space(sc->s[i]))
                i++;
        return i;
}

static bool line_start(const Scan *sc, size_t i) {
        while (i > 0 && (sc->s[i - 1] == ' ' || sc->s[i - 1] == '\t'))
                i--;
        return i == 0 || sc->s[i - 1] == '\n';
}

static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

/* A name of [A-Za-z0-9_.-]{1,64} at i: its length, or 0. */
static size_t name_at(const Scan *sc, size_t i, size_t end) {
        size_t l = 0;
        while (i + l < end && l <= NAME_MAX_LEN && is_name_char(sc->s[i + l]))
                l++;
        return l > NAME_MAX_LEN ? 0 : l;
}

/* Where the JSON object or array that begins at i ends (the index after its
 * closing bracket), found by counting brackets outside strings; NPOS if it
 * does not close before end or nests too deep. Whether it is JSON is for
 * the parser to say, on exactly that text. */
static size_t json_extent(const Scan *sc, size_t i, size_t end) {
        unsigned depth = 0;
        bool string = false;

        for (; i < end; i++) {
                char c = sc->s[i];

                if (string) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                string = false;
                        continue;
                }
                if (c == '"')
                        string = true;
                else if (c == '{' || c == '[') {
                        if (++depth > JSON_PARSE_DEPTH)
                                return NPOS;
                } else if (c == '}' || c == ']') {
                        if (depth == 0)
                                return NPOS;
                        if (--depth == 0)
                                return i + 1;
                }
        }
        return NPOS;
}

/* The JSON object or array at i: 0 and *ret_end after it; -EBADMSG if it is
 * none; -ENOMEM. */
static int json_at(const Scan *sc, size_t i, size_t end, json_object **ret, size_t *ret_end) {
        size_t e;
        int r;

        if (i >= end || (sc->s[i] != '{' && sc->s[i] != '['))
                return -EBADMSG;
        e = json_extent(sc, i, end);
        if (e == NPOS)
                return -EBADMSG;
        r = json_parse_strict(sc->s + i, e - i, ret);
        if (r < 0)
                return r == -ENOMEM ? r : -EBADMSG;
        *ret_end = e;
        return 0;
}

/* arguments may be NULL (none given) and stays the caller's. 1: a call; 0: not read (an
 * unknown tool, or past the limit), counted as unread if explicit. */
static int add_call(Scan *sc, const char *name, json_object *arguments, bool explicit) {
        ModelTextCall *c;
        const char *t;

        if (!tool_find(sc->tools, name) || sc->out->n_calls >= MODEL_TEXT_CALLS_MAX) {
                if (explicit)
                        sc->out->unread++;
                return 0;
        }
        if (!arguments)
                t = "{}";
        else if (json_object_is_type(arguments, json_type_string))
                /* Some models write the arguments as a string of JSON, as
                 * the OpenAI API sends them: the tool's parser reads it. */
                t = json_object_get_string(arguments);
        else
                t = json_object_to_json_string_ext(arguments, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!t)
                return -ENOMEM;

        c = sc->out->calls + sc->out->n_calls;
        c->name = strdup(name);
        c->arguments = strdup(t);
        if (!c->name || !c->arguments) {
                c->name = mfree_ptr(c->name);
                c->arguments = mfree_ptr(c->arguments);
                return -ENOMEM;
        }
        sc->out->n_calls++;
        return 1;
}

/* {"name": N, "arguments"|"parameters": {...}}, also wrapped as OpenAI
 * sends it, {"type": "function", "function": {...}}. 1, 0 or -ENOMEM as
 * add_call(); 0 for an object that is no call. */
static int add_call_object(Scan *sc, json_object *o, bool explicit) {
        json_object *fn = get(o, "function"), *args;
        const char *name;

        if (!get(o, "name") && fn && json_object_is_type(fn, json_type_object))
                o = fn;
        name = get_string(o, "name");
        if (!name || memchr(name, '\0', (size_t) json_object_get_string_len(get(o, "name")))) {
                if (explicit)
                        sc->out->unread++;
                return 0;
        }
        args = get(o, "arguments") ?: get(o, "parameters");
        return add_call(sc, name, args, explicit);
}

/* An object or a list of them: the number of calls, or -ENOMEM. */
static int add_calls_value(Scan *sc, json_object *v, bool explicit) {
        int r, found = 0;

        if (json_object_is_type(v, json_type_object))
                return add_call_object(sc, v, explicit);
        if (!json_object_is_type(v, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(v); i++) {
                json_object *e = json_object_array_get_idx(v, i);
                if (!json_object_is_type(e, json_type_object))
                        continue;
                r = add_call_object(sc, e, explicit);
                if (r < 0)
                        return r;
                found += r;
        }
        return found;
}

/* The JSON values from i on, up to end, with white space, ',' and ';'
 * between them: the calls they hold. *ret_pos is where reading stopped. A
 * value that does not parse ends the reading and counts as unread if
 * explicit. */
static int read_json_calls(Scan *sc, size_t i, size_t end, bool explicit, size_t *ret_pos) {
        int r, found = 0;

        for (;;) {
                _cleanup_json_ json_object *v = NULL;
                size_t e;

                while (i < end && (is_space(sc->s[i]) || sc->s[i] == ',' || sc->s[i] == ';'))
                        i++;
                if (i >= end || (sc->s[i] != '{' && sc->s[i] != '['))
                        break;
                r = json_at(sc, i, end, &v, &e);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        if (explicit)
                                sc->out->unread++;
                        break;
                }
                r = add_calls_value(sc, v, explicit);
                if (r < 0)
                        return r;
                found += r;
                i = e;
        }
        *ret_pos = i;
        return found;
}

/* The value of <parameter=K>V</parameter>, typed as the tool's schema says:
 * a string unless the parameter is of another type and V is JSON. */
static json_object *parameter_value(json_object *fn, const char *key, const char *v, size_t l) {
        json_object *props = get(get(fn, "parameters"), "properties"), *o = NULL;
        const char *type = get_string(get(props, key), "type");

        if (type && !streq(type, "string")) {
                _cleanup_free_ char *t = NULL;
                size_t a = 0, b = l;

                while (a < b && is_space(v[a]))
                        a++;
                while (b > a && is_space(v[b - 1]))
                        b--;
                /* With a blank after it, as the parser wants to see a
                 * number end. */
                if (b > a && asprintf(&t, "%.*s ", (int) (b - a), v + a) >= 0 &&
                    json_parse_strict(t, strlen(t), &o) >= 0)
                        return o;
        }
        return json_object_new_string_len(v, (int) l);
}

/* <function=N>, at i: then either a JSON object or <parameter=K>V</parameter>
 * blocks, up to </function> (or end). 1 (a call), 0 (not read) or -ENOMEM;
 * *ret_pos after the block. */
static int read_function(Scan *sc, size_t i, size_t end, size_t *ret_pos) {
        _cleanup_json_ json_object *args = NULL;
        _cleanup_free_ char *name = NULL;
        size_t l, close, j, block_end;
        json_object *fn;
        int r;

        i += strlen("<function=");
        l = name_at(sc, i, end);
        if (l == 0 || i + l >= end || sc->s[i + l] != '>')
                return -EBADMSG;   /* not this format: text */
        name = strndup(sc->s + i, l);
        if (!name)
                return -ENOMEM;
        j = i + l + 1;
        close = find(sc, j, end, "</function>");
        block_end = close != NPOS ? close : end;
        *ret_pos = close != NPOS ? close + strlen("</function>") : end;
        fn = tool_find(sc->tools, name);

        j = skip_space(sc, j, block_end);
        if (at(sc, j, "<parameter=")) {
                args = json_object_new_object();
                if (!args)
                        return -ENOMEM;
                for (unsigned k = 0; at(sc, j, "<parameter=") && k < PARAMETERS_MAX; k++) {
                        _cleanup_free_ char *key = NULL;
                        size_t kl, v, vend;

                        j += strlen("<parameter=");
                        kl = name_at(sc, j, block_end);
                        if (kl == 0 || j + kl >= block_end || sc->s[j + kl] != '>')
                                break;
                        key = strndup(sc->s + j, kl);
                        if (!key)
                                return -ENOMEM;
                        v = j + kl + 1;
                        vend = find(sc, v, block_end, "</parameter>");
                        if (vend == NPOS) {
                                sc->out->unread++;
                                return 0;
                        }
                        j = skip_space(sc, vend + strlen("</parameter>"), block_end);
                        /* The value stands on lines of its own. */
                        if (v < vend && sc->s[v] == '\n')
                                v++;
                        if (vend > v && sc->s[vend - 1] == '\n')
                                vend--;
                        json_object *value = parameter_value(fn, key, sc->s + v, vend - v);
                        if (!value)
                                return -ENOMEM;
                        if (json_object_object_add(args, key, value) < 0) {
                                json_object_put(value);
                                return -ENOMEM;
                        }
                }
        } else if (j < block_end && sc->s[j] == '{') {
                size_t e;
                r = json_at(sc, j, block_end, &args, &e);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        sc->out->unread++;
                        return 0;
                }
        } else if (close == NPOS) {
                sc->out->unread++;
                return 0;
        }
        return add_call(sc, name, args, true);
}

/* [TOOL_CALLS] at i: a JSON list (or object), or Mistral's newer
 * N[ARGS]{...} (with an optional [CALL_ID]ID before [ARGS]). */
static int read_mistral(Scan *sc, size_t i, size_t *ret_pos) {
        _cleanup_json_ json_object *args = NULL;
        _cleanup_free_ char *name = NULL;
        size_t j = skip_space(sc, i + strlen("[TOOL_CALLS]"), sc->n), l, e;
        int r;

        if (j < sc->n && (sc->s[j] == '[' || sc->s[j] == '{')) {
                size_t before = sc->out->unread;
                r = read_json_calls(sc, j, sc->n, true, ret_pos);
                if (r == 0 && sc->out->unread == before)
                        sc->out->unread++;
                return r;
        }
        l = name_at(sc, j, sc->n);
        *ret_pos = j + l;
        if (l == 0) {
                sc->out->unread++;
                return 0;
        }
        name = strndup(sc->s + j, l);
        if (!name)
                return -ENOMEM;
        j += l;
        if (at(sc, j, "[CALL_ID]")) {
                size_t a = find(sc, j, MIN(sc->n, j + 128), "[ARGS]");
                if (a != NPOS)
                        j = a;
        }
        if (!at(sc, j, "[ARGS]")) {
                sc->out->unread++;
                return 0;
        }
        j += strlen("[ARGS]");
        r = json_at(sc, j, sc->n, &args, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                sc->out->unread++;
                return 0;
        }
        *ret_pos = e;
        return add_call(sc, name, args, true);
}

/* <tool_call> at i: JSON values or <function=...> blocks, up to
 * </tool_call>; unclosed, what parses is read (a model that stops at the
 * end of its call without the closing tag). */
static int read_tool_call(Scan *sc, size_t i, size_t *ret_pos) {
        size_t j = i + strlen("<tool_call>"), close, end, pos, before = sc->out->unread;
        int r, found = 0;

        close = find(sc, j, sc->n, "</tool_call>");
        end = close != NPOS ? close : sc->n;
        j = skip_space(sc, j, end);
        if (at(sc, j, "<function=")) {
                while (at(sc, j, "<function=")) {
                        r = read_function(sc, j, end, &pos);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                break;
                        found += r;
                        j = skip_space(sc, pos, end);
                }
                pos = j;
        } else {
                r = read_json_calls(sc, j, end, true, &pos);
                if (r < 0)
                        return r;
                found = r;
        }
        if (found == 0 && sc->out->unread == before)
                sc->out->unread++;
        *ret_pos = close != NPOS ? close + strlen("</tool_call>") : found > 0 ? pos : end;
        return found;
}

/* A fence at i, at the start of a line: ```json (or no language, or
 * tool_call) whose JSON holds calls. Other fences, and JSON that holds
 * none, are text, whose inside is not looked at. */
static int read_fence(Scan *sc, size_t i, size_t *ret_pos) {
        size_t j = i + 3, nl, body, close, end, pos;
        _cleanup_free_ char *lang = NULL;

        nl = find(sc, j, sc->n, "\n");
        body = nl != NPOS ? nl + 1 : sc->n;
        close = find(sc, body, sc->n, "```");
        end = close != NPOS ? close : sc->n;
        *ret_pos = close != NPOS ? close + 3 : sc->n;

        while (j < body && is_space(sc->s[j]) && sc->s[j] != '\n')
                j++;
        size_t l = 0;
        while (j + l < body && !is_space(sc->s[j + l]))
                l++;
        lang = strndup(sc->s + j, MIN(l, (size_t) 32));
        if (!lang)
                return -ENOMEM;
        for (char *c = lang; *c; c++)
                if (*c >= 'A' && *c <= 'Z')
                        *c += 'a' - 'A';
        if (!streq(lang, "") && !streq(lang, "json") && !streq(lang, "tool_call") && !streq(lang, "tool_calls"))
                return 0;
        return read_json_calls(sc, skip_space(sc, body, end), end, false, &pos);
}

static const char *const call_markers[] = { "<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<function=" };
/* Special tokens that some servers leave in the text around calls. */
static const char *const stray_tokens[] = { "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>" };

static size_t next_call_marker(const Scan *sc, size_t from) {
        size_t best = NPOS;

        for (size_t k = 0; k < ELEMENTSOF(call_markers); k++) {
                size_t p = find(sc, from, sc->n, call_markers[k]);
                if (p < best)
                        best = p;
        }
        return best;
}

/* Thinking at i: <think>...</think> (or <thinking>). Unclosed, it runs up to
 * the first call after it (a model that forgot to close it), or to the
 * end (a reply cut while thinking). */
static size_t skip_thinking(const Scan *sc, size_t i) {
        const char *close = at(sc, i, "<thinking>") ? "</thinking>" : "</think>";
        size_t e = find(sc, i + 1, sc->n, close);

        if (e != NPOS)
                return e + strlen(close);
        e = sc->tools ? next_call_marker(sc, i + 1) : NPOS;
        return e != NPOS ? e : sc->n;
}

/* The block at i, if one begins there: 1 and *ret_next after it, *ret_keep
 * if it stays text; 0 if none begins there; -ENOMEM. */
static int scan_block(Scan *sc, size_t i, size_t *ret_next, bool *ret_keep) {
        char c = sc->s[i];
        size_t next = NPOS;
        int r;

        *ret_keep = false;
        if (c == '<') {
                if (at(sc, i, "<think>") || at(sc, i, "<thinking>")) {
                        *ret_next = skip_thinking(sc, i);
                        return 1;
                }
                for (size_t k = 0; k < ELEMENTSOF(stray_tokens); k++)
                        if (at(sc, i, stray_tokens[k])) {
                                *ret_next = i + strlen(stray_tokens[k]);
                                return 1;
                        }
                if (!sc->tools)
                        return 0;
                if (at(sc, i, "<tool_call>"))
                        r = read_tool_call(sc, i, &next);
                else if (at(sc, i, "<|python_tag|>")) {
                        size_t before = sc->out->unread;
                        r = read_json_calls(sc, i + strlen("<|python_tag|>"), sc->n, true, &next);
                        if (r == 0 && sc->out->unread == before)
                                sc->out->unread++;
                } else if (at(sc, i, "<function=")) {
                        r = read_function(sc, i, sc->n, &next);
                        if (r == -EBADMSG)
                                return 0;
                } else
                        return 0;
        } else if (!sc->tools)
                return 0;
        else if (c == '[' && at(sc, i, "[TOOL_CALLS]"))
                r = read_mistral(sc, i, &next);
        else if (c == '`' && at(sc, i, "```") && line_start(sc, i))
                r = read_fence(sc, i, &next);
        else if ((c == '{' || c == '[') && line_start(sc, i) && sc->bare_tries < BARE_TRIES_MAX) {
                _cleanup_json_ json_object *v = NULL;

                sc->bare_tries++;
                r = json_at(sc, i, sc->n, &v, &next);
                if (r == -EBADMSG)
                        return 0;
                if (r >= 0)
                        r = add_calls_value(sc, v, false);
        } else
                return 0;
        if (r < 0)
                return r;
        *ret_keep = r == 0;
        *ret_next = MIN(MAX(next, i + 1), sc->n);
        return 1;
}

static int scan(Scan *sc) {
        size_t i = 0, plain = 0;
        int r;

        while (i < sc->n) {
                size_t next;
                bool keep;

                if (!strchr("<[`{", sc->s[i])) {
                        i++;
                        continue;
                }
                if (at(sc, i, "</think>") || at(sc, i, "</thinking>")) {
                        /* Thinking whose opening tag was in the prompt
                         * (DeepSeek-R1's template): all text before it. */
                        buf_done(&sc->rest);
                        i = plain = i + (at(sc, i, "</think>") ? strlen("</think>") : strlen("</thinking>"));
                        continue;
                }
                r = scan_block(sc, i, &next, &keep);
                if (r < 0)
                        return r;
                if (r == 0) {
                        i++;
                        continue;
                }
                if (buf_append(&sc->rest, sc->s + plain, i - plain) < 0 ||
                    (keep && buf_append(&sc->rest, sc->s + i, next - i) < 0))
                        return -ENOMEM;
                i = plain = next;
        }
        return buf_append(&sc->rest, sc->s + plain, sc->n - plain);
}

/* The text trimmed, or NULL if nothing is left. */
static int take_trimmed(Buf *b, char **ret) {
        size_t a = 0, e = b->n;

        while (a < e && is_space(b->s[a]))
                a++;
        while (e > a && is_space(b->s[e - 1]))
                e--;
        if (a == e) {
                *ret = NULL;
                return 0;
        }
        *ret = strndup(b->s + a, e - a);
        return *ret ? 0 : -ENOMEM;
}

static int text_scan(const char *text, size_t size, json_object *tools, ModelTextCalls *out) {
        _cleanup_(buf_done) Buf rest = {};
        size_t n;
        int r;

        /* Content never holds a NUL (model-reply.c makes it U+FFFD); from
         * elsewhere, the text ends there. */
        size = strnlen(text, size);
        n = MIN(size, (size_t) MODEL_TEXT_SCAN_MAX);

        Scan sc = {
                .s = text,
                .n = n,
                .tools = tools && json_object_is_type(tools, json_type_array) && json_object_array_length(tools) > 0 ?
                        tools : NULL,
                .out = out,
        };
        r = scan(&sc);
        rest = sc.rest;
        if (r < 0)
                return r;
        /* Past the limit, the text is kept as it is. */
        if (buf_append(&rest, text + n, size - n) < 0)
                return -ENOMEM;
        return take_trimmed(&rest, &out->text);
}

int model_text_calls_parse(const char *text, size_t size, json_object *tools, ModelTextCalls *ret) {
        ModelTextCalls c = {};
        int r;

        assert(text || size == 0);
        assert(ret);

        r = text_scan(text ?: "", size, tools, &c);
        if (r < 0) {
                model_text_calls_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}

int model_text_strip_thinking(const char *text, size_t size, char **ret) {
        _cleanup_(model_text_calls_done) ModelTextCalls c = {};
        int r;

        assert(text || size == 0);
        assert(ret);

        r = text_scan(text ?: "", size, NULL, &c);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c.text);
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

int model_reply_read_text(const ModelReply *r, ModelToolCalls mode, json_object *tools, ModelReply **ret) {
        _cleanup_(model_text_calls_done) ModelTextCalls tc = {};
        _cleanup_(model_reply_freep) ModelReply *n = NULL;
        bool read_calls;
        int k;

        assert(r);
        assert(ret);

        *ret = NULL;
        if (!r->content)
                return 0;
        read_calls = mode != MODEL_TOOL_CALLS_NATIVE && r->n_tool_calls == 0;
        k = model_text_calls_parse(r->content, strlen(r->content), read_calls ? tools : NULL, &tc);
        if (k < 0)
                return k;
        if (tc.n_calls == 0 && tc.unread == 0 && streq_ptr(tc.text, r->content))
                return 0;

        n = calloc(1, sizeof(ModelReply));
        if (!n)
                return -ENOMEM;
        n->content = TAKE_PTR(tc.text);
        if (r->finish_reason && !(n->finish_reason = strdup(r->finish_reason)))
                return -ENOMEM;
        n->prompt_tokens = r->prompt_tokens;
        n->completion_tokens = r->completion_tokens;
        n->cached_tokens = r->cached_tokens;
        n->request = r->request ? json_object_get(r->request) : NULL;
        n->stream = r->stream;
        n->attempts = r->attempts;
        n->unread_calls = tc.unread;

        size_t count = r->n_tool_calls > 0 ? r->n_tool_calls : tc.n_calls;
        if (count > 0) {
                n->tool_calls = calloc(count, sizeof(ModelToolCall));
                if (!n->tool_calls)
                        return -ENOMEM;
                n->n_tool_calls = count;
        }
        if (r->n_tool_calls > 0)
                for (size_t i = 0; i < count; i++) {
                        ModelToolCall *t = n->tool_calls + i;
                        t->id = strdup(r->tool_calls[i].id);
                        t->name = strdup(r->tool_calls[i].name);
                        t->arguments = strdup(r->tool_calls[i].arguments);
                        if (!t->id || !t->name || !t->arguments)
                                return -ENOMEM;
                }
        else if (count > 0) {
                /* Ids made from the reply, as for a server's calls without
                 * one (model-reply.c): a replay makes the same. */
                uint32_t h = r->raw ? fnv1a(r->raw, r->raw_size) : fnv1a(r->content, strlen(r->content));
                for (size_t i = 0; i < count; i++) {
                        ModelToolCall *t = n->tool_calls + i;
                        if (asprintf(&t->id, "call_%08x_t%zu", h, i) < 0) {
                                t->id = NULL;
                                return -ENOMEM;
                        }
                        t->name = TAKE_PTR(tc.calls[i].name);
                        t->arguments = TAKE_PTR(tc.calls[i].arguments);
                }
                n->text_calls = true;
        }
        k = model_reply_build_message(n);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(n);
        return 1;
}

char *model_text_calls_prompt(json_object *tools) {
        _cleanup_(buf_done) Buf b = {};
        const char *example = NULL, *example_key = NULL;
        size_t n = tools && json_object_is_type(tools, json_type_array) ? json_object_array_length(tools) : 0;

        /* An example with a tool that has a required parameter. */
        for (size_t i = 0; i < n && !example; i++) {
                json_object *fn = get(json_object_array_get_idx(tools, i), "function"), *req;
                const char *name = get_string(fn, "name");

                req = get(get(fn, "parameters"), "required");
                if (!name || !req || !json_object_is_type(req, json_type_array) || json_object_array_length(req) == 0)
                        continue;
                json_object *key = json_object_array_get_idx(req, 0);
                if (!json_object_is_type(key, json_type_string))
                        continue;
                example = name;
                example_key = json_object_get_string(key);
        }

        if (buf_puts(&b, "# Tools\n\n"
                     "You have no tool-calling interface: you call a tool by writing, in your reply, one block of "
                     "exactly this form for each call, with the arguments as one JSON object:\n\n"
                     "<tool_call>{\"name\": \"TOOL\", \"arguments\": {...}}</tool_call>\n\n") < 0)
                return NULL;
        if (example) {
                _cleanup_json_ json_object *o = json_object_new_object(), *a = json_object_new_object();
                const char *t;

                if (!o || !a || json_add_string(a, example_key, "...") < 0 || json_add_string(o, "name", example) < 0 ||
                    json_object_object_add(o, "arguments", json_object_get(a)) < 0)
                        return NULL;
                t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
                if (!t || buf_printf(&b, "For example:\n\n<tool_call>%s</tool_call>\n\n", t) < 0)
                        return NULL;
        }
        if (buf_puts(&b, "Several blocks in one reply run one after the other. The result of each comes back in the "
                     "next message as <tool_response name=\"TOOL\">...</tool_response>; never write results yourself, "
                     "and write nothing after your last call. The tools, with the JSON Schema of their arguments:\n") < 0)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *fn = get(json_object_array_get_idx(tools, i), "function");
                const char *name = get_string(fn, "name"), *params;

                if (!name)
                        continue;
                params = get(fn, "parameters") ?
                        json_object_to_json_string_ext(get(fn, "parameters"), JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) :
                        "{}";
                if (!params || buf_printf(&b, "\n## %s\n%s\nArguments: %s\n", name, strempty(get_string(fn, "description")),
                                          params) < 0)
                        return NULL;
        }
        return TAKE_PTR(b.s);
}

static int add_message(json_object *out, const char *role, const char *content) {
        _cleanup_json_ json_object *m = json_object_new_object();

        if (!m || json_add_string(m, "role", role) < 0 || json_add_string(m, "content", content) < 0 ||
            json_object_array_add(out, m) < 0)
                return -ENOMEM;
        m = NULL;
        return 0;
}

/* An assistant message's tool calls as the blocks the model is asked to
 * write. */
static int render_calls(Buf *b, json_object *calls) {
        for (size_t i = 0; i < json_object_array_length(calls); i++) {
                json_object *fn = get(json_object_array_get_idx(calls, i), "function"), *name, *args = NULL;
                _cleanup_json_ json_object *parsed = NULL;
                const char *a = get_string(fn, "arguments") ?: "{}";

                name = json_object_new_string(get_string(fn, "name") ?: "");
                if (!name)
                        return -ENOMEM;
                /* Arguments that are JSON are written as such; others (a
                 * call that was cut) as the string they were. */
                if (json_parse_strict(a, strlen(a), &parsed) >= 0)
                        args = parsed;
                else
                        args = parsed = json_object_new_string(a);
                const char *ns = json_object_to_json_string_ext(name, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
                const char *as = args ? json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
                int r = ns && as ? buf_printf(b, "%s<tool_call>{\"name\": %s, \"arguments\": %s}</tool_call>",
                                              i > 0 ? "\n" : "", ns, as) : -ENOMEM;
                json_object_put(name);
                if (r < 0)
                        return r;
        }
        return 0;
}

int model_text_calls_messages(json_object *messages, json_object *tools, json_object **ret) {
        _cleanup_json_ json_object *out = json_object_new_array();
        _cleanup_(buf_done) Buf user = {};
        _cleanup_free_ char *prompt = NULL;
        size_t n;
        bool have_system = false;
        int r;

        assert(ret);

        if (!out)
                return -ENOMEM;
        if (!messages || !json_object_is_type(messages, json_type_array))
                return -EINVAL;
        n = json_object_array_length(messages);
        if (tools && json_object_is_type(tools, json_type_array) && json_object_array_length(tools) > 0) {
                prompt = model_text_calls_prompt(tools);
                if (!prompt)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (streq_ptr(get_string(json_object_array_get_idx(messages, i), "role"), "system"))
                        have_system = true;
        if (prompt && !have_system && add_message(out, "system", prompt) < 0)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                json_object *m = json_object_array_get_idx(messages, i), *calls = get(m, "tool_calls");
                const char *role = get_string(m, "role"), *content = get_string(m, "content");

                if (streq_ptr(role, "user") || streq_ptr(role, "tool")) {
                        if (user.s && buf_puts(&user, "\n\n") < 0)
                                return -ENOMEM;
                        if (streq_ptr(role, "tool"))
                                r = buf_printf(&user, "<tool_response name=\"%s\">\n%s\n</tool_response>",
                                               get_string(m, "name") ?: "tool", strempty(content));
                        else
                                r = buf_puts(&user, strempty(content));
                        if (r < 0)
                                return -ENOMEM;
                        continue;
                }
                if (user.s) {
                        if (add_message(out, "user", user.s) < 0)
                                return -ENOMEM;
                        buf_done(&user);
                }
                if (streq_ptr(role, "system") && prompt) {
                        _cleanup_free_ char *s = NULL;
                        if (asprintf(&s, "%s%s%s", strempty(content), isempty(content) ? "" : "\n\n", prompt) < 0 ||
                            add_message(out, "system", s) < 0)
                                return -ENOMEM;
                        prompt = mfree_ptr(prompt);
                } else if (streq_ptr(role, "assistant") && calls && json_object_is_type(calls, json_type_array) &&
                           json_object_array_length(calls) > 0) {
                        _cleanup_(buf_done) Buf b = {};
                        if ((!isempty(content) && buf_printf(&b, "%s\n\n", content) < 0) || render_calls(&b, calls) < 0 ||
                            add_message(out, "assistant", b.s) < 0)
                                return -ENOMEM;
                } else if (json_object_array_add(out, json_object_get(m)) < 0)
                        return -ENOMEM;
        }
        if (user.s && add_message(out, "user", user.s) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(out);
        return 0;
}
