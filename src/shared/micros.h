/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

/* Money as an integer of millionths of a currency's unit, the way budgets
 * (max_cost, MaxCost=) and the daemon's counters hold it: no floating
 * point between what a person types and what is compared. */

#define MICROS_PER_UNIT 1000000ULL
/* A bound well below UINT64_MAX (which means "none"): 10^12 units. */
#define MICROS_MAX (1000000000000ULL * MICROS_PER_UNIT)

/* "3", "0.50", "12.345678": a decimal number of units, at most six digits
 * after the point (more only if they are zeros). -EINVAL for anything
 * else (signs, exponents, spaces, an empty string), -ERANGE past MICROS_MAX. */
int parse_micros(const char *s, uint64_t *ret);

/* "0.50", "12.345678", "3.00": at least two decimals, trailing zeros past
 * them dropped. buf holds any uint64_t. */
const char *format_micros(char buf[static 32], uint64_t micros);
