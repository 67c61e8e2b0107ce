/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

/* A review finding: what the review stage says about a task's change. Every
 * string in a Finding is escaped and bounded when it is added (see
 * finding_list_add()), so a finding may go as it is into the journal, a
 * D-Bus property, the state file, the summary or the model's context. A
 * finding never holds a secret's value: the secret scan stores a redacted
 * prefix only. */

typedef enum FindingKind {
        FINDING_SECRET,                 /* secret-scan.h */
        FINDING_STATIC_CHECK,           /* checker-output.h */
        FINDING_DEPENDENCY,             /* dependencies.h: a dependency added or changed */
        FINDING_VULNERABLE_DEPENDENCY,  /* osv.h */
        FINDING_COVERAGE,               /* coverage.h */
        FINDING_REVIEW_ERROR,           /* a part of the review could not be done */
        _FINDING_KIND_MAX,
        _FINDING_KIND_INVALID = -EINVAL,
} FindingKind;

typedef enum FindingSeverity {
        FINDING_ERROR,          /* stops the task for a person */
        FINDING_WARNING,        /* goes in the summary */
        FINDING_NOTE,           /* goes in the summary, informational */
        _FINDING_SEVERITY_MAX,
        _FINDING_SEVERITY_INVALID = -EINVAL,
} FindingSeverity;

/* "secret", "static-check", "dependency", "vulnerable-dependency",
 * "coverage", "review-error". */
const char *finding_kind_to_string(FindingKind k);
FindingKind finding_kind_from_string(const char *s);
/* "error", "warning", "note". */
const char *finding_severity_to_string(FindingSeverity s);
FindingSeverity finding_severity_from_string(const char *s);

/* Bounds, in bytes, of each string of a finding (longer ones are cut on a
 * character boundary and end in "…"). */
#define FINDING_FILE_MAX 512U
#define FINDING_RULE_MAX 128U
#define FINDING_MESSAGE_MAX 1024U
/* Default bound on the findings of one review; more are counted, not kept. */
#define FINDING_LIST_MAX_DEFAULT 500U

typedef struct Finding {
        FindingKind kind;
        FindingSeverity severity;
        char *file;             /* workspace-relative; NULL: not about a file */
        unsigned line;          /* 1-based; 0: not about a line */
        char *rule;             /* checker rule, advisory id, secret kind; NULL: none */
        char *message;          /* never NULL */
} Finding;

typedef struct FindingList {
        Finding *items;
        size_t n, allocated;
        size_t max;             /* 0: FINDING_LIST_MAX_DEFAULT */
        size_t n_dropped;       /* findings past max, counted only */
        size_t n_errors[_FINDING_KIND_MAX];     /* errors added per kind, dropped ones included */
} FindingList;

void finding_list_done(FindingList *l);

/* Adds a finding; file, rule and the formatted message are copied escaped
 * and bounded (finding_escape()). Past the list's bound the finding is only
 * counted in n_dropped (and 0 returned): the review still knows there were
 * more, and a breaker trips on them all the same (finding_list_count()). */
int finding_list_add(FindingList *l, FindingKind kind, FindingSeverity severity, const char *file, unsigned line,
                     const char *rule, const char *format, ...) _printf_(7, 8);
int finding_list_addv(FindingList *l, FindingKind kind, FindingSeverity severity, const char *file, unsigned line,
                      const char *rule, const char *format, va_list ap) _printf_(7, 0);

/* The same with a message that is already text (message_len bytes, which
 * may hold anything): no format to run. */
int finding_list_add_text(FindingList *l, FindingKind kind, FindingSeverity severity, const char *file, unsigned line,
                          const char *rule, const char *message, size_t message_len);

/* Findings kept of this kind (or any kind with _FINDING_KIND_INVALID) with
 * at least this severity (FINDING_ERROR counts errors only). */
size_t finding_list_count(const FindingList *l, FindingKind kind, FindingSeverity at_least);

/* Errors of this kind ever added, also those past the bound. */
size_t finding_list_errors(const FindingList *l, FindingKind kind);

/* Sorts by severity (errors first), kind, file, line; stable for equals. */
void finding_list_sort(FindingList *l);

/* Copies s[0..n) to one line of at most max bytes: control characters
 * become "\n", "\t", "\r" or "\xNN" escapes, invalid UTF-8 becomes '?', and
 * a cut ends in "…" on a character boundary. Never NULL but for -ENOMEM. */
char *finding_escape(const char *s, size_t n, size_t max);

/* [{"kind":..,"severity":..,"file":..,"line":N,"rule":..,"message":..}, ...]
 * ("file" and "rule" absent when NULL, "line" absent when 0). */
int finding_list_to_json(const FindingList *l, json_object **ret);
/* The reverse, for a state file read again after a restart: every entry is
 * checked and escaped again as if it were added anew; an entry that is not
 * an object with a known kind and severity and a message is -EBADMSG. */
int finding_list_from_json(json_object *j, FindingList *l);

/* A markdown section for a summary or a pull request body:
 * "## Review\n\n" then one bullet per finding, errors first. Every text
 * taken from a finding is escaped for markdown and HTML (see finding.c), so
 * a checker's message cannot inject links, images, HTML or mentions. */
int finding_list_to_markdown(const FindingList *l, const char *title, char **ret);
