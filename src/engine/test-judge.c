/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "macro.h"
#include "string-util.h"
#include "test-judge.h"

/* At most this many names of a list in a line; the rest are counted. */
#define NAMES_SHOWN 8u

static bool strv_has(char **l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

static int strv_push(char ***l, const char *s) {
        return strv_has(*l, s) ? 0 : strv_extend(l, s);
}

void test_comparison_done(TestComparison *c) {
        if (!c)
                return;
        strv_free(c->newly_failing);
        strv_free(c->fixed);
        strv_free(c->still_failing);
        *c = (TestComparison) {};
}

int test_run_compare(const TestRun *baseline, const TestRun *now, TestComparison *ret) {
        _cleanup_(test_comparison_done) TestComparison c = {};

        assert(ret);
        *ret = (TestComparison) {};
        if (!baseline || !now)
                return 0;

        if (now->passed) {
                for (size_t i = 0; i < baseline->n_failed_names; i++)
                        if (strv_push(&c.fixed, baseline->failed[i]) < 0)
                                return -ENOMEM;
                c.by_name = baseline->failed_complete || baseline->passed;
                *ret = c;
                c = (TestComparison) {};
                return 0;
        }

        for (size_t i = 0; i < now->n_failed_names; i++)
                if (strv_push(strv_has(baseline->failed, now->failed[i]) ? &c.still_failing : &c.newly_failing,
                              now->failed[i]) < 0)
                        return -ENOMEM;
        /* What failed at the baseline and is not named now is fixed only
         * if this run names all of its failures. */
        if (now->failed_complete)
                for (size_t i = 0; i < baseline->n_failed_names; i++)
                        if (!strv_has(now->failed, baseline->failed[i]) && strv_push(&c.fixed, baseline->failed[i]) < 0)
                                return -ENOMEM;
        c.by_name = now->failed_complete && (baseline->failed_complete || baseline->passed);
        *ret = c;
        c = (TestComparison) {};
        return 0;
}

static bool is_word_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* needle as a whole word of text, ignoring case. */
static bool word_in_text(const char *needle, size_t n, const char *text) {
        if (n == 0)
                return false;
        for (const char *p = text; *p; p++) {
                if (strncasecmp(p, needle, n) != 0)
                        continue;
                if ((p > text && is_word_char(p[-1]) && is_word_char(needle[0])) ||
                    (is_word_char(p[n]) && is_word_char(needle[n - 1])))
                        continue;
                return true;
        }
        return false;
}

/* A part of a name that says which test it is, not an English word:
 * "test_add", "TestAdd", "test2", "adds_numbers". */
static bool part_is_distinctive(const char *s, size_t n) {
        if (n < 4)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] == '_' || (s[i] >= '0' && s[i] <= '9') || (i > 0 && s[i] >= 'A' && s[i] <= 'Z'))
                        return true;
        return false;
}

bool test_name_in_text(const char *name, const char *text) {
        if (isempty(name) || isempty(text))
                return false;
        if (strlen(name) >= 4 && word_in_text(name, strlen(name), text))
                return true;

        /* The levels of a meson or node name ("demo / adds numbers", "math >
         * throws"): a phrase of a few words names a test as well. */
        for (const char *p = name; *p;) {
                const char *sep = strstr(p, " / "), *gt = strstr(p, " > ");
                if (!sep || (gt && gt < sep))
                        sep = gt;
                size_t n = sep ? (size_t) (sep - p) : strlen(p);
                if (n >= 8 && memchr(p, ' ', n) && word_in_text(p, n, text))
                        return true;
                if (!sep)
                        break;
                p = sep + 3;
        }

        /* The parts: between "::", ".", "/", " > ", " / ", "#", without
         * parameters ("[2]", "(i=1)"). */
        for (const char *p = name; *p;) {
                size_t n = strcspn(p, ":./>#[( ");
                if (part_is_distinctive(p, n) && word_in_text(p, n, text))
                        return true;
                p += n;
                if (*p == '[' || *p == '(') {
                        const char *close = strchr(p, *p == '[' ? ']' : ')');
                        p = close ? close + 1 : p + strlen(p);
                } else if (*p)
                        p++;
        }
        return false;
}

static int put_list(Buf *b, char **l) {
        size_t n = strv_length(l);
        int r = 0;

        for (size_t i = 0; i < n && i < NAMES_SHOWN && r >= 0; i++)
                r = buf_printf(b, "%s%s", i == 0 ? "" : ", ", l[i]);
        if (r >= 0 && n > NAMES_SHOWN)
                r = buf_printf(b, " and %zu more", n - NAMES_SHOWN);
        return r;
}

