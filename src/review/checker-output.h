/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include "changed-lines.h"
#include "finding.h"

/* Reading what a static checker printed. Two forms:
 *  - SARIF 2.1.0 (a JSON document; gcc -fdiagnostics-format=sarif-file,
 *    cppcheck --output-format=sarif, semgrep --sarif, ...): every
 *    runs[].results[] with its ruleId, level ("error", "warning", "note",
 *    "none"; absent means "warning" as the standard says), message.text and
 *    locations[].physicalLocation.artifactLocation.uri + region.startLine;
 *  - lines "FILE:LINE[:COL]: SEVERITY: MESSAGE [RULE]" (gcc and clang,
 *    shellcheck -f gcc, cppcheck --template=gcc, many linters); severities
 *    "error" and "fatal error" are errors, "warning" a warning, anything
 *    else ("note", "style", "info", "performance", "portability") a note.
 *    Other lines ("In function ...", source excerpts) are skipped.
 * Only findings on lines the change added or changed count (the checker
 * sees the whole tree; what was there before is not this task's doing).
 * Paths are normalised (review_path_normalize()): "./x.c",
 * "/workspace/x.c" and "file:///workspace/x.c" all name "x.c".
 *
 * The output is untrusted (a checker reads files the model wrote): it is
 * bounded (CHECKER_OUTPUT_MAX, CHECKER_FINDINGS_MAX per checker) and every
 * string is escaped on its way into a finding. */

#define CHECKER_OUTPUT_MAX (32U * 1024U * 1024U)
#define CHECKER_FINDINGS_MAX 200U
#define CHECKER_JSON_DEPTH_MAX 64

typedef struct CheckerStats {
        size_t total;           /* findings the output held */
        size_t kept;            /* of them, on changed lines */
        size_t dropped;         /* on changed lines but past CHECKER_FINDINGS_MAX */
} CheckerStats;

/* Parses a SARIF log. -EBADMSG with *ret_error (when non-NULL) saying what
 * is wrong for malformed JSON or a document that is not SARIF 2.x; -EFBIG
 * past CHECKER_OUTPUT_MAX. Findings go to out with kind
 * FINDING_STATIC_CHECK; their rule is "TOOL/RULE" (TOOL from the run's
 * tool.driver.name, else the checker's name). */
int checker_parse_sarif(const char *checker, const char *buf, size_t size, const ReviewFile *changed, size_t n_changed,
                        FindingList *out, CheckerStats *ret_stats, char **ret_error);

/* Parses gcc-style lines. Never fails on content (lines that do not match
 * are skipped); -EFBIG past CHECKER_OUTPUT_MAX. */
int checker_parse_lines(const char *checker, const char *buf, size_t size, const ReviewFile *changed, size_t n_changed,
                        FindingList *out, CheckerStats *ret_stats, char **ret_error);

/* SARIF when the first non-blank byte is '{', else lines. */
int checker_parse(const char *checker, const char *buf, size_t size, const ReviewFile *changed, size_t n_changed,
                  FindingList *out, CheckerStats *ret_stats, char **ret_error);
