/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <stdarg.h>

#include "ledger.h"
#include "macro.h"

struct Ledger {
        git_repository *repo;
        char *branch;           /* "agentfab/<id>" */
        char *ref;              /* "refs/heads/agentfab/<id>" */
        git_oid base;
        uint64_t max_bytes;
        int workspace_fd;
};

/* Where the base commit is remembered, so that ledger_open() finds it again. */
#define LEDGER_BASE_REF "refs/agentfab/base"

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_commit *, git_commit_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_reference *, git_reference_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_index *, git_index_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb *, git_odb_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_revwalk *, git_revwalk_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_packbuilder *, git_packbuilder_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_diff *, git_diff_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_diff_stats *, git_diff_stats_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_patch *, git_patch_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_signature *, git_signature_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_remote *, git_remote_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_config *, git_config_free);

static inline void git_buf_disposep(git_buf *b) {
        git_buf_dispose(b);
}
#define _cleanup_git_buf_ _cleanup_(git_buf_disposep)

/* The message of the last libgit2 error, never NULL. */
const char *ledger_git_message(void);

/* Maps a libgit2 return code to a negative errno. */
int ledger_git_errno(int error);

/* Stores a formatted message in *ret_error (if ret_error is non-NULL) and returns r. */
int ledger_set_error(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);

int ledger_write_all(int fd, const void *data, size_t size);

/* Copies s to one line: control characters become spaces, invalid UTF-8 '?',
 * at most max bytes (cut on a character boundary, "…" appended when cut). */
char *ledger_one_line(const char *s, size_t max);

/* base..tip, oldest first. */
int ledger_walk_new(Ledger *l, git_revwalk **ret);

int ledger_tip(Ledger *l, git_oid *ret);
