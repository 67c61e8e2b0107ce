/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "context.h"
#include "json-util.h"
#include "macro.h"
#include "string-table.h"
#include "string-util.h"

/* A string longer than this in an old message is what shrinking replaces. */
#define SHRINK_MIN         256u
/* An assistant's words longer than this are cut to their start. */
#define WORDS_MAX          1024u
#define WORDS_KEPT         200u
#define DIGEST_MIN         1024u
#define DIGEST_MAX         (16u * 1024u)
#define DIGEST_FILES_MAX   40u
#define DIGEST_LINE_MAX    100u
#define DIGEST_PLAN_MAX    600u
#define DIGEST_GOAL_MAX    600u
/* A message cut in the middle keeps at least this much. */
#define CLIP_MIN           512u
#define CLIP_ROUNDS        8u
/* What a request has besides its messages and tools: model, max_tokens... */
#define REQUEST_OVERHEAD   256u

static const char *const context_cause_table[_CONTEXT_CAUSE_MAX] = {
        [CONTEXT_CALIBRATED] = "calibrated",
        [CONTEXT_REFUSED]    = "refused",
        [CONTEXT_TRUNCATED]  = "truncated",
};

DEFINE_STRING_TABLE_LOOKUP(context_cause, ContextCause);

/* ---- Sizes and small helpers ---- */

static size_t json_size(json_object *o) {
        const char *s = json_to_line(o);
        return s ? strlen(s) : 0;
}

static const char *message_role(json_object *m) {
        const char *role = NULL;
        (void) json_get_string(m, "role", &role);
        return strempty(role);
}

static const char *message_content(json_object *m) {
        const char *s = NULL;
        (void) json_get_string(m, "content", &s);
        return s;
}

/* The length of s's first n bytes, not cutting a UTF-8 sequence. */
static size_t utf8_prefix(const char *s, size_t l, size_t n) {
        if (n >= l)
                return l;
        while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
                n--;
        return n;
}

/* The start of the last n bytes of s[0..l), not in a UTF-8 sequence. */
static size_t utf8_suffix_start(const char *s, size_t l, size_t n) {
        size_t i;

        if (n >= l)
                return 0;
        i = l - n;
        while (i < l && ((unsigned char) s[i] & 0xC0) == 0x80)
                i++;
        return i;
}

/* The first non-blank line of s, at most n bytes ("…" when cut there),
 * for a note or the digest; "" for none. */
static char *first_line(const char *s, size_t n) {
        size_t l;
        char *r;

        s = strempty(s);
        s += strspn(s, " \t\r\n");
        l = strcspn(s, "\r\n");
        if (l > n)
                return strshorten_line(s, n);
        r = strndup(s, l);
        return r;
}

/* A shallow copy of the object o: its members shared, so that one of them
 * may be replaced. */
static json_object *object_copy(json_object *o) {
        _cleanup_json_ json_object *c = json_object_new_object();

        if (!c)
                return NULL;
        json_object_object_foreach(o, key, val)
                if (json_object_object_add(c, key, json_object_get(val)) < 0)
                        return NULL;
        return TAKE_PTR(c);
}

