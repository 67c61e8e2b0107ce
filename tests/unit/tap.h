/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A minimal TAP producer: meson runs each test binary with protocol 'tap'
 * and counts every check. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

static unsigned tap_n = 0, tap_failed = 0;

#define CHECK(cond, ...)                                                        \
        do {                                                                    \
                tap_n++;                                                        \
                if (cond)                                                       \
                        printf("ok %u - ", tap_n);                              \
                else {                                                          \
                        tap_failed++;                                           \
                        printf("not ok %u - %s:%d: ", tap_n, __FILE__, __LINE__); \
                }                                                               \
                printf(__VA_ARGS__);                                            \
                printf("\n");                                                   \
        } while (0)

static inline int tap_done(void) {
        printf("1..%u\n", tap_n);
        return tap_failed ? 1 : 0;
}
