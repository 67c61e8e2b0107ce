/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "time-util.h"
#include "trace.h"

static int enabled = -1;
static _Thread_local TracePhase phases[TRACE_PHASES_MAX];
static _Thread_local size_t n_phases;

bool trace_enabled(void) {
        /* Read once: the environment is the daemon's, fixed at start. A race
         * between two threads reading it first sets the same value. */
        if (enabled < 0) {
                const char *e = getenv("AGENTFAB_TRACE");
                enabled = e && (streq(e, "1") || streq(e, "yes") || streq(e, "true"));
        }
        return enabled > 0;
}

void trace_set_enabled(bool b) {
        enabled = b;
}

uint64_t trace_now_usec(void) {
        /* Never 0: TRACE_END() takes 0 for "not tracing". */
        return clock_now_usec(CLOCK_MONOTONIC) + 1;
}

void trace_add(const char *phase, uint64_t usec) {
        if (!trace_enabled() || !phase)
                return;
        for (size_t i = 0; i < n_phases; i++)
                if (strneq(phases[i].name, phase, sizeof(phases[i].name))) {
                        phases[i].usec += usec;
                        phases[i].calls++;
                        return;
                }
        if (n_phases >= TRACE_PHASES_MAX)
                return;
        TracePhase *p = &phases[n_phases++];
        (void) snprintf(p->name, sizeof(p->name), "%s", phase);
        p->usec = usec;
        p->calls = 1;
}

size_t trace_take(TracePhase ret[static TRACE_PHASES_MAX]) {
        size_t n = n_phases;

        memcpy(ret, phases, n * sizeof(TracePhase));
        n_phases = 0;
        return n;
}

char *trace_format(const TracePhase *p, size_t n) {
        char *buf = NULL;
        size_t size = 0;

        FILE *f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%s%s %.3f ms", i > 0 ? ", " : "", p[i].name, (double) p[i].usec / 1000.0);
                if (p[i].calls > 1)
                        fprintf(f, " (%u)", p[i].calls);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
