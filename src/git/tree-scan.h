/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>

/* A walk of a whole directory tree that never follows a symlink and never
 * looks a path up from the top: each directory is opened relative to its
 * parent (O_NOFOLLOW), read with getdents64(), and the metadata of its
 * entries is asked for with statx() relative to it, many at a time through
 * io_uring (one at a time without a ring). Entries named .git (any case)
 * are skipped, or handed to git_entry() when there is one. What to do with
 * each entry is the caller's. */

typedef struct TreeScan TreeScan;

typedef struct TreeScanDir {
        struct TreeScanDir *parent;
        int fd;                 /* open while its entries are handed out */
        unsigned depth;         /* 0: the top */
        int mark;               /* the caller's, -1 to begin with (0 for the top) */
        char *name;             /* in the parent */
        char *path;             /* "" or "a/b/" */

        /* The walk's own. */
        struct TreeScanDir *next;
        unsigned refs;
} TreeScanDir;

typedef struct TreeScanOps {
        /* A directory found in parent (by its d_type or its metadata) at
         * path ("a/b"); sub is what the walk would read. 1: read it later;
         * 0: leave it; < 0: stop. One that is not a directory any more when
         * it is opened is handed to entry() instead. */
        int (*dir)(TreeScan *scan, TreeScanDir *parent, TreeScanDir *sub, const char *path, void *userdata);
        /* Anything else, with its metadata (STATX_TYPE, MODE, INO, SIZE,
         * MTIME, CTIME). An entry gone meanwhile is not handed out. */
        int (*entry)(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path, const struct statx *x,
                     void *userdata);
        /* Optional: an entry named .git (any case), whatever it is, never
         * looked at nor descended into by the walk. */
        int (*git_entry)(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path, void *userdata);
        /* Optional: dir (the top too) is open as dir->fd and about to be
         * read. < 0: stop. */
        int (*dir_opened)(TreeScan *scan, TreeScanDir *dir, void *userdata);
} TreeScanOps;

typedef struct TreeScanLimits {
        unsigned depth_max;
        unsigned entries_max;
        unsigned ring_entries;
        unsigned ring_workers_max;      /* io-wq threads; 0: the kernel's default */
} TreeScanLimits;

#define TREE_SCAN_STATX_MASK (STATX_TYPE | STATX_MODE | STATX_INO | STATX_SIZE | STATX_MTIME | STATX_CTIME)

/* Walks the tree below root_fd (which is not read from: a new open file
 * description is made). ret_error gets a sentence for the errors that have
 * one (too deep, too many entries, an unreadable directory). */
int tree_scan_run(int root_fd, bool use_ring, const TreeScanLimits *limits, const TreeScanOps *ops, void *userdata,
                  char **ret_error);

/* The same below a directory of a bigger tree: root_fd is that directory,
 * prefix its path in the tree ("a/b"); paths handed out begin with it.
 * root_mark is the mark its TreeScanDir starts with. */
int tree_scan_run_at(int root_fd, const char *prefix, int root_mark, bool use_ring, const TreeScanLimits *limits, const TreeScanOps *ops,
                     void *userdata, char **ret_error);

/* From entry(): what was handed out as name in dir is a directory after
 * all (it became one meanwhile); goes through dir() like any other. */
int tree_scan_descend(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path);
