/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "path-glob.h"
#include "test-run.h"

/* Circuit breakers: pure policy over what the agent did, no I/O. A tripped
 * breaker pauses the task for a person; the reason says exactly why. */

typedef enum Breaker {
        BREAKER_TESTS_FAILING,
        BREAKER_FILES_CHANGED,
        BREAKER_LINES_CHANGED,
        BREAKER_PROTECTED_PATH,
        BREAKER_TESTS_DELETED,
        BREAKER_TESTS_REGRESSED,
        BREAKER_DEPENDENCY_MANIFEST,
        BREAKER_NETWORK,
        BREAKER_BUDGET,
        BREAKER_MALFORMED_OUTPUT,
        /* The review stage's (src/daemon/review-stage.c, src/review/), at delivery. */
        BREAKER_SECRET,
        BREAKER_VULNERABLE_DEPENDENCY,
        BREAKER_REVIEW,
        BREAKER_COVERAGE_DROPPED,
        /* A binary file the agent asked to keep (keep_file). */
        BREAKER_BINARY_FILE,
        /* The model gave up (finish with cannot_complete), saying why. */
        BREAKER_GAVE_UP,
        /* The same tool call with the same result, again and again. */
        BREAKER_STUCK,
        _BREAKER_MAX,
        _BREAKER_INVALID = -EINVAL,
} Breaker;

/* "tests-failing", "files-changed", ... */
const char *breaker_to_string(Breaker b);
Breaker breaker_from_string(const char *s);

/* The same call with the same result: the model is warned at the first,
 * the task stops at the second. */
#define BREAKER_WARN_REPEATED_CALLS 3U
#define BREAKER_MAX_REPEATED_CALLS 5U

typedef struct BreakerConfig {
        unsigned max_consecutive_test_failures; /* same failure this many runs in a row; 0: no limit */
        unsigned max_files_changed;             /* more than this many files; 0: no limit */
        unsigned max_lines_changed;             /* more than this many lines added + removed; 0: no limit */
        char **protected_globs;                 /* path_glob_match() globs, matched ignoring case */
        char **manifest_names;                  /* basename globs, or path globs when they contain '/' */
        unsigned max_malformed;                 /* malformed model replies in a row; 0: no limit */
        unsigned warn_repeated_calls;           /* the same call with the same result: warned this often */
        unsigned max_repeated_calls;            /* and stopped; 0: no limit */
        bool enabled[_BREAKER_MAX];
} BreakerConfig;

/* Fills in the defaults (all breakers enabled; see breakers.c for the lists
 * and why). Returns -ENOMEM, in which case c is still safe to _done(). */
int breaker_config_init_defaults(BreakerConfig *c);
void breaker_config_done(BreakerConfig *c);

bool path_is_dependency_manifest(const BreakerConfig *c, const char *path);
bool path_is_test_file(const char *path);

typedef struct BreakerChange {
        const char *path;
        char status;            /* 'A', 'M', 'D', 'R' (path is the new name) */
        unsigned added, removed;
        const char *old_path;   /* 'R': the old name, or NULL */
} BreakerChange;

typedef struct BreakerTrip {
        Breaker breaker;
        char *reason;
} BreakerTrip;

/* Checks the cumulative changes since the task's base. Returns 1 and fills
 * *ret with the first breaker tripped, in this order: protected path,
 * tests deleted, dependency manifest, files changed, lines changed; or 0. */
int breakers_check_changes(const BreakerConfig *c, const BreakerChange *changes, size_t n, BreakerTrip *ret);

/* Checks the test history, oldest first. Trips
 *  - BREAKER_TESTS_FAILING when the last max_consecutive_test_failures runs
 *    all failed with the same signature (a model stuck on one failure; a
 *    changing failure is progress, bounded by the budget breaker instead);
 *  - BREAKER_TESTS_REGRESSED when the latest run passes but fewer tests
 *    passed than in the baseline (tests removed or skipped to get green).
 *    Failing runs are not compared: mid-work breakage is the failing
 *    breaker's business. Unknown counts are not compared. */
int breakers_check_tests(const BreakerConfig *c, const TestRun *history, size_t n, const TestRun *baseline, BreakerTrip *ret);

/* True when a failed command's output says it wanted the network (name
 * resolution, unreachable networks, package-manager fetch errors). Refused
 * connections and timeouts count only when the line does not name a
 * loopback address and the command fetches or the line names a URL. */
bool command_output_needs_network(const char *command, const char *output);

/* BREAKER_NETWORK for a failed command whose output needs the network. */
int breakers_check_network(const BreakerConfig *c, const char *command, int exit_code, const char *output, BreakerTrip *ret);

/* BREAKER_MALFORMED_OUTPUT when n_malformed replies in a row reached the limit. */
int breakers_check_malformed(const BreakerConfig *c, unsigned n_malformed, BreakerTrip *ret);

/* BREAKER_GAVE_UP with the model's reason (finish's summary) as the
 * task's Reason: one line, control characters blanked, bounded. */
int breakers_check_gave_up(const BreakerConfig *c, const char *reason, BreakerTrip *ret);

/* A signature of a tool call and its result: the tool, its arguments as
 * the model wrote them, and the result with what differs between runs of
 * the same thing folded (timings, addresses: test_run_fold_hash()). */
uint64_t tool_call_signature(const char *name, const char *arguments, const char *result);

/* How often sig is among the n recent signatures. */
unsigned tool_call_repeats(const uint64_t *recent, size_t n, uint64_t sig);

/* BREAKER_STUCK when the same call came with the same result repeats
 * times, the limit; call describes it (the tool and its arguments, cut). */
int breakers_check_stuck(const BreakerConfig *c, unsigned repeats, const char *call, BreakerTrip *ret);

void breaker_trip_done(BreakerTrip *t);
