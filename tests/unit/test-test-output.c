/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The test runners' output as the agent reads it (test-run.h,
 * test-output.h): counts, skips, the names of the failed tests and the
 * excerpt the model sees, on outputs recorded from the real runners
 * (tests/unit/test-output/: pytest 7, unittest of Python 3.11, node 20's
 * test runner with its TAP and spec reporters, meson 1.0, ctest 3.25,
 * cargo 1.95) and, for go test, written from its documented format. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "buf.h"
#include "fs-util.h"
#include "string-util.h"
#include "tap.h"
#include "test-judge.h"
#include "test-output.h"
#include "test-run.h"

#ifndef TEST_OUTPUT_DIR
#error "TEST_OUTPUT_DIR must name tests/unit/test-output"
#endif

static char *fixture(const char *name, size_t *ret_size) {
        char path[4096];
        char *text = NULL;
        size_t size = 0;

        snprintf(path, sizeof(path), "%s/%s", TEST_OUTPUT_DIR, name);
        if (read_file_at(AT_FDCWD, path, 1024 * 1024, &text, &size) < 0)
                return NULL;
        *ret_size = size;
        return text;
}

static bool names_are(const TestRun *t, const char *const *want) {
        size_t n = 0;

        for (; want[n]; n++)
                if (n >= t->n_failed_names || !streq(t->failed[n], want[n]))
                        return false;
        return n == t->n_failed_names;
}

static char *names_joined(const TestRun *t) {
        return t->failed ? strv_join(t->failed, " | ") : strdup("(none)");
}

#define NAMES(...) ((const char *const[]) { __VA_ARGS__, NULL })
#define NO_NAMES ((const char *const[]) { NULL })

/* One recorded run: what the model and the finish rule need from it. The
 * names matter most: they are what the baseline is compared by. */
