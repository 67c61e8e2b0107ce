/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The ledger: a task's own git history. Each task gets a bare repository
 * (<task_dir>/ledger.git) that only the daemon sees, and a workspace
 * (<task_dir>/workspace) that is the repository's work tree but has no .git
 * inside, so nothing the sandbox does can reach the history. Checkpoints are
 * commits on one branch with machine-readable trailers; delivery is a diff,
 * an mbox, a bundle or a push of that branch.
 *
 * All calls block (they do file and object I/O); none of them runs a
 * program, a hook or a filter. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

typedef struct Ledger Ledger;

typedef struct LedgerOptions {
        uint64_t max_bytes;      /* bound on what is imported (objects + checkout); UINT64_MAX none */
        bool submodules;         /* false: submodules are not fetched (gitlinks stay as they are) */
} LedgerOptions;

/* Initializes libgit2 once for the process and cuts it off from the daemon's
 * own git configuration. Called by every entry point; safe to call again. */
void ledger_library_init(void);

int ledger_create(int task_dir_fd, const char *source, int source_fd, const char *base, const char *branch,
                  const LedgerOptions *o, char **ret_error, Ledger **ret);
int ledger_open(int task_dir_fd, const char *branch, Ledger **ret);
Ledger *ledger_free(Ledger *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(Ledger *, ledger_free);

int ledger_workspace_fd(Ledger *l);
int ledger_base(Ledger *l, char ret[static 41]);
int ledger_head(Ledger *l, char ret[static 41]);
const char *ledger_branch(Ledger *l);

typedef struct Checkpoint {
        const char *task_id;
        unsigned step;
        const char *subject;
        const char *body;
        const char *model;
        char **commands;
        const char *tests;          /* "pass" | "fail" | "not-run" */
        const char *test_command;
        int test_exit;
        uid_t uid;
        const char *user_name;
} Checkpoint;

/* Bounds on what goes into a commit message. */
#define LEDGER_SUBJECT_MAX 72U
#define LEDGER_BODY_MAX (64U * 1024U)
#define LEDGER_TRAILER_VALUE_MAX 256U
#define LEDGER_COMMANDS_MAX 64U

int ledger_checkpoint(Ledger *l, const Checkpoint *c, char ret_commit[static 41], char **ret_error);
int ledger_reset(Ledger *l, const char *commit);
int ledger_checkpoints(Ledger *l, json_object **ret);
int ledger_parse_trailers(const char *message, json_object **ret);

typedef struct FileChange {
        char *path;
        char status; /* 'A','M','D','R','T' */
        unsigned added, removed;
} FileChange;

int ledger_changes(Ledger *l, const char *from, FileChange **ret, size_t *ret_n);
void file_changes_free(FileChange *c, size_t n);
int ledger_diffstat(Ledger *l, char **ret);

int ledger_export_diff(Ledger *l, int out_fd);
int ledger_export_mbox(Ledger *l, int out_fd);
int ledger_export_bundle(Ledger *l, int out_fd);

int ledger_import_bundle(const char *repo_path, int bundle_fd, const char *branch, uint64_t max_bytes, char **ret_error);

/* Pushes refs/heads/<branch> (only that, never forced) to url. The branch
 * must be under agentfab/. credential_token, if given, is offered as the
 * password of user "x-access-token" for https remotes. */
int ledger_push(Ledger *l, const char *url, const char *credential_token, char **ret_error);
