/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "micros.h"

int parse_micros(const char *s, uint64_t *ret) {
        uint64_t whole = 0, frac = 0;
        unsigned digits = 0;
        const char *p = s;

        if (!s || !(*p >= '0' && *p <= '9'))
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (whole > MICROS_MAX / MICROS_PER_UNIT)
                        return -ERANGE;
                whole = whole * 10 + (uint64_t) (*p - '0');
        }
        if (*p == '.') {
                p++;
                if (!(*p >= '0' && *p <= '9'))
                        return -EINVAL;
                for (; *p >= '0' && *p <= '9'; p++) {
                        if (digits == 6) {
                                /* Finer than a millionth cannot be held: refused rather than rounded. */
                                if (*p != '0')
                                        return -ERANGE;
                                continue;
                        }
                        frac = frac * 10 + (uint64_t) (*p - '0');
                        digits++;
                }
        }
        if (*p != '\0')
                return -EINVAL;
        for (; digits < 6; digits++)
                frac *= 10;
        if (whole > MICROS_MAX / MICROS_PER_UNIT || whole * MICROS_PER_UNIT + frac > MICROS_MAX)
                return -ERANGE;
        *ret = whole * MICROS_PER_UNIT + frac;
        return 0;
}

const char *format_micros(char buf[static 32], uint64_t micros) {
        int n = snprintf(buf, 32, "%llu.%06llu", (unsigned long long) (micros / MICROS_PER_UNIT),
                         (unsigned long long) (micros % MICROS_PER_UNIT));

        /* Keep two decimals, as money is read. */
        while (n > 0 && buf[n - 1] == '0' && buf[n - 3] != '.')
                buf[--n] = '\0';
        return buf;
}