static const struct {
        const char *file;
        int exit_code;
        TestRunner runner;
        int passed, failed, skipped;
        const char *const *names;
        bool complete;
        const char *in_excerpt;     /* kept when the excerpt is only 2 KiB */
} recorded[] = {
        { "pytest-fail.txt", 1, TEST_RUNNER_PYTEST, 2, 4, 1,
          NAMES("test_calc.py::test_add", "test_calc.py::TestThings::test_dict",
                "test_calc.py::TestThings::test_param[2]", "test_calc.py::test_error_fixture"),
          true, "3 failed, 2 passed, 1 skipped, 1 error in" },
        { "pytest-v.txt", 1, TEST_RUNNER_PYTEST, 2, 4, 1,
          NAMES("test_calc.py::test_add", "test_calc.py::TestThings::test_dict",
                "test_calc.py::TestThings::test_param[2]", "test_calc.py::test_error_fixture"),
          true, "FAILED test_calc.py::test_add - assert -1 == 5" },
        { "pytest-q.txt", 1, TEST_RUNNER_PYTEST, 2, 4, 1,
          NAMES("test_calc.py::test_add", "test_calc.py::TestThings::test_dict",
                "test_calc.py::TestThings::test_param[2]", "test_calc.py::test_error_fixture"),
          true, "3 failed, 2 passed, 1 skipped, 1 error in 0.03s" },
        { "pytest-pass.txt", 0, TEST_RUNNER_PYTEST, 2, 0, 0, NO_NAMES, true, "2 passed in" },
        { "pytest-collect.txt", 2, TEST_RUNNER_PYTEST, 0, 1, 0, NAMES("test_broken.py"), true,
          "ModuleNotFoundError: No module named 'nosuchmodule'" },
        { "unittest-fail.txt", 1, TEST_RUNNER_UNITTEST, 1, 3, 1,
          NAMES("test_calc.T.test_error", "test_calc.T.test_add", "test_calc.U.test_sub"), true,
          "FAILED (failures=2, errors=1, skipped=1)" },
        { "unittest-v.txt", 1, TEST_RUNNER_UNITTEST, 1, 3, 1,
          NAMES("test_calc.T.test_error", "test_calc.T.test_add", "test_calc.U.test_sub"), true,
          "KeyError: 'k'" },
        { "unittest-pass.txt", 0, TEST_RUNNER_UNITTEST, 1, 0, 1, NO_NAMES, true, "OK (skipped=1)" },
        { "node-tap-fail.txt", 1, TEST_RUNNER_TAP, 2, 2, 2, NAMES("adds numbers", "math > throws"), true,
          "# fail 2" },
        { "node-spec-fail.txt", 1, TEST_RUNNER_TAP, 2, 2, 2, NAMES("adds numbers", "throws"), true,
          "-1 !== 5" },
        { "node-tap-pass.txt", 0, TEST_RUNNER_TAP, 2, 0, 0, NO_NAMES, true, "# pass 2" },
        { "meson-fail.txt", 3, TEST_RUNNER_MESON, 1, 3, 1,
          NAMES("adds numbers", "tap suite", "slow one"), true, "Timeout:            1" },
        { "meson-errorlogs.txt", 3, TEST_RUNNER_MESON, 1, 3, 1,
          NAMES("demo / adds numbers", "demo:unit / tap suite", "demo / slow one"), true,
          "Assertion failed: add(2, 3) == 5" },
        { "ctest-fail.txt", 8, TEST_RUNNER_CTEST, 1, 3, 1, NAMES("adds_numbers", "slow_one", "not_built"), true,
          "2 - adds_numbers (Failed)" },
        { "ctest-output-on-failure.txt", 8, TEST_RUNNER_CTEST, 1, 3, 1,
          NAMES("adds_numbers", "slow_one", "not_built"), true, "calc.c:12: expected 5, got -1" },
        { "cargo-fail.txt", 101, TEST_RUNNER_CARGO, 2, 2, 1, NAMES("tests::adds_numbers", "tests::panics"), true,
          "index out of bounds: the len is 0 but the index is 3" },
        { "cargo-pass.txt", 0, TEST_RUNNER_CARGO, 4, 0, 1, NO_NAMES, true, "test result: ok." },
        { "cargo-build-error.txt", 101, _TEST_RUNNER_INVALID, -1, -1, -1, NO_NAMES, false,
          "error[E0277]: cannot add `&str` to `i32`" },
        { "go-v-fail.txt", 1, TEST_RUNNER_GO, 2, 2, 1, NAMES("TestAdd", "TestTable/negative"), true,
          "add(-1, -1) = 0, want -2" },
        { "go-fail.txt", 1, TEST_RUNNER_GO, 0, 2, -1, NAMES("TestAdd", "TestTable/negative"), true,
          "add(2, 3) = -1, want 5" },
        { "go-panic.txt", 1, TEST_RUNNER_GO, 0, 1, -1, NAMES("TestParse"), true,
          "panic: runtime error: index out of range [3] with length 0" },
        { "go-build-fail.txt", 1, TEST_RUNNER_GO, 1, 1, -1, NAMES("example.com/calc (build failed)"), true,
          "./calc_test.go:9:9: undefined: sub" },
        { "go-pass.txt", 0, TEST_RUNNER_GO, 2, 0, -1, NO_NAMES, true, "ok  \texample.com/calc/strutil" },
};

/* Every recorded run: runner, counts, names, and the failure in a small
 * excerpt. */
static void test_recorded(void) {
        for (size_t i = 0; i < ELEMENTSOF(recorded); i++) {
                _cleanup_free_ char *text = NULL, *names = NULL, *ex = NULL;
                _cleanup_(test_run_done) TestRun t = {};
                size_t size = 0;

                text = fixture(recorded[i].file, &size);
                if (!text) {
                        CHECK(false, "%s: cannot read the fixture", recorded[i].file);
                        continue;
                }
                CHECK_ERRNO(test_run_parse_full(recorded[i].exit_code, text, size, &t), 0, "%s parses", recorded[i].file);
                names = names_joined(&t);
                CHECK(t.runner == recorded[i].runner, "%s: runner %s", recorded[i].file,
                      strempty(test_runner_to_string(t.runner)));
                CHECK(t.n_passed == recorded[i].passed && t.n_failed == recorded[i].failed &&
                      t.n_skipped == recorded[i].skipped,
                      "%s: %d passed, %d failed, %d skipped", recorded[i].file, t.n_passed, t.n_failed, t.n_skipped);
                CHECK(names_are(&t, recorded[i].names), "%s: failed %s", recorded[i].file, names);
                CHECK(t.failed_complete == recorded[i].complete, "%s: names %s", recorded[i].file,
                      t.failed_complete ? "complete" : "incomplete");
                CHECK(t.passed == (recorded[i].exit_code == 0), "%s: passed %s", recorded[i].file, t.passed ? "yes" : "no");

                CHECK_ERRNO(test_output_excerpt(text, size, t.runner, 2048, &ex), 0, "%s: excerpt", recorded[i].file);
                CHECK(ex && strlen(ex) <= 2048 && strstr(ex, recorded[i].in_excerpt),
                      "%s: a 2 KiB excerpt keeps '%s': %s", recorded[i].file, recorded[i].in_excerpt, strempty(ex));
        }
}

