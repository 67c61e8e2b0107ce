/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A corpus of agentfabctl eval, as agentfab-corpus(5) describes it: a
 * directory with corpus.json and one directory a task. */

typedef struct EvalTask {
        char *name;             /* the task's directory name: letters, digits, ".", "_", "-" */
        char *dir;              /* its absolute path */
        char *goal, *acceptance, *test, *grade, *language, *kind, *environment, *reason;
        char **files;           /* what the reference fix touches */
        char **limits;          /* "KEY=N", as submit's --limit= */
        bool solvable;          /* false: the right outcome is not succeeding */
        unsigned timeout_sec;   /* of the grading command */
        bool files_named;       /* each of files is named in the goal, acceptance or test */
} EvalTask;

typedef struct EvalCorpus {
        char *path, *name, *version;
        EvalTask *tasks;
        size_t n_tasks;
} EvalCorpus;

/* Loads the corpus at path, only the tasks whose names match one of the
 * comma-separated fnmatch(3) globs (all when NULL). Problems are printed, with the task's name; returns
 * 0 or a negative errno (-EINVAL for a malformed corpus, -ENOENT when no
 * task matched). */
int eval_corpus_load(const char *path, const char *glob, EvalCorpus *ret);
void eval_corpus_done(EvalCorpus *c);

/* Whether every one of files is named (as its path or its last component)
 * in text: the repository-map figure of the report. */
bool eval_files_named(char **files, const char *text);
