/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* A sandbox's connection that comes back from systemd's fd store after the
 * daemon restarted is taken up again only if it still is what its name in
 * the store says: a connected stream socket whose sandbox's PID 1 (pid)
 * lives, runs as uid and sits in agentfab-task-ID.scope. The name was
 * ours, but the world moved while we were gone: the sandbox may have
 * ended, its pid may be another process's, its scope may have been
 * stopped. */

/* Whether /proc/PID/cgroup's text places the process in the task's scope
 * on systemd's own hierarchy ("name=systemd", or cgroup v2's "0::"): every
 * such line must end in "/agentfab-task-ID.scope", and there must be one. */
bool sandbox_cgroup_text_is_task(const char *text, const char *task_id);

/* Checks fd, pid and uid as above. idle: the connection must also have
 * nothing waiting to be read and no hang-up (a sandbox between commands
 * says nothing; anything there would be the answer to a request the
 * earlier daemon sent, which is the sign of a command in flight). Returns
 * 0 and a pidfd of the sandbox's PID 1 in ret_pidfd, or a negative errno
 * and a static reason in ret_why. */
int sandbox_connection_check(int fd, const char *task_id, pid_t pid, uid_t uid, bool idle, int *ret_pidfd,
                             const char **ret_why);
