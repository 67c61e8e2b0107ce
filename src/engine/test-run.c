/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "string-util.h"
#include "test-run.h"

/* A test command's output read for its counts and a signature of its
 * failure, for the test breakers (see test_run_parse()). */

#define FNV_OFFSET TEST_RUN_HASH_INIT
#define FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv_byte(uint64_t h, unsigned char c) {
        return (h ^ c) * FNV_PRIME;
}

static uint64_t fnv_int(uint64_t h, int v) {
        for (unsigned i = 0; i < sizeof(v); i++)
                h = fnv_byte(h, (unsigned char) ((unsigned) v >> (8 * i)));
        return h;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_hex(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Digit runs and 0x... numbers are timings, line numbers of the runner,
 * addresses, PIDs. */
uint64_t test_run_fold_hash(uint64_t h, const char *s, size_t l) {
        for (size_t i = 0; i < l;) {
                if (s[i] == '0' && i + 1 < l && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
                        i += 2;
                        while (i < l && is_hex(s[i]))
                                i++;
                        h = fnv_byte(h, '#');
                } else if (is_digit(s[i])) {
                        while (i < l && is_digit(s[i]))
                                i++;
                        h = fnv_byte(h, '#');
                } else if (l - i >= 5 && strneq(s + i, "/tmp/", 5)) {
                        while (i < l && !strchr(" \t'\":)", s[i]))
                                i++;
                        h = fnv_byte(h, '@');
                } else if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
                        while (i < l && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
                                i++;
                        h = fnv_byte(h, ' ');
                } else
                        h = fnv_byte(h, (unsigned char) s[i++]);
        }
        return fnv_byte(h, '\n');
}

static bool line_is_failure(const char *s) {
        static const char *const markers[] = {
                "FAIL", "Error", "ERROR", "error:", "assert", "Assert", "not ok", "panic", "Traceback",
                "Exception", "expected", "Expected",
        };

        for (size_t i = 0; i < ELEMENTSOF(markers); i++)
                if (strstr(s, markers[i]))
                        return true;
        return false;
}

/* Parses a number at s (clamped), returns its end. */
static const char *parse_count(const char *s, int *ret) {
        long v = 0;

        while (is_digit(*s)) {
                if (v < INT_MAX / 20)
                        v = v * 10 + (*s - '0');
                s++;
        }
        *ret = (int) v;
        return s;
}

/* The value after "key=" somewhere in s, or 0. */
static int keyed_count(const char *s, const char *key) {
        const char *p = strstr(s, key);
        int v = 0;

        if (p && is_digit(p[strlen(key)]))
                (void) parse_count(p + strlen(key), &v);
        return v;
}

typedef enum SummaryKind {
        SUMMARY_NONE,
        SUMMARY_LINE,   /* one line with everything */
        SUMMARY_TAP,    /* "# pass N", "# fail N" */
        SUMMARY_MESON,  /* "Ok: N", "Fail: N", "Timeout: N", "Unexpected Pass: N" */
        SUMMARY_GTEST,  /* "[  PASSED  ] N tests.", "[  FAILED  ] N tests" */
        SUMMARY_MOCHA,  /* "N passing", "N failing" */
} SummaryKind;

typedef struct Summary {
        SummaryKind kind;
        int passed, failed;
} Summary;

static void summary_part(Summary *s, SummaryKind kind, int passed, int failed) {
        if (s->kind != kind)
                *s = (Summary) { .kind = kind, .passed = -1, .failed = -1 };
        if (passed >= 0)
                s->passed = passed;
        if (failed >= 0)
                s->failed = MAX(s->failed, 0) + failed;
}

/* " in 0.13s" ending a line: pytest's summary. */
static bool pytest_timing(const char *s) {
        const char *p = strstr(s, " in ");

        if (!p || !is_digit(p[4]))
                return false;
        p += 4;
        while (is_digit(*p) || *p == '.')
                p++;
        return *p == 's' && (p[1] == '\0' || p[1] == ' ');
}

/* Counts "<number> <word>" pairs of a summary line. Returns true if the line
 * looks like a test summary. Mocha's split lines come back as parts. */
static bool parse_counts_line(const char *s, Summary *sum) {
        int passed = -1, failed = -1, total = -1, skipped = 0, passing = -1, failing = -1;
        for (const char *p = s; *p;) {
                int v;

                if (!is_digit(*p) || (p > s && (is_alpha(p[-1]) || is_digit(p[-1]) || p[-1] == '_' || p[-1] == '.'))) {
                        p++;
                        continue;
                }
                p = parse_count(p, &v);
                if (*p != ' ')
                        continue;
                while (*p == ' ')
                        p++;

                const char *w = p;
                while (is_alpha(*p))
                        p++;
                size_t l = (size_t) (p - w);
                if (l == 0 || is_digit(*p))
                        continue;

#define WORD(x) (l == strlen(x) && strncasecmp(w, x, l) == 0)
                if (WORD("passed"))
                        passed = MAX(passed, 0) + v;
                else if (WORD("passing"))
                        passing = v;
                else if (WORD("failed") || WORD("failures") || WORD("failure") || WORD("errors") || WORD("error"))
                        failed = MAX(failed, 0) + v;
                else if (WORD("failing"))
                        failing = v;
                else if (WORD("tests") || WORD("test") || WORD("examples") || WORD("example") || WORD("runs") ||
                         WORD("total"))
                        total = total < 0 ? v : total;
                else if (WORD("skipped") || WORD("skips") || WORD("skip") || WORD("pending") || WORD("pendings") ||
                         WORD("omissions") || WORD("xfailed") || WORD("ignored") || WORD("todo"))
                        skipped += v;
#undef WORD
        }

        if (passing >= 0 || failing >= 0) {
                summary_part(sum, SUMMARY_MOCHA, passing, failing);
                return true;
        }
        if (passed < 0 && failed < 0)
                return false;
        /* "failed" alone ("1 error generated") says nothing about tests,
         * unless a total came with it ("10 examples, 2 failures") or it is
         * pytest's summary ("1 error in 0.13s": a module that did not
         * import). */
        if (passed < 0 && total < 0 && !pytest_timing(s))
                return false;
        if (passed < 0)
                passed = MAX(total - MAX(failed, 0) - skipped, 0);

        *sum = (Summary) { .kind = SUMMARY_LINE, .passed = passed, .failed = MAX(failed, 0) };
        return true;
}

/* "Key:   N" at the start of a line. */
static bool line_key_count(const char *s, const char *key, int *ret) {
        size_t l = strlen(key);

        if (!strneq(s, key, l))
                return false;
        s += l;
        while (*s == ' ' || *s == '\t')
                s++;
        if (!is_digit(*s))
                return false;
        s = parse_count(s, ret);
        return *s == '\0' || *s == ' ' || *s == '\t';
}

int test_run_parse_full(int exit_code, const char *text, size_t size, TestRun *ret) {
        Summary sum = { .kind = SUMMARY_NONE, .passed = -1, .failed = -1 };
        int cargo_passed = 0, cargo_failed = 0, go_pass = 0, go_fail = 0, go_ok_pkgs = 0, go_fail_pkgs = 0;
        int tap_ok = 0, tap_not_ok = 0, unittest_ran = -1;
        bool cargo = false;
        uint64_t h_fail = FNV_OFFSET, h_all = FNV_OFFSET;
        bool any_failure_line = false;
        TestOutput out = {};
        char line[4096];
        int r;

        if (!ret)
                return -EINVAL;
        *ret = (TestRun) { .exit_code = exit_code, .n_passed = -1, .n_failed = -1, .n_skipped = -1,
                           .runner = _TEST_RUNNER_INVALID };
        if (!text)
                size = 0;

        for (const char *p = text, *end = text + size; p && p < end;) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
                int v;

                test_output_clean_line(p, l, line, sizeof(line));
                p += l + (nl ? 1 : 0);

                h_all = test_run_fold_hash(h_all, line, strlen(line));
                if (line_is_failure(line)) {
                        h_fail = test_run_fold_hash(h_fail, line, strlen(line));
                        any_failure_line = true;
                }

                /* Raw lines first: TAP, go test. */
                if (strneq(line, "not ok", 6) && (line[6] == '\0' || line[6] == ' ')) {
                        tap_not_ok++;
                        continue;
                }
                if (strneq(line, "ok", 2) && (line[2] == '\0' || line[2] == ' ' || line[2] == '\t')) {
                        const char *q = line + 2;
                        q += strspn(q, " \t");
                        if (*q == '\0' || is_digit(*q) || *q == '-')
                                tap_ok++;
                        else if (strchr(line, '\t'))
                                go_ok_pkgs++;
                        continue;
                }
                if (strneq(line, "FAIL\t", 5)) {
                        go_fail_pkgs++;
                        continue;
                }
                if (strneq(line, "--- PASS:", 9)) {
                        go_pass++;
                        continue;
                }
                if (strneq(line, "--- FAIL:", 9)) {
                        go_fail++;
                        continue;
                }

                const char *s = line + strspn(line, " \t");

                /* cargo: one line per test binary, summed. */
                if (strneq(s, "test result:", 12)) {
                        Summary c = {};
                        if (parse_counts_line(s, &c) && c.kind == SUMMARY_LINE) {
                                cargo_passed += c.passed;
                                cargo_failed += c.failed;
                                cargo = true;
                        }
                        continue;
                }

                /* unittest: "Ran N tests in 0.1s", then "OK" or "FAILED (...)". */
                if (strneq(s, "Ran ", 4) && is_digit(s[4])) {
                        (void) parse_count(s + 4, &unittest_ran);
                        continue;
                }
                if (unittest_ran >= 0 && (streq(s, "OK") || strneq(s, "OK (", 4))) {
                        int skipped = keyed_count(s, "skipped=") + keyed_count(s, "expected failures=");
                        sum = (Summary) { SUMMARY_LINE, MAX(unittest_ran - skipped, 0), 0 };
                        unittest_ran = -1;
                        continue;
                }
                if (unittest_ran >= 0 && strneq(s, "FAILED (", 8)) {
                        int f = keyed_count(s, "failures=") + keyed_count(s, "errors=");
                        int skipped = keyed_count(s, "skipped=") + keyed_count(s, "expected failures=");
                        sum = (Summary) { SUMMARY_LINE, MAX(unittest_ran - f - skipped, 0), f };
                        unittest_ran = -1;
                        continue;
                }

                /* TAP producers' summary comments; node's spec reporter's. */
                if (line_key_count(s, "# pass", &v) || line_key_count(s, "\xe2\x84\xb9 pass", &v)) {
                        summary_part(&sum, SUMMARY_TAP, v, -1);
                        continue;
                }
                if (line_key_count(s, "# fail", &v) || line_key_count(s, "\xe2\x84\xb9 fail", &v)) {
                        summary_part(&sum, SUMMARY_TAP, -1, v);
                        continue;
                }

                /* meson test. */
                if (line_key_count(s, "Ok:", &v)) {
                        summary_part(&sum, SUMMARY_MESON, v, -1);
                        continue;
                }
                if (sum.kind == SUMMARY_MESON &&
                    (line_key_count(s, "Fail:", &v) || line_key_count(s, "Timeout:", &v) ||
                     line_key_count(s, "Unexpected Pass:", &v))) {
                        summary_part(&sum, SUMMARY_MESON, -1, v);
                        continue;
                }

                /* googletest. */
                if (strneq(s, "[  PASSED  ] ", 13) && is_digit(s[13])) {
                        (void) parse_count(s + 13, &v);
                        summary_part(&sum, SUMMARY_GTEST, v, -1);
                        continue;
                }
                if (strneq(s, "[  FAILED  ] ", 13) && is_digit(s[13])) {
                        const char *e = parse_count(s + 13, &v);
                        if (strneq(e, " test", 5))
                                summary_part(&sum, SUMMARY_GTEST, -1, v);
                        continue;
                }

                /* ctest: "95% tests passed, 1 tests failed out of 20". */
                const char *q = strstr(s, "tests failed out of ");
                if (q && strstr(s, "tests passed")) {
                        int total, f = 0;
                        const char *b = q;
                        while (b > s && b[-1] == ' ')
                                b--;
                        while (b > s && is_digit(b[-1]))
                                b--;
                        (void) parse_count(b, &f);
                        (void) parse_count(q + strlen("tests failed out of "), &total);
                        sum = (Summary) { SUMMARY_LINE, MAX(total - f, 0), f };
                        continue;
                }

                /* Lines that count something else than tests. */
                if (strneq(s, "Test Suites:", 12) || strneq(s, "assertions:", 11) || strneq(s, "Snapshots:", 10))
                        continue;

                (void) parse_counts_line(s, &sum);
        }

        TestRun t = { .exit_code = exit_code, .n_passed = -1, .n_failed = -1, .n_skipped = -1,
                      .runner = _TEST_RUNNER_INVALID };
        if (cargo) {
                t.n_passed = cargo_passed;
                t.n_failed = cargo_failed;
        } else if (sum.kind != SUMMARY_NONE) {
                t.n_passed = sum.passed;
                t.n_failed = sum.failed;
                /* Split formats print the failure line only when something failed. */
                if (t.n_passed >= 0 && t.n_failed < 0)
                        t.n_failed = 0;
        } else if (go_pass + go_fail > 0) {
                t.n_passed = go_pass;
                t.n_failed = go_fail;
        } else if (tap_ok + tap_not_ok > 0) {
                t.n_passed = tap_ok;
                t.n_failed = tap_not_ok;
        } else if (go_ok_pkgs + go_fail_pkgs > 0) {
                t.n_passed = go_ok_pkgs;
                t.n_failed = go_fail_pkgs;
        }
        t.passed = exit_code == 0 && t.n_failed <= 0;

        uint64_t h = fnv_int(FNV_OFFSET, exit_code);
        h = fnv_int(h, t.n_failed);
        h ^= any_failure_line ? h_fail : h_all;
        t.signature = h * FNV_PRIME;

        /* The runner, its skips and the names of what failed. */
        r = test_output_parse(text ?: "", size, &out);
        if (r < 0)
                return r;
        t.runner = out.runner;
        t.n_skipped = out.n_skipped;
        t.failed = TAKE_PTR(out.failed);
        t.n_failed_names = out.n_failed;
        /* ctest counts a skipped test among those that passed. */
        if (t.runner == TEST_RUNNER_CTEST && t.n_passed > 0 && t.n_skipped > 0)
                t.n_passed = MAX(t.n_passed - t.n_skipped, 0);
        /* Every failure named: and a failed run with no failure counted
         * (a build error, a crash after the tests) is not explained by
         * names. */
        t.failed_complete = t.runner >= 0 && !out.truncated && t.n_failed >= 0 &&
                out.n_reports >= (size_t) t.n_failed && (exit_code == 0 || t.n_failed > 0);

        *ret = t;
        return 0;
}

int test_run_parse(int exit_code, const char *output, TestRun *ret) {
        return test_run_parse_full(exit_code, output, output ? strlen(output) : 0, ret);
}

void test_run_done(TestRun *t) {
        if (!t)
                return;
        strv_free(t->failed);
        t->failed = NULL;
        t->n_failed_names = 0;
        t->failed_complete = false;
}
