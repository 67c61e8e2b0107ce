/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "tools.h"
#include "workspace-path.h"

/* Bounds of the file tools that callers do not choose. */
#define READ_FILE_MAX_BYTES (8U * 1024U * 1024U)
#define SEARCH_FILE_MAX_BYTES (1024U * 1024U)
#define SEARCH_TOTAL_MAX_BYTES (256U * 1024U * 1024U)
#define SEARCH_LINE_SHOWN 240U
#define WALK_VISITS_MAX 200000U
#define WALK_DIR_ENTRIES_MAX 65536U
#define LIST_MAX_DEPTH 24U
#define TREE_MAX_DEPTH 3U
#define SYMLINK_TARGET_SHOWN 200U

static const char *const tool_kind_table[_TOOL_KIND_MAX] = {
        [TOOL_RUN_COMMAND] = "run_command",
        [TOOL_READ_FILE] = "read_file",
        [TOOL_WRITE_FILE] = "write_file",
        [TOOL_EDIT_FILE] = "edit_file",
        [TOOL_LIST_FILES] = "list_files",
        [TOOL_SEARCH] = "search",
        [TOOL_RUN_TESTS] = "run_tests",
        [TOOL_FINISH] = "finish",
};

const char *tool_kind_to_string(ToolKind k) {
        if (k < 0 || k >= _TOOL_KIND_MAX)
                return NULL;
        return tool_kind_table[k];
}

ToolKind tool_kind_from_string(const char *s) {
        if (!s)
                return _TOOL_KIND_INVALID;
        for (ToolKind k = 0; k < _TOOL_KIND_MAX; k++)
                if (streq(tool_kind_table[k], s))
                        return k;
        return _TOOL_KIND_INVALID;
}

/* ---- A small growable text buffer ---- */

typedef struct Buf {
        char *s;
        size_t n, allocated;
} Buf;

static int buf_append(Buf *b, const char *p, size_t l) {
        if (b->n + l + 1 > b->allocated) {
                size_t a = MAX(b->allocated * 2, b->n + l + 1);
                a = MAX(a, (size_t) 256);
                char *t = realloc(b->s, a);
                if (!t)
                        return -ENOMEM;
                b->s = t;
                b->allocated = a;
        }
        memcpy(b->s + b->n, p, l);
        b->n += l;
        b->s[b->n] = '\0';
        return 0;
}

static int buf_puts(Buf *b, const char *s) {
        return buf_append(b, s, strlen(s));
}

_printf_(2, 3)
static int buf_printf(Buf *b, const char *fmt, ...) {
        _cleanup_free_ char *t = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&t, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        return buf_append(b, t, (size_t) k);
}

static void buf_done(Buf *b) {
        b->s = mfree_ptr(b->s);
        b->n = b->allocated = 0;
}

/* Hands the text over, never NULL on success (an empty string at least). */
static int buf_steal(Buf *b, char **ret) {
        if (!b->s) {
                int r = buf_append(b, "", 0);
                if (r < 0)
                        return r;
        }
        /* Whatever a file held, the model gets UTF-8 without NUL. */
        utf8_sanitize(b->s, b->n);
        *ret = TAKE_PTR(b->s);
        b->n = b->allocated = 0;
        return 0;
}

_printf_(3, 4)
static int tool_message(char **ret_output, int error, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        utf8_sanitize(m, (size_t) k);
        *ret_output = m;
        return error;
}

/* "read_file: no such file 'x'" */
static int tool_path_error(ToolKind k, const char *path, int error, char **ret_output) {
        _cleanup_free_ char *m = NULL;
        int r;

        r = workspace_path_error(path, error, &m);
        if (r == -ENOMEM && error != -ENOMEM)
                return r;
        return tool_message(ret_output, error, "%s: %s", tool_kind_to_string(k), m);
}

static char *quote_short(const char *s) {
        return strshorten_line(strempty(s), 200);
}

/* ---- Schema ---- */

static json_object *schema_property(const char *type, const char *description) {
        json_object *p = json_object_new_object();
        if (!p)
                return NULL;
        if (json_add_string(p, "type", type) < 0 || json_add_string(p, "description", description) < 0) {
                json_object_put(p);
                return NULL;
        }
        return p;
}

typedef struct SchemaProperty {
        const char *name, *type, *description;
        bool required;
} SchemaProperty;

static json_object *schema_function(const char *name, const char *description,
                                    const SchemaProperty *props, size_t n_props) {
        _cleanup_json_ json_object *tool = json_object_new_object();
        json_object *function = json_object_new_object(), *params = json_object_new_object(),
                    *properties = json_object_new_object(), *required = json_object_new_array();

        /* Attach first, so that the cleanup of tool frees whatever exists. */
        if (!tool || !function || !params || !properties || !required) {
                json_object_put(function);
                json_object_put(params);
                json_object_put(properties);
                json_object_put(required);
                return NULL;
        }
        json_object_object_add(tool, "function", function);
        json_object_object_add(function, "parameters", params);
        json_object_object_add(params, "properties", properties);
        json_object_object_add(params, "required", required);

        if (json_add_string(tool, "type", "function") < 0 ||
            json_add_string(function, "name", name) < 0 ||
            json_add_string(function, "description", description) < 0 ||
            json_add_string(params, "type", "object") < 0)
                return NULL;
        json_object_object_add(params, "additionalProperties", json_object_new_boolean(false));

        for (size_t i = 0; i < n_props; i++) {
                json_object *p = schema_property(props[i].type, props[i].description);
                if (!p)
                        return NULL;
                json_object_object_add(properties, props[i].name, p);
                if (props[i].required)
                        json_object_array_add(required, json_object_new_string(props[i].name));
        }

        return TAKE_PTR(tool);
}

