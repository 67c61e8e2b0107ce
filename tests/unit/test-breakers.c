/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "breakers.h"
#include "string-util.h"
#include "tap.h"

static BreakerConfig config;

static void test_names(void) {
        bool all = true;

        /* The names appear in the journal and in configuration files. */
        for (Breaker b = 0; b < _BREAKER_MAX; b++)
                if (!breaker_to_string(b) || breaker_from_string(breaker_to_string(b)) != b)
                        all = false;
        CHECK(all, "every breaker has a name that parses back");
        CHECK(streq(breaker_to_string(BREAKER_PROTECTED_PATH), "protected-path") &&
              breaker_from_string("nope") == _BREAKER_INVALID && !breaker_to_string(_BREAKER_MAX), "names");
        /* The review stage's breakers carry the names review_breaker_to_string() gives them. */
        CHECK(streq(breaker_to_string(BREAKER_SECRET), "secret") &&
              streq(breaker_to_string(BREAKER_VULNERABLE_DEPENDENCY), "vulnerable-dependency") &&
              streq(breaker_to_string(BREAKER_REVIEW), "review") &&
              streq(breaker_to_string(BREAKER_COVERAGE_DROPPED), "coverage-dropped"), "review breakers' names");
}

static void test_globs(void) {
        /* "**" spans directories, "*" never does. */
        CHECK(path_glob_match("**/auth/**", "src/auth/x.c"), "**/auth/** matches src/auth/x.c");
        CHECK(path_glob_match("**/auth/**", "auth/x.c"), "**/auth/** matches auth/x.c");
        CHECK(path_glob_match("**/auth/**", "a/b/c/auth/d/e.c"), "at any depth");
        CHECK(!path_glob_match("**/auth/**", "src/author/x.c") && !path_glob_match("**/auth/**", "src/oauth/x.c"),
              "a whole component only");
        CHECK(path_glob_match("*.lock", "yarn.lock") && !path_glob_match("*.lock", "sub/yarn.lock"),
              "*.lock at the top only");
        CHECK(path_glob_match("**/*.lock", "Cargo.lock") && path_glob_match("**/*.lock", "a/b/Gemfile.lock"),
              "**/*.lock at any depth");
        CHECK(!path_glob_match("**/*.lock", "x.lock/inner.c") && !path_glob_match("*.lock", "x.lock/inner.c"),
              "a directory named *.lock does not make its files lock files");
        CHECK(path_glob_match("a/**/b", "a/b") && path_glob_match("a/**/b", "a/x/y/b") && !path_glob_match("a/**/b", "a/xb"),
              "a/**/b");
        CHECK(path_glob_match(".github/**", ".github/workflows/ci.yml") && !path_glob_match(".github/**", "src/.github/x"),
              "anchored at the top");
        CHECK(path_glob_match("src/?.c", "src/a.c") && !path_glob_match("src/?.c", "src/ab.c") &&
              !path_glob_match("src?a.c", "src/a.c"), "? is one character, never '/'");
        CHECK(path_glob_match("[abc].txt", "b.txt") && !path_glob_match("[abc].txt", "d.txt") &&
              path_glob_match("[!abc].txt", "d.txt") && path_glob_match("[a-z]1", "q1") && !path_glob_match("[a-z]1", "Q1"),
              "bracket sets, ranges, negation");
        CHECK(path_glob_match("a[", "a[") && path_glob_match("\\*x", "*x") && !path_glob_match("\\*x", "ax"),
              "unclosed bracket and escapes are literal");
        CHECK(path_glob_match("*", "file") && !path_glob_match("*", "dir/file") && path_glob_match("**", "dir/file"),
              "* and ** alone");
        CHECK(path_glob_match_full("**/auth/**", "src/Auth/Login.cs", true) && !path_glob_match("**/auth/**", "src/Auth/Login.cs"),
              "case folded on request");
        CHECK(!path_glob_match("*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), "backtracking ends");
        CHECK(!path_glob_match(NULL, "x") && !path_glob_match("x", NULL), "NULL never matches");
}

static void test_classify(void) {
        /* Manifests: by basename in any directory. */
        CHECK(path_is_dependency_manifest(&config, "package.json") && path_is_dependency_manifest(&config, "web/package.json"),
              "package.json anywhere");
        CHECK(path_is_dependency_manifest(&config, "requirements-dev.txt") && path_is_dependency_manifest(&config, "requirements.txt") &&
              path_is_dependency_manifest(&config, "requirements/base.txt"), "requirements files");
        CHECK(path_is_dependency_manifest(&config, "svc/go.mod") && path_is_dependency_manifest(&config, "Cargo.toml") &&
              path_is_dependency_manifest(&config, "pyproject.toml") && path_is_dependency_manifest(&config, "app/build.gradle.kts") &&
              path_is_dependency_manifest(&config, "foo.gemspec") && path_is_dependency_manifest(&config, "src/App/App.csproj") &&
              path_is_dependency_manifest(&config, "pom.xml") && path_is_dependency_manifest(&config, "Gemfile"),
              "go.mod, Cargo.toml, pyproject.toml, gradle, gemspec, csproj, pom.xml, Gemfile");
        CHECK(!path_is_dependency_manifest(&config, "src/package.c") && !path_is_dependency_manifest(&config, "docs/requirements.md") &&
              !path_is_dependency_manifest(&config, "meson.build") && !path_is_dependency_manifest(&config, "go.mod.bak"),
              "look-alikes are not manifests");

        /* Test files, by directory and by naming convention. */
        CHECK(path_is_test_file("tests/unit/test-tools.c") && path_is_test_file("test/foo.js") &&
              path_is_test_file("src/__tests__/App.js") && path_is_test_file("spec/models/user_spec.rb"),
              "test directories");
        CHECK(path_is_test_file("pkg/server/handler_test.go") && path_is_test_file("app/test_views.py") &&
              path_is_test_file("app/views_test.py") && path_is_test_file("src/Button.test.tsx") &&
              path_is_test_file("src/api.spec.ts") && path_is_test_file("src/main/java/FooTest.java") &&
              path_is_test_file("conftest.py") && path_is_test_file("t/basic.t"), "test file names");
        CHECK(!path_is_test_file("src/main.c") && !path_is_test_file("src/latest.py") && !path_is_test_file("src/contest.go") &&
              !path_is_test_file("src/attestation.rs") && !path_is_test_file("README.md"), "ordinary files are not tests");
}

static int changes(const BreakerChange *c, size_t n, BreakerTrip *t) {
        return breakers_check_changes(&config, c, n, t);
}

static void test_changes(void) {
        BreakerTrip t = {};

        BreakerChange ok[] = {
                { "src/main.c", 'M', 10, 2, NULL },
                { "tests/test_main.py", 'A', 30, 0, NULL },
                { "README.md", 'M', 1, 1, NULL },
        };
        CHECK(changes(ok, ELEMENTSOF(ok), &t) == 0 && !t.reason, "an ordinary change trips nothing");

        BreakerChange auth[] = { { "src/main.c", 'M', 1, 1, NULL }, { "src/auth/login.c", 'M', 3, 1, NULL } };
        CHECK(changes(auth, 2, &t) == 1 && t.breaker == BREAKER_PROTECTED_PATH &&
              streq(t.reason, "protected path changed: src/auth/login.c (matches **/auth/**)"), "auth: %s", t.reason);
        breaker_trip_done(&t);
        BreakerChange auth_top[] = { { "auth/x.c", 'A', 3, 0, NULL } };
        CHECK(changes(auth_top, 1, &t) == 1 && t.breaker == BREAKER_PROTECTED_PATH && strstr(t.reason, "added"),
              "auth at the top: %s", t.reason);
        breaker_trip_done(&t);

        static const char *const protected[] = {
                "src/payments/charge.py", "billing/invoice.go", "db/migrations/0042_add.sql", ".github/workflows/ci.yml",
                ".gitlab-ci.yml", "Jenkinsfile", "yarn.lock", "web/package-lock.json", "Cargo.lock", "go.sum",
                "poetry.lock", "Gemfile.lock", ".env", "src/Auth/Handler.cs", "lib/jwt_auth.py", "AGENTS.md",
                ".circleci/config.yml", "config/secrets/prod.yml",
        };
        bool all = true;
        for (size_t i = 0; i < ELEMENTSOF(protected); i++) {
                BreakerChange c = { protected[i], 'M', 1, 1, NULL };
                if (changes(&c, 1, &t) != 1 || t.breaker != BREAKER_PROTECTED_PATH) {
                        printf("# not protected: %s\n", protected[i]);
                        all = false;
                }
                breaker_trip_done(&t);
        }
        CHECK(all, "payment, billing, migrations, CI, lock files, secrets, instructions are protected");

        BreakerChange renamed[] = { { "src/login.c", 'R', 0, 0, "src/auth/login.c" } };
        CHECK(changes(renamed, 1, &t) == 1 && t.breaker == BREAKER_PROTECTED_PATH && strstr(t.reason, "src/auth/login.c -> src/login.c"),
              "renamed out of a protected path: %s", t.reason);
        breaker_trip_done(&t);

        BreakerChange deleted[] = { { "src/main.c", 'M', 1, 1, NULL }, { "tests/test_main.py", 'D', 0, 40, NULL } };
        CHECK(changes(deleted, 2, &t) == 1 && t.breaker == BREAKER_TESTS_DELETED &&
              streq(t.reason, "test file deleted: tests/test_main.py"), "test deleted: %s", t.reason);
        breaker_trip_done(&t);
        BreakerChange moved[] = { { "tests/test_a.py", 'R', 0, 0, "tests/test_b.py" } };
        CHECK_ERRNO(changes(moved, 1, &t), 0, "a test renamed to another test name is fine");
        BreakerChange away[] = { { "src/helpers.py", 'R', 0, 0, "tests/test_b.py" } };
        CHECK(changes(away, 1, &t) == 1 && t.breaker == BREAKER_TESTS_DELETED, "a test renamed away: %s", t.reason);
        breaker_trip_done(&t);

        BreakerChange manifest[] = { { "src/app.js", 'M', 1, 1, NULL }, { "web/package.json", 'M', 1, 0, NULL } };
        CHECK(changes(manifest, 2, &t) == 1 && t.breaker == BREAKER_DEPENDENCY_MANIFEST &&
              streq(t.reason, "dependency manifest changed: web/package.json"), "manifest: %s", t.reason);
        breaker_trip_done(&t);

        /* Thresholds: at the limit is fine, one more trips. */
        BreakerChange many[21];
        char names[21][32];
        for (unsigned i = 0; i < 21; i++) {
                snprintf(names[i], sizeof(names[i]), "src/f%u.c", i);
                many[i] = (BreakerChange) { names[i], 'M', 1, 1, NULL };
        }
        CHECK_ERRNO(changes(many, 20, &t), 0, "20 files is the limit");
        CHECK(changes(many, 21, &t) == 1 && t.breaker == BREAKER_FILES_CHANGED &&
              streq(t.reason, "21 files changed, more than the limit of 20"), "21 files: %s", t.reason);
        breaker_trip_done(&t);

        BreakerChange big[] = { { "src/a.c", 'M', 600, 400, NULL }, { "src/b.c", 'A', 0, 0, NULL } };
        CHECK_ERRNO(changes(big, 2, &t), 0, "1000 lines is the limit");
        big[1].added = 1;
        CHECK(changes(big, 2, &t) == 1 && t.breaker == BREAKER_LINES_CHANGED &&
              streq(t.reason, "1001 lines changed (+601 -400), more than the limit of 1000"), "1001 lines: %s", t.reason);
        breaker_trip_done(&t);

        /* File names are the model's choice: no newlines into the journal. */
        BreakerChange evil[] = { { "src/auth/x\nAGENTFAB_EVENT=fake.c", 'A', 1, 0, NULL } };
        CHECK(changes(evil, 1, &t) == 1 && !strchr(t.reason, '\n') && strstr(t.reason, "x?AGENTFAB_EVENT"),
              "control characters replaced: %s", t.reason);
        breaker_trip_done(&t);
        BreakerChange none[] = { { NULL, 'M', 1, 1, NULL } };
        CHECK_ERRNO(changes(none, 1, &t), 0, "an entry without a path is skipped");

        /* Order: the most specific reason first. */
        BreakerChange both[] = { { "src/auth/a.c", 'M', 5000, 0, NULL } };
        CHECK(changes(both, 1, &t) == 1 && t.breaker == BREAKER_PROTECTED_PATH, "protected path before size");
        breaker_trip_done(&t);

        /* A disabled breaker or a zero limit stays quiet. */
        config.enabled[BREAKER_PROTECTED_PATH] = false;
        CHECK_ERRNO(changes(auth, 2, &t), 0, "disabled breaker quiet");
        config.enabled[BREAKER_PROTECTED_PATH] = true;
        config.max_files_changed = 0;
        CHECK_ERRNO(changes(many, 21, &t), 0, "limit 0 is no limit");
        config.max_files_changed = 20;
}

/* The counts and the signature: the names (test-test-output.c) are freed
 * here, so that the copies the history tests make own nothing. */
static TestRun parse(int exit_code, const char *output) {
        TestRun t;
        test_run_parse(exit_code, output, &t);
        test_run_done(&t);
        return t;
}

static void test_parsers(void) {
        TestRun t;

        /* Counts from the formats projects actually use. */
        t = parse(1, "============ FAILURES ============\n____ test_x ____\n"
                     "E   assert 1 == 2\n=== short test summary info ===\nFAILED tests/test_a.py::test_x - assert 1 == 2\n"
                     "========= 1 failed, 41 passed, 2 skipped in 0.53s =========\n");
        CHECK(t.n_passed == 41 && t.n_failed == 1 && !t.passed, "pytest failing: %d/%d", t.n_passed, t.n_failed);
        t = parse(0, "\x1b[32m============================== 42 passed in 0.51s ===============================\x1b[0m\n");
        CHECK(t.n_passed == 42 && t.n_failed == 0 && t.passed, "pytest colored: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "==== 2 failed, 3 passed, 1 error in 1.2s ====\n");
        CHECK(t.n_passed == 3 && t.n_failed == 3, "pytest errors count as failures: %d/%d", t.n_passed, t.n_failed);

        t = parse(1, "TAP version 13\nok 1 - a\nnot ok 2 - b\nok 3 - c\n1..3\n# tests 3\n# pass  2\n# fail  1\n");
        CHECK(t.n_passed == 2 && t.n_failed == 1, "TAP summary: %d/%d", t.n_passed, t.n_failed);
        t = parse(0, "ok 1 - a\nok 2 - b\nok 3 # SKIP\n1..3\n");
        CHECK(t.n_passed == 3 && t.n_failed == 0 && t.passed, "raw TAP counted: %d/%d", t.n_passed, t.n_failed);
        t = parse(0, "# Subtest: x\n    ok 1 - inner\nok 1 - x\n# pass 1\n");
        CHECK(t.n_passed == 1 && t.n_failed == 0, "TAP pass without fail line: %d/%d", t.n_passed, t.n_failed);

        t = parse(0, "....\n----------------------------------------------------------------------\nRan 4 tests in 0.002s\n\nOK\n");
        CHECK(t.n_passed == 4 && t.n_failed == 0 && t.passed, "unittest OK: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "F.E.s\n======\nFAIL: test_b (t.T)\nAssertionError: 1 != 2\n-----\nRan 5 tests in 0.01s\n\n"
                     "FAILED (failures=1, errors=1, skipped=1)\n");
        CHECK(t.n_passed == 2 && t.n_failed == 2, "unittest FAILED: %d/%d", t.n_passed, t.n_failed);
        t = parse(0, "Ran 6 tests in 0.01s\n\nOK (skipped=2)\n");
        CHECK(t.n_passed == 4 && t.n_failed == 0, "unittest skipped: %d/%d", t.n_passed, t.n_failed);

        t = parse(1, "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n    b_test.go:9: want 1, got 2\n"
                     "--- FAIL: TestB (0.00s)\n=== RUN   TestC\n--- PASS: TestC (0.00s)\nFAIL\nFAIL\texample.com/m\t0.003s\n");
        CHECK(t.n_passed == 2 && t.n_failed == 1, "go test -v: %d/%d", t.n_passed, t.n_failed);
        t = parse(0, "ok  \texample.com/m/a\t0.003s\nok  \texample.com/m/b\t(cached)\n?   \texample.com/m/c\t[no test files]\n");
        CHECK(t.n_passed == 2 && t.n_failed == 0 && t.passed, "go test packages: %d/%d", t.n_passed, t.n_failed);

        t = parse(1, "PASS src/a.test.js\nFAIL src/b.test.js\n\nTest Suites: 1 failed, 1 passed, 2 total\n"
                     "Tests:       1 failed, 1 skipped, 10 passed, 12 total\nSnapshots:   0 total\nTime:        1.2 s\n");
        CHECK(t.n_passed == 10 && t.n_failed == 1, "jest: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, " Test Files  1 failed | 2 passed (3)\n      Tests  2 failed | 14 passed (16)\n");
        CHECK(t.n_passed == 14 && t.n_failed == 2, "vitest: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "  10 passing (20ms)\n  1 pending\n  2 failing\n\n  1) thing\n     AssertionError: expected 1\n");
        CHECK(t.n_passed == 10 && t.n_failed == 2, "mocha: %d/%d", t.n_passed, t.n_failed);

        t = parse(0, "running 3 tests\ntest a ... ok\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured\n"
                     "running 2 tests\ntest result: ok. 2 passed; 0 failed; 1 ignored\n   Doc-tests m\n"
                     "test result: ok. 0 passed; 0 failed; 0 ignored\n");
        CHECK(t.n_passed == 5 && t.n_failed == 0 && t.passed, "cargo summed over binaries: %d/%d", t.n_passed, t.n_failed);

        t = parse(1, "Finished in 0.1 seconds\n10 examples, 2 failures, 1 pending\n");
        CHECK(t.n_passed == 7 && t.n_failed == 2, "rspec: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "10 runs, 20 assertions, 1 failures, 0 errors, 0 skips\n");
        CHECK(t.n_passed == 9 && t.n_failed == 1, "minitest: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "12 tests, 3 failures\n");
        CHECK(t.n_passed == 9 && t.n_failed == 3, "'N tests, N failures': %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "95% tests passed, 1 tests failed out of 20\n\nTotal Test time (real) =   1.23 sec\n");
        CHECK(t.n_passed == 19 && t.n_failed == 1, "ctest: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "[==========] 12 tests from 3 test suites ran. (5 ms total)\n[  PASSED  ] 10 tests.\n"
                     "[  FAILED  ] 2 tests, listed below:\n[  FAILED  ] A.B\n[  FAILED  ] A.C\n");
        CHECK(t.n_passed == 10 && t.n_failed == 2, "gtest: %d/%d", t.n_passed, t.n_failed);
        t = parse(1, "Ok:                 8   \nExpected Fail:      0   \nFail:               1   \nUnexpected Pass:    0   \n"
                     "Skipped:            2   \nTimeout:            1   \n");
        CHECK(t.n_passed == 8 && t.n_failed == 2, "meson: %d/%d", t.n_passed, t.n_failed);

        t = parse(2, "make: *** [Makefile:3: test] Error 2\n");
        CHECK(t.n_passed == -1 && t.n_failed == -1 && !t.passed, "no counts: unknown");
        t = parse(1, "src/a.c:3:1: error: expected ';'\n1 error generated.\n");
        CHECK_INT_EQ(t.n_passed, -1, "compiler error counts are not tests: %d/%d", t.n_passed, t.n_failed);
        t = parse(0, NULL);
        CHECK(t.passed && t.n_passed == -1, "no output, exit 0: passed, counts unknown");
        CHECK_ERRNO(test_run_parse(0, "", NULL), -EINVAL, "NULL ret refused");

        /* Signatures: the same failure is recognized across runs whose
         * timings and addresses differ; another failure is another. */
        TestRun a = parse(1, "FAILED tests/test_a.py::test_x - assert 1 == 2\n== 1 failed, 3 passed in 0.53s ==\n"
                             "object at 0x7f3a2b1c in /tmp/pytest-of-u/pytest-17/x\n");
        TestRun b = parse(1, "FAILED tests/test_a.py::test_x - assert 1 == 2\n== 1 failed, 3 passed in 1.07s ==\n"
                             "object at 0x55aa00ff in /tmp/pytest-of-u/pytest-18/x\n");
        TestRun c = parse(1, "FAILED tests/test_a.py::test_y - assert 'a' == 'b'\n== 1 failed, 3 passed in 0.53s ==\n");
        TestRun d = parse(2, "FAILED tests/test_a.py::test_x - assert 1 == 2\n== 1 failed, 3 passed in 0.53s ==\n");
        CHECK_UINT_EQ(a.signature, b.signature, "same failure, same signature");
        CHECK(a.signature != c.signature, "another failing test, another signature");
        CHECK(a.signature != d.signature, "another exit code, another signature");
}

static void test_history(void) {
        TestRun h[8], base = parse(0, "== 10 passed in 0.1s ==\n");
        BreakerTrip t = {};
        TestRun fail = parse(1, "FAILED t.py::test_x - assert 1 == 2\n== 1 failed, 9 passed ==\n");
        TestRun other = parse(1, "FAILED t.py::test_y - KeyError: 'k'\n== 1 failed, 9 passed ==\n");

        /* Five identical failures in a row: stuck. Four: still trying. */
        for (unsigned i = 0; i < 8; i++)
                h[i] = fail;
        CHECK_ERRNO(breakers_check_tests(&config, h, 4, &base, &t), 0, "4 same failures: not yet");
        CHECK(breakers_check_tests(&config, h, 5, &base, &t) == 1 && t.breaker == BREAKER_TESTS_FAILING &&
              streq(t.reason, "tests failed 5 times in a row with the same failure (exit code 1, 1 failing)"),
              "5 same failures trip: %s", t.reason);
        breaker_trip_done(&t);

        h[1] = other;
        CHECK_ERRNO(breakers_check_tests(&config, h, 5, &base, &t), 0, "a different failure in between resets the count");
        CHECK_ERRNO(breakers_check_tests(&config, h, 6, &base, &t), 0, "4 in a row after it: not yet");
        CHECK_ERRNO(breakers_check_tests(&config, h, 7, &base, &t), 1, "5 in a row after it: trip");
        breaker_trip_done(&t);
        h[6] = base;
        CHECK_ERRNO(breakers_check_tests(&config, h, 7, &base, &t), 0, "a passing run ends the streak");

        /* Regression: green with fewer tests than at the start. */
        TestRun fewer = parse(0, "== 8 passed in 0.1s ==\n");
        h[0] = fewer;
        CHECK(breakers_check_tests(&config, h, 1, &base, &t) == 1 && t.breaker == BREAKER_TESTS_REGRESSED &&
              streq(t.reason, "tests passing dropped from 10 at the start to 8"), "regression: %s", t.reason);
        breaker_trip_done(&t);
        CHECK_ERRNO(breakers_check_tests(&config, h, 1, NULL, &t), 0, "no baseline, no comparison");
        TestRun more = parse(0, "== 12 passed in 0.1s ==\n");
        h[0] = more;
        CHECK_ERRNO(breakers_check_tests(&config, h, 1, &base, &t), 0, "more tests is fine");
        h[0] = parse(1, "== 3 failed, 7 passed ==\n");
        CHECK_ERRNO(breakers_check_tests(&config, h, 1, &base, &t), 0, "a failing run mid-work is not a regression");
        h[0] = parse(0, "all good\n");
        CHECK_ERRNO(breakers_check_tests(&config, h, 1, &base, &t), 0, "unknown counts are not compared");
        CHECK_ERRNO(breakers_check_tests(&config, h, 0, &base, &t), 0, "empty history");
}

static void test_network(void) {
        BreakerTrip t = {};

        /* What fetchers print when the sandbox has no network. */
        CHECK(command_output_needs_network("pip install requests",
                                           "WARNING: Retrying (Retry(total=4)) after connection broken by "
                                           "'NewConnectionError(...: Failed to establish a new connection: [Errno -3] "
                                           "Temporary failure in name resolution')'\nERROR: Could not find a version that "
                                           "satisfies the requirement requests (from versions: none)\n"), "pip");
        CHECK(command_output_needs_network("npm install", "npm ERR! code EAI_AGAIN\nnpm ERR! request to "
                                           "https://registry.npmjs.org/left-pad failed, reason: getaddrinfo EAI_AGAIN\n"), "npm");
        CHECK(command_output_needs_network("cargo build", "    Updating crates.io index\nwarning: spurious network error "
                                           "(2 tries remaining): [6] Couldn't resolve host name\n"), "cargo");
        CHECK(command_output_needs_network("go mod download", "go: example.com/x@v1.0.0: Get "
                                           "\"https://proxy.golang.org/x/@v/v1.0.0.mod\": dial tcp: lookup proxy.golang.org "
                                           "on 10.0.0.1:53: no such host\n"), "go");
        CHECK(command_output_needs_network("curl -sS https://example.com", "curl: (6) Could not resolve host: example.com\n"), "curl");
        CHECK(command_output_needs_network("git fetch", "fatal: unable to access 'https://github.com/x/y/': "
                                           "Could not resolve host: github.com\n"), "git");
        CHECK(command_output_needs_network("python fetch.py", "OSError: [Errno 101] Network is unreachable\n"),
              "network unreachable from any command");
        CHECK(command_output_needs_network("./gradlew build", "Connection refused (Connection refused)\n"),
              "refused connection of a fetcher");
        CHECK(command_output_needs_network("python app.py", "requests.exceptions.ConnectionError: "
                                           "HTTPSConnectionPool(host='api.example.com'): Connection refused for https://api.example.com\n"),
              "refused connection to a remote URL");

        /* Local services are the project's own business. */
        CHECK(!command_output_needs_network("pytest", "psycopg2.OperationalError: connection to server at \"localhost\" "
                                            "(127.0.0.1), port 5432 failed: Connection refused\n"), "refused on localhost");
        CHECK(!command_output_needs_network("pytest", "redis.exceptions.ConnectionError: Error 111 connecting to "
                                            "127.0.0.1:6379. Connection refused.\n"), "refused on 127.0.0.1");
        CHECK(!command_output_needs_network("python app.py", "ConnectionRefusedError: [Errno 111] Connection refused\n"),
              "bare refusal from a non-fetcher");
        CHECK(!command_output_needs_network("make", "src/a.c:3:1: error: expected ';'\n"), "compiler error");
        CHECK(!command_output_needs_network("curl http://localhost:8080/health",
                                            "curl: (7) Failed to connect to localhost port 8080: Connection refused\n"),
              "curl to a local server");
        CHECK(command_output_needs_network("curl https://example.com",
                                           "curl: (7) Failed to connect to example.com port 443: Connection timed out\n"),
              "curl to a remote server");
        CHECK(!command_output_needs_network("ls", NULL), "no output");

        CHECK(breakers_check_network(&config, "npm ci", 1, "npm ERR! code ENOTFOUND\n", &t) == 1 &&
              t.breaker == BREAKER_NETWORK && strstr(t.reason, "'npm ci'"), "network breaker: %s", t.reason);
        breaker_trip_done(&t);
        CHECK_ERRNO(breakers_check_network(&config, "npm ci", 0, "npm ERR! code ENOTFOUND\n", &t), 0,
                    "a command that succeeded needs nothing");

        CHECK_ERRNO(breakers_check_malformed(&config, 2, &t), 0, "2 malformed replies: not yet");
        CHECK(breakers_check_malformed(&config, 3, &t) == 1 && t.breaker == BREAKER_MALFORMED_OUTPUT, "3 trip: %s", t.reason);
        breaker_trip_done(&t);
}

/* A model that says it cannot do the task stops it for a person, with its
 * words as the reason; one that makes the same call with the same result
 * over and over is stopped too. */
static void test_gave_up_and_stuck(void) {
        BreakerTrip t = {};
        uint64_t recent[8];
        size_t n = 0;

        CHECK(streq(breaker_to_string(BREAKER_GAVE_UP), "gave-up") && breaker_from_string("stuck") == BREAKER_STUCK,
              "the new breakers' names");
        CHECK(breakers_check_gave_up(&config, "test_net needs the network.\nIt fails at the start too.", &t) == 1 &&
              t.breaker == BREAKER_GAVE_UP &&
              streq(t.reason, "the agent gave up: test_net needs the network. It fails at the start too."),
              "gave up: one line, the model's reason: %s", t.reason);
        breaker_trip_done(&t);
        CHECK(breakers_check_gave_up(&config, "", &t) == 1 && strstr(t.reason, "(no reason given)"), "no reason: %s",
              t.reason);
        breaker_trip_done(&t);

        /* The same call and result, whatever the timings in it. */
        uint64_t a = tool_call_signature("run_command", "{\"command\": \"ls\"}", "a b\n[exit status 0; 0.1 s]"),
                 b = tool_call_signature("run_command", "{\"command\": \"ls\"}", "a b\n[exit status 0; 0.3 s]"),
                 c = tool_call_signature("run_command", "{\"command\": \"ls -l\"}", "a b\n[exit status 0; 0.1 s]"),
                 d = tool_call_signature("run_command", "{\"command\": \"ls\"}", "a c\n[exit status 0; 0.1 s]");
        CHECK(a == b && a != c && a != d, "a call's signature: its arguments and its result, timings folded");
        recent[n++] = a;
        recent[n++] = c;
        recent[n++] = b;
        CHECK_UINT_EQ(tool_call_repeats(recent, n, a), 2, "counted among the recent calls");
        CHECK_ERRNO(breakers_check_stuck(&config, 4, "run_command {\"command\": \"ls\"}", &t), 0, "4 times: warned only");
        CHECK(breakers_check_stuck(&config, 5, "run_command {\"command\": \"ls\"}", &t) == 1 && t.breaker == BREAKER_STUCK &&
              streq(t.reason, "the model made the same call with the same result 5 times: run_command {\"command\": \"ls\"}"),
              "5 times: stuck: %s", t.reason);
        breaker_trip_done(&t);
}

int main(void) {
        if (breaker_config_init_defaults(&config) < 0)
                return 2;
        CHECK(config.max_consecutive_test_failures == 5 && config.max_files_changed == 20 &&
              config.max_lines_changed == 1000 && config.max_malformed == 3 && config.enabled[BREAKER_NETWORK] &&
              strv_length(config.protected_globs) > 20, "defaults");

        test_names();
        test_globs();
        test_classify();
        test_changes();
        test_parsers();
        test_history();
        test_network();
        test_gave_up_and_stuck();

        breaker_config_done(&config);
        breaker_config_done(&config);
        return tap_done();
}
