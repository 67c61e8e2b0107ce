/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "seccomp-policy.h"

#define SANDBOX_WORKSPACE "/workspace"
#define SANDBOX_CACHE     "/cache"
#define SANDBOX_HISTORY   "/history.git"

/* One sandbox: the policy every task command gets. */
typedef struct SandboxConfig {
        int workspace_fd;              /* the only writable persistent directory */
        uid_t uid;                     /* never 0 */
        gid_t gid;
        bool userns;                   /* unprivileged caller: build it inside a user namespace */
        bool idmap;                    /* mount the workspace idmapped through idmap_userns_fd */
        int idmap_userns_fd;           /* (task-uid.h): its owner seen as uid/gid */
        char **argv;
        char **envp;                   /* the command's whole environment */
        const char *cwd;               /* inside the sandbox; default SANDBOX_WORKSPACE */
        const SeccompProgram *seccomp;
        uint64_t tmp_size;             /* bytes of /tmp */
        int serve_fd;                  /* >= 0: a live sandbox serving exec requests on it (exec-service.h) */
        const char *image;             /* the system directories' root (environments.h); NULL: the host's */
        int cache_fd;                  /* >= 0: the dependency cache, writable at SANDBOX_CACHE, idmapped like the workspace */
        int history_fd;                /* >= 0: the task's ledger, read-only at SANDBOX_HISTORY, idmapped likewise */
        int proxy_fd;                  /* > 2: the task's channel to the egress proxy (agentfab-proxy(8));
                                        * 0 (left unset) or negative: no network at all */
        uint16_t proxy_port;           /* the forwarder's port on the loopback; 0: AGENTFAB_PROXY_PORT */
} SandboxConfig;

/* Runs in the child made with the namespace flags, as PID 1 of its pid
 * namespace. Waits for a first byte on sync_fd (its user namespace's id
 * maps are written), builds the file system, network and privileges, waits
 * for a second byte (it is in its scope), then runs the command and exits
 * with its status (128+N for signal N). Setup errors are written to error_fd as text; exit 127.
 * Never returns. */
void sandbox_child(const SandboxConfig *c, int sync_fd, int error_fd) __attribute__((noreturn));

/* execve() of argv[0] searched in envp's PATH (execvpe() would use ours). */
void sandbox_exec_command(char **argv, char **envp);

/* The whole environment of a sandbox's commands: a fixed minimum, then the
 * declared NAME=VALUE entries of extra (may be NULL). Nothing of the
 * caller's own environment. */
char **sandbox_environment(char **extra);

/* An opt-in timing trace of the start-up, for the benchmark: when
 * AGENTFAB_SANDBOX_TRACE= is set (to a CLOCK_MONOTONIC time in ns, the
 * caller's start, or to anything else: our own start), each step writes
 * "trace: +MS.US what" to stderr. Async-signal-safe; a no-op when off. */
void sandbox_trace_init(void);
void sandbox_trace(const char *what);

/* clone() flags of a sandbox. */
unsigned long sandbox_clone_flags(bool userns);
