/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "finding.h"

/* Line coverage from the reports test runners write:
 *  - lcov tracefiles (.info: geninfo, c8/nyc, coverage.py's lcov, cargo
 *    llvm-cov, go tools converting): per record ("SF:" ... "end_of_record")
 *    the LF:/LH: totals, or, in a record without them, its DA:LINE,HITS
 *    lines counted (a line twice in a record counts once, hit if either
 *    run hit it);
 *  - Cobertura XML (coverage.py xml, gcovr --xml, jest's cobertura,
 *    JaCoCo converters): the root <coverage>'s lines-valid and
 *    lines-covered, else its line-rate, else every <line hits="N"> outside
 *    <method> elements counted (methods repeat their class's lines).
 * The report is untrusted (the task's test command writes it): bounded by
 * COVERAGE_REPORT_MAX, no entity is expanded, no DTD is read, and anything
 * malformed is -EBADMSG with a message saying where. */

#define COVERAGE_REPORT_MAX (128U * 1024U * 1024U)
#define COVERAGE_XML_DEPTH_MAX 256U
/* Lines a report may count in all: what 18 digits hold. More is refused
 * (lcov's totals are summed over records and must not wrap around). */
#define COVERAGE_LINES_MAX UINT64_C(999999999999999999)

typedef enum CoverageFormat {
        COVERAGE_FORMAT_LCOV,
        COVERAGE_FORMAT_COBERTURA,
        _COVERAGE_FORMAT_MAX,
        _COVERAGE_FORMAT_INVALID = -EINVAL,
} CoverageFormat;

typedef struct Coverage {
        uint64_t lines_valid;   /* 0 when only a rate was given */
        uint64_t lines_covered;
        double percent;         /* 0..100 */
} Coverage;

/* Cobertura when the first non-blank byte is '<', lcov otherwise. */
CoverageFormat coverage_detect(const char *buf, size_t size);

int coverage_parse_lcov(const char *buf, size_t size, Coverage *ret, char **ret_error);
int coverage_parse_cobertura(const char *buf, size_t size, Coverage *ret, char **ret_error);
int coverage_parse(const char *buf, size_t size, Coverage *ret, char **ret_error);

/* A FINDING_COVERAGE error (breaker coverage-dropped) when the final
 * coverage is more than tolerance percentage points below the base's; a
 * note with both figures otherwise. Returns 1 when it dropped. */
int coverage_compare(const Coverage *base, const Coverage *final, double tolerance, const char *report, FindingList *out);
