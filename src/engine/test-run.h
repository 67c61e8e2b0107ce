/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "test-output.h"

typedef struct TestRun {
        int exit_code;
        bool passed;            /* exit code 0 and no failures counted */
        int n_passed;           /* -1: unknown */
        int n_failed;           /* -1: unknown */
        int n_skipped;          /* skipped, ignored, todo; -1: unknown */
        uint64_t signature;     /* the same failure gives the same value */
        TestRunner runner;      /* _TEST_RUNNER_INVALID: not recognized */
        /* The failed tests by name (test-output.h), owned; failed_complete
         * when every failure counted is named there (the runner is known,
         * the list was not cut, and it holds as many reports as failures
         * were counted). */
        char **failed;
        size_t n_failed_names;
        bool failed_complete;
} TestRun;

/* Parses a test command's output tolerantly: pytest ("3 failed, 40 passed"),
 * unittest ("Ran 12 tests" + "OK"/"FAILED (failures=2, errors=1)"), TAP
 * ("# pass 5" / "# fail 1", else counted "ok"/"not ok" lines; node's spec
 * reporter's "ℹ pass 5"), go test ("--- PASS"/"--- FAIL", else "ok"/"FAIL"
 * package lines), jest/vitest ("Tests: 1 failed, 10 passed, 11 total"),
 * mocha ("10 passing", "2 failing"), cargo ("test result: ok. 3 passed; 0
 * failed", summed over test binaries), rspec/minitest/Test::Unit ("10
 * examples, 2 failures", "10 runs, ... 1 failures, 0 errors"), ctest ("...
 * 1 tests failed out of 20", its skipped tests not counted as passed),
 * gtest ("[  PASSED  ] 10 tests."), meson ("Ok: 5", "Fail: 1"). Counts it
 * cannot find stay -1. The skips and the names of the failed tests come
 * from test_output_parse(). The signature hashes the exit code, the failure
 * count and the lines that look like failures (FAIL, Error, assert, not ok,
 * panic, ...) with digit runs and hex numbers folded, so timings, addresses
 * and temporary names do not make every failure look new; without such
 * lines the whole folded output is hashed. Returns 0, -ENOMEM, or -EINVAL
 * for NULL ret. On error *ret is safe to pass to test_run_done(). */
int test_run_parse(int exit_code, const char *output, TestRun *ret);
/* The same for text of a known size, which may hold NULs. */
int test_run_parse_full(int exit_code, const char *text, size_t size, TestRun *ret);
void test_run_done(TestRun *t);

/* A hash of s[0..l) with what changes between runs of the same failure
 * folded: digit runs, 0x... numbers, /tmp/... names, runs of white space. */
uint64_t test_run_fold_hash(uint64_t h, const char *s, size_t l);
#define TEST_RUN_HASH_INIT UINT64_C(0xcbf29ce484222325)
