/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <math.h>

#include "eval-stats.h"
#include "tap.h"

#define Z 1.959963984540054

static bool near(double a, double b) {
        return fabs(a - b) < 5e-4;
}

/* The interval every report prints beside a pass rate: it must match
 * Wilson's published values, stay within [0, 1], and be wide at the 0 %
 * and 100 % that the null agent and the oracle score. */
static void test_wilson(void) {
        double lo, hi;

        eval_wilson_interval(81, 263, Z, &lo, &hi);   /* Wilson (1927), via Newcombe (1998): 0.2553-0.3662 */
        CHECK(near(lo, 0.2553) && near(hi, 0.3662), "81 of 263: %.4f-%.4f", lo, hi);
        eval_wilson_interval(0, 30, Z, &lo, &hi);
        CHECK(lo == 0 && near(hi, 0.1135), "none of 30: 0-%.4f, not 0-0", hi);
        eval_wilson_interval(30, 30, Z, &lo, &hi);
        CHECK(hi == 1 && near(lo, 0.8865), "all of 30: %.4f-1", lo);
        eval_wilson_interval(0, 0, Z, &lo, &hi);
        CHECK(lo == 0 && hi == 1, "no task: the whole range");
        eval_wilson_interval(5, 10, Z, &lo, &hi);
        CHECK(near(lo + hi, 1.0) && near(lo, 0.2366), "half: symmetric around 0.5 (%.4f-%.4f)", lo, hi);
}

/* Medians of passed tasks' steps and tokens: odd and even counts, unsorted
 * input, and none at all. */
static void test_median(void) {
        double odd[] = { 9, 1, 5 }, even[] = { 4, 1, 3, 2 };

        CHECK(eval_median(odd, 3) == 5, "median of 3 values");
        CHECK(eval_median(even, 4) == 2.5, "median of 4 values is the mean of the middle two");
        CHECK(eval_median(NULL, 0) == 0, "median of nothing is 0");
}

/* --compare's test: exact two-sided binomial on the discordant pairs. */
static void test_mcnemar(void) {
        CHECK(eval_mcnemar_p(0, 0) == 1, "no discordant pair: p = 1");
        CHECK(near(eval_mcnemar_p(0, 6), 0.03125), "0 against 6: p = 2/64 (%.5f)", eval_mcnemar_p(0, 6));
        CHECK(near(eval_mcnemar_p(3, 3), 1), "3 against 3: p = 1");
        CHECK(near(eval_mcnemar_p(2, 8), 0.1094), "2 against 8: p = 0.1094 (%.4f)", eval_mcnemar_p(2, 8));
        CHECK(eval_mcnemar_p(0, 1000) < 1e-100 && eval_mcnemar_p(0, 1000) >= 0, "1000 discordant pairs neither "
              "overflow nor go negative");
}

int main(void) {
        test_wilson();
        test_median();
        test_mcnemar();
        return tap_done();
}
