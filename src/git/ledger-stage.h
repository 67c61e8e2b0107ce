/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "ledger-internal.h"

/* One stage (ledger-stage.c), shared with what finds the paths it looks at
 * (ledger-stage-paths.c: the scan, a directory alone, a named path). */

typedef struct Edit {
        char *path;
        git_index_entry entry;  /* mode 0: remove the entry */
        bool stat_only;         /* same blob and mode: the tree stays */
} Edit;

typedef struct Stage {
        Ledger *ledger;
        git_repository *repo;
        git_odb *odb;
        git_index *index;
        uint64_t max;
        struct timespec racy;   /* the index file's mtime: entries changed at or after it are hashed again */
        struct timespec start;  /* the scan's start: what changed at or after it is smudged */
        uint8_t *seen;          /* a bit per index position */
        size_t n_index;
        Edit *edits;
        size_t n_edits, n_alloc;
        unsigned hashed;
        uint64_t hash_usec;
        bool saw_gitlink;       /* a watch cannot see into their directories */
        char **error;
} Stage;

/* Records that path changes to entry (NULL: it goes). */
int stage_edit_add(Stage *s, const char *path, const git_index_entry *entry);
/* Records one non-directory entry whose stat data moved (or that is new),
 * read through dir_fd. -EAGAIN: it is a directory now. */
int stage_file(Stage *s, int dir_fd, const char *name, const char *path, const git_index_entry *old);
bool stage_entry_clean(const Stage *s, const git_index_entry *e, const struct statx *x);
/* What git cannot record at path (a FIFO, a socket, a device node, a
 * name it refuses, a path too long or too deep): left out, as git leaves
 * it out (a tracked file that became one goes), and noted for
 * ledger_take_left_out(). */
int stage_left_out(Stage *s, const char *path, const git_index_entry *old);
/* strcmp() of two char * array elements, for qsort() and bsearch(). */
int stage_path_cmp(const void *a, const void *b);
/* The same with the reason named ("path (why)"), for what git could record
 * but the ledger leaves out (ledger-leave-out.c). */
int stage_left_out_why(Stage *s, const char *path, const git_index_entry *old, const char *why);

/* ledger-leave-out.c */
/* Whether path, about to be recorded (read through dir_fd/name, old its
 * entry or NULL, x its metadata), is left out (LedgerLeaveOut): 1, noted
 * for ledger_take_left_out(); 0 if it is recorded. */
int stage_leave_out(Stage *s, int dir_fd, const char *name, const char *path, const git_index_entry *old,
                    const struct statx *x);
/* Whether the untracked directory path is build output: not read at all. */
bool stage_build_output_dir(Stage *s, const char *path);
/* A name git refuses to record (libgit2's index, with core.protectNTFS as
 * it is by default): one NTFS takes for .git, that is ".git" or "git~1" in
 * any case followed by nothing but dots and spaces, or by a backslash or a
 * colon (an alternate data stream). Left out, a directory of that name
 * with everything in it. */
bool stage_name_refused(const char *name);
/* A path this long is left out and noted as well: a reset could not write
 * it again (the kernel takes no longer path), nor could git. */
#define LEDGER_PATH_MAX (PATH_MAX - 1)

/* ledger-stage-paths.c */
/* Every file's metadata (and the watch made anew). */
int stage_scan(Stage *s);
/* One path the tools wrote or the watch named. 1: done; 0: a scan is needed. */
int stage_noted(Stage *s, const char *noted);