json_object *tools_schema(void) {
        static const SchemaProperty run_command[] = {
                { "command", "string", "The command line, run by /bin/sh -c in the workspace directory inside the "
                  "sandbox. No network access. Output (stdout and stderr) is returned, cut in the middle when long.", true },
                { "timeout_sec", "integer", "Optional time limit in seconds; the factory applies its own default "
                  "and maximum.", false },
        }, read_file[] = {
                { "path", "string", "File path relative to the workspace top, e.g. \"src/main.c\".", true },
                { "start_line", "integer", "Optional first line to show, 1-based.", false },
                { "end_line", "integer", "Optional last line to show, 1-based and inclusive.", false },
        }, write_file[] = {
                { "path", "string", "File path relative to the workspace top. Missing directories are created.", true },
                { "content", "string", "The complete new content of the file.", true },
        }, edit_file[] = {
                { "path", "string", "File path relative to the workspace top.", true },
                { "old_text", "string", "Text to replace. It must occur exactly once in the file, matching "
                  "whitespace and indentation exactly; include a few surrounding lines to make it unique. "
                  "Do not include the line numbers that read_file shows.", true },
                { "new_text", "string", "The replacement text (may be empty to delete old_text).", true },
        }, list_files[] = {
                { "path", "string", "Optional directory relative to the workspace top; the top when omitted.", false },
        }, search[] = {
                { "pattern", "string", "Text to look for, matched within single lines.", true },
                { "regex", "boolean", "Optional: when true, pattern is a POSIX extended regular expression "
                  "(like grep -E); otherwise it is a fixed string. Default false.", false },
                { "path", "string", "Optional directory or file to search, relative to the workspace top; "
                  "the whole workspace when omitted.", false },
        }, finish[] = {
                { "summary", "string", "What was changed and why, and the state of the tests, for the "
                  "person who reviews the work.", true },
        };
        static const struct {
                const char *name, *description;
                const SchemaProperty *props;
                size_t n_props;
        } table[] = {
                { "run_command", "Run a shell command in the workspace inside the sandbox, e.g. to build, "
                  "inspect or use git. Prefer the file tools for reading and changing files.",
                  run_command, ELEMENTSOF(run_command) },
                { "read_file", "Read a text file of the workspace. Lines are shown numbered as \"  12| text\"; the "
                  "numbers are not part of the file. Long files are cut; ask for more with start_line.",
                  read_file, ELEMENTSOF(read_file) },
                { "write_file", "Create a file or replace its whole content. For changes to part of an existing "
                  "file, prefer edit_file.", write_file, ELEMENTSOF(write_file) },
                { "edit_file", "Change part of a file: replace the one exact occurrence of old_text by new_text. "
                  "Fails, saying why, when old_text is not found or is found more than once.",
                  edit_file, ELEMENTSOF(edit_file) },
                { "list_files", "List files and directories recursively, one path a line relative to the workspace "
                  "top; directories end in \"/\", symlinks show their target. .git is not shown.",
                  list_files, ELEMENTSOF(list_files) },
                { "search", "Search the workspace's text files for a string or regular expression. Prints "
                  "\"path:line: text\" for each matching line.", search, ELEMENTSOF(search) },
                { "run_tests", "Run the project's test suite the way the factory is configured to, and return "
                  "the result and output.", NULL, 0 },
                { "finish", "Call once when the task is done (or cannot be done), with a summary. Ends the work "
                  "on this task.", finish, ELEMENTSOF(finish) },
        };

        _cleanup_json_ json_object *a = json_object_new_array();
        if (!a)
                return NULL;

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                json_object *f = schema_function(table[i].name, table[i].description, table[i].props, table[i].n_props);
                if (!f || json_object_array_add(a, f) < 0) {
                        json_object_put(f);
                        return NULL;
                }
        }

        return TAKE_PTR(a);
}

/* ---- Parsing tool calls ---- */

static const char *const tool_keys[_TOOL_KIND_MAX][4] = {
        [TOOL_RUN_COMMAND] = { "command", "timeout_sec" },
        [TOOL_READ_FILE] = { "path", "start_line", "end_line" },
        [TOOL_WRITE_FILE] = { "path", "content" },
        [TOOL_EDIT_FILE] = { "path", "old_text", "new_text" },
        [TOOL_LIST_FILES] = { "path" },
        [TOOL_SEARCH] = { "pattern", "regex", "path" },
        [TOOL_RUN_TESTS] = {},
        [TOOL_FINISH] = { "summary" },
};

_printf_(2, 3)
static int parse_error(char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        if (!ret_error)
                return -EINVAL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        if (!m)
                return -ENOMEM;
        utf8_sanitize(m, strlen(m));
        *ret_error = m;
        return -EINVAL;
}

static json_object *arg_lookup(json_object *o, const char *key) {
        json_object *v = NULL;

        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return NULL;
        return v;
}

