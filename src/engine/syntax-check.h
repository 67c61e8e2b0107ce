/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The syntax check after an edit: when edit_file, write_file or apply_patch
 * changed a file that a check is known for, the check runs in the task's
 * sandbox (never in the daemon: a repository's checker is the repository's
 * code, and so are the files it reads) and what it says comes back with the
 * edit's result, so that the model mends a broken file in its next step
 * rather than when the tests fail.
 *
 * A check is the base's .agentfab.md's "syntax-check: GLOB COMMAND" whose
 * glob (path-glob.h) matches the file first, else the default for the file's
 * extension (syntax_check_default()). This module only writes the shell
 * script that runs them and reads what it printed; the agent sends the
 * script to the sandbox's exec service like any command. */

#define SYNTAX_CHECK_FILES_MAX 8U                /* files checked after one edit */
#define SYNTAX_CHECK_TIMEOUT_USEC (10ULL * 1000000ULL) /* for all of them */
#define SYNTAX_CHECK_LINES_MAX 20U               /* of its output told to the model */
#define SYNTAX_CHECK_BYTES_MAX 2048U

/* The default check of a file, by its name: a shell snippet that checks the
 * file "$1" and prints what is wrong, exiting non-zero, or exits 0 without a
 * word when it is fine or when the checker is not installed in the sandbox.
 * *ret_label names the checker for the model ("python3 compile"). 0: no
 * default for this kind of file (both NULL). None of them runs the file's
 * code or writes beside it: Python is compiled in memory (no __pycache__),
 * Perl's -c is left out since it runs BEGIN blocks. */
int syntax_check_default(const char *path, const char **ret_label, const char **ret_snippet);

/* The check for path: the first of checks (pairs GLOB, COMMAND, from the
 * base's .agentfab.md; may be NULL) whose glob matches it, else the
 * default. A repository's COMMAND gets "{file}" replaced by the file's path,
 * quoted for the shell as "./path" so that it is never taken for an option
 * (appended when there is no "{file}"). 0: no check (*ret_label and
 * *ret_snippet NULL); 1: one, both allocated. */
int syntax_check_pick(const char *path, char **checks, char **ret_label, char **ret_snippet);

/* One script for several files: each file's snippet runs with "$1" its path
 * ("./path", quoted), and the output of each that fails is printed under a
 * line "<path> (<label>):"; the script exits 1 if any failed. A missing file
 * (deleted by a patch) is skipped, and so is a command not found (127).
 * paths, labels and snippets have n entries. */
int syntax_check_script(char **paths, char **labels, char **snippets, size_t n, char **ret);

/* What the model is told after the edit's result, from the script's output
 * and exit status: NULL (nothing to say) when it passed, else a paragraph
 * that says the check failed and shows at most SYNTAX_CHECK_LINES_MAX lines
 * and SYNTAX_CHECK_BYTES_MAX bytes of the output, with a note when cut. A
 * timed-out check says so. */
int syntax_check_report(const char *output, int status, bool timed_out, char **ret);

/* Quotes s for a POSIX shell, as one word in single quotes. */
char *shell_quote(const char *s);
