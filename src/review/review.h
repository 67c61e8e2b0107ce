/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>

#include "changed-lines.h"
#include "finding.h"

/* The review stage's engine, between a task's last step and its delivery.
 * The daemon gathers what it has (the lines the change added, the
 * manifests before and after, what the checkers printed, the coverage
 * reports of the base and the final tree, the base's .agentfab.md) and
 * calls review_run(), which reads nothing else and runs nothing: it
 * returns the findings and the breaker, if any, that stops the task for a
 * person. Transport-agnostic: no bus, no event loop, no threads.
 *
 * Breakers, in the order checked (the first one that trips is reported;
 * every finding is kept):
 *  - secret: any FINDING_SECRET (secret-scan.h);
 *  - vulnerable-dependency: an added or changed dependency version that a
 *    HIGH or CRITICAL advisory covers (osv.h);
 *  - review: a checker's error on a changed line (checker-output.h), or a
 *    part of the review that could not be done because of what the task
 *    produced (unreadable checker output or final coverage report, an
 *    unreadable vulnerability database): failing closed, so that breaking
 *    a checker is no way around it;
 *  - coverage-dropped: final line coverage below the base's by more than
 *    the tolerance (coverage.h). */

typedef enum ReviewBreaker {
        REVIEW_BREAKER_SECRET,
        REVIEW_BREAKER_VULNERABLE_DEPENDENCY,
        REVIEW_BREAKER_REVIEW,
        REVIEW_BREAKER_COVERAGE_DROPPED,
        _REVIEW_BREAKER_MAX,
        _REVIEW_BREAKER_INVALID = -EINVAL,
} ReviewBreaker;

/* "secret", "vulnerable-dependency", "review", "coverage-dropped". */
const char *review_breaker_to_string(ReviewBreaker b);
ReviewBreaker review_breaker_from_string(const char *s);

#define REVIEW_COVERAGE_TOLERANCE_DEFAULT 1.0   /* percentage points */

typedef struct ReviewConfig {
        char **secret_scan_ignore;      /* [Review] SecretScanIgnore=: the administrator's globs */
        const char *vulnerability_database;     /* [Review] VulnerabilityDatabase=; NULL: no dependency vulnerability check */
        double coverage_tolerance;      /* [Review] CoverageTolerance=, percentage points; < 0: default */
        double secret_min_entropy;      /* 0: SECRET_MIN_ENTROPY_DEFAULT */
        size_t secret_min_length;       /* 0: SECRET_MIN_LENGTH_DEFAULT */
        size_t max_findings;            /* 0: FINDING_LIST_MAX_DEFAULT */
} ReviewConfig;

typedef struct ReviewManifest {
        const char *path;               /* manifest_kind_from_path() must know it; others are skipped */
        const char *old_text;           /* NULL: the change adds the file */
        size_t old_size;
        const char *new_text;           /* NULL: the change removes the file (nothing added) */
        size_t new_size;
} ReviewManifest;

typedef struct ReviewCheckerOutput {
        const char *name;               /* for messages and rules when the output does not name its tool */
        const char *output;             /* SARIF or gcc-style lines (checker-output.h) */
        size_t size;
} ReviewCheckerOutput;

typedef struct ReviewCoverageReports {
        const char *path;               /* the report's workspace path, for messages */
        const char *base;               /* the base tree's report; NULL: none could be made */
        size_t base_size;
        const char *final;              /* the final tree's report; NULL: the test command wrote none */
        size_t final_size;
} ReviewCoverageReports;

typedef struct ReviewInput {
        const ReviewFile *files;        /* lines each changed file added (changed-lines.h) */
        size_t n_files;
        const ReviewManifest *manifests;
        size_t n_manifests;
        const ReviewCheckerOutput *checkers;
        size_t n_checkers;
        const ReviewCoverageReports *coverage;  /* NULL: the task names no coverage report */
        /* SECURITY: the BASE commit's .agentfab.md (review-settings.h), never the task's. */
        const char *repo_settings;
        size_t repo_settings_size;
} ReviewInput;

typedef struct ReviewResult {
        FindingList findings;           /* sorted: errors first */
        bool tripped;
        ReviewBreaker breaker;          /* when tripped */
        char *reason;                   /* when tripped: one line, escaped, for the journal and the approval prompt */
        char **warnings;                /* .agentfab.md lines skipped, and the like: for the journal */
} ReviewResult;

void review_result_done(ReviewResult *r);

/* -EINVAL for input that breaks the contract (a ReviewFile whose lines are
 * not ascending); -ENOMEM. Everything a task produced that cannot be read
 * becomes a finding, not an error. */
int review_run(const ReviewConfig *c, const ReviewInput *in, ReviewResult *ret);

/* {"breaker":"secret"|null,"reason":...|null,"findings":[...],"dropped":N}
 * (findings as finding_list_to_json()). */
int review_result_to_json(const ReviewResult *r, json_object **ret);
/* The summary's and pull request's section: the breaker, then the findings
 * (finding_list_to_markdown()). */
int review_result_to_markdown(const ReviewResult *r, char **ret);
