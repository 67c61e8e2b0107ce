/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <time.h>

#include "macro.h"

/* The time of clock in microseconds. The clocks we read (CLOCK_MONOTONIC,
 * CLOCK_REALTIME, CLOCK_BOOTTIME) cannot fail with a valid timespec. */
static inline uint64_t clock_now_usec(clockid_t clock) {
        struct timespec ts;

        (void) clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}