static int arg_string(json_object *o, ToolKind k, const char *key, bool required, bool allow_empty,
                      size_t max, char **dst, char **ret_error) {
        const char *t = tool_kind_to_string(k);
        json_object *v = arg_lookup(o, key);

        if (!v) {
                if (required)
                        return parse_error(ret_error, "%s: '%s' is required", t, key);
                return 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return parse_error(ret_error, "%s: '%s' must be a string, not %s", t, key,
                                   json_type_to_name(json_object_get_type(v)));

        const char *s = json_object_get_string(v);
        size_t l = (size_t) json_object_get_string_len(v);
        if (memchr(s, '\0', l))
                return parse_error(ret_error, "%s: '%s' contains a NUL byte", t, key);
        if (l > max)
                return parse_error(ret_error, "%s: '%s' is too long (%zu bytes, at most %zu)", t, key, l, max);
        if (l == 0 && !allow_empty)
                return parse_error(ret_error, "%s: '%s' must not be empty", t, key);

        char *c = strdup(s);
        if (!c)
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

static int arg_uint(json_object *o, ToolKind k, const char *key, uint64_t min, uint64_t max,
                    uint64_t *dst, char **ret_error) {
        const char *t = tool_kind_to_string(k);
        json_object *v = arg_lookup(o, key);
        uint64_t u;

        if (!v)
                return 0;

        switch (json_object_get_type(v)) {
        case json_type_int:
                if (json_object_get_int64(v) < 0)
                        return parse_error(ret_error, "%s: '%s' must not be negative", t, key);
                u = json_object_get_uint64(v);
                break;
        case json_type_double: {
                /* 10.0 is an integer too; 1.5 is not. */
                double d = json_object_get_double(v);
                if (!(d >= 0 && d <= (double) max && d == (double) (uint64_t) d))
                        return parse_error(ret_error, "%s: '%s' must be a whole number", t, key);
                u = (uint64_t) d;
                break;
        }
        case json_type_string:
                /* Some models quote numbers; accept plain digits. */
                if (safe_atou64(json_object_get_string(v), &u) < 0)
                        return parse_error(ret_error, "%s: '%s' must be an integer", t, key);
                break;
        default:
                return parse_error(ret_error, "%s: '%s' must be an integer, not %s", t, key,
                                   json_type_to_name(json_object_get_type(v)));
        }

        if (u < min || u > max)
                return parse_error(ret_error, "%s: '%s' must be between %" PRIu64 " and %" PRIu64, t, key, min, max);

        *dst = u;
        return 0;
}

static int arg_bool(json_object *o, ToolKind k, const char *key, bool *dst, char **ret_error) {
        json_object *v = arg_lookup(o, key);

        if (!v)
                return 0;
        if (json_object_is_type(v, json_type_boolean)) {
                *dst = json_object_get_boolean(v);
                return 0;
        }
        if (json_object_is_type(v, json_type_string)) {
                int b = parse_boolean(json_object_get_string(v));
                if (b >= 0) {
                        *dst = b;
                        return 0;
                }
        }
        return parse_error(ret_error, "%s: '%s' must be true or false", tool_kind_to_string(k), key);
}

static int parse_arguments_object(const char *tool, const char *arguments, json_object **ret, char **ret_error) {
        _cleanup_json_ json_object *o = NULL;
        size_t l;
        int r;

        if (!arguments || arguments[strspn(arguments, " \t\r\n")] == '\0')
                arguments = "{}";
        l = strlen(arguments);
        if (l > TOOL_ARGUMENTS_MAX)
                return parse_error(ret_error, "%s: the arguments are too long (%zu bytes)", tool, l);

        r = json_parse_strict(arguments, l, &o);
        if (r < 0)
                return parse_error(ret_error, "%s: the arguments are not valid JSON; send one JSON object "
                                   "such as {\"path\": \"README.md\"}", tool);

        /* Tolerate an object that was encoded twice ("{\"path\":...}"). */
        if (json_object_is_type(o, json_type_string)) {
                _cleanup_json_ json_object *inner = NULL;
                const char *s = json_object_get_string(o);
                size_t sl = (size_t) json_object_get_string_len(o);

                if (json_parse_strict(s, sl, &inner) >= 0 && json_object_is_type(inner, json_type_object)) {
                        json_object_put(o);
                        o = TAKE_PTR(inner);
                }
        }

        if (!json_object_is_type(o, json_type_object))
                return parse_error(ret_error, "%s: the arguments must be a JSON object, not %s", tool,
                                   json_type_to_name(json_object_get_type(o)));

        *ret = TAKE_PTR(o);
        return 0;
}

static int check_known_keys(json_object *o, ToolKind k, char **ret_error) {
        const char *const *known = tool_keys[k];

        json_object_object_foreach(o, key, v) {
                bool found = false;
                (void) v;

                for (size_t i = 0; i < ELEMENTSOF(tool_keys[k]) && known[i]; i++)
                        if (streq(known[i], key))
                                found = true;
                if (found)
                        continue;

                _cleanup_free_ char *shown = quote_short(key);
                if (!shown)
                        return -ENOMEM;
                if (!known[0])
                        return parse_error(ret_error, "%s: unknown argument '%s'; this tool takes no arguments",
                                           tool_kind_to_string(k), shown);

                Buf list = {};
                for (size_t i = 0; i < ELEMENTSOF(tool_keys[k]) && known[i]; i++)
                        if (buf_printf(&list, "%s%s", i > 0 ? ", " : "", known[i]) < 0) {
                                buf_done(&list);
                                return -ENOMEM;
                        }
                int r = parse_error(ret_error, "%s: unknown argument '%s' (the arguments are: %s)",
                                    tool_kind_to_string(k), shown, list.s);
                buf_done(&list);
                return r;
        }
        return 0;
}

void tool_call_args_done(ToolCallArgs *a) {
        if (!a)
                return;
        free(a->command);
        free(a->path);
        free(a->content);
        free(a->old_text);
        free(a->new_text);
        free(a->pattern);
        free(a->summary);
        *a = (ToolCallArgs) { .kind = _TOOL_KIND_INVALID };
}

int tool_call_parse(const char *name, const char *arguments, ToolCallArgs *ret, char **ret_error) {
        _cleanup_(tool_call_args_done) ToolCallArgs a = { .kind = _TOOL_KIND_INVALID };
        _cleanup_json_ json_object *o = NULL;
        uint64_t u;
        ToolKind k;
        int r;

        assert(ret);

        /* Safe to _done() whatever happens. */
        *ret = (ToolCallArgs) { .kind = _TOOL_KIND_INVALID };
        if (ret_error)
                *ret_error = NULL;

        k = tool_kind_from_string(name);
        if (k < 0) {
                _cleanup_free_ char *shown = quote_short(name);
                if (!shown)
                        return -ENOMEM;
                return parse_error(ret_error, "unknown tool '%s'; the tools are: run_command, read_file, "
                                   "write_file, edit_file, list_files, search, run_tests, finish", shown);
        }
        a.kind = k;

        r = parse_arguments_object(name, arguments, &o, ret_error);
        if (r < 0)
                return r;
        r = check_known_keys(o, k, ret_error);
        if (r < 0)
                return r;

        switch (k) {
        case TOOL_RUN_COMMAND:
                r = arg_string(o, k, "command", true, false, TOOL_COMMAND_MAX, &a.command, ret_error);
                if (r >= 0)
                        r = arg_uint(o, k, "timeout_sec", 1, TOOL_TIMEOUT_MAX_SEC, &a.timeout_sec, ret_error);
                break;

        case TOOL_READ_FILE:
                r = arg_string(o, k, "path", true, false, PATH_MAX - 1, &a.path, ret_error);
                if (r >= 0) {
                        u = 0;
                        r = arg_uint(o, k, "start_line", 1, UINT_MAX, &u, ret_error);
                        a.start_line = (unsigned) u;
                }
                if (r >= 0) {
                        u = 0;
                        r = arg_uint(o, k, "end_line", 1, UINT_MAX, &u, ret_error);
                        a.end_line = (unsigned) u;
                }
                if (r >= 0 && a.start_line > 0 && a.end_line > 0 && a.end_line < a.start_line)
                        r = parse_error(ret_error, "read_file: end_line (%u) is before start_line (%u)",
                                        a.end_line, a.start_line);
                break;

        case TOOL_WRITE_FILE:
                r = arg_string(o, k, "path", true, false, PATH_MAX - 1, &a.path, ret_error);
                if (r >= 0)
                        r = arg_string(o, k, "content", true, true, TOOL_CONTENT_MAX, &a.content, ret_error);
                break;

        case TOOL_EDIT_FILE:
                r = arg_string(o, k, "path", true, false, PATH_MAX - 1, &a.path, ret_error);
                if (r >= 0) {
                        r = arg_string(o, k, "old_text", true, true, TOOL_CONTENT_MAX, &a.old_text, ret_error);
                        if (r >= 0 && isempty(a.old_text))
                                r = parse_error(ret_error, "edit_file: 'old_text' must not be empty; "
                                                "to create or overwrite a whole file use write_file");
                }
                if (r >= 0)
                        r = arg_string(o, k, "new_text", true, true, TOOL_CONTENT_MAX, &a.new_text, ret_error);
                if (r >= 0 && streq(a.old_text, a.new_text))
                        r = parse_error(ret_error, "edit_file: 'old_text' and 'new_text' are the same; nothing would change");
                break;

        case TOOL_LIST_FILES:
                /* An empty path means the top, as an omitted one does. */
                r = arg_string(o, k, "path", false, true, PATH_MAX - 1, &a.path, ret_error);
                break;

        case TOOL_SEARCH:
                r = arg_string(o, k, "pattern", true, false, TOOL_PATTERN_MAX, &a.pattern, ret_error);
                if (r >= 0)
                        r = arg_bool(o, k, "regex", &a.regex, ret_error);
                if (r >= 0)
                        r = arg_string(o, k, "path", false, true, PATH_MAX - 1, &a.path, ret_error);
                break;

        case TOOL_RUN_TESTS:
                r = 0;
                break;

        case TOOL_FINISH:
                r = arg_string(o, k, "summary", true, false, TOOL_SUMMARY_MAX, &a.summary, ret_error);
                break;

        default:
                assert(false);
                r = -EINVAL;
        }
        if (r < 0)
                return r;

        if (a.path && a.path[0] == '\0')
                a.path = mfree_ptr(a.path);

        *ret = a;
        a = (ToolCallArgs) { .kind = _TOOL_KIND_INVALID };
        return 0;
}

/* ---- Output bounds ---- */

static size_t utf8_back(const char *s, size_t i) {
        while (i > 0 && ((unsigned char) s[i] & 0xC0) == 0x80)
                i--;
        return i;
}

static size_t utf8_forward(const char *s, size_t i, size_t n) {
        while (i < n && ((unsigned char) s[i] & 0xC0) == 0x80)
                i++;
        return i;
}

int tool_output_bound(char **text, size_t max) {
        char *s = *text, note[64];
        size_t n = strlen(s), budget, h, t0;
        const char *nl;

        if (n <= max)
                return 0;

        if (max < 128) {
                s[utf8_back(s, max)] = '\0';
                return 0;
        }

        /* 48 bytes hold the note with the widest number and two newlines. */
        budget = max - 48;
        h = utf8_back(s, budget / 2);
        nl = memrchr(s, '\n', h);
        if (nl && (size_t) (nl - s + 1) >= h - h / 4)
                h = (size_t) (nl - s) + 1;

        t0 = utf8_forward(s, n - (budget - budget / 2), n);
        nl = memchr(s + t0, '\n', n - t0);
        if (nl && (size_t) (nl - (s + t0)) <= (budget - budget / 2) / 4)
                t0 = (size_t) (nl - s) + 1;

        snprintf(note, sizeof(note), "[... %zu bytes cut ...]", t0 - h);

        Buf b = {};
        if (buf_append(&b, s, h) < 0 ||
            buf_printf(&b, "%s%s\n", h > 0 && s[h - 1] != '\n' ? "\n" : "", note) < 0 ||
            buf_append(&b, s + t0, n - t0) < 0) {
                buf_done(&b);
                return -ENOMEM;
        }

        free(*text);
        *text = b.s;
        return 0;
}

/* Reads at most max bytes of fd; *ret_truncated tells whether there was more. */
static int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size, bool *ret_truncated) {
        Buf b = {};
        char chunk[65536];
        bool truncated = false;

        for (;;) {
                size_t want = MIN(sizeof(chunk), max - b.n + 1);
                ssize_t k = read(fd, chunk, want);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        buf_done(&b);
                        return -errno;
                }
                if (k == 0)
                        break;
                if (b.n + (size_t) k > max) {
                        k = (ssize_t) (max - b.n);
                        truncated = true;
                }
                if (buf_append(&b, chunk, (size_t) k) < 0) {
                        buf_done(&b);
                        return -ENOMEM;
                }
                if (truncated)
                        break;
        }
        if (!b.s && buf_append(&b, "", 0) < 0)
                return -ENOMEM;

        *ret = b.s;
        *ret_size = b.n;
        if (ret_truncated)
                *ret_truncated = truncated;
        return 0;
}

