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
#include "tools-internal.h"
#include "tools.h"
#include "workspace-path.h"

/* The calls the model may make: their JSON schema, and their arguments read
 * strictly (known keys only, typed, bounded). */

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
                { "old_text", "string", "Text to replace, copied from the file. It must occur once in the file; "
                  "include a few surrounding lines to make it unique. Do not include the line numbers that "
                  "read_file shows.", true },
                { "new_text", "string", "The replacement text (may be empty to delete old_text).", true },
                { "replace_all", "boolean", "Optional: when true, replace every exact occurrence of old_text "
                  "instead of requiring one. Default false.", false },
        }, apply_patch[] = {
                { "patch", "string", "The patch. Codex format: \"*** Begin Patch\", then per file \"*** Update "
                  "File: PATH\" followed by hunks (an optional \"@@ line to find first\", then lines starting with "
                  "' ' for context, '-' to remove, '+' to add), \"*** Add File: PATH\" followed by the content as "
                  "'+' lines, or \"*** Delete File: PATH\"; then \"*** End Patch\". A unified diff (\"--- a/PATH\", "
                  "\"+++ b/PATH\", \"@@ -l,n +l,n @@\") is accepted too.", true },
        }, list_files[] = {
                { "path", "string", "Optional directory relative to the workspace top; the top when omitted.", false },
        }, search[] = {
                { "pattern", "string", "Text to look for, matched within single lines.", true },
                { "regex", "boolean", "Optional: when true, pattern is a POSIX extended regular expression "
                  "(like grep -E); otherwise it is a fixed string. Default false.", false },
                { "path", "string", "Optional directory or file to search, relative to the workspace top; "
                  "the whole workspace when omitted.", false },
        }, keep_file[] = {
                { "path", "string", "The file, relative to the workspace top.", true },
                { "reason", "string", "Why it belongs to the change, for the commit and the person who reviews it.",
                  true },
        }, finish[] = {
                { "summary", "string", "What was changed and why, and the state of the tests, for the "
                  "person who reviews the work; when you give up, why the task cannot be done.", true },
                { "cannot_complete", "boolean", "Optional: true to give up honestly, when you cannot do the task "
                  "(it is impossible as asked, or blocked by something outside the workspace, such as tests that "
                  "fail for reasons unrelated to it). The tests are not run; the task stops for a person, who "
                  "reads the summary and may amend the task, let you go on, or cancel it. Default false.", false },
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
                { "edit_file", "Change part of a file: replace the one occurrence of old_text by new_text. When "
                  "old_text does not match exactly, differences in line endings, trailing whitespace, indentation "
                  "(new_text is then re-indented to the file's), quotes and dashes are tolerated. Fails, saying "
                  "why and showing the nearest lines, when old_text is not found, and when it is found more than "
                  "once. Shows the changed lines.", edit_file, ELEMENTSOF(edit_file) },
                { "apply_patch", "Change several files at once, all or nothing: update parts of files, add, "
                  "delete or move files. Context lines are matched as edit_file matches old_text; line numbers "
                  "are only hints. If any part fails, no file is changed and every problem is reported.",
                  apply_patch, ELEMENTSOF(apply_patch) },
                { "list_files", "List files and directories recursively, one path a line relative to the workspace "
                  "top; directories end in \"/\", symlinks show their target. .git is not shown.",
                  list_files, ELEMENTSOF(list_files) },
                { "search", "Search the workspace's text files for a string or regular expression. Prints "
                  "\"path:line: text\" for each matching line.", search, ELEMENTSOF(search) },
                { "run_tests", "Run the project's test suite the way the factory is configured to, and return "
                  "the result and output.", NULL, 0 },
                { "finish", "Call once when the task is done, with a summary: it runs the tests and is accepted "
                  "when nothing fails that passed before you started and the tests the task is about pass. Or give "
                  "up with cannot_complete.", finish, ELEMENTSOF(finish) },
                { "keep_file", "Commit a file that the factory leaves out of your commits (build output, a binary, "
                  "or a file the test command wrote) because it belongs to the change: a generated file the "
                  "project tracks, a fixture. A binary file is committed only once a person approves it.",
                  keep_file, ELEMENTSOF(keep_file) },
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
        [TOOL_EDIT_FILE] = { "path", "old_text", "new_text", "replace_all" },
        [TOOL_LIST_FILES] = { "path" },
        [TOOL_SEARCH] = { "pattern", "regex", "path" },
        [TOOL_RUN_TESTS] = {},
        [TOOL_FINISH] = { "summary", "cannot_complete" },
        [TOOL_KEEP_FILE] = { "path", "reason" },
        [TOOL_APPLY_PATCH] = { "patch" },
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
        free(a->patch);
        free(a->pattern);
        free(a->summary);
        free(a->reason);
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
                                   "write_file, edit_file, apply_patch, list_files, search, run_tests, finish, keep_file", shown);
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
                if (r >= 0)
                        r = arg_bool(o, k, "replace_all", &a.replace_all, ret_error);
                break;

        case TOOL_APPLY_PATCH:
                r = arg_string(o, k, "patch", true, false, TOOL_CONTENT_MAX, &a.patch, ret_error);
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
                if (r >= 0)
                        r = arg_bool(o, k, "cannot_complete", &a.cannot_complete, ret_error);
                break;

        case TOOL_KEEP_FILE:
                r = arg_string(o, k, "path", true, false, PATH_MAX - 1, &a.path, ret_error);
                if (r >= 0)
                        r = arg_string(o, k, "reason", true, false, TOOL_REASON_MAX, &a.reason, ret_error);
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

