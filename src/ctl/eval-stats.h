/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* The statistics of agentfabctl eval's reports, with no I/O. */

/* Wilson's score interval of k successes in n trials for the normal
 * quantile z (1.959964 for 95 %): unlike the plain normal interval it stays
 * within [0, 1] and is not [p, p] at 0 or n successes, which matters for the
 * small corpora and the 0 % and 100 % that eval reports. n == 0 gives [0, 1]. */
void eval_wilson_interval(unsigned k, unsigned n, double z, double *ret_low, double *ret_high);

/* The median of n values (sorted in place); 0 when n == 0. */
double eval_median(double *values, size_t n);

/* McNemar's exact test on paired outcomes: b pairs passed only under A, c
 * only under B. The two-sided p-value of the binomial test of b out of
 * b + c at 1/2 (1 when b + c == 0): exact, since the discordant pairs of a
 * corpus of tens of tasks are too few for the chi-square form. */
double eval_mcnemar_p(unsigned b, unsigned c);
