/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tools the model calls. run_command and run_tests run in the sandbox
 * (the agent loop sends them to the exec service); the file tools below run
 * in the daemon, directly on the workspace directory fd, with every path
 * resolved by workspace-path.h.
 *
 * Each file tool returns 0 and text for the model in *ret_output, or a
 * negative errno and a one-paragraph message for the model in *ret_output
 * (NULL only on -ENOMEM). Output text is always valid UTF-8 without NUL, and
 * bounded by the max_output given: cut text carries a note that says so. */

/* The OpenAI "tools" array: [{"type":"function","function":{name,
 * description, parameters}}, ...]. A new reference each call. */
json_object *tools_schema(void);

typedef enum ToolKind {
        TOOL_RUN_COMMAND,
        TOOL_READ_FILE,
        TOOL_WRITE_FILE,
        TOOL_EDIT_FILE,
        TOOL_LIST_FILES,
        TOOL_SEARCH,
        TOOL_RUN_TESTS,
        TOOL_FINISH,
        TOOL_KEEP_FILE,
        TOOL_APPLY_PATCH,
        _TOOL_KIND_MAX,
        _TOOL_KIND_INVALID = -EINVAL,
} ToolKind;

const char *tool_kind_to_string(ToolKind k);
ToolKind tool_kind_from_string(const char *s);

/* Bounds on single arguments, checked by tool_call_parse(). */
#define TOOL_ARGUMENTS_MAX (16U * 1024U * 1024U)  /* the raw JSON text */
#define TOOL_CONTENT_MAX (8U * 1024U * 1024U)     /* content, old_text, new_text, patch */
#define TOOL_COMMAND_MAX (64U * 1024U)
#define TOOL_PATTERN_MAX 4096U
#define TOOL_SUMMARY_MAX (64U * 1024U)
#define TOOL_REASON_MAX 1024U
#define TOOL_TIMEOUT_MAX_SEC 86400U

typedef struct ToolCallArgs {
        ToolKind kind;
        char *command;          /* run_command: shell command line */
        uint64_t timeout_sec;   /* run_command: 0 when not given */
        char *path;             /* read/write/edit: required; list/search: NULL when not given */
        unsigned start_line, end_line; /* read_file: 1-based inclusive, 0 when not given */
        char *content;          /* write_file */
        char *old_text, *new_text; /* edit_file */
        bool replace_all;       /* edit_file: every exact occurrence */
        char *patch;            /* apply_patch */
        char *pattern;          /* search */
        bool regex;             /* search: pattern is a POSIX extended regex */
        char *summary;          /* finish */
        bool cannot_complete;   /* finish: the model gives up, summary says why */
        char *reason;           /* keep_file */
} ToolCallArgs;

/* Parses a model's tool call: the function name and the raw argument text,
 * both untrusted. Refused with -EINVAL and a message for the model in
 * *ret_error (which may be NULL):
 *   - unknown tool names;
 *   - argument text that is not one JSON object (empty text counts as {}, and
 *     an object that was JSON-encoded twice into a string is accepted);
 *   - wrong types ("start_line" must be a non-negative integer, "regex" a
 *     boolean), missing required keys, empty required strings;
 *   - unknown keys: refused rather than ignored, because a misspelt optional
 *     key ("startLine") would otherwise silently change what the tool does;
 *     the message lists the known keys. JSON null counts as absent;
 *   - strings with a NUL byte ("\u0000") or longer than the TOOL_*_MAX bounds.
 * Paths are checked later by the tools themselves. On failure *ret is left
 * empty (kind _TOOL_KIND_INVALID), safe to pass to tool_call_args_done(). */
int tool_call_parse(const char *name, const char *arguments, ToolCallArgs *ret, char **ret_error);
void tool_call_args_done(ToolCallArgs *a);

/* Cuts text longer than max bytes in the middle: the head and the tail are
 * kept (on UTF-8 and, where close by, line boundaries) around a note
 * "[... N bytes cut ...]". The result is at most max bytes when max >= 128,
 * else only the head is kept. */
int tool_output_bound(char **text, size_t max);