int test_run_judge(const TestRun *baseline, const TestRun *now, const char *requirement, char **ret_why) {
        _cleanup_(test_comparison_done) TestComparison c = {};
        _cleanup_strv_free_ char **about = NULL, **about_failing = NULL, **unrelated = NULL;
        _cleanup_(buf_done) Buf b = {};
        int r, verdict;

        assert(now);
        assert(ret_why);

        if (now->passed) {
                *ret_why = strdup("the tests pass");
                return *ret_why ? TEST_VERDICT_PASS : -ENOMEM;
        }

        if (!baseline || baseline->passed)
                r = buf_puts(&b, "the tests fail, and they passed before you started");
        else if (!baseline->failed_complete)
                r = buf_puts(&b, "the tests fail; they failed before you started too, but which tests failed then "
                             "cannot be read from that output, so only a passing run is accepted");
        else if (!now->failed_complete)
                r = buf_puts(&b, "the tests fail, and which tests fail cannot be read from the output (a build "
                             "error, a crash, a runner that names no tests?), so it cannot be compared with the "
                             "start");
        else
                r = 1;
        if (r < 0)
                return -ENOMEM;
        if (r == 0) {
                *ret_why = TAKE_PTR(b.s);
                return TEST_VERDICT_REFUSE;
        }

        r = test_run_compare(baseline, now, &c);
        if (r < 0)
                return r;
        if (c.newly_failing) {
                if (buf_puts(&b, "tests fail that passed before you started: ") < 0 || put_list(&b, c.newly_failing) < 0)
                        return -ENOMEM;
                *ret_why = TAKE_PTR(b.s);
                return TEST_VERDICT_REFUSE;
        }

        /* The tests the task is about: those the requirement names. */
        for (size_t i = 0; i < baseline->n_failed_names; i++)
                if (test_name_in_text(baseline->failed[i], requirement) && strv_push(&about, baseline->failed[i]) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < now->n_failed_names; i++)
                if (test_name_in_text(now->failed[i], requirement) && strv_push(&about, now->failed[i]) < 0)
                        return -ENOMEM;
        for (char **s = c.still_failing; s && *s; s++)
                if (strv_push(strv_has(about, *s) || !about ? &about_failing : &unrelated, *s) < 0)
                        return -ENOMEM;

        if (about_failing) {
                if (about)
                        r = buf_puts(&b, "the tests the goal and acceptance criteria name still fail: ");
                else
                        r = buf_puts(&b, "these tests failed before you started and still fail: ");
                if (r < 0 || put_list(&b, about_failing) < 0)
                        return -ENOMEM;
                if (!about && buf_puts(&b, "; the goal and acceptance criteria name none of the tests, so all of "
                                       "them are the task's (if they fail for reasons unrelated to the task, give up "
                                       "with finish and cannot_complete, saying so: a person can name the task's "
                                       "tests in the acceptance criteria)") < 0)
                        return -ENOMEM;
                verdict = TEST_VERDICT_REFUSE;
        } else {
                if (buf_puts(&b, "nothing fails that passed before you started, and the tests the goal and acceptance "
                             "criteria name pass (") < 0 || put_list(&b, about) < 0 ||
                    buf_puts(&b, "); failing as before you started, not the task's: ") < 0 ||
                    put_list(&b, unrelated) < 0)
                        return -ENOMEM;
                verdict = TEST_VERDICT_ACCEPT;
        }
        *ret_why = TAKE_PTR(b.s);
        return verdict;
}

static int put_counts(Buf *b, const TestRun *t) {
        int r;

        if (t->n_passed < 0 && t->n_failed < 0)
                return buf_puts(b, "no counts in the output");
        r = buf_printf(b, "%d passed, %d failed", MAX(t->n_passed, 0), MAX(t->n_failed, 0));
        if (r >= 0 && t->n_skipped > 0)
                r = buf_printf(b, ", %d skipped", t->n_skipped);
        if (r >= 0 && t->runner >= 0)
                r = buf_printf(b, " (%s)", test_runner_to_string(t->runner));
        return r;
}

