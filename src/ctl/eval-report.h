/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <json-c/json.h>

#include "eval-corpus.h"
#include "eval-run.h"

/* What the report is stamped with. */
typedef struct EvalStamp {
        const char *corpus_name, *corpus_version, *corpus_path;
        const char *version, *daemon_version;
        unsigned runs;
        double repository_map;          /* share of the tasks whose fix touches only files named */
        unsigned n_tasks, n_named;
        /* The daemon's ListModelProfiles(): an object a profile name, its
         * settings; NULL when the daemon does not say (an older one). */
        json_object *profiles;
} EvalStamp;

#define EVAL_MAX_BREAKERS 32

typedef struct EvalSummary {
        char *profile, *model;
        unsigned tasks, passed;         /* runs, and those with the right outcome */
        unsigned passed_alone;          /* passed with no person's step (EvalResult.person) */
        double pass_rate, low, high;    /* and the 95 % Wilson interval */
        unsigned unsolvable, unsolvable_right;  /* of them, of tasks that cannot be done */
        double median_steps, median_tokens, median_commands, median_seconds;
        double tokens_per_pass;         /* all tokens of the profile's runs over the passes */
        uint64_t tokens;
        unsigned outcomes[_EVAL_OUTCOME_MAX];
        struct {
                char *name;
                unsigned count;
        } breakers[EVAL_MAX_BREAKERS];
        unsigned n_breakers;
} EvalSummary;

/* The summary of the results whose profile is profile. */
int eval_summarize(const EvalResult *results, size_t n, const char *profile, EvalSummary *ret);
void eval_summary_done(EvalSummary *s);

/* The table of one profile: a line a task (its runs together), then the
 * summary's lines. */
void eval_print_profile(FILE *f, const EvalResult *results, size_t n, const EvalSummary *s, const EvalStamp *stamp);
void eval_print_stamp(FILE *f, const EvalStamp *stamp);

/* JSON lines: one object a run, one a profile's summary. */
int eval_write_result(FILE *f, const EvalResult *r);
int eval_write_summary(FILE *f, const EvalSummary *s, const EvalStamp *stamp);

/* agentfabctl eval --compare A B: the paired difference per task and
 * McNemar's test. Prints; returns an exit code. */
int eval_compare(const char *a, const char *b);