static bool looks_binary(const char *s, size_t n) {
        return memchr(s, '\0', n) != NULL;
}

static unsigned count_lines(const char *s, size_t n) {
        unsigned lines = 0;

        for (const char *p = s; (p = memchr(p, '\n', n - (size_t) (p - s))); p++)
                lines++;
        if (n > 0 && s[n - 1] != '\n')
                lines++;
        return lines;
}

static unsigned line_of_offset(const char *s, size_t offset) {
        unsigned line = 1;

        for (size_t i = 0; i < offset; i++)
                if (s[i] == '\n')
                        line++;
        return line;
}

/* ---- read_file ---- */

int tool_read_file(int ws_fd, const ToolCallArgs *a, size_t max_output, char **ret_output) {
        _cleanup_free_ char *data = NULL, *shown = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool truncated;
        struct stat st;
        size_t size;
        int r;

        assert(a);
        assert(ret_output);

        r = workspace_open(ws_fd, a->path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd);
        if (r < 0)
                return tool_path_error(TOOL_READ_FILE, a->path, r, ret_output);
        if (fstat(fd, &st) < 0)
                return tool_path_error(TOOL_READ_FILE, a->path, -errno, ret_output);

        shown = quote_short(a->path);
        if (!shown)
                return -ENOMEM;

        if (S_ISDIR(st.st_mode))
                return tool_message(ret_output, -EISDIR, "read_file: '%s' is a directory; use list_files to see "
                                  "what it contains", shown);
        if (!S_ISREG(st.st_mode))
                return tool_message(ret_output, -EBADFD, "read_file: '%s' is not a regular file", shown);

        r = read_fd_bounded(fd, READ_FILE_MAX_BYTES, &data, &size, &truncated);
        if (r < 0)
                return tool_path_error(TOOL_READ_FILE, a->path, r, ret_output);

        if (looks_binary(data, size))
                return tool_message(ret_output, -EMEDIUMTYPE, "read_file: '%s' is a binary file (it contains NUL "
                                  "bytes, %jd bytes in all); it is not shown", shown, (intmax_t) st.st_size);

        unsigned total = count_lines(data, size);
        if (total == 0)
                return tool_message(ret_output, 0, "'%s' is empty", shown);

        unsigned first = a->start_line > 0 ? a->start_line : 1;
        unsigned last = a->end_line > 0 ? MIN(a->end_line, total) : total;
        if (first > total)
                return tool_message(ret_output, -ERANGE, "read_file: start_line %u is past the end of '%s', "
                                  "which has %u lines%s", first, shown, total,
                                  truncated ? " in the part that is read" : "");

        /* Room kept at the end for the note. */
        size_t reserve = 160, budget = max_output > reserve * 2 ? max_output - reserve : max_output / 2;
        _cleanup_(buf_done) Buf b = {};
        const char *p = data, *end = data + size;
        unsigned line = 1, shown_last = 0;

        for (; line < first; line++)
                p = memchr(p, '\n', (size_t) (end - p)) + 1;

        for (; line <= last; line++) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
                char prefix[24];
                int pl = snprintf(prefix, sizeof(prefix), "%4u| ", line);

                if (b.n + (size_t) pl + l + 1 > budget) {
                        if (shown_last == 0) {
                                /* One line longer than all the room: show its start. */
                                size_t room = budget > b.n + (size_t) pl ? budget - b.n - (size_t) pl : 0;
                                room = utf8_back(p, MIN(room, l));
                                if (buf_append(&b, prefix, (size_t) pl) < 0 || buf_append(&b, p, room) < 0 ||
                                    buf_printf(&b, "\n[... line %u is %zu bytes long; the rest of it is cut ...]\n",
                                               line, l) < 0)
                                        return -ENOMEM;
                                shown_last = line;
                                line++;
                        }
                        break;
                }

                if (buf_append(&b, prefix, (size_t) pl) < 0 || buf_append(&b, p, l) < 0 || buf_append(&b, "\n", 1) < 0)
                        return -ENOMEM;
                shown_last = line;
                p = nl ? nl + 1 : end;
        }

        if (shown_last < last) {
                if (buf_printf(&b, "[... output cut: lines %u-%u of %u shown; call read_file with start_line=%u to "
                               "read on ...]\n", first, shown_last, total, shown_last + 1) < 0)
                        return -ENOMEM;
        } else if (first > 1 || last < total) {
                if (buf_printf(&b, "[lines %u-%u of %u]\n", first, last, total) < 0)
                        return -ENOMEM;
        }
        if (truncated &&
            buf_printf(&b, "[the file is %jd bytes; only the first %u MiB were read]\n",
                       (intmax_t) st.st_size, READ_FILE_MAX_BYTES / (1024U * 1024U)) < 0)
                return -ENOMEM;

        return buf_steal(&b, ret_output);
}