/* The arguments of a call, parsed; NULL when they are not an object. */
static json_object *call_arguments(json_object *call) {
        json_object *function, *args;
        json_object *o = NULL;

        if (!json_object_object_get_ex(call, "function", &function) ||
            !json_object_object_get_ex(function, "arguments", &args))
                return NULL;
        if (json_object_is_type(args, json_type_object))
                return json_object_get(args);
        if (!json_object_is_type(args, json_type_string))
                return NULL;
        if (json_parse_strict(json_object_get_string(args), (size_t) json_object_get_string_len(args), &o) < 0)
                return NULL;
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

static const char *call_name(json_object *call) {
        json_object *function;
        const char *name = NULL;

        if (json_object_object_get_ex(call, "function", &function))
                (void) json_get_string(function, "name", &name);
        return name ?: "a tool";
}

/* What a call was, in a few words: "read_file 'src/a.c'", "run_command
 * 'make test'", "write_file 'a.c' (12034 bytes)". */
static char *call_label(json_object *call) {
        _cleanup_json_ json_object *args = call_arguments(call);
        _cleanup_free_ char *what = NULL;
        const char *name = call_name(call), *s = NULL, *content = NULL;
        char *label;

        if (args) {
                static const char *const keys[] = { "path", "command", "pattern", "summary" };
                for (size_t i = 0; i < ELEMENTSOF(keys) && !s; i++)
                        (void) json_get_string(args, keys[i], &s);
                (void) json_get_string(args, "content", &content);
        }
        if (s && !(what = strshorten_line(s, 80)))
                return NULL;
        if (asprintf(&label, "%s%s%s%s", name, what ? " '" : "", strempty(what), what ? "'" : "") < 0)
                return NULL;
        if (content) {
                char *l;
                if (asprintf(&l, "%s (%zu bytes)", label, strlen(content)) < 0) {
                        free(label);
                        return NULL;
                }
                free(label);
                label = l;
        }
        return label;
}

/* ---- Shrinking one message ---- */

/* A string of arguments with every long string member replaced by a note;
 * NULL (and *ret_same) when there is nothing to replace. */
static char *arguments_shrunk(json_object *call, bool *ret_same) {
        _cleanup_json_ json_object *args = call_arguments(call);
        json_object *function, *raw;
        bool changed = false;
        char note[96];

        *ret_same = true;
        if (!json_object_object_get_ex(call, "function", &function) ||
            !json_object_object_get_ex(function, "arguments", &raw) ||
            !json_object_is_type(raw, json_type_string))
                return NULL;

        if (!args) {
                /* Arguments that are not an object were refused when they
                 * came; only their size matters now. */
                size_t l = (size_t) json_object_get_string_len(raw);
                _cleanup_json_ json_object *o = NULL;
                if (l <= SHRINK_MIN)
                        return NULL;
                snprintf(note, sizeof(note), "[arguments of %zu bytes elided to fit the context budget]", l);
                o = json_object_new_object();
                if (!o || json_add_string(o, "elided", note) < 0)
                        return NULL;
                *ret_same = false;
                return strdup(json_to_line(o));
        }

        json_object_object_foreach(args, key, val) {
                size_t l;

                if (!json_object_is_type(val, json_type_string))
                        continue;
                l = (size_t) json_object_get_string_len(val);
                if (l <= SHRINK_MIN)
                        continue;
                snprintf(note, sizeof(note), "[%zu bytes elided to fit the context budget]", l);
                if (json_object_object_add(args, key, json_object_new_string(note)) < 0)
                        return NULL;
                changed = true;
        }
        if (!changed)
                return NULL;
        *ret_same = false;
        return strdup(json_to_line(args));
}

/* An assistant message with long words cut and the long arguments of its
 * tool calls replaced by notes; NULL with *ret_same when nothing is. */
static json_object *assistant_shrunk(json_object *m, bool *ret_same, int *ret_error) {
        _cleanup_json_ json_object *copy = NULL, *calls_copy = NULL;
        const char *content = message_content(m);
        json_object *calls;
        bool changed = false;

        *ret_same = true;
        *ret_error = -ENOMEM;
        copy = object_copy(m);
        if (!copy)
                return NULL;

        if (content && strlen(content) > WORDS_MAX) {
                size_t l = strlen(content), k = utf8_prefix(content, l, WORDS_KEPT);
                _cleanup_free_ char *s = NULL;
                if (asprintf(&s, "%.*s [... %zu more bytes elided to fit the context budget]", (int) k, content, l - k) < 0 ||
                    json_add_string(copy, "content", s) < 0)
                        return NULL;
                changed = true;
        }

        if (json_object_object_get_ex(m, "tool_calls", &calls) && json_object_is_type(calls, json_type_array)) {
                size_t n = json_object_array_length(calls);
                bool calls_changed = false;

                calls_copy = json_object_new_array();
                if (!calls_copy)
                        return NULL;
                for (size_t i = 0; i < n; i++) {
                        json_object *call = json_object_array_get_idx(calls, i), *function;
                        _cleanup_json_ json_object *c = NULL, *f = NULL;
                        _cleanup_free_ char *args = NULL;
                        bool same = true;

                        if (json_object_is_type(call, json_type_object))
                                args = arguments_shrunk(call, &same);
                        if (same) {
                                if (json_object_array_add(calls_copy, json_object_get(call)) < 0)
                                        return NULL;
                                continue;
                        }
                        if (!args || !json_object_object_get_ex(call, "function", &function))
                                return NULL;
                        c = object_copy(call);
                        f = object_copy(function);
                        if (!c || !f || json_add_string(f, "arguments", args) < 0 ||
                            json_object_object_add(c, "function", TAKE_PTR(f)) < 0 ||
                            json_object_array_add(calls_copy, TAKE_PTR(c)) < 0)
                                return NULL;
                        calls_changed = true;
                }
                if (calls_changed) {
                        if (json_object_object_add(copy, "tool_calls", TAKE_PTR(calls_copy)) < 0)
                                return NULL;
                        changed = true;
                }
        }

        *ret_error = 0;
        if (!changed)
                return NULL;
        *ret_same = false;
        return TAKE_PTR(copy);
}

/* A tool's answer replaced by a note that says what the call was, how
 * long its output and how it began. */
static json_object *tool_shrunk(json_object *m, const char *label, bool *ret_same, int *ret_error) {
        _cleanup_json_ json_object *copy = NULL;
        _cleanup_free_ char *head = NULL, *note = NULL;
        const char *content = message_content(m);
        size_t l = content ? strlen(content) : 0;

        *ret_same = true;
        *ret_error = 0;
        if (l <= SHRINK_MIN)
                return NULL;
        *ret_error = -ENOMEM;
        head = first_line(content, DIGEST_LINE_MAX);
        if (!head)
                return NULL;
        if (asprintf(&note, "[%s: output of %zu bytes elided to fit the context budget; it began: \"%s\"]",
                     label ?: "a tool", l, head) < 0)
                return NULL;
        copy = object_copy(m);
        if (!copy || json_add_string(copy, "content", note) < 0)
                return NULL;
        *ret_error = 0;
        *ret_same = false;
        return TAKE_PTR(copy);
}

/* ---- The conversation taken apart ---- */

typedef struct Item {
        json_object *m;
        json_object *shrunk;    /* NULL: shrinking changes nothing */
        size_t full, small;
        bool boundary;          /* not a tool's answer: a cut may be made before it */
        bool assistant;
        unsigned step;          /* assistant messages before it: 0 is the plan */
        size_t caller;          /* a tool's answer: the index of the assistant message, or SIZE_MAX */
        json_object *call;      /* a tool's answer: the call it answers, or NULL */
        char *label;            /* a tool's answer: call_label() of that call */
} Item;

typedef struct Conv {
        Item *items;
        size_t n, prefix;
        size_t *sum_full, *sum_small;   /* n + 1 each: the sizes of items [0, i) */
        size_t *last_assistant;         /* n + 1: the latest assistant message in [0, i), or SIZE_MAX */
} Conv;

static void conv_done(Conv *c) {
        for (size_t i = 0; c->items && i < c->n; i++) {
                json_object_put(c->items[i].shrunk);
                free(c->items[i].label);
        }
        free(c->items);
        free(c->sum_full);
        free(c->sum_small);
        free(c->last_assistant);
}

/* The call of the assistant message a answering id, else the one at
 * position pos among its answers. */
static json_object *find_call(json_object *a, const char *id, size_t pos) {
        json_object *calls;
        size_t n;

        if (!json_object_object_get_ex(a, "tool_calls", &calls) || !json_object_is_type(calls, json_type_array))
                return NULL;
        n = json_object_array_length(calls);
        for (size_t i = 0; id && i < n; i++) {
                json_object *c = json_object_array_get_idx(calls, i);
                const char *cid = NULL;
                if (json_get_string(c, "id", &cid) >= 0 && streq(cid, id))
                        return c;
        }
        return pos < n ? json_object_array_get_idx(calls, pos) : NULL;
}

static int conv_init(Conv *c, json_object *messages) {
        size_t n = json_object_array_length(messages), assistant = SIZE_MAX, answers = 0;
        unsigned steps = 0;

        *c = (Conv) {
                .n = n,
                .prefix = MIN((size_t) CONTEXT_PREFIX, n),
                .items = calloc(MAX(n, (size_t) 1), sizeof(Item)),
                .sum_full = calloc(n + 1, sizeof(size_t)),
                .sum_small = calloc(n + 1, sizeof(size_t)),
                .last_assistant = calloc(n + 1, sizeof(size_t)),
        };
        if (!c->items || !c->sum_full || !c->sum_small || !c->last_assistant)
                return -ENOMEM;

        c->last_assistant[0] = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
                Item *it = c->items + i;
                const char *role;
                bool same = true;
                int r = 0;

                it->m = json_object_array_get_idx(messages, i);
                it->caller = SIZE_MAX;
                role = message_role(it->m);
                it->full = it->small = json_size(it->m);
                it->boundary = !streq(role, "tool");
                it->assistant = streq(role, "assistant");
                it->step = steps;

                if (it->assistant) {
                        assistant = i;
                        answers = 0;
                        steps++;
                        if (i >= c->prefix)
                                it->shrunk = assistant_shrunk(it->m, &same, &r);
                } else if (!it->boundary) {
                        const char *id = NULL;
                        (void) json_get_string(it->m, "tool_call_id", &id);
                        it->caller = assistant;
                        if (assistant != SIZE_MAX)
                                it->call = find_call(c->items[assistant].m, id, answers);
                        answers++;
                        if (it->call) {
                                it->label = call_label(it->call);
                                if (!it->label)
                                        return -ENOMEM;
                        }
                        if (i >= c->prefix)
                                it->shrunk = tool_shrunk(it->m, it->label, &same, &r);
                }
                if (r < 0)
                        return r;
                if (it->shrunk) {
                        it->small = json_size(it->shrunk);
                        if (it->small >= it->full) {
                                json_object_put(it->shrunk);
                                it->shrunk = NULL;
                                it->small = it->full;
                        }
                }

                c->sum_full[i + 1] = c->sum_full[i] + it->full;
                c->sum_small[i + 1] = c->sum_small[i] + it->small;
                c->last_assistant[i + 1] = it->assistant ? i : c->last_assistant[i];
        }
        return 0;
}

