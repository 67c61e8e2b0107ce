/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* What a test runner's output says beyond its counts: which runner it is,
 * how many tests it skipped, the names of the tests that failed, and the
 * parts of a long output that show the failures. test_run_parse()
 * (test-run.h) reads the counts and calls this for the rest. The output is
 * untrusted text of any size: bytes that are not UTF-8, NULs, ANSI colours
 * (raw, or as exec_output_escape() wrote them: "\x1b[31m"), lines of any
 * length. */

typedef enum TestRunner {
        TEST_RUNNER_PYTEST,
        TEST_RUNNER_UNITTEST,
        TEST_RUNNER_GO,             /* go test, plain or -v */
        TEST_RUNNER_CARGO,          /* cargo test, summed over its test binaries */
        TEST_RUNNER_TAP,            /* node --test (TAP and spec reporters), prove, any TAP producer */
        TEST_RUNNER_MESON,          /* meson test */
        TEST_RUNNER_CTEST,
        _TEST_RUNNER_MAX,
        _TEST_RUNNER_INVALID = -EINVAL,
} TestRunner;

/* "pytest", "unittest", "go test", "cargo test", "TAP", "meson test", "ctest". */
const char *test_runner_to_string(TestRunner r);
TestRunner test_runner_from_string(const char *s);

/* Bounds of what a run's failures are remembered by: the state file keeps
 * the baseline's. */
#define TEST_NAMES_MAX 100U
#define TEST_NAME_MAX 200U

typedef struct TestOutput {
        TestRunner runner;          /* _TEST_RUNNER_INVALID: no runner recognized */
        int n_skipped;              /* skipped, ignored, todo; -1: the output does not say */
        /* The failed tests as the runner names them ("test_calc.py::test_add",
         * "test_calc.T.test_add", "TestTable/negative", "tests::adds",
         * "math > throws", "demo / adds numbers"), each once, in the order
         * they were reported; a failed parent with failed children is named
         * by the children. At most TEST_NAMES_MAX, each valid UTF-8 without
         * control characters, at most TEST_NAME_MAX bytes, not empty. */
        char **failed;
        size_t n_failed;            /* entries of failed */
        size_t n_reports;           /* failure reports read, repeats included (subtests, summaries) */
        bool truncated;             /* more failed tests than failed holds */
} TestOutput;

/* Reads the output. Returns 0, or -ENOMEM (then *ret is empty but safe to
 * pass to test_output_done()); -EINVAL for a NULL ret or text. */
int test_output_parse(const char *text, size_t size, TestOutput *ret);
void test_output_done(TestOutput *o);

/* The text of a test run for the model, at most max bytes (max >= 1024):
 * the whole output when it fits; otherwise the blocks that show the
 * failures (pytest's FAILURES and ERRORS sections and its short summary,
 * unittest's FAIL:/ERROR: sections, go's "--- FAIL" with its log and
 * panics, cargo's "---- name stdout ----" sections, TAP's "not ok" with
 * its diagnostics, meson's and ctest's failing tests with their output and
 * their lists of failures; for other output the lines that look like
 * failures, with some context) and the last lines, each block cut to a
 * fair share of max when they do not all fit, with notes of what was left
 * out. ANSI colours are dropped; control characters and bytes that are not
 * UTF-8 are written "\xNN". runner is test_output_parse()'s (or
 * _TEST_RUNNER_INVALID). Returns 0 or -ENOMEM; -EINVAL for max < 1024. */
int test_output_excerpt(const char *text, size_t size, TestRunner runner, size_t max, char **ret);

/* A line as the parsers read it: without ANSI colour sequences (raw or
 * escaped as "\x1b[...") and carriage returns, cut to size - 1 bytes,
 * NUL-terminated; NULs in the line are dropped. */
void test_output_clean_line(const char *s, size_t l, char *buf, size_t size);