/* Reads a text file. Lines are numbered ("  12| text"; the number and "| " are
 * not part of the file) and start_line..end_line is 1-based inclusive; an
 * end_line past the end is clamped, a start_line past the end is an error
 * that says how many lines there are. Files with NUL bytes are refused as
 * binary (-EMEDIUMTYPE). Only the first 8 MiB of a larger file are read, with
 * a note. Output longer than max_output stops at a line boundary with a note
 * saying which start_line to ask for next. */
int tool_read_file(int ws_fd, const ToolCallArgs *a, size_t max_output, char **ret_output);

/* Writes content to path: atomic replace (temporary file and rename in the
 * same directory), parents created, the mode of an existing file kept (0644
 * for new ones, less the daemon's umask). Refuses a symlink (-ELOOP) or a
 * directory (-EISDIR) as the final component and content over max_file
 * (-EFBIG). */
int tool_write_file(int ws_fd, const ToolCallArgs *a, size_t max_file, char **ret_output);

/* Replaces the one occurrence of old_text by new_text (tools-edit.c). When
 * old_text is not in the file byte for byte, it is looked for with line
 * endings, trailing whitespace, indentation, then quotes and dashes let
 * differ, and again without read_file's "  12| " prefixes if every line
 * carries one (text-match.h); the answer says which rule matched and shows
 * the changed lines, numbered. With replace_all, every exact occurrence is
 * replaced, and the answer says how many. Not found is -ENODATA, with the
 * nearest lines of the file; more than one match (overlapping ones count)
 * under the rule that matched is -ENOTUNIQ, saying how many and on which
 * lines. Symlinks, directories, binary files and files over max_file are
 * refused. */
int tool_edit_file(int ws_fd, const ToolCallArgs *a, size_t max_file, char **ret_output);

/* Applies a patch (patch.h: Codex's format or a unified diff) to several
 * files, all or nothing: every file's new content is computed first, with
 * edit_file's tolerant matching for the hunks' lines, and every path is
 * resolved and checked as the other file tools do (no absolute paths, no
 * "..", nothing in .git, no symlinks, only regular text files of at most
 * max_file bytes, PATCH_FILES_MAX files); only then are the files written,
 * added, moved and deleted. Should a write fail midway, what was already
 * written is put back from memory. *ret_paths (which may be NULL) lists
 * every workspace-relative path the patch names, once writing began or
 * succeeded, NULL when nothing was touched. */
int tool_apply_patch(int ws_fd, const ToolCallArgs *a, size_t max_file, char ***ret_paths, char **ret_output);

/* Lists path (default: the workspace top) recursively, sorted per directory,
 * depth first, one workspace-relative path a line: directories end in "/",
 * symlinks show "-> target" and are never descended, .git is skipped, and so
 * are other file systems; bulky directories (see workspace_tree()) are shown
 * but not descended unless named as the path. At most max_entries lines and
 * 24 levels, then a note. Empty or omitted path: the top. */
int tool_list_files(int ws_fd, const ToolCallArgs *a, unsigned max_entries, size_t max_output, char **ret_output);

/* Searches regular files below path (default: the top; may also name one
 * file) for a fixed string or, with regex, a POSIX extended regex matched per
 * line. Output "path:line: text", lines shortened to 240 bytes. Skips .git,
 * symlinks, binary files (NUL bytes), files over 1 MiB, other file systems
 * and the bulky directories workspace_tree() names (unless path is inside
 * one); reads at most 256 MiB in all; stops after max_matches with a note.
 * No match is not an error. glibc's regexec() has no time limit: patterns
 * are bounded in length only. */
int tool_search(int ws_fd, const ToolCallArgs *a, unsigned max_matches, size_t max_output, char **ret_output);

/* A tree of the workspace for the system prompt: indented two spaces a level,
 * at most 3 levels deep and max_entries lines, directories with "/"; bulky
 * directories (node_modules, vendor, __pycache__, build output, virtualenvs)
 * are shown but not descended. */
int workspace_tree(int ws_fd, unsigned max_entries, char **ret);

/* Reads AGENTS.md and .agentfab.md at the workspace top (both, in this order,
 * each under a "# <name>" line when both exist), at most max bytes in all,
 * cut with a note. *ret is NULL when neither exists. Symlinks leading out of
 * the workspace and non-regular files are ignored like absent ones. */
int workspace_agent_instructions(int ws_fd, size_t max, char **ret);
