/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentfab-bus.h"
#include "task-id.h"

/* The launcher's request, one JSON line from an unprivileged peer (see
 * agentfab-launcher(8)). Everything in it is checked here, before the
 * launcher acts on any of it. */

#define LAUNCHER_REQUEST_MAX    (64 * 1024)   /* one request line, newline included */
#define LAUNCHER_ENV_MAX        64
#define LAUNCHER_ENV_NAME_MAX   128
#define LAUNCHER_ENV_VALUE_MAX  4096
#define LAUNCHER_KEEP_MAX       4096          /* the daemon's MaxTasks= bound */

typedef enum LauncherRequestType {
        LAUNCHER_REQUEST_SANDBOX,
        LAUNCHER_REQUEST_REAP,
        LAUNCHER_REQUEST_FREEZE,                /* with a pidfd of the sandbox's PID 1 */
        LAUNCHER_REQUEST_THAW,                  /* likewise */
        _LAUNCHER_REQUEST_TYPE_MAX,
        _LAUNCHER_REQUEST_TYPE_INVALID = -EINVAL,
} LauncherRequestType;

/* The largest limits the launcher grants; also what a request that names
 * no limit gets. UINT64_MAX: no limit. */
typedef struct LauncherLimits {
        uint64_t memory_max;            /* bytes */
        uint64_t tasks_max;
        uint64_t cpu_quota_percent;     /* 100: one CPU */
        uint64_t runtime_max_sec;
} LauncherLimits;

#define LAUNCHER_LIMITS_DEFAULT (LauncherLimits) {      \
                .memory_max = 2ULL << 30,               \
                .tasks_max = 512,                       \
                .cpu_quota_percent = 100,               \
                .runtime_max_sec = UINT64_MAX,          \
        }

typedef struct LauncherRequest {
        LauncherRequestType type;
        char task[AGENTFAB_TASK_ID_LEN + 1];    /* sandbox, freeze, thaw */
        LauncherLimits limits;                  /* sandbox: granted, i.e. clamped */
        bool clamped;                           /* some limit asked for more than the maximum */
        char **env;                             /* sandbox: NAME=VALUE */
        char environment[64 + 1];               /* sandbox: the environment's name; "" the default */
        bool cache;                             /* sandbox: a second fd, the dependency cache, comes along */
        bool history;                           /* sandbox: then the task's ledger, mounted read-only for git */
        bool proxy;                             /* sandbox: the task's channel to the egress proxy comes last */
        char **keep;                            /* reap: task ids whose scopes stay */
} LauncherRequest;

/* Parses and validates one request (without its newline). On success fills
 * ret and returns 0; otherwise returns -EINVAL (or -ENOMEM) and points
 * ret_error at a static message for the peer. */
int launcher_request_parse(const char *text, size_t size, const LauncherLimits *maxima,
                           LauncherRequest *ret, const char **ret_error);
void launcher_request_done(LauncherRequest *r);

/* [A-Za-z_][A-Za-z0-9_]*, bounded, and not a variable of the dynamic loader (LD_*). */
bool launcher_env_name_is_valid(const char *name);