/* Where the messages kept as they are begin, in the first L: the latest
 * CONTEXT_KEEP_RECENT and the whole latest step. */
static size_t conv_tail(const Conv *c, size_t L) {
        size_t t = L > CONTEXT_KEEP_RECENT ? L - CONTEXT_KEEP_RECENT : 0;

        if (c->last_assistant[L] != SIZE_MAX && c->last_assistant[L] < t)
                t = c->last_assistant[L];
        return MAX(t, c->prefix);
}

/* The size of the first L messages sent with [prefix, k) condensed into a
 * digest of at most digest bytes and [k, f) shrunk (f within the part
 * before the tail). */
static size_t conv_cost(const Conv *c, size_t L, size_t k, size_t f, size_t digest) {
        size_t g = MIN(MAX(f, k), conv_tail(c, L)), count;

        g = MAX(g, k);
        count = c->prefix + (k > c->prefix) + (L - k);
        return 2 + (count > 0 ? count - 1 : 0) + c->sum_full[c->prefix] + (k > c->prefix ? digest : 0) +
                (c->sum_small[g] - c->sum_small[k]) + (c->sum_full[L] - c->sum_full[g]);
}

static size_t conv_next_boundary(const Conv *c, size_t k, size_t limit) {
        for (size_t j = k + 1; j <= limit && j < c->n; j++)
                if (c->items[j].boundary)
                        return j;
        return k;
}

