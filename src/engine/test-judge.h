/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "test-run.h"

/* A test run against the task's baseline (the run of the test command
 * before the agent changed anything): what the model is told of it, and
 * whether finish may deliver it. Pure policy, no I/O. */

typedef struct TestComparison {
        char **newly_failing;      /* failing now, not at the baseline */
        char **fixed;              /* failing at the baseline, not now */
        char **still_failing;      /* failing at both */
        bool by_name;              /* both runs name every failure: the lists are the whole truth */
} TestComparison;

/* Compares by name where the runs name their failures. A run that passes
 * fixed every failure of the baseline, whatever its output names. Returns
 * 0 or -ENOMEM; *ret is safe to _done() in any case. */
int test_run_compare(const TestRun *baseline, const TestRun *now, TestComparison *ret);
void test_comparison_done(TestComparison *c);

/* Whether text (the goal and the acceptance criteria) names the test: its
 * whole name ("test_calc.py::test_add", "adds numbers"), or a part of it
 * that looks like an identifier rather than a word ("test_calc",
 * "test_add", "TestAdd", "adds_numbers", but not "tests" or "math"), as a
 * whole word, ignoring case. */
bool test_name_in_text(const char *name, const char *text);

typedef enum TestVerdict {
        TEST_VERDICT_PASS,          /* the tests pass */
        TEST_VERDICT_ACCEPT,        /* they fail, but only as at the baseline, and not the task's */
        TEST_VERDICT_REFUSE,
} TestVerdict;

/* finish's rule. A run that passes is accepted. A failing run is accepted
 * only when both it and the baseline name every failure, nothing fails
 * that did not fail at the baseline, and none of the tests the task is
 * about fails. The tests the task is about are those the requirement (goal
 * and acceptance criteria) names, among the failures of both runs; when it
 * names none, every test that failed at the baseline is. So a suite that
 * was red for unrelated reasons does not trap an agent whose requirement
 * names its tests, and a requirement that names none is met only by green.
 * Returns the verdict and, in *ret_why, one sentence for the model and the
 * person (what passed, or why not); negative errno on failure. */
int test_run_judge(const TestRun *baseline, const TestRun *now, const char *requirement, char **ret_why);

/* The first line of every test result the model sees: the exit status, the
 * counts where the output has them, the comparison with the baseline
 * (newly failing, fixed, still failing, by name where known; NULL
 * baseline: none) and, for a failing run, how often this same failure has
 * come in a row of the limit after which the tests-failing breaker stops
 * the task (limit 0: none). One line, no newline. */
int test_run_headline(const TestRun *now, const TestRun *baseline, unsigned repeats, unsigned limit, char **ret);

/* The tests of the baseline for the first prompt: "exit status 1; 3
 * passed, 2 failed. Failing then: a, b." or "all pass". */
int test_run_baseline_text(const TestRun *baseline, const char *requirement, char **ret);