/* A long log: thousands of passing tests' lines, the failure in the middle
 * (go test -v), where the head and the tail would miss it. */
static void test_excerpt_keeps_the_failure(void) {
        _cleanup_(buf_done) Buf b = {};
        _cleanup_free_ char *ex = NULL;
        _cleanup_(test_run_done) TestRun t = {};

        for (unsigned i = 0; i < 3000; i++)
                (void) buf_printf(&b, "=== RUN   TestCase%u\n--- PASS: TestCase%u (0.00s)\n", i, i);
        (void) buf_puts(&b, "=== RUN   TestOverflow\n    big_test.go:77: sum overflowed: got -2147483648, want 2147483648\n"
                            "--- FAIL: TestOverflow (0.01s)\n");
        for (unsigned i = 3000; i < 6000; i++)
                (void) buf_printf(&b, "=== RUN   TestCase%u\n--- PASS: TestCase%u (0.00s)\n", i, i);
        (void) buf_puts(&b, "FAIL\nFAIL\texample.com/big\t0.120s\nFAIL\n");

        CHECK_ERRNO(test_run_parse_full(1, b.s, b.n, &t), 0, "a long go test -v log parses");
        CHECK(t.runner == TEST_RUNNER_GO && t.n_passed == 6000 && t.n_failed == 1 && t.n_failed_names == 1 &&
              streq(t.failed[0], "TestOverflow") && t.failed_complete, "6000 passed, TestOverflow failed");
        CHECK_ERRNO(test_output_excerpt(b.s, b.n, t.runner, 16 * 1024, &ex), 0, "excerpt of 16 KiB");
        CHECK(ex && strlen(ex) <= 16 * 1024, "within its bound: %zu bytes", ex ? strlen(ex) : 0);
        CHECK(ex && strstr(ex, "big_test.go:77: sum overflowed") && strstr(ex, "--- FAIL: TestOverflow"),
              "the failure in the middle is kept");
        CHECK(ex && strstr(ex, "FAIL\texample.com/big"), "and the end");
        CHECK(ex && !strstr(ex, "TestCase10\n"), "not the passing tests before it");
        CHECK(ex && strstr(ex, "lines not shown"), "with a note of what was left out");
}

/* Many failures: each block cut to a fair share, the first ones and the
 * summary kept, the rest counted. */
static void test_excerpt_many_failures(void) {
        _cleanup_(buf_done) Buf b = {};
        _cleanup_free_ char *ex = NULL;
        _cleanup_(test_run_done) TestRun t = {};

        (void) buf_puts(&b, "============================= test session starts ==============================\n"
                            "collected 400 items\n\n"
                            "=================================== FAILURES ===================================\n");
        for (unsigned i = 0; i < 200; i++) {
                (void) buf_printf(&b, "___________________________________ test_%u ___________________________________\n\n"
                                      "    def test_%u():\n>       assert compute(%u) == %u\nE       assert %u == %u\n",
                                  i, i, i, i + 1, i, i + 1);
                for (unsigned k = 0; k < 30; k++)
                        (void) buf_printf(&b, "E         context line %u of failure %u\n", k, i);
                (void) buf_printf(&b, "\ntest_many.py:%u: AssertionError\n", 10 * i + 3);
        }
        (void) buf_puts(&b, "=========================== short test summary info ============================\n");
        for (unsigned i = 0; i < 200; i++)
                (void) buf_printf(&b, "FAILED test_many.py::test_%u - assert %u == %u\n", i, i, i + 1);
        (void) buf_puts(&b, "======================== 200 failed, 200 passed in 1.52s ========================\n");

        CHECK_ERRNO(test_run_parse_full(1, b.s, b.n, &t), 0, "200 failures parse");
        CHECK(t.n_failed == 200 && t.n_failed_names == TEST_NAMES_MAX && !t.failed_complete,
              "names bounded at %u, so not complete: %zu", TEST_NAMES_MAX, t.n_failed_names);
        CHECK_ERRNO(test_output_excerpt(b.s, b.n, t.runner, 8192, &ex), 0, "excerpt of 8 KiB");
        CHECK(ex && strlen(ex) <= 8192, "within its bound: %zu bytes", ex ? strlen(ex) : 0);
        CHECK(ex && strstr(ex, "E       assert 0 == 1"), "the first failure is shown");
        CHECK(ex && strstr(ex, "200 failed, 200 passed in 1.52s"), "the summary is shown");
        CHECK(ex && strstr(ex, "more parts about failures, not shown"), "the dropped blocks are counted");
        CHECK(ex && strstr(ex, "of this part not shown"), "a cut block says so");
}

