/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* What a repository says about its own review, in its .agentfab.md: a
 * fenced code block whose info string is "agentfab", holding "key: value"
 * lines (blank lines and lines starting with '#' are skipped):
 *
 *     ```agentfab
 *     # Example keys in the test fixtures are not secrets.
 *     secret-scan-ignore: tests/fixtures/keys.pem docs/example-id_rsa
 *     checker: shellcheck -f gcc {files}
 *     coverage-report: coverage.info
 *     ```
 *
 *  - secret-scan-ignore: whitespace-separated path_glob_match() globs
 *    (workspace-relative; "**" as a whole component crosses directories,
 *    so "tests/fixtures/" followed by "**" is everything below it; a glob
 *    without '/' matches at the top only) of files the secret scan skips;
 *    repeatable.
 *  - checker: one checker command line (run by the daemon in the task's
 *    sandbox; this library only records it); repeatable.
 *  - coverage-report: the workspace-relative path of the coverage report
 *    the test command writes.
 *  - leave-out: whitespace-separated names of build output the checkpoints
 *    leave out, besides agentfab.conf's LeaveOut= (fnmatch() patterns of
 *    one path component; "name/" a directory); repeatable.
 *  - syntax-check: a glob (as for secret-scan-ignore), then the command
 *    that checks a file it matches after the agent edits it, "{file}" the
 *    file (run in the task's sandbox, syntax-check.h); repeatable, the
 *    first glob that matches wins over the others and the defaults.
 * Several such blocks add up. Other text of the file is the model's
 * instructions and is not read here. Unknown keys and invalid values are
 * skipped with a warning that names the line.
 *
 * SECURITY: the daemon must pass the .agentfab.md of the task's BASE
 * commit, never the one the task produced: otherwise a model could allow
 * itself the secret it added. */

#define REVIEW_SETTINGS_SIZE_MAX (1024U * 1024U)
#define REVIEW_IGNORE_GLOBS_MAX 64U
#define REVIEW_CHECKERS_MAX 16U
#define REVIEW_CHECKER_COMMAND_MAX 1024U
#define REVIEW_GLOB_MAX 255U
#define REVIEW_LEAVE_OUT_MAX 64U
#define REVIEW_SYNTAX_CHECKS_MAX 32U

typedef struct ReviewRepoSettings {
        char **secret_scan_ignore;
        char **checkers;
        char *coverage_report;
        char **leave_out;       /* leave-out: names of build output */
        char **syntax_checks;   /* syntax-check: pairs GLOB, COMMAND */
        char **warnings;        /* "line N: ...", for the journal */
} ReviewRepoSettings;

void review_repo_settings_done(ReviewRepoSettings *s);

/* Parses the text of a .agentfab.md. -EFBIG past REVIEW_SETTINGS_SIZE_MAX;
 * otherwise never fails on content. */
int review_repo_settings_parse(const char *text, size_t size, ReviewRepoSettings *ret);

/* True for a glob that may go on an ignore list: workspace-relative, not
 * empty, at most REVIEW_GLOB_MAX bytes, no control characters, no "..". */
bool review_glob_is_valid(const char *glob);

/* True for a name of build output (LeaveOut=, leave-out:): one path
 * component, "name/" for a directory, 1 to REVIEW_GLOB_MAX bytes, no
 * control characters, not "." or "..". */
bool leave_out_pattern_is_valid(const char *pattern);