/* ---- write_file and edit_file ---- */

/* Looks at the entry a write would replace: refuses what must not be
 * replaced and returns the mode to keep (0644 for a new file). */
static int check_write_target(int dir_fd, const char *name, ToolKind k, const char *path,
                              bool must_exist, mode_t *ret_mode, char **ret_output) {
        struct stat st;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT || must_exist)
                        return tool_path_error(k, path, -errno, ret_output);
                *ret_mode = 0644;
                return 0;
        }

        _cleanup_free_ char *shown = quote_short(path);
        if (!shown)
                return -ENOMEM;

        /* SECURITY: the rename would replace a symlink rather than write
         * through it, which is safe, but surprising: refuse it clearly. */
        if (S_ISLNK(st.st_mode))
                return tool_message(ret_output, -ELOOP, "%s: '%s' is a symlink; the tools do not write through "
                                  "symlinks (write to the file it points to, if that is in the workspace)",
                                  tool_kind_to_string(k), shown);
        if (S_ISDIR(st.st_mode))
                return tool_message(ret_output, -EISDIR, "%s: '%s' is a directory", tool_kind_to_string(k), shown);
        if (!S_ISREG(st.st_mode))
                return tool_message(ret_output, -EBADFD, "%s: '%s' is not a regular file", tool_kind_to_string(k), shown);

        /* Keep the permission bits (an executable script stays one), but
         * never set-id bits. */
        *ret_mode = st.st_mode & 0777;
        return 1;
}

static int write_replace(int dir_fd, const char *name, ToolKind k, const char *path,
                         const char *data, size_t size, mode_t mode, char **ret_output) {
        int r;

        /* write_file_atomic() needs room for its temporary name. */
        if (strlen(name) > 200)
                return tool_path_error(k, path, -ENAMETOOLONG, ret_output);

        r = write_file_atomic(dir_fd, name, data, size, mode);
        if (r < 0)
                return tool_path_error(k, path, r, ret_output);
        return 0;
}

int tool_write_file(int ws_fd, const ToolCallArgs *a, size_t max_file, char **ret_output) {
        _cleanup_free_ char *name = NULL, *shown = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        size_t size;
        mode_t mode;
        int r, existed;

        assert(a);
        assert(ret_output);

        shown = quote_short(a->path);
        if (!shown)
                return -ENOMEM;

        size = strlen(strempty(a->content));
        if (size > max_file)
                return tool_message(ret_output, -EFBIG, "write_file: the content for '%s' is %zu bytes, more than "
                                  "the limit of %zu", shown, size, max_file);

        r = workspace_open_parent(ws_fd, a->path, true, &dir_fd, &name);
        if (r < 0)
                return tool_path_error(TOOL_WRITE_FILE, a->path, r, ret_output);

        existed = check_write_target(dir_fd, name, TOOL_WRITE_FILE, a->path, false, &mode, ret_output);
        if (existed < 0)
                return existed;

        r = write_replace(dir_fd, name, TOOL_WRITE_FILE, a->path, strempty(a->content), size, mode, ret_output);
        if (r < 0)
                return r;

        return tool_message(ret_output, 0, "wrote '%s' (%zu bytes, %u lines, %s)", shown, size,
                          count_lines(strempty(a->content), size), existed ? "replaced" : "new file");
}

