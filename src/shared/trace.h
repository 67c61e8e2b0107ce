/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An opt-in trace of where a step's time goes: with AGENTFAB_TRACE=1 in the
 * daemon's environment, code marks its phases (trace_add()), and whoever
 * owns the step takes the sums (trace_take()) and journals them. Without
 * it, every call is a check of one flag. The phases are kept per thread:
 * work done on a worker thread is traced where it runs. */

#define TRACE_PHASES_MAX 16U
#define TRACE_PHASE_NAME_MAX 24U

typedef struct TracePhase {
        char name[TRACE_PHASE_NAME_MAX];  /* [a-z0-9_] */
        uint64_t usec;                    /* summed over the calls */
        unsigned calls;
} TracePhase;

bool trace_enabled(void);
/* For tests and benchmarks: overrides the environment. */
void trace_set_enabled(bool b);
uint64_t trace_now_usec(void);
/* Adds usec to the phase named (a static string of [a-z0-9_], at most 23
 * characters; more than TRACE_PHASES_MAX distinct names are dropped). */
void trace_add(const char *phase, uint64_t usec);
/* Copies the phases recorded on this thread since the last call (in the
 * order first seen) and forgets them. Returns how many. */
size_t trace_take(TracePhase ret[static TRACE_PHASES_MAX]);
/* "scan 0.41 ms, hash 0.02 ms (3)" */
char *trace_format(const TracePhase *p, size_t n);

/* t0 = TRACE_BEGIN(); ...; TRACE_END("scan", t0); */
#define TRACE_BEGIN() (trace_enabled() ? trace_now_usec() : UINT64_C(0))
#define TRACE_END(phase, t0)                                                    \
        do {                                                                    \
                if ((t0) != 0)                                                  \
                        trace_add(phase, trace_now_usec() - (t0));              \
        } while (0)