/* Colours, escaped colours, bytes that are not UTF-8, NULs, a line of a
 * megabyte: read the same, shown escaped. */
static void test_hostile_text(void) {
        _cleanup_(buf_done) Buf b = {};
        _cleanup_free_ char *ex = NULL;
        _cleanup_(test_run_done) TestRun t = {}, e = {};

        for (unsigned i = 0; i < 500; i++)
                (void) buf_printf(&b, "test_a.py::test_%u PASSED\n", i);
        (void) buf_puts(&b, "=== short test summary info ===\n\x1b[31mFAILED\x1b[0m test_a.py::test_\xff\x01x - boom ");
        for (unsigned i = 0; i < 100000; i++)
                (void) buf_puts(&b, "xxxxxxxxxx");
        (void) buf_append(&b, "\nnoise\0more\n", 12);
        (void) buf_puts(&b, "\x1b[31m==== 1 failed, 3 passed in 0.10s ====\x1b[0m\n");
        CHECK_ERRNO(test_run_parse_full(1, b.s, b.n, &t), 0, "hostile output parses");
        CHECK(t.runner == TEST_RUNNER_PYTEST && t.n_failed == 1 && t.n_passed == 3 && t.n_failed_names == 1 &&
              streq(t.failed[0], "test_a.py::test_? x"), "colours dropped, the name made safe: '%s'",
              t.n_failed_names ? t.failed[0] : "");
        CHECK_ERRNO(test_output_excerpt(b.s, b.n, t.runner, 4096, &ex), 0, "excerpt");
        CHECK(ex && strlen(ex) <= 4096 && !strchr(ex, '\x1b') && strstr(ex, "\\xff\\x01"),
              "no raw escape, other bytes written \\xNN");
        CHECK(ex && strstr(ex, "[line cut]"), "the long line is cut");
        CHECK(ex && strstr(ex, "1 failed, 3 passed in 0.10s"), "the summary is kept");

        /* As exec_output_escape() wrote it for the head and tail. */
        CHECK_ERRNO(test_run_parse(1, "\\x1b[31mFAILED\\x1b[0m test_b.py::test_c - x\n\\x1b[31m== 1 failed in 0.1s ==\\x1b[0m\n",
                                   &e), 0, "escaped colours parse");
        CHECK(e.n_failed == 1 && e.n_failed_names == 1 && streq(e.failed[0], "test_b.py::test_c"),
              "escaped colours dropped too: %d", e.n_failed);
}

/* Output no runner explains: the lines that look like failures, with
 * their context, and the end. */
static void test_excerpt_generic(void) {
        _cleanup_(buf_done) Buf b = {};
        _cleanup_free_ char *ex = NULL;

        for (unsigned i = 0; i < 2000; i++)
                (void) buf_printf(&b, "checking thing %u ... fine\n", i);
        (void) buf_puts(&b, "before the failure\nERROR: widget 7 exploded\n  at widget.c:12\n");
        for (unsigned i = 0; i < 2000; i++)
                (void) buf_printf(&b, "checking more %u ... fine\n", i);
        (void) buf_puts(&b, "2 things broke\n");
        CHECK_ERRNO(test_output_excerpt(b.s, b.n, _TEST_RUNNER_INVALID, 4096, &ex), 0, "generic excerpt");
        CHECK(ex && strstr(ex, "before the failure\nERROR: widget 7 exploded\n  at widget.c:12"),
              "the failure with the line before and after");
        CHECK(ex && strstr(ex, "2 things broke"), "and the end");
        CHECK_ERRNO(test_output_excerpt(b.s, b.n, _TEST_RUNNER_INVALID, 100, &ex), -EINVAL, "a bound below 1 KiB is refused");
}