int tool_edit_file(int ws_fd, const ToolCallArgs *a, size_t max_file, char **ret_output) {
        _cleanup_free_ char *name = NULL, *shown = NULL, *data = NULL, *out = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        size_t size, ol, nl;
        mode_t mode;
        int r;

        assert(a);
        assert(ret_output);

        shown = quote_short(a->path);
        if (!shown)
                return -ENOMEM;
        if (isempty(a->old_text))
                return tool_message(ret_output, -EINVAL, "edit_file: 'old_text' must not be empty");

        r = workspace_open_parent(ws_fd, a->path, false, &dir_fd, &name);
        if (r < 0)
                return tool_path_error(TOOL_EDIT_FILE, a->path, r, ret_output);

        r = check_write_target(dir_fd, name, TOOL_EDIT_FILE, a->path, true, &mode, ret_output);
        if (r < 0)
                return r;

        r = read_file_at(dir_fd, name, max_file, &data, &size);
        if (r == -EFBIG)
                return tool_message(ret_output, r, "edit_file: '%s' is bigger than the limit of %zu bytes", shown, max_file);
        if (r < 0)
                return tool_path_error(TOOL_EDIT_FILE, a->path, r, ret_output);
        if (looks_binary(data, size))
                return tool_message(ret_output, -EMEDIUMTYPE, "edit_file: '%s' is a binary file", shown);

        /* Count every occurrence, overlapping ones too: "aa" in "aaa" is
         * ambiguous. Remember the lines of the first few for the message. */
        ol = strlen(a->old_text);
        nl = strlen(strempty(a->new_text));
        unsigned count = 0, lines[8];
        const char *first = NULL;
        for (const char *p = data; (p = strstr(p, a->old_text)); p++) {
                if (count < ELEMENTSOF(lines))
                        lines[count] = line_of_offset(data, (size_t) (p - data));
                if (!first)
                        first = p;
                count++;
        }

        if (count == 0)
                return tool_message(ret_output, -ENODATA, "edit_file: old_text was not found in '%s'. It must match "
                                  "the file exactly, including whitespace, indentation and line breaks, and must "
                                  "not include the line numbers read_file shows; read the file again and copy the "
                                  "text%s", shown,
                                  strstr(data, "\r\n") && !strchr(a->old_text, '\r') ?
                                  " (note: the file has CRLF line endings, \\r\\n)" : "");
        if (count > 1) {
                _cleanup_(buf_done) Buf where = {};
                for (unsigned i = 0; i < MIN(count, (unsigned) ELEMENTSOF(lines)); i++)
                        if (buf_printf(&where, "%s%u", i > 0 ? ", " : "", lines[i]) < 0)
                                return -ENOMEM;
                return tool_message(ret_output, -ENOTUNIQ, "edit_file: old_text occurs %u times in '%s' (at lines "
                                  "%s%s); it must occur exactly once: include more of the surrounding lines",
                                  count, shown, where.s, count > ELEMENTSOF(lines) ? ", ..." : "");
        }

        size_t offset = (size_t) (first - data), new_size = size - ol + nl;
        if (new_size > max_file)
                return tool_message(ret_output, -EFBIG, "edit_file: '%s' would become %zu bytes, more than the "
                                  "limit of %zu", shown, new_size, max_file);

        out = malloc(new_size + 1);
        if (!out)
                return -ENOMEM;
        memcpy(out, data, offset);
        memcpy(out + offset, strempty(a->new_text), nl);
        memcpy(out + offset + nl, data + offset + ol, size - offset - ol);
        out[new_size] = '\0';

        r = write_replace(dir_fd, name, TOOL_EDIT_FILE, a->path, out, new_size, mode, ret_output);
        if (r < 0)
                return r;

        unsigned at = line_of_offset(data, offset);
        return tool_message(ret_output, 0, "edited '%s': replaced %u line%s at line %u with %u line%s", shown,
                          count_lines(a->old_text, ol), count_lines(a->old_text, ol) == 1 ? "" : "s", at,
                          count_lines(strempty(a->new_text), nl), count_lines(strempty(a->new_text), nl) == 1 ? "" : "s");
}

/* ---- Directory walks ---- */

/* Directories of generated or downloaded files: listed, not descended when
 * met during a walk (naming them as the path still works). */
static bool dir_is_bulky(const char *name) {
        static const char *const table[] = {
                "node_modules", "bower_components", "__pycache__", ".venv", "venv", ".tox", ".nox",
                ".mypy_cache", ".pytest_cache", ".ruff_cache", ".gradle", ".next", ".cache", "target", "vendor",
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(name, table[i]))
                        return true;
        return false;
}

#define WALK_STOP 1
#define WALK_NO_DESCEND 2

typedef struct Walk Walk;
struct Walk {
        dev_t dev;
        unsigned max_depth;
        unsigned visited;
        bool too_many;
        /* Called for each entry, sorted per directory, parents before their
         * children. Returns <0 to fail, WALK_STOP or WALK_NO_DESCEND. */
        int (*entry)(Walk *w, int dir_fd, const char *name, const char *relpath, const struct stat *st, unsigned depth);
        void *userdata;
};

static int name_compare(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void names_free(char ***names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free((*names)[i]);
        *names = mfree_ptr(*names);
}

/* Takes ownership of fd. SECURITY: each level is opened with O_NOFOLLOW |
 * O_DIRECTORY relative to its parent, symlinks are never descended, nor are
 * other file systems, and depth and entries are bounded. */
static int walk_dir(Walk *w, int fd, const char *prefix, unsigned depth) {
        _cleanup_free_ char **names = NULL;
        size_t n = 0, allocated = 0;
        DIR *d;
        int r = 0;

        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }

        for (struct dirent *de; (de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                /* SECURITY: the repository metadata is never shown or searched. */
                if (strcasecmp(de->d_name, ".git") == 0)
                        continue;
                if (n >= WALK_DIR_ENTRIES_MAX) {
                        w->too_many = true;
                        break;
                }
                if (n >= allocated) {
                        size_t na = MAX(allocated * 2, (size_t) 64);
                        char **t = realloc(names, na * sizeof(char *));
                        if (!t) {
                                r = -ENOMEM;
                                break;
                        }
                        names = t;
                        allocated = na;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }

        /* An empty directory has no array at all: qsort() must not see NULL. */
        if (r >= 0 && n > 0)
                qsort(names, n, sizeof(char *), name_compare);

        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *rel = NULL;
                struct stat st;

                if (++w->visited > WALK_VISITS_MAX) {
                        w->too_many = true;
                        r = WALK_STOP;
                        break;
                }
                if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;

                if (streq(prefix, "."))
                        rel = strdup(names[i]);
                else if (asprintf(&rel, "%s/%s", prefix, names[i]) < 0)
                        rel = NULL;
                if (!rel) {
                        r = -ENOMEM;
                        break;
                }

                r = w->entry(w, dirfd(d), names[i], rel, &st, depth);
                if (r < 0 || r == WALK_STOP)
                        break;
                if (!S_ISDIR(st.st_mode) || r == WALK_NO_DESCEND || st.st_dev != w->dev || depth + 1 >= w->max_depth) {
                        r = 0;
                        continue;
                }

                int child = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                if (child < 0) {
                        r = 0;
                        continue;
                }
                /* The entry may have been swapped since fstatat(): check
                 * what was opened, not what was looked at. */
                struct stat cst;
                if (fstat(child, &cst) < 0 || cst.st_dev != w->dev) {
                        safe_close(child);
                        r = 0;
                        continue;
                }
                r = walk_dir(w, child, rel, depth + 1);
                if (r < 0 || r == WALK_STOP)
                        break;
                r = 0;
        }

        names_free(&names, n);
        closedir(d);
        return r;
}

/* Opens the directory (or, when allow_file, the file) a walk starts from. */
static int walk_open_start(int ws_fd, ToolKind k, const char *path, bool allow_file,
                           int *ret_fd, struct stat *ret_st, char **ret_prefix, char **ret_output) {
        _cleanup_free_ char *prefix = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        path = path ?: ".";

        r = workspace_path_normalize(path, &prefix);
        if (r >= 0)
                r = workspace_open(ws_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | (allow_file ? 0 : O_DIRECTORY), 0, &fd);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOTDIR && !allow_file) {
                _cleanup_free_ char *shown = quote_short(path);
                if (!shown)
                        return -ENOMEM;
                return tool_message(ret_output, r, "%s: '%s' is not a directory; use read_file for files",
                                  tool_kind_to_string(k), shown);
        }
        if (r < 0)
                return tool_path_error(k, path, r, ret_output);

        if (fstat(fd, ret_st) < 0)
                return tool_path_error(k, path, -errno, ret_output);

        /* SECURITY: the walks skip .git by name; a symlink to it given as
         * the start must not list or search it either. */
        if (S_ISDIR(ret_st->st_mode)) {
                r = workspace_dir_in_git(ws_fd, fd);
                if (r < 0)
                        return tool_path_error(k, path, r, ret_output);
                if (r > 0)
                        return tool_path_error(k, path, -EPERM, ret_output);
        }

        *ret_fd = TAKE_FD(fd);
        *ret_prefix = TAKE_PTR(prefix);
        return 0;
}