int test_run_headline(const TestRun *now, const TestRun *baseline, unsigned repeats, unsigned limit, char **ret) {
        _cleanup_(test_comparison_done) TestComparison c = {};
        _cleanup_(buf_done) Buf b = {};
        int r;

        assert(now);
        assert(ret);

        r = buf_printf(&b, "Tests: exit status %d; ", now->exit_code);
        if (r >= 0)
                r = put_counts(&b, now);
        if (r >= 0)
                r = buf_puts(&b, ".");
        if (r < 0)
                return -ENOMEM;

        if (baseline) {
                r = test_run_compare(baseline, now, &c);
                if (r < 0)
                        return r;
                if (c.by_name) {
                        if (!c.newly_failing && !c.fixed && !c.still_failing)
                                r = buf_puts(&b, baseline->passed ? " As at the start: all pass." :
                                             " Against the start: no change by name.");
                        else {
                                r = buf_puts(&b, " Against the start:");
                                if (r >= 0 && c.newly_failing)
                                        r = buf_puts(&b, " newly failing: ") < 0 || put_list(&b, c.newly_failing) < 0 ||
                                                buf_puts(&b, ";") < 0 ? -ENOMEM : 0;
                                if (r >= 0 && c.fixed)
                                        r = buf_puts(&b, " fixed: ") < 0 || put_list(&b, c.fixed) < 0 ||
                                                buf_puts(&b, ";") < 0 ? -ENOMEM : 0;
                                if (r >= 0 && c.still_failing)
                                        r = buf_puts(&b, " still failing (failed at the start too): ") < 0 ||
                                                put_list(&b, c.still_failing) < 0 || buf_puts(&b, ";") < 0 ? -ENOMEM : 0;
                                if (r >= 0 && b.s[b.n - 1] == ';')
                                        b.s[b.n - 1] = '.';
                        }
                } else {
                        /* By the counts, and the names known on either side. */
                        r = buf_puts(&b, " Against the start (");
                        if (r >= 0)
                                r = baseline->passed ? buf_puts(&b, "all passed") :
                                        buf_printf(&b, "exit status %d, %s", baseline->exit_code,
                                                   baseline->n_failed >= 0 ? "" : "failures not counted");
                        if (r >= 0 && !baseline->passed && baseline->n_failed >= 0)
                                r = buf_printf(&b, "%d failed", baseline->n_failed);
                        if (r >= 0)
                                r = buf_puts(&b, ")");
                        if (r >= 0 && now->n_failed >= 0 && baseline->n_failed >= 0 && !baseline->passed)
                                r = buf_printf(&b, ": %d %s failing", abs(now->n_failed - baseline->n_failed),
                                               now->n_failed > baseline->n_failed ? "more" :
                                               now->n_failed < baseline->n_failed ? "fewer" : "as many");
                        if (r >= 0 && now->n_failed_names > 0)
                                r = buf_puts(&b, "; failing now: ") < 0 || put_list(&b, now->failed) < 0 ? -ENOMEM : 0;
                        if (r >= 0)
                                r = buf_puts(&b, ".");
                }
                if (r < 0)
                        return -ENOMEM;
        } else if (now->n_failed_names > 0) {
                if (buf_puts(&b, " Failing: ") < 0 || put_list(&b, now->failed) < 0 || buf_puts(&b, ".") < 0)
                        return -ENOMEM;
        }

        if (!now->passed && repeats > 0 && limit > 0 &&
            buf_printf(&b, " This same failure %u time%s in a row; at %u the task stops for a person "
                       "(MaxConsecutiveTestFailures=).", repeats, repeats == 1 ? "" : "s", limit) < 0)
                return -ENOMEM;

        *ret = TAKE_PTR(b.s);
        return 0;
}

int test_run_baseline_text(const TestRun *baseline, const char *requirement, char **ret) {
        _cleanup_strv_free_ char **about = NULL, **others = NULL;
        _cleanup_(buf_done) Buf b = {};
        int r;

        assert(baseline);
        assert(ret);

        r = buf_printf(&b, "Before you started, the test command %s (exit status %d; ",
                       baseline->passed ? "passed" : "failed", baseline->exit_code);
        if (r >= 0)
                r = put_counts(&b, baseline);
        if (r >= 0)
                r = buf_puts(&b, ").");
        if (r < 0)
                return -ENOMEM;

        if (baseline->passed)
                r = buf_puts(&b, " Nothing may fail when you finish.");
        else if (!baseline->failed_complete)
                r = buf_puts(&b, " Which tests failed cannot be read from its output: finish needs the test command "
                             "to pass.");
        else {
                for (size_t i = 0; i < baseline->n_failed_names; i++)
                        if (strv_push(test_name_in_text(baseline->failed[i], requirement) ? &about : &others,
                                      baseline->failed[i]) < 0)
                                return -ENOMEM;
                r = buf_puts(&b, " Failing then: ");
                if (r >= 0)
                        r = put_list(&b, baseline->failed);
                if (r >= 0)
                        r = buf_puts(&b, ".");
                if (r >= 0 && about) {
                        r = buf_puts(&b, " The goal and acceptance criteria name ");
                        if (r >= 0)
                                r = put_list(&b, about);
                        if (r >= 0)
                                r = buf_puts(&b, ": finish needs these to pass, and nothing that passed then to fail");
                        if (r >= 0 && others)
                                r = buf_puts(&b, "; the others (") < 0 || put_list(&b, others) < 0 ||
                                        buf_puts(&b, ") may go on failing as they did") < 0 ? -ENOMEM : 0;
                        if (r >= 0)
                                r = buf_puts(&b, ".");
                } else if (r >= 0)
                        r = buf_puts(&b, " The goal and acceptance criteria name none of them, so finish needs all of "
                                     "them to pass. If some fail for reasons unrelated to the task, give up (finish "
                                     "with cannot_complete) and say which and why: a person decides.");
        }
        if (r < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(b.s);
        return 0;
}
