/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The cgroup v2 freezer of a task's scope, for where systemd will not
 * freeze it (systemd 252 on a hybrid hierarchy: "Unit ... does not support
 * freezing"). Every non-root cgroup v2 directory has cgroup.freeze, the
 * unified directory systemd keeps for each unit in hybrid mode too. The
 * directory is found from what the kernel says of the sandbox's PID 1
 * (/proc/PID/cgroup, its "0::" line), never from a path anybody sent. */

#define CGROUP_FREEZE_TIMEOUT_USEC (5 * USEC_PER_SEC)

/* From the text of /proc/PID/cgroup: the cgroup v2 path ("0::" line) of a
 * process in the scope of task, which must be ".../X.slice/agentfab-task-ID.scope"
 * with no "." or ".." component. -ENOENT: no "0::" line; -EPERM: not that
 * task's scope. */
int cgroup_task_path_from_proc(const char *text, const char *task, char **ret);

/* From the text of cgroup.events: 1 if it says "frozen 1", 0 if "frozen 0",
 * -EBADMSG if it does not say. */
int cgroup_events_frozen(const char *text);

/* The pid that a pidfd refers to (from /proc/self/fdinfo), -ESRCH if the
 * process is gone, -EBADF if fd is no pidfd. */
int pidfd_get_pid_of(int pidfd, pid_t *ret);

/* The cgroup v2 path of the process behind pidfd, which must be in task's
 * scope (cgroup_task_path_from_proc()). On failure *ret_error says why
 * (static text). */
int cgroup_task_path_of_pidfd(int pidfd, const char *task, char **ret, const char **ret_error);

/* Freezes (or thaws) that cgroup v2 directory and waits until its
 * cgroup.events says so, at most CGROUP_FREEZE_TIMEOUT_USEC; a freeze that
 * does not complete in time is undone. */
int cgroup_freeze_path(const char *path, bool freeze, const char **ret_error);