/* ---- The digest ---- */

static bool call_changes_files(const char *name) {
        static const char *const verbs[] = {
                "write", "edit", "apply", "patch", "delete", "remove", "move", "rename", "create", "replace",
        };
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strneq(name, verbs[i], strlen(verbs[i])))
                        return true;
        return false;
}

static int files_add(char ***files, size_t *n, const char *path) {
        char **l;

        if (isempty(path))
                return 0;
        for (size_t i = 0; i < *n; i++)
                if (streq((*files)[i], path))
                        return 0;
        l = reallocarray(*files, *n + 2, sizeof(char *));
        if (!l)
                return -ENOMEM;
        *files = l;
        l[*n] = strdup(path);
        if (!l[*n])
                return -ENOMEM;
        l[++*n] = NULL;
        return 0;
}

/* The paths a call changed: its "path", and those a patch names. */
static int files_of_call(json_object *call, char ***files, size_t *n) {
        _cleanup_json_ json_object *args = NULL;
        const char *path = NULL, *patch = NULL;
        int r;

        if (!call_changes_files(call_name(call)))
                return 0;
        args = call_arguments(call);
        if (!args)
                return 0;
        if (json_get_string(args, "path", &path) >= 0) {
                r = files_add(files, n, path);
                if (r < 0)
                        return r;
        }
        static const char *const keys[] = { "patch", "diff", "input" };
        static const char *const heads[] = { "+++ b/", "+++ ", "*** Update File: ", "*** Add File: ", "*** Delete File: " };
        for (size_t i = 0; i < ELEMENTSOF(keys) && !patch; i++)
                (void) json_get_string(args, keys[i], &patch);
        /* The files a unified diff or an apply_patch envelope names. */
        for (const char *l = patch; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                _cleanup_free_ char *p = NULL;
                const char *s = NULL;

                for (size_t i = 0; i < ELEMENTSOF(heads) && !s; i++)
                        if (strneq(l, heads[i], strlen(heads[i])))
                                s = l + strlen(heads[i]);
                if (!s || strneq(s, "/dev/null", 9))
                        continue;
                p = strndup(s, MIN(strcspn(s, "\t\r\n"), (size_t) 4096));
                if (!p)
                        return -ENOMEM;
                r = files_add(files, n, p);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The digest's line for item i (an assistant message, or a user's), or
 * NULL for a tool's answer, which its call's line says. */
static int digest_line(const Conv *c, size_t i, size_t to, char **ret) {
        const Item *it = c->items + i;
        _cleanup_free_ char *words = NULL;
        Buf b = {};
        json_object *calls = NULL;
        size_t n_calls = 0;

        *ret = NULL;
        if (!it->boundary)
                return 0;
        if (!it->assistant) {
                words = first_line(message_content(it->m), 2 * DIGEST_LINE_MAX);
                if (!words || buf_printf(&b, "- %s message: %s\n", message_role(it->m), words) < 0)
                        goto oom;
                *ret = b.s;
                return 0;
        }

        if (json_object_object_get_ex(it->m, "tool_calls", &calls) && json_object_is_type(calls, json_type_array))
                n_calls = json_object_array_length(calls);
        if (it->step == 0 && n_calls == 0) {
                /* The plan: more of it than of other words. */
                const char *plan = message_content(it->m);
                _cleanup_free_ char *p = strdup(strempty(plan));
                size_t l;

                if (!p)
                        goto oom;
                for (char *s = p; *s; s++)
                        if (*s == '\n' || *s == '\r' || *s == '\t')
                                *s = ' ';
                l = utf8_prefix(p, strlen(p), DIGEST_PLAN_MAX);
                if (buf_printf(&b, "- the plan: %.*s%s\n", (int) l, p, l < strlen(p) ? "…" : "") < 0)
                        goto oom;
                *ret = b.s;
                return 0;
        }

        words = first_line(message_content(it->m), DIGEST_LINE_MAX);
        if (!words || buf_printf(&b, "- step %u:%s%s%s", it->step, isempty(words) ? "" : " \"", words,
                                 isempty(words) ? "" : "\"") < 0)
                goto oom;
        for (size_t j = 0; j < n_calls; j++) {
                json_object *call = json_object_array_get_idx(calls, j);
                _cleanup_free_ char *label = call_label(call), *result = NULL;

                if (!label)
                        goto oom;
                for (size_t a = i + 1; a < to && !c->items[a].boundary; a++)
                        if (c->items[a].call == call) {
                                result = first_line(message_content(c->items[a].m), DIGEST_LINE_MAX);
                                if (!result)
                                        goto oom;
                                break;
                        }
                if (buf_printf(&b, "%s %s -> %s%s%s", j ? ";" : "", label, result ? "\"" : "",
                               result ?: "(no answer)", result ? "\"" : "") < 0)
                        goto oom;
        }
        if (n_calls == 0 && buf_puts(&b, " (no tool calls)") < 0)
                goto oom;
        if (buf_puts(&b, "\n") < 0)
                goto oom;
        *ret = b.s;
        return 0;
oom:
        buf_done(&b);
        return -ENOMEM;
}

/* The digest of items [from, to): what the model needs of the steps it no
 * longer sees, at most cap bytes; the oldest steps' lines go first when it
 * would be longer. */
static int digest_build(const Conv *c, size_t from, size_t to, const char *goal, size_t cap, char **ret) {
        _cleanup_free_ char *g = NULL, *tests = NULL;
        char **lines = NULL, **files = NULL;
        size_t n_lines = 0, n_files = 0, skip, keep, total;
        bool plan;
        unsigned first_step = UINT32_MAX, last_step = 0, tests_step = 0;
        Buf b = {};
        int r = -ENOMEM;

        lines = calloc(to - from + 1, sizeof(char *));
        if (!lines)
                goto finish;
        for (size_t i = from; i < to; i++) {
                const Item *it = c->items + i;

                r = digest_line(c, i, to, &lines[n_lines]);
                if (r < 0)
                        goto finish;
                if (lines[n_lines])
                        n_lines++;
                if (it->assistant) {
                        first_step = MIN(first_step, it->step);
                        last_step = MAX(last_step, it->step);
                }
                if (it->call) {
                        r = files_of_call(it->call, &files, &n_files);
                        if (r < 0)
                                goto finish;
                        if (streq(call_name(it->call), "run_tests")) {
                                free(tests);
                                tests = first_line(message_content(it->m), 2 * DIGEST_LINE_MAX);
                                if (!tests) {
                                        r = -ENOMEM;
                                        goto finish;
                                }
                                tests_step = c->items[it->caller].step;
                        }
                }
        }

        g = strdup(strempty(goal));
        if (!g) {
                r = -ENOMEM;
                goto finish;
        }
        for (char *s = g; *s; s++)
                if (*s == '\n' || *s == '\r' || *s == '\t')
                        *s = ' ';
        g[utf8_prefix(g, strlen(g), DIGEST_GOAL_MAX)] = '\0';

        r = -ENOMEM;
        if (buf_printf(&b, "[agentfab] To fit the model's context, the conversation's messages %zu to %zu", from + 1, to) < 0)
                goto finish;
        if (first_step != UINT32_MAX && buf_printf(&b, " (%s%u to %u)", first_step == 0 ? "the plan and steps " : "steps ",
                                                   MAX(first_step, 1u), last_step) < 0)
                goto finish;
        if (buf_printf(&b, " are condensed here by the factory; the conversation goes on after them as it was.\n"
                       "Goal: %s\n", isempty(g) ? "(see the first message)" : g) < 0)
                goto finish;
        if (n_files > 0) {
                if (buf_puts(&b, "Files written or edited in these steps:") < 0)
                        goto finish;
                for (size_t i = 0; i < n_files && i < DIGEST_FILES_MAX; i++) {
                        _cleanup_free_ char *p = strshorten_line(files[i], 200);
                        if (!p || buf_printf(&b, "%s %s", i ? "," : "", p) < 0)
                                goto finish;
                }
                if (n_files > DIGEST_FILES_MAX && buf_printf(&b, " and %zu more", n_files - DIGEST_FILES_MAX) < 0)
                        goto finish;
                if (buf_puts(&b, "\n") < 0)
                        goto finish;
        }
        if (tests ? buf_printf(&b, "Last test run in these steps (step %u): %s\n", tests_step, tests) < 0 :
                    buf_puts(&b, "Last test run in these steps: none\n") < 0)
                goto finish;
        if (buf_puts(&b, "What each step did (calls -> the first line of their results):\n") < 0)
                goto finish;

        /* The plan always; of the other lines, the latest that fit. */
        plan = n_lines > 0 && strneq(lines[0], "- the plan: ", 12);
        if (plan && buf_puts(&b, lines[0]) < 0)
                goto finish;
        total = b.n + 64;
        for (keep = n_lines; keep > (size_t) plan && total + strlen(lines[keep - 1]) <= cap; keep--)
                total += strlen(lines[keep - 1]);
        skip = keep - plan;
        if (skip > 0 && buf_printf(&b, "- (%zu earlier lines left out)\n", skip) < 0)
                goto finish;
        for (size_t i = keep; i < n_lines; i++)
                if (buf_puts(&b, lines[i]) < 0)
                        goto finish;

        /* Still too long (a long goal, many files): cut. */
        if (b.n > cap) {
                size_t l = utf8_prefix(b.s, b.n, cap > 4 ? cap - 4 : 0);
                b.s[l] = '\0';
                b.n = l;
                if (buf_puts(&b, "…\n") < 0)
                        goto finish;
        }
        *ret = TAKE_PTR(b.s);
        r = 0;
finish:
        buf_done(&b);
        for (size_t i = 0; lines && i < n_lines; i++)
                free(lines[i]);
        free(lines);
        for (size_t i = 0; i < n_files; i++)
                free(files[i]);
        free(files);
        return r;
}

/* ---- The last resort: cutting recent messages ---- */

/* A copy of m with its content cut in the middle to keep bytes; NULL
 * when it has no such content. */
static json_object *message_clipped(json_object *m, size_t keep) {
        _cleanup_json_ json_object *copy = NULL;
        _cleanup_free_ char *s = NULL;
        const char *content = message_content(m);
        size_t l = content ? strlen(content) : 0, head, tail;

        keep = MAX(keep, (size_t) CLIP_MIN);
        if (l <= keep)
                return NULL;
        head = utf8_prefix(content, l, keep * 2 / 3);
        tail = utf8_suffix_start(content, l, keep / 3);
        if (asprintf(&s, "%.*s\n[... %zu bytes cut here to fit the context budget ...]\n%s", (int) head, content,
                     tail - head, content + tail) < 0)
                return NULL;
        copy = object_copy(m);
        if (!copy || json_add_string(copy, "content", s) < 0)
                return NULL;
        return TAKE_PTR(copy);
}

static size_t array_size(json_object *a) {
        size_t n = json_object_array_length(a), total = 2 + (n > 0 ? n - 1 : 0);

        for (size_t i = 0; i < n; i++)
                total += json_size(json_object_array_get_idx(a, i));
        return total;
}

/* ---- Compaction ---- */

int context_compact(json_object *messages, size_t budget, const char *goal, json_object **ret,
                    ContextStats *ret_stats) {
        _cleanup_json_ json_object *out = NULL;
        _cleanup_free_ char *digest = NULL;
        ContextStats stats = {};
        Conv c;
        size_t k, f, low, digest_cap, size, tail, g;
        int r;

        assert(messages);
        assert(ret);

        r = conv_init(&c, messages);
        if (r < 0)
                goto finish;
        r = -ENOMEM;
        out = json_object_new_array();
        if (!out)
                goto finish;

        stats.full_bytes = 2 + (c.n > 0 ? c.n - 1 : 0) + c.sum_full[c.n];
        digest_cap = MIN(MAX(budget / 8, (size_t) DIGEST_MIN), (size_t) DIGEST_MAX);
        low = budget - budget / 4;

        /* The conversation as it grew, message by message: once it is past
         * the budget, shrink the oldest messages until it is a quarter
         * below, then, if that is not enough, condense the oldest steps
         * likewise. Done from the start every time, so that the same
         * conversation gives the same cut, and the cut moves only when the
         * budget is reached again: the requests in between share their
         * beginning. */
        k = f = c.prefix;
        for (size_t L = c.prefix + 1; L <= c.n; L++) {
                tail = conv_tail(&c, L);
                if (conv_cost(&c, L, k, f, digest_cap) <= budget)
                        continue;
                while (f < tail && conv_cost(&c, L, k, f, digest_cap) > low)
                        f++;
                if (conv_cost(&c, L, k, f, digest_cap) <= budget)
                        continue;
                for (;;) {
                        size_t next;
                        if (conv_cost(&c, L, k, f, digest_cap) <= low)
                                break;
                        next = conv_next_boundary(&c, k, tail);
                        if (next == k)
                                break;
                        k = next;
                        f = MAX(f, k);
                }
        }

        /* The request. */
        tail = conv_tail(&c, c.n);
        g = MAX(MIN(f, tail), k);
        for (size_t i = 0; i < c.prefix; i++)
                if (json_object_array_add(out, json_object_get(c.items[i].m)) < 0)
                        goto finish;
        if (k > c.prefix) {
                json_object *d;
                r = digest_build(&c, c.prefix, k, goal, digest_cap, &digest);
                if (r < 0)
                        goto finish;
                r = -ENOMEM;
                d = json_object_new_object();
                if (!d || json_object_array_add(out, d) < 0) {
                        json_object_put(d);
                        goto finish;
                }
                if (json_add_string(d, "role", "user") < 0 || json_add_string(d, "content", digest) < 0)
                        goto finish;
                stats.condensed = k - c.prefix;
        }
        for (size_t i = k; i < c.n; i++) {
                bool shrink = i < g && c.items[i].shrunk;
                if (json_object_array_add(out, json_object_get(shrink ? c.items[i].shrunk : c.items[i].m)) < 0)
                        goto finish;
                stats.shrunk += shrink;
        }

        /* Over the budget all the same: the latest messages are larger than
         * it. Shrink them too, all but the last, oldest first; then cut the
         * longest contents in the middle. The system prompt and the first
         * user message stay whole: without them the model does not know
         * what it is doing. */
        size = array_size(out);
        for (size_t i = g; size > budget && i + 1 < c.n; i++) {
                size_t at = i - k + c.prefix + (k > c.prefix);
                if (!c.items[i].shrunk)
                        continue;
                if (json_object_array_put_idx(out, at, json_object_get(c.items[i].shrunk)) < 0)
                        goto finish;
                size -= c.items[i].full - c.items[i].small;
                stats.shrunk++;
        }
        for (unsigned round = 0; size > budget && round < CLIP_ROUNDS; round++) {
                size_t n = json_object_array_length(out), longest = SIZE_MAX, longest_len = 0, excess = size - budget;
                json_object *clipped;

                for (size_t i = c.prefix; i < n; i++) {
                        const char *s = message_content(json_object_array_get_idx(out, i));
                        size_t l = s ? strlen(s) : 0;
                        if (l > longest_len) {
                                longest = i;
                                longest_len = l;
                        }
                }
                if (longest == SIZE_MAX || longest_len <= CLIP_MIN)
                        break;
                /* The note and JSON escapes take some room: aim a little lower. */
                clipped = message_clipped(json_object_array_get_idx(out, longest),
                                          longest_len > excess + 256 ? longest_len - excess - 256 : 0);
                if (!clipped)
                        goto finish;
                if (json_object_array_put_idx(out, longest, clipped) < 0)
                        goto finish;
                stats.clipped++;
                size = array_size(out);
        }

        stats.bytes = array_size(out);
        if (ret_stats)
                *ret_stats = stats;
        *ret = TAKE_PTR(out);
        r = 0;
finish:
        conv_done(&c);
        return r;
}

size_t context_message_budget(uint64_t budget_tokens, unsigned bytes_per_token_milli, unsigned max_tokens,
                              size_t tools_bytes) {
        uint64_t reserve = MIN((uint64_t) max_tokens, budget_tokens / 2), margin = budget_tokens / 10, tokens, bytes;

        tokens = budget_tokens - reserve - margin;
        /* At most 2^32 tokens at most 8 bytes each: no overflow. */
        bytes = tokens * MAX(bytes_per_token_milli, 1u) / 1000;
        if (bytes <= (uint64_t) tools_bytes + REQUEST_OVERHEAD + CONTEXT_MESSAGES_MIN)
                return CONTEXT_MESSAGES_MIN;
        bytes -= tools_bytes + REQUEST_OVERHEAD;
        return (size_t) MIN(bytes, (uint64_t) SIZE_MAX / 2);
}

/* ---- The gauge ---- */

int context_entry_to_json(const ContextEntry *e, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add_uint64(o, "step", e->step) < 0 ||
            json_add_string(o, "cause", context_cause_to_string(e->cause)) < 0 ||
            json_add_uint64(o, "profile_budget", e->profile_budget) < 0 ||
            json_add_uint64(o, "sent_bytes", e->sent_bytes) < 0 ||
            json_add_uint64(o, "prompt_tokens", e->prompt_tokens) < 0)
                return -ENOMEM;
        if (e->cause == CONTEXT_CALIBRATED &&
            (json_add_uint64(o, "bytes_per_token_milli", e->bytes_per_token_milli) < 0 ||
             json_add_uint64(o, "taken", e->taken) < 0))
                return -ENOMEM;
        if (e->cause != CONTEXT_CALIBRATED && json_add_uint64(o, "budget", e->budget) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

int context_entry_from_json(json_object *o, ContextEntry *ret) {
        ContextEntry e = {};
        const char *cause = NULL;
        uint64_t step = 0, u = 0;

        if (!json_object_is_type(o, json_type_object) ||
            json_get_string(o, "cause", &cause) < 0 ||
            (e.cause = context_cause_from_string(cause)) < 0 ||
            json_get_uint64(o, "step", &step) < 0 || step > UINT32_MAX ||
            json_get_uint64(o, "profile_budget", &e.profile_budget) < 0)
                return -EBADMSG;
        e.step = (unsigned) step;
        (void) json_get_uint64(o, "sent_bytes", &e.sent_bytes);
        (void) json_get_uint64(o, "prompt_tokens", &e.prompt_tokens);
        if (e.cause == CONTEXT_CALIBRATED) {
                if (json_get_uint64(o, "bytes_per_token_milli", &u) < 0 || (u != 0 && (u < 1000 || u > 8000)) ||
                    json_get_uint64(o, "taken", &e.taken) < 0)
                        return -EBADMSG;
                e.bytes_per_token_milli = (unsigned) u;
        } else if (json_get_uint64(o, "budget", &e.budget) < 0 || e.budget == 0)
                return -EBADMSG;
        *ret = e;
        return 0;
}

void context_gauge_from(ContextGauge *g, uint64_t profile_budget, const ContextEntry *entries, size_t n,
                        unsigned step) {
        *g = (ContextGauge) {
                .budget = profile_budget,
                .bytes_per_token_milli = CONTEXT_BPT_DEFAULT_MILLI,
        };
        for (size_t i = 0; i < n; i++) {
                const ContextEntry *e = entries + i;

                if (e->cause == CONTEXT_CALIBRATED) {
                        if (e->step >= step)
                                continue;
                        if (e->bytes_per_token_milli > 0) {
                                g->bytes_per_token_milli = g->calibrated ?
                                        MIN(g->bytes_per_token_milli, e->bytes_per_token_milli) : e->bytes_per_token_milli;
                                g->calibrated = true;
                        }
                        g->taken = MAX(g->taken, e->taken);
                } else if (e->step <= step && e->profile_budget == profile_budget)
                        g->budget = MIN(g->budget, e->budget);
        }
}

bool context_truncated(const ContextGauge *g, uint64_t sent_bytes, uint64_t prompt_tokens, uint64_t *ret_estimate) {
        unsigned milli = g->calibrated ? g->bytes_per_token_milli : CONTEXT_BPT_DEFAULT_MILLI;
        uint64_t estimate = sent_bytes * 1000 / MAX(milli, 1u);

        if (ret_estimate)
                *ret_estimate = estimate;
        if (prompt_tokens < CONTEXT_TRUNCATED_MIN)
                return false;
        if (g->calibrated)
                return prompt_tokens * 10 < estimate * 6 && prompt_tokens * 5 >= g->taken * 4;
        return prompt_tokens * 2 < estimate;
}

bool context_calibrate(const ContextGauge *g, unsigned step, uint64_t profile_budget, uint64_t sent_bytes,
                       uint64_t prompt_tokens, ContextEntry *ret) {
        uint64_t milli;
        bool lower, larger;

        /* A short prompt is mostly the chat template's own tokens. */
        if (prompt_tokens < 64 || sent_bytes == 0)
                return false;
        milli = sent_bytes * 1000 / prompt_tokens;
        lower = milli >= 1000 && milli <= 8000 &&
                (!g->calibrated || milli * 100 < (uint64_t) g->bytes_per_token_milli * 99);
        larger = prompt_tokens * 10 > g->taken * 11;
        if (!lower && !larger)
                return false;
        *ret = (ContextEntry) {
                .cause = CONTEXT_CALIBRATED,
                .step = step,
                .profile_budget = profile_budget,
                .sent_bytes = sent_bytes,
                .prompt_tokens = prompt_tokens,
                .bytes_per_token_milli = lower ? (unsigned) milli : 0,
                .taken = MAX(g->taken, prompt_tokens),
        };
        return true;
}
