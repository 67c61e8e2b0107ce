/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Each task's commands run as a host uid (and gid) of their own, neither
 * root nor agentfabd's: an escape past one boundary meets the next, and two
 * tasks cannot touch each other's processes. The workspace stays owned by
 * agentfab on disk; the sandbox mounts it idmapped, agentfab's ids shown as
 * the task's. */

#include <stdbool.h>
#include <sys/types.h>

/* 65536 ids that systemd leaves unassigned (UIDS-GIDS: between the 16-bit
 * range and the container range). */
#define TASK_UID_MIN ((uid_t) 0x60000)
#define TASK_UID_MAX ((uid_t) 0x6FFFF)

/* Where the ids in use are locked: one byte per id, an open file
 * description lock each, held by the launcher for its sandbox's life. */
#define TASK_UID_LOCK_DIR "/run/agentfab-launcher"
#define TASK_UID_LOCK_FILE "task-uids.lock"

/* The first id of the range from the task id's hash on, that is free:
 * not locked by another sandbox, not in the user or group database, not in
 * a user's subordinate range (/etc/subuid, /etc/subgid).
 * Returns the lock's fd (keep it open as long as the id is used).
 * -EBUSY when every id is taken. */
int task_uid_acquire(const char *lock_dir, const char *task_id, uid_t *ret_uid);
/* The same, skipping the ids of the subordinate id files given (NULL
 * terminated; task_uid_acquire() passes /etc/subuid and /etc/subgid). */
int task_uid_acquire_full(const char *lock_dir, const char *const *subid_files, const char *task_id, uid_t *ret_uid);

/* Whether id is in the range. */
bool task_uid_in_range(uid_t id);

/* A user namespace (its fd) whose maps show on-disk uid from_uid and gid
 * from_gid as the id `to`, and nothing else: what MOUNT_ATTR_IDMAP takes.
 * Needs CAP_SETUID and CAP_SETGID. */
int task_uid_idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to, int *ret_fd);