static int readlink_shown(int dir_fd, const char *name, char **ret) {
        char target[PATH_MAX];
        ssize_t l = readlinkat(dir_fd, name, target, sizeof(target) - 1);
        if (l < 0)
                l = 0;
        target[l] = '\0';
        *ret = strshorten_line(target, SYMLINK_TARGET_SHOWN);
        return *ret ? 0 : -ENOMEM;
}

/* ---- list_files ---- */

typedef struct ListContext {
        Buf out;
        unsigned n, max_entries;
        size_t max_output;
        bool cut;
} ListContext;

static int list_entry(Walk *w, int dir_fd, const char *name, const char *relpath, const struct stat *st, unsigned depth) {
        ListContext *c = w->userdata;
        int r;

        if (c->n >= c->max_entries || c->out.n >= c->max_output) {
                c->cut = true;
                return WALK_STOP;
        }
        c->n++;

        if (S_ISLNK(st->st_mode)) {
                _cleanup_free_ char *target = NULL;
                r = readlink_shown(dir_fd, name, &target);
                if (r < 0)
                        return r;
                return buf_printf(&c->out, "%s -> %s\n", relpath, target);
        }
        if (S_ISDIR(st->st_mode)) {
                if (dir_is_bulky(name)) {
                        r = buf_printf(&c->out, "%s/ (not listed; name it as the path to see inside)\n", relpath);
                        return r < 0 ? r : WALK_NO_DESCEND;
                }
                return buf_printf(&c->out, "%s/\n", relpath);
        }
        return buf_printf(&c->out, "%s\n", relpath);
}

int tool_list_files(int ws_fd, const ToolCallArgs *a, unsigned max_entries, size_t max_output, char **ret_output) {
        _cleanup_free_ char *prefix = NULL;
        ListContext c = { .max_entries = max_entries, .max_output = max_output };
        struct stat st;
        int fd, r;

        assert(a);
        assert(ret_output);

        r = walk_open_start(ws_fd, TOOL_LIST_FILES, a->path, false, &fd, &st, &prefix, ret_output);
        if (r < 0)
                return r;

        Walk w = { .dev = st.st_dev, .max_depth = LIST_MAX_DEPTH, .entry = list_entry, .userdata = &c };
        r = walk_dir(&w, fd, prefix, 0);
        if (r < 0) {
                buf_done(&c.out);
                return r == -ENOMEM ? r : tool_path_error(TOOL_LIST_FILES, a->path, r, ret_output);
        }

        if (c.n == 0)
                r = buf_printf(&c.out, "(%s is empty)\n", streq(prefix, ".") ? "the workspace" : "the directory");
        else if (c.cut || w.too_many)
                r = buf_printf(&c.out, "[... listing cut after %u entries; list a subdirectory to see more ...]\n", c.n);
        if (r < 0) {
                buf_done(&c.out);
                return r;
        }

        r = buf_steal(&c.out, ret_output);
        if (r < 0)
                return r;
        return tool_output_bound(ret_output, max_output);
}

/* ---- search ---- */

typedef struct SearchContext {
        const ToolCallArgs *args;
        regex_t regex;
        size_t pattern_len;
        Buf out;
        unsigned matches, max_matches, files;
        size_t max_output, scanned;
        bool cut;
} SearchContext;

static bool search_line_matches(SearchContext *c, char *line, size_t l) {
        if (!c->args->regex)
                return memmem(line, l, c->args->pattern, c->pattern_len) != NULL;

        /* regexec() wants a string: end the line there for the moment. */
        char saved = line[l];
        line[l] = '\0';
        bool m = regexec(&c->regex, line, 0, NULL, 0) == 0;
        line[l] = saved;
        return m;
}

/* Searches the file open as fd. Returns WALK_STOP once enough is found. */
static int search_fd(SearchContext *c, int fd, const char *relpath) {
        _cleanup_free_ char *data = NULL;
        struct stat st;
        size_t size;
        int r;

        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SEARCH_FILE_MAX_BYTES)
                return 0;
        if (c->scanned >= SEARCH_TOTAL_MAX_BYTES) {
                c->cut = true;
                return WALK_STOP;
        }

        r = read_fd_bounded(fd, SEARCH_FILE_MAX_BYTES, &data, &size, NULL);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        c->scanned += size;
        c->files++;
        if (looks_binary(data, size))
                return 0;

        unsigned line = 1;
        for (char *p = data, *end = data + size; p < end; line++) {
                char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);

                if (search_line_matches(c, p, l)) {
                        if (c->matches >= c->max_matches || c->out.n >= c->max_output) {
                                c->cut = true;
                                return WALK_STOP;
                        }
                        c->matches++;

                        char saved = p[l];
                        p[l] = '\0';
                        _cleanup_free_ char *text = strshorten_line(p, SEARCH_LINE_SHOWN);
                        p[l] = saved;
                        if (!text)
                                return -ENOMEM;
                        r = buf_printf(&c->out, "%s:%u: %s\n", relpath, line, text);
                        if (r < 0)
                                return r;
                }
                p = nl ? nl + 1 : end;
        }
        return 0;
}

