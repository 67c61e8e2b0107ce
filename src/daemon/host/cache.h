/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The dependency caches of task environments: one directory per
 * environment and owner, state/cache/ENVIRONMENT/UID, mounted at /cache in
 * the owner's sandboxes of that environment (environments.h). Here: their
 * size, pruning to CacheMaxSize=, clearing, and the bus methods that show
 * and clear a caller's own. Walking a cache may take long (an npm cache
 * holds 100,000 files): all of it runs in worker threads. */

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "environments.h"
#include "factory.h"

#define CACHE_DIR "cache"
#define CACHE_WALK_DEPTH_MAX 64U
#define CACHE_WALK_FILES_MAX (4U * 1024U * 1024U)

/* Opens (with create, makes) state/cache/ENVIRONMENT/UID; never follows a symlink. */
int cache_open(int state_fd, const char *environment, uid_t owner, bool create);

/* Bytes (st_blocks) and files below dir_fd, never following symlinks. */
int cache_usage(int dir_fd, uint64_t *ret_bytes, uint64_t *ret_files);

/* Removes the least recently modified files until at most max_bytes are
 * left; returns the bytes removed. */
int cache_prune(int dir_fd, uint64_t max_bytes, uint64_t *ret_removed);

/* Removes everything below dir_fd (the directory itself stays). */
int cache_clear(int dir_fd);

/* After a task of owner in environment e ended: prunes its cache to
 * CacheMaxSize= in a worker thread, if there is a cap. */
void cache_prune_later(Factory *f, const Environment *e, uid_t owner);

