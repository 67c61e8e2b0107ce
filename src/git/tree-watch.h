/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

/* What changed in a directory tree since the last look, from inotify, so
 * that a stage after a command looks at what the command touched instead
 * of the metadata of every file.
 *
 * A walk of the tree (tree-scan.c) adds a watch on each directory it reads,
 * before reading it: whatever changes afterwards is an event, whatever
 * changed before is seen by the walk. Once a walk is complete, the events
 * name every path that changed: files created, written, truncated,
 * chmod'ed, renamed or removed, and directories created or removed. What
 * they cannot name exactly makes the watch "stale" until the next walk:
 * the kernel's queue overflowed, a directory was renamed (the paths below
 * it moved), the top went away, or a watch could not be added.
 *
 * inotify is per inode, so writes through any mount of the tree (the
 * sandbox's idmapped bind mount) are seen. It does not see writes through
 * a shared mapping made after the file was closed; the caller walks the
 * whole tree where that matters (the task's last checkpoint). */

typedef struct TreeWatch TreeWatch;

/* -EMFILE: no inotify instance left for this user (fs.inotify.max_user_instances). */
int tree_watch_new(TreeWatch **ret);
TreeWatch *tree_watch_free(TreeWatch *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(TreeWatch *, tree_watch_free);

/* A walk begins: pending events are dropped (the walk sees their result)
 * and the watch is stale until tree_watch_walk_done(). */
void tree_watch_walk_begin(TreeWatch *w);
/* The walk opened the directory at path ("" for the top, else "a/b/", as
 * TreeScanDir.path) as dir_fd, and is about to read it. A failure leaves
 * the watch stale after the walk (-ENOSPC: fs.inotify.max_user_watches). */
int tree_watch_add(TreeWatch *w, int dir_fd, const char *path);
/* The walk read every directory that counts: watches of directories it did
 * not read are removed, and the watch is complete unless an add failed. */
void tree_watch_walk_done(TreeWatch *w);
/* Stale from now on (the walk failed, or the caller changed the tree in a
 * way it does not report). */
void tree_watch_invalidate(TreeWatch *w);
bool tree_watch_complete(const TreeWatch *w);

/* What changed since the walk or the last call, sorted, each once, relative
 * to the top ("a/b/c"). A directory created or removed is one path; the
 * caller looks at what stands there. -ESTALE: the events do not say it all
 * (more than TREE_WATCH_CHANGES_MAX paths, too); walk again. */
#define TREE_WATCH_CHANGES_MAX 65536U
int tree_watch_changes(TreeWatch *w, char ***ret, size_t *ret_n);

/* How many directories are watched. */
size_t tree_watch_size(const TreeWatch *w);