static int search_entry(Walk *w, int dir_fd, const char *name, const char *relpath, const struct stat *st, unsigned depth) {
        SearchContext *c = w->userdata;

        if (S_ISDIR(st->st_mode))
                return dir_is_bulky(name) ? WALK_NO_DESCEND : 0;
        /* SECURITY: symlinks are skipped, never followed; their targets
         * inside the workspace are searched under their own names. */
        if (!S_ISREG(st->st_mode) || st->st_size > SEARCH_FILE_MAX_BYTES)
                return 0;

        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        return search_fd(c, fd, relpath);
}

int tool_search(int ws_fd, const ToolCallArgs *a, unsigned max_matches, size_t max_output, char **ret_output) {
        _cleanup_free_ char *prefix = NULL, *shown = NULL;
        SearchContext c = { .args = a, .max_matches = max_matches, .max_output = max_output };
        _cleanup_close_ int fd = -EBADF;
        bool compiled = false;
        struct stat st;
        int r;

        assert(a);
        assert(ret_output);

        if (isempty(a->pattern))
                return tool_message(ret_output, -EINVAL, "search: 'pattern' must not be empty");
        shown = quote_short(a->pattern);
        if (!shown)
                return -ENOMEM;
        c.pattern_len = strlen(a->pattern);

        if (a->regex) {
                r = regcomp(&c.regex, a->pattern, REG_EXTENDED | REG_NEWLINE | REG_NOSUB);
                if (r != 0) {
                        char e[256];
                        regerror(r, &c.regex, e, sizeof(e));
                        return tool_message(ret_output, -EINVAL, "search: '%s' is not a valid extended regular "
                                          "expression: %s", shown, e);
                }
                compiled = true;
        }

        r = walk_open_start(ws_fd, TOOL_SEARCH, a->path, true, &fd, &st, &prefix, ret_output);
        if (r >= 0) {
                if (S_ISDIR(st.st_mode)) {
                        Walk w = { .dev = st.st_dev, .max_depth = LIST_MAX_DEPTH, .entry = search_entry, .userdata = &c };
                        r = walk_dir(&w, TAKE_FD(fd), prefix, 0);
                        if (w.too_many)
                                c.cut = true;
                } else if (S_ISREG(st.st_mode))
                        r = search_fd(&c, fd, prefix);
                else
                        r = tool_message(ret_output, -EBADFD, "search: '%s' is not a regular file or directory", prefix);
        }
        if (compiled)
                regfree(&c.regex);
        if (r < 0) {
                buf_done(&c.out);
                return r;
        }

        if (c.matches == 0)
                r = buf_printf(&c.out, "no matches for '%s' (%u file%s searched)\n", shown, c.files, c.files == 1 ? "" : "s");
        else if (c.cut)
                r = buf_printf(&c.out, "[... search stopped after %u matches; narrow the pattern or the path ...]\n", c.matches);
        if (r < 0) {
                buf_done(&c.out);
                return r;
        }

        r = buf_steal(&c.out, ret_output);
        if (r < 0)
                return r;
        return tool_output_bound(ret_output, max_output);
}

/* ---- For the system prompt ---- */

typedef struct TreeContext {
        Buf out;
        unsigned n, max_entries;
        bool cut;
} TreeContext;

static int tree_entry(Walk *w, int dir_fd, const char *name, const char *relpath, const struct stat *st, unsigned depth) {
        TreeContext *c = w->userdata;
        int r;

        if (c->n >= c->max_entries) {
                c->cut = true;
                return WALK_STOP;
        }
        c->n++;

        for (unsigned i = 0; i < depth; i++)
                if (buf_puts(&c->out, "  ") < 0)
                        return -ENOMEM;

        if (S_ISLNK(st->st_mode)) {
                _cleanup_free_ char *target = NULL;
                r = readlink_shown(dir_fd, name, &target);
                if (r < 0)
                        return r;
                return buf_printf(&c->out, "%s -> %s\n", name, target);
        }
        if (S_ISDIR(st->st_mode)) {
                if (dir_is_bulky(name)) {
                        r = buf_printf(&c->out, "%s/ (not shown)\n", name);
                        return r < 0 ? r : WALK_NO_DESCEND;
                }
                return buf_printf(&c->out, "%s/\n", name);
        }
        return buf_printf(&c->out, "%s\n", name);
}

int workspace_tree(int ws_fd, unsigned max_entries, char **ret) {
        TreeContext c = { .max_entries = max_entries };
        struct stat st;
        int fd, r;

        assert(ret);

        r = workspace_open(ws_fd, ".", O_RDONLY | O_DIRECTORY, 0, &fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                safe_close(fd);
                return r;
        }

        Walk w = { .dev = st.st_dev, .max_depth = TREE_MAX_DEPTH, .entry = tree_entry, .userdata = &c };
        r = walk_dir(&w, fd, ".", 0);
        if (r >= 0 && (c.cut || w.too_many))
                r = buf_printf(&c.out, "[... tree cut after %u entries ...]\n", c.n);
        if (r < 0) {
                buf_done(&c.out);
                return r;
        }
        return buf_steal(&c.out, ret);
}

typedef struct StringPair {
        char *s[2];
} StringPair;

static void strings_free(StringPair *p) {
        free(p->s[0]);
        free(p->s[1]);
}

int workspace_agent_instructions(int ws_fd, size_t max, char **ret) {
        static const char *const names[] = { "AGENTS.md", ".agentfab.md" };
        _cleanup_(strings_free) StringPair texts = {};
        bool truncated[ELEMENTSOF(names)] = {};
        size_t found = 0;
        int r;

        assert(ret);

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                _cleanup_close_ int fd = -EBADF;
                struct stat st;
                size_t size;

                r = workspace_open(ws_fd, names[i], O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;

                r = read_fd_bounded(fd, max, &texts.s[i], &size, &truncated[i]);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        continue;
                found++;
        }

        if (found == 0) {
                *ret = NULL;
                return 0;
        }

        _cleanup_(buf_done) Buf b = {};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                if (!texts.s[i])
                        continue;
                if (found > 1 && buf_printf(&b, "%s# %s\n\n", b.n > 0 ? "\n" : "", names[i]) < 0)
                        return -ENOMEM;
                if (buf_puts(&b, texts.s[i]) < 0)
                        return -ENOMEM;
                if (truncated[i] && buf_printf(&b, "\n[... %s cut at %zu bytes ...]\n", names[i], max) < 0)
                        return -ENOMEM;
        }

        /* Both together may still be twice max: cut the whole. */
        r = buf_steal(&b, ret);
        if (r < 0)
                return r;
        return tool_output_bound(ret, max);
}
