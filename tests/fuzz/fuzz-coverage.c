/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A coverage report as the test command wrote it: lcov tracefile or
 * Cobertura XML (coverage_parse() tells them apart). Invariants: every
 * failure says why; a result has 0 <= percent <= 100, covered <= valid and
 * the percentage their ratio; the result written out in the other format
 * and read back is the same; an lcov report followed by itself (after an
 * end_of_record) counts exactly twice the lines, or is refused as too
 * large (COVERAGE_LINES_MAX), never wraps around; and coverage_compare() says "dropped" exactly
 * when the figure fell by more than the tolerance. */
#include <inttypes.h>
#include <math.h>

#include "coverage.h"
#include "fuzz-review.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

static void check_result(const Coverage *c) {
        FUZZ_CHECK(c->percent >= 0 && c->percent <= 100, "percent %g", c->percent);
        FUZZ_CHECK(c->lines_covered <= c->lines_valid, "%" PRIu64 " covered of %" PRIu64, c->lines_covered, c->lines_valid);
        if (c->lines_valid > 0)
                FUZZ_CHECK(fabs(c->percent - 100.0 * (double) c->lines_covered / (double) c->lines_valid) < 1e-9,
                           "percent %g for %" PRIu64 "/%" PRIu64, c->percent, c->lines_covered, c->lines_valid);
}

static void check_compare(const Coverage *base, const Coverage *final, double tolerance) {
        FindingList l = {};
        int r = coverage_compare(base, final, tolerance, "coverage.info", &l);

        FUZZ_CHECK(r >= 0 && l.n == 1, "compare: %d, %zu findings", r, l.n);
        FUZZ_CHECK((r == 1) == (final->percent < base->percent - tolerance) && (r == 1) == (l.items[0].severity == FINDING_ERROR),
                   "compare %g -> %g (tolerance %g) said %d", base->percent, final->percent, tolerance, r);
        fuzz_check_findings(&l);
        finding_list_done(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *error = NULL, *other = NULL, *twice = NULL;
        const char *buf = (const char *) data;
        Coverage c = {}, o = {}, d = {};
        CoverageFormat fmt;
        int r;

        if (size > 1024 * 1024)
                return 0;
        fmt = coverage_detect(buf, size);
        r = coverage_parse(buf, size, &c, &error);
        FUZZ_CHECK(r >= 0 || (r != -ENOMEM && error), "refused (%d) without a reason", r);
        if (r < 0)
                return 0;
        check_result(&c);
        check_compare(&c, &c, 0);
        check_compare(&(Coverage) { .percent = 50 }, &c, 1.5);

        /* The other format, with the same figures. */
        if (c.lines_valid > 0) {
                if (fmt == COVERAGE_FORMAT_LCOV)
                        r = asprintf(&other, "<?xml version=\"1.0\"?>\n<coverage lines-valid=\"%" PRIu64 "\" lines-covered=\"%" PRIu64
                                     "\" line-rate=\"0\"><packages/></coverage>\n", c.lines_valid, c.lines_covered);
                else
                        r = asprintf(&other, "TN:\nSF:a.c\nLF:%" PRIu64 "\nLH:%" PRIu64 "\nend_of_record\n", c.lines_valid, c.lines_covered);
                if (r < 0)
                        abort();
                error = mfree_ptr(error);
                r = coverage_parse(other, strlen(other), &o, &error);
                FUZZ_CHECK(r >= 0 && o.lines_valid == c.lines_valid && o.lines_covered == c.lines_covered,
                           "written as %s, read back %d: %" PRIu64 "/%" PRIu64 ", was %" PRIu64 "/%" PRIu64 " (%s)", other, r,
                           o.lines_covered, o.lines_valid, c.lines_covered, c.lines_valid, fuzz_strna(error));
        }

        /* lcov records add up. */
        if (fmt == COVERAGE_FORMAT_LCOV && !(size >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)) {
                twice = malloc(2 * size + 32);
                if (!twice)
                        abort();
                memcpy(twice, buf, size);
                memcpy(twice + size, "\nend_of_record\n", 15);
                memcpy(twice + size + 15, buf, size);
                error = mfree_ptr(error);
                r = coverage_parse(twice, 2 * size + 15, &d, &error);
                if (c.lines_valid > COVERAGE_LINES_MAX / 2)
                        FUZZ_CHECK(r < 0 && error, "%" PRIu64 " lines twice read as %" PRIu64, c.lines_valid, d.lines_valid);
                else if (c.lines_valid > 0)
                        FUZZ_CHECK(r >= 0 && d.lines_valid == 2 * c.lines_valid && d.lines_covered == 2 * c.lines_covered,
                                   "twice %" PRIu64 "/%" PRIu64 " read as %" PRIu64 "/%" PRIu64 " (%d, %s)",
                                   c.lines_covered, c.lines_valid, d.lines_covered, d.lines_valid, r, fuzz_strna(error));
        }
        return 0;
}