/* Short output is shown whole, cleaned. */
static void test_excerpt_short(void) {
        _cleanup_free_ char *ex = NULL;

        const char *text = "\x1b[32mok\x1b[0m\r\nall good\n";
        CHECK_ERRNO(test_output_excerpt(text, strlen(text), TEST_RUNNER_TAP, 1024, &ex), 0, "short");
        CHECK_STR_EQ(ex, "ok\nall good\n", "whole, without colours and carriage returns");
        ex = mfree_ptr(ex);
        CHECK_ERRNO(test_output_excerpt(NULL, 0, _TEST_RUNNER_INVALID, 1024, &ex), 0, "empty");
        CHECK_STR_EQ(ex, "", "empty output, empty text");
}

/* Which tests a requirement names: identifiers, not English words. */
static void test_names_in_text(void) {
        static const struct {
                const char *name, *text;
                bool named;
        } cases[] = {
                { "test_calc.py::test_add", "Fix test_add.", true },
                { "test_calc.T.test_add", "test_calc passes", true },
                { "test_calc.py::TestThings::test_param[2]", "make test_param pass", true },
                { "test_calc.py::test_add", "see TEST_CALC.PY", true },
                { "tests::adds_numbers", "the tests pass", false },
                { "tests::adds_numbers", "adds_numbers must pass", true },
                { "TestTable/negative", "fix TestTable", true },
                { "TestTable/negative", "a negative number", false },
                { "math > throws", "math throws", false },
                { "math > throws an error", "the test 'throws an error' is flaky", true },
                { "adds numbers", "make 'adds numbers' pass", true },
                { "demo / adds numbers", "the adds numbers test", true },
                { "test_calc.py::test_add", "test_addition passes", false },
                { "test_calc.py::test_add", "", false },
                { "", "anything", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                CHECK(test_name_in_text(cases[i].name, cases[i].text) == cases[i].named, "'%s' %s in '%s'",
                      cases[i].name, cases[i].named ? "named" : "not named", cases[i].text);
}

static TestRun unittest_run(const char *failing) {
        _cleanup_(buf_done) Buf b = {};
        TestRun t = {};
        unsigned n = 0;

        /* "T.test_add U.test_net": that many FAIL: sections of 6 tests. */
        for (const char *p = failing; p && *p; n++) {
                _cleanup_free_ char *id = strndup(p, strcspn(p, " "));
                p += strlen(id);
                p += strspn(p, " ");
                (void) buf_printf(&b, "======================================================================\n"
                                      "FAIL: %s (test_%s)\n----------------------------------------------------------------------\n"
                                      "AssertionError: 1 != 2\n\n", strrchr(id, '.') + 1, id);
        }
        (void) buf_printf(&b, "----------------------------------------------------------------------\nRan 6 tests in 0.01s\n\n");
        if (n > 0)
                (void) buf_printf(&b, "FAILED (failures=%u)\n", n);
        else
                (void) buf_puts(&b, "OK\n");
        (void) test_run_parse_full(n > 0, b.s, b.n, &t);
        return t;
}

/* finish's rule: red at the start for unrelated reasons does not trap the
 * agent whose requirement names its tests; what passed must not fail; a
 * requirement that names no test is met by green only. */
static void test_judge(void) {
        _cleanup_(test_run_done) TestRun base = unittest_run("calc.T.test_add other.O.test_net"),
                only_net = unittest_run("other.O.test_net"),
                both = unittest_run("calc.T.test_add other.O.test_net"),
                new_fail = unittest_run("calc.T.test_zero other.O.test_net"),
                green = unittest_run(NULL), broken = {};
        const char *req = "Make add() add\ntest_calc passes";
        _cleanup_free_ char *why = NULL;

        CHECK(base.failed_complete && base.n_failed_names == 2 && streq(base.failed[0], "test_calc.T.test_add") &&
              streq(base.failed[1], "test_other.O.test_net"), "the baseline names its failures");

        CHECK_INT_EQ(test_run_judge(&base, &only_net, req, &why), TEST_VERDICT_ACCEPT, "its own test fixed: %s", why);
        CHECK(why && strstr(why, "test_calc.T.test_add") && strstr(why, "not the task's: test_other.O.test_net"),
              "the verdict says which failure was left: %s", why);
        why = mfree_ptr(why);
        CHECK_INT_EQ(test_run_judge(&base, &both, req, &why), TEST_VERDICT_REFUSE, "its own test still fails");
        CHECK(why && strstr(why, "name still fail: test_calc.T.test_add"), "names it: %s", why);
        why = mfree_ptr(why);
        CHECK_INT_EQ(test_run_judge(&base, &new_fail, req, &why), TEST_VERDICT_REFUSE, "a test that passed fails now");
        CHECK(why && strstr(why, "passed before you started: test_calc.T.test_zero"), "names it: %s", why);
        why = mfree_ptr(why);
        CHECK_INT_EQ(test_run_judge(&base, &only_net, "Make add() add", &why), TEST_VERDICT_REFUSE,
                     "no test named: every failure of the baseline is the task's");
        CHECK(why && strstr(why, "still fail: test_other.O.test_net") && strstr(why, "cannot_complete"),
              "and the way out is said: %s", why);
        why = mfree_ptr(why);
        CHECK_INT_EQ(test_run_judge(&base, &green, req, &why), TEST_VERDICT_PASS, "green passes");
        why = mfree_ptr(why);
        CHECK_INT_EQ(test_run_judge(&green, &only_net, req, &why), TEST_VERDICT_REFUSE, "green at the start: red refused");
        why = mfree_ptr(why);
        CHECK_INT_EQ(test_run_judge(NULL, &only_net, req, &why), TEST_VERDICT_REFUSE, "no baseline: red refused");
        why = mfree_ptr(why);
        (void) test_run_parse(1, "error: could not compile `calc`\n", &broken);
        CHECK_INT_EQ(test_run_judge(&base, &broken, req, &why), TEST_VERDICT_REFUSE, "a build error is no comparison");
        CHECK(why && strstr(why, "cannot be read"), "and says why: %s", why);
}

/* The first line of a test result. */
static void test_headline(void) {
        _cleanup_(test_run_done) TestRun base = unittest_run("calc.T.test_add other.O.test_net"),
                only_net = unittest_run("other.O.test_net"), new_fail = unittest_run("calc.T.test_zero other.O.test_net"),
                green = unittest_run(NULL), counted = {};
        _cleanup_free_ char *h = NULL;

        CHECK_ERRNO(test_run_headline(&only_net, &base, 0, 5, &h), 0, "headline");
        CHECK_STR_EQ(h, "Tests: exit status 1; 5 passed, 1 failed (unittest). Against the start: fixed: "
                     "test_calc.T.test_add; still failing (failed at the start too): test_other.O.test_net.",
                     "fixed and still failing by name");
        h = mfree_ptr(h);
        CHECK_ERRNO(test_run_headline(&new_fail, &base, 2, 5, &h), 0, "headline");
        CHECK_STR_EQ(h, "Tests: exit status 1; 4 passed, 2 failed (unittest). Against the start: newly failing: "
                     "test_calc.T.test_zero; fixed: test_calc.T.test_add; still failing (failed at the start too): "
                     "test_other.O.test_net. This same failure 2 times in a row; at 5 the task stops for a person "
                     "(MaxConsecutiveTestFailures=).", "newly failing, and the repeats");
        h = mfree_ptr(h);
        CHECK_ERRNO(test_run_headline(&green, &base, 0, 5, &h), 0, "headline");
        CHECK_STR_EQ(h, "Tests: exit status 0; 6 passed, 0 failed (unittest). Against the start: fixed: "
                     "test_calc.T.test_add, test_other.O.test_net.", "green");
        h = mfree_ptr(h);
        (void) test_run_parse(1, "Tests: 3 failed, 10 passed, 13 total\n", &counted);
        CHECK_ERRNO(test_run_headline(&counted, &base, 1, 5, &h), 0, "headline");
        CHECK_STR_EQ(h, "Tests: exit status 1; 10 passed, 3 failed. Against the start (exit status 1, 2 failed): 1 more "
                     "failing. This same failure 1 time in a row; at 5 the task stops for a person "
                     "(MaxConsecutiveTestFailures=).", "by counts when names are not known");
        h = mfree_ptr(h);
        CHECK_ERRNO(test_run_baseline_text(&base, "test_calc passes", &h), 0, "baseline text");
        CHECK_STR_EQ(h, "Before you started, the test command failed (exit status 1; 4 passed, 2 failed (unittest)). "
                     "Failing then: test_calc.T.test_add, test_other.O.test_net. The goal and acceptance criteria "
                     "name test_calc.T.test_add: finish needs these to pass, and nothing that passed then to fail; "
                     "the others (test_other.O.test_net) may go on failing as they did.", "the first prompt's words");
}

int main(void) {
        test_recorded();
        test_excerpt_keeps_the_failure();
        test_excerpt_many_failures();
        test_hostile_text();
        test_excerpt_generic();
        test_excerpt_short();
        test_names_in_text();
        test_judge();
        test_headline();
        printf("1..%u\n", tap_n);
        return tap_failed > 0;
}
