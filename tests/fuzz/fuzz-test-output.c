/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A test command's output as the agent reads it (test_run_parse_full(),
 * test_output_excerpt(), test-judge.h): the first byte is the exit code and
 * picks the excerpt's bound, the rest up to a byte 0xff is the baseline's
 * output, what follows the run's. Invariants: counts are -1 or more; the
 * failed tests' names are distinct, not empty, at most TEST_NAME_MAX bytes
 * of valid UTF-8 without control characters, at most TEST_NAMES_MAX of
 * them, each named by itself; complete names mean a known runner and a
 * count; the excerpt is within its bound, valid UTF-8 with no control
 * character but newline and tab; a run compared with itself has nothing
 * newly failing or fixed; the first line is one line. */
#include "fuzz.h"
#include "macro.h"
#include "string-util.h"
#include "test-judge.h"
#include "test-output.h"
#include "test-run.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

FUZZ_UNINSTRUMENTED static bool text_is_clean(const char *s, size_t n, bool allow_newline) {
        for (size_t i = 0; i < n;) {
                unsigned char c = (unsigned char) s[i];
                size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
                if (k == 0 || i + k > n || (k == 2 && c < 0xC2))
                        return false;
                if (k == 1 && (c < ' ' || c == 127) && c != '\t' && !(allow_newline && c == '\n'))
                        return false;
                for (size_t j = 1; j < k; j++)
                        if (((unsigned char) s[i + j] & 0xC0) != 0x80)
                                return false;
                i += k;
        }
        return true;
}

static void check_run(const TestRun *t) {
        FUZZ_CHECK(t->n_passed >= -1 && t->n_failed >= -1 && t->n_skipped >= -1, "counts %d %d %d",
                   t->n_passed, t->n_failed, t->n_skipped);
        FUZZ_CHECK(t->n_failed_names <= TEST_NAMES_MAX, "%zu names", t->n_failed_names);
        FUZZ_CHECK(t->n_failed_names == strv_length(t->failed), "%zu names counted, %zu listed", t->n_failed_names,
                   strv_length(t->failed));
        FUZZ_CHECK(!t->failed_complete || (t->runner >= 0 && t->n_failed >= 0), "complete without a runner or a count");
        FUZZ_CHECK(!t->passed || (t->exit_code == 0 && t->n_failed <= 0), "passed with exit %d, %d failed",
                   t->exit_code, t->n_failed);
        for (size_t i = 0; i < t->n_failed_names; i++) {
                const char *n = t->failed[i];
                size_t l = strlen(n);
                FUZZ_CHECK(l > 0 && l <= TEST_NAME_MAX, "name of %zu bytes", l);
                FUZZ_CHECK(text_is_clean(n, l, false), "name '%s' not clean", n);
                FUZZ_CHECK(l < 4 || test_name_in_text(n, n), "'%s' does not name itself", n);
                for (size_t j = 0; j < i; j++)
                        FUZZ_CHECK(!streq(t->failed[j], n), "'%s' twice", n);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(test_run_done) TestRun base = {}, now = {};
        _cleanup_(test_comparison_done) TestComparison c = {};
        _cleanup_free_ char *excerpt = NULL, *line = NULL, *why = NULL, *req = NULL;
        const char *text, *split;
        size_t max, n_base, n_now;
        int exit_code, r;

        if (size < 1 || size > 256 * 1024)
                return 0;
        exit_code = data[0] & 0x7f;
        max = 1024 + (size_t) (data[0] >> 7) * 3072;
        text = (const char *) data + 1;
        split = memchr(text, 0xff, size - 1);
        n_base = split ? (size_t) (split - text) : 0;
        n_now = size - 1 - (split ? n_base + 1 : 0);

        r = test_run_parse_full(exit_code ? 1 : 0, text, n_base, &base);
        FUZZ_CHECK(r == 0, "baseline refused: %d", r);
        r = test_run_parse_full(exit_code, split ? split + 1 : text, n_now, &now);
        FUZZ_CHECK(r == 0, "run refused: %d", r);
        check_run(&base);
        check_run(&now);

        r = test_output_excerpt(split ? split + 1 : text, n_now, now.runner, max, &excerpt);
        FUZZ_CHECK(r == 0 && excerpt, "excerpt failed: %d", r);
        FUZZ_CHECK(strlen(excerpt) <= max, "excerpt of %zu bytes, bound %zu", strlen(excerpt), max);
        FUZZ_CHECK(text_is_clean(excerpt, strlen(excerpt), true), "excerpt not clean");

        r = test_run_compare(&now, &now, &c);
        FUZZ_CHECK(r == 0, "compare failed: %d", r);
        FUZZ_CHECK(!c.newly_failing && (!c.fixed || now.passed), "a run against itself changed");
        FUZZ_CHECK(!now.failed_complete || now.passed || !c.fixed, "fixed by itself");

        r = test_run_headline(&now, &base, 2, 5, &line);
        FUZZ_CHECK(r == 0 && line && !strchr(line, '\n'), "headline not one line");

        /* The requirement names the run's first failure, if any. */
        req = strdup(now.n_failed_names > 0 ? now.failed[0] : "make it work");
        FUZZ_CHECK(req, "oom");
        r = test_run_judge(&base, &now, req, &why);
        FUZZ_CHECK(r >= 0 && why, "judge failed: %d", r);
        FUZZ_CHECK(r != TEST_VERDICT_PASS || now.passed, "a failing run passed");
        FUZZ_CHECK(r != TEST_VERDICT_ACCEPT || (base.failed_complete && now.failed_complete && !base.passed),
                   "accepted without names on both sides");
        /* The run's own named failure is the task's: never accepted. */
        FUZZ_CHECK(r != TEST_VERDICT_ACCEPT || now.n_failed_names == 0 || strlen(now.failed[0]) < 4,
                   "accepted while '%s', which the requirement names, fails", now.failed[0]);
        return 0;
}
