/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Circuit breakers: pure policy over what the agent did, no I/O. A tripped
 * breaker pauses the task for a person; the reason says exactly why. */

typedef enum Breaker {
        BREAKER_TESTS_FAILING,
        BREAKER_FILES_CHANGED,
        BREAKER_LINES_CHANGED,
        BREAKER_PROTECTED_PATH,
        BREAKER_TESTS_DELETED,
        BREAKER_TESTS_REGRESSED,
        BREAKER_DEPENDENCY_MANIFEST,
        BREAKER_NETWORK,
        BREAKER_BUDGET,
        BREAKER_MALFORMED_OUTPUT,
        /* The review stage's (src/daemon/review-stage.c, src/review/), at delivery. */
        BREAKER_SECRET,
        BREAKER_VULNERABLE_DEPENDENCY,
        BREAKER_REVIEW,
        BREAKER_COVERAGE_DROPPED,
        _BREAKER_MAX,
        _BREAKER_INVALID = -EINVAL,
} Breaker;

/* "tests-failing", "files-changed", ... */
const char *breaker_to_string(Breaker b);
Breaker breaker_from_string(const char *s);

typedef struct BreakerConfig {
        unsigned max_consecutive_test_failures; /* same failure this many runs in a row; 0: no limit */
        unsigned max_files_changed;             /* more than this many files; 0: no limit */
        unsigned max_lines_changed;             /* more than this many lines added + removed; 0: no limit */
        char **protected_globs;                 /* path_glob_match() globs, matched ignoring case */
        char **manifest_names;                  /* basename globs, or path globs when they contain '/' */
        unsigned max_malformed;                 /* malformed model replies in a row; 0: no limit */
        bool enabled[_BREAKER_MAX];
} BreakerConfig;

/* Fills in the defaults (all breakers enabled; see breakers.c for the lists
 * and why). Returns -ENOMEM, in which case c is still safe to _done(). */
int breaker_config_init_defaults(BreakerConfig *c);
void breaker_config_done(BreakerConfig *c);

/* Matches a workspace-relative path against a glob: "**" as a whole
 * component matches any number of directories (also none), "*" any run of
 * characters but '/', "?" one character but '/', "[abc]", "[a-z]", "[!x]"
 * (or "[^x]") one character of a set, "\\x" a literal x. A glob without '/'
 * matches at the top only ("*.lock" matches "yarn.lock", not "a/yarn.lock";
 * write "**" "/" "*.lock" for any depth). */
bool path_glob_match(const char *glob, const char *path);
/* The same, ignoring ASCII case when casefold is true. */
bool path_glob_match_full(const char *glob, const char *path, bool casefold);

bool path_is_dependency_manifest(const BreakerConfig *c, const char *path);
bool path_is_test_file(const char *path);

typedef struct BreakerChange {
        const char *path;
        char status;            /* 'A', 'M', 'D', 'R' (path is the new name) */
        unsigned added, removed;
        const char *old_path;   /* 'R': the old name, or NULL */
} BreakerChange;

typedef struct BreakerTrip {
        Breaker breaker;
        char *reason;
} BreakerTrip;

/* Checks the cumulative changes since the task's base. Returns 1 and fills
 * *ret with the first breaker tripped, in this order: protected path,
 * tests deleted, dependency manifest, files changed, lines changed; or 0. */
int breakers_check_changes(const BreakerConfig *c, const BreakerChange *changes, size_t n, BreakerTrip *ret);

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

/* Checks the test history, oldest first. Trips
 *  - BREAKER_TESTS_FAILING when the last max_consecutive_test_failures runs
 *    all failed with the same signature (a model stuck on one failure; a
 *    changing failure is progress, bounded by the budget breaker instead);
 *  - BREAKER_TESTS_REGRESSED when the latest run passes but fewer tests
 *    passed than in the baseline (tests removed or skipped to get green).
 *    Failing runs are not compared: mid-work breakage is the failing
 *    breaker's business. Unknown counts are not compared. */
int breakers_check_tests(const BreakerConfig *c, const TestRun *history, size_t n, const TestRun *baseline, BreakerTrip *ret);

/* True when a failed command's output says it wanted the network (name
 * resolution, unreachable networks, package-manager fetch errors). Refused
 * connections and timeouts count only when the line does not name a
 * loopback address and the command fetches or the line names a URL. */
bool command_output_needs_network(const char *command, const char *output);

/* BREAKER_NETWORK for a failed command whose output needs the network. */
int breakers_check_network(const BreakerConfig *c, const char *command, int exit_code, const char *output, BreakerTrip *ret);

/* BREAKER_MALFORMED_OUTPUT when n_malformed replies in a row reached the limit. */
int breakers_check_malformed(const BreakerConfig *c, unsigned n_malformed, BreakerTrip *ret);

void breaker_trip_done(BreakerTrip *t);
