/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <math.h>
#include <stdlib.h>

#include "eval-stats.h"

void eval_wilson_interval(unsigned k, unsigned n, double z, double *ret_low, double *ret_high) {
        if (n == 0 || k > n) {
                *ret_low = 0;
                *ret_high = 1;
                return;
        }
        double p = (double) k / n, z2 = z * z;
        double centre = (p + z2 / (2.0 * n)) / (1 + z2 / n);
        double half = z * sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / (1 + z2 / n);
        double lo = centre - half, hi = centre + half;

        /* At 0 and n successes the bound is exactly 0 or 1, not a rounding
         * error away from it. */
        *ret_low = k == 0 ? 0 : lo < 0 ? 0 : lo;
        *ret_high = k == n ? 1 : hi > 1 ? 1 : hi;
}

static int compare_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

double eval_median(double *values, size_t n) {
        if (n == 0)
                return 0;
        qsort(values, n, sizeof(double), compare_double);
        return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double eval_mcnemar_p(unsigned b, unsigned c) {
        unsigned n = b + c, m = b < c ? b : c;
        double sum = 0;

        if (n == 0)
                return 1;
        /* P(X <= m) for X ~ Bin(n, 1/2), through logarithms so that large
         * n neither overflows the binomial coefficients nor underflows 2^-n. */
        for (unsigned i = 0; i <= m; i++)
                sum += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
        sum *= 2;
        return sum > 1 ? 1 : sum;
}
