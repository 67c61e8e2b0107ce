/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* What a sandbox's scope (agentfab-task-ID.scope) has used since it was
 * made, read from the cgroups its PID 1 sits in: the cgroup2 hierarchy's
 * cpu.stat, memory.peak and io.stat where it has those controllers, else
 * the cgroup v1 hierarchies of a hybrid system (cpuacct.usage,
 * memory.max_usage_in_bytes, blkio.throttle.io_service_bytes_recursive).
 * A controller that is not enabled for the scope itself (its processes sit
 * in a parent's cgroup there, which counts others too) gives
 * TASK_RESOURCE_UNKNOWN, never the parent's figure. */
typedef struct SandboxUsage {
        uint64_t cpu_usec;
        uint64_t memory_peak;
        uint64_t io_read_bytes;
        uint64_t io_write_bytes;
        /* Not a cgroup's (neither version counts them): the processes and
         * threads started, as the sandbox's PID namespace numbers them
         * (sandbox_session_get_last_pid()); unknown here. */
        uint64_t processes;
} SandboxUsage;

/* Fills every field (unknown where nothing could be read); -ESRCH if the
 * process is gone or not in the task's scope, -ENOMEM. root: the cgroup
 * file systems' mount point, "/sys/fs/cgroup" (tests give their own);
 * proc_cgroup: the text of /proc/PID/cgroup, NULL to read it for pid. */
int sandbox_usage_read(const char *root, pid_t pid, const char *proc_cgroup, const char *task_id, SandboxUsage *ret);
