/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct TestRun {
        int exit_code;
        bool passed;            /* exit code 0 and no failures counted */
        int n_passed;           /* -1: unknown */
        int n_failed;           /* -1: unknown */
        uint64_t signature;     /* the same failure gives the same value */
} TestRun;

/* Parses a test command's output tolerantly: pytest ("3 failed, 40 passed"),
 * unittest ("Ran 12 tests" + "OK"/"FAILED (failures=2, errors=1)"), TAP
 * ("# pass 5" / "# fail 1", else counted "ok"/"not ok" lines), go test
 * ("--- PASS"/"--- FAIL", else "ok"/"FAIL" package lines), jest/vitest
 * ("Tests: 1 failed, 10 passed, 11 total"), mocha ("10 passing", "2
 * failing"), cargo ("test result: ok. 3 passed; 0 failed", summed over test
 * binaries), rspec/minitest/Test::Unit ("10 examples, 2 failures", "10 runs,
 * ... 1 failures, 0 errors"), ctest ("... 1 tests failed out of 20"), gtest
 * ("[  PASSED  ] 10 tests."), meson ("Ok: 5", "Fail: 1"). Counts it cannot
 * find stay -1. The signature hashes the exit code, the failure count and the
 * lines that look like failures (FAIL, Error, assert, not ok, panic, ...) with
 * digit runs and hex numbers folded, so timings, addresses and temporary
 * names do not make every failure look new; without such lines the whole
 * folded output is hashed. Always returns 0 (or -EINVAL for NULL ret). */
int test_run_parse(int exit_code, const char *output, TestRun *ret);
