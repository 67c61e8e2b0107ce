/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <systemd/sd-bus.h>

/* agentfabctl eval: measures agents on a corpus of tasks (agentfabctl(1),
 * agentfab-corpus(5)). Its options are parsed with agentfabctl's, from
 * this table: EVAL_LONG_OPTIONS(base) in the getopt table, and
 * eval_parse_option(c - base, optarg) for a value from base on. */
enum {
        EVAL_OPT_RUNS,
        EVAL_OPT_TASKS,
        EVAL_OPT_ORACLE,
        EVAL_OPT_NULL,
        EVAL_OPT_AGENT,
        EVAL_OPT_COMPARE,
        EVAL_OPT_JOBS,
        EVAL_OPT_BUILTIN_PROFILE,
        EVAL_OPT_BUILTIN_PORT,
        EVAL_OPT_TIMEOUT,
        EVAL_OPT_KEEP,
        _EVAL_OPT_MAX,
};

#define EVAL_LONG_OPTIONS(base)                                                                         \
        { "runs",            required_argument, NULL, (base) + EVAL_OPT_RUNS            },              \
        { "tasks",           required_argument, NULL, (base) + EVAL_OPT_TASKS           },              \
        { "oracle",          no_argument,       NULL, (base) + EVAL_OPT_ORACLE          },              \
        { "null",            no_argument,       NULL, (base) + EVAL_OPT_NULL            },              \
        { "agent",           required_argument, NULL, (base) + EVAL_OPT_AGENT           },              \
        { "compare",         no_argument,       NULL, (base) + EVAL_OPT_COMPARE         },              \
        { "jobs",            required_argument, NULL, (base) + EVAL_OPT_JOBS            },              \
        { "builtin-profile", required_argument, NULL, (base) + EVAL_OPT_BUILTIN_PROFILE },              \
        { "builtin-port",    required_argument, NULL, (base) + EVAL_OPT_BUILTIN_PORT    },              \
        { "timeout",         required_argument, NULL, (base) + EVAL_OPT_TIMEOUT         },              \
        { "keep",            no_argument,       NULL, (base) + EVAL_OPT_KEEP            }

/* Returns 1, or a negative errno with the problem printed. */
int eval_parse_option(int option, const char *arg);

/* The verb: argv[0] is "eval", then the corpus (or, with --compare, the
 * two reports). model is --model=, json_file --json=FILE. connect makes
 * the bus connection (not needed for --compare). Returns an exit code. */
int eval_verb(int argc, char *argv[], const char *model, const char *json_file, bool ask_password,
              int (*connect)(sd_bus **ret));
void eval_options_free(void);
