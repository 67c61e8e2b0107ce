/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Task environments: the [Environment] sections of agentfab.conf(5). Each
 * names a system image (a directory tree mounted read-only as the sandbox's
 * root; the host's own system when empty), a network mode, the package
 * managers whose caches a task gets, variables set in every command and
 * default limits. Read by agentfabd (what a task may name, what its
 * commands see) and by the privileged launcher, which takes only the
 * environment's *name* from the daemon and finds its image itself. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#define ENVIRONMENTS_CONFIG_FILE "/etc/agentfab/agentfab.conf"
#define ENVIRONMENT_DEFAULT      "default"
#define ENVIRONMENTS_MAX         64U
#define ENVIRONMENT_NAME_MAX     64U
#define ENVIRONMENT_ALLOW_MAX    256U
#define ENVIRONMENT_VARS_MAX     32U
#define ENVIRONMENT_IMAGE_MAX    1024U

typedef enum NetworkMode {
        NETWORK_OFF,                    /* loopback only: today's sandbox */
        NETWORK_ALLOWLIST,              /* through the egress proxy, to Allow= entries only */
        NETWORK_AUDITED,                /* through the egress proxy, to any public destination */
        _NETWORK_MODE_MAX,
        _NETWORK_MODE_INVALID = -EINVAL,
} NetworkMode;

typedef enum CacheKind {
        CACHE_PIP,
        CACHE_NPM,
        CACHE_CARGO,
        CACHE_GO,
        _CACHE_KIND_MAX,
        _CACHE_KIND_INVALID = -EINVAL,
} CacheKind;

typedef struct Environment {
        char *name;                     /* Name= */
        char *image;                    /* Image= : absolute path; NULL the host's system */
        char *version;                  /* Version= : the administrator's identity of the image; NULL: computed */
        NetworkMode network;            /* Network= */
        char **allow;                   /* Allow= : host, *.glob, host:port, address, address/prefix */
        unsigned caches;                /* Cache= : bit mask of 1 << CacheKind */
        uint64_t cache_max_bytes;       /* CacheMaxSize= : per owner; 0: no cap */
        char **vars;                    /* Environment= : NAME=VALUE */
        uint64_t memory_max;            /* MemoryMax=, TasksMax=, CPUQuota= : defaults; UINT64_MAX unset */
        uint64_t tasks_max;
        uint64_t cpu_quota_percent;
} Environment;

typedef struct Environments {
        Environment list[ENVIRONMENTS_MAX];
        size_t n;
} Environments;

const char *network_mode_to_string(NetworkMode m);
NetworkMode network_mode_from_string(const char *s);
const char *cache_kind_to_string(CacheKind k);
CacheKind cache_kind_from_string(const char *s);

bool environment_name_is_valid(const char *s);
/* The shape of an Allow= entry (and of a host an approval allows): a host
 * name or "*.glob", an address or address/prefix, each with an optional
 * ":PORT" (IPv6 in brackets then). The proxy decides what it means. */
bool environment_allow_entry_is_valid(const char *s);

/* Reads the [Environment] sections of path and its drop-ins. There is
 * always an environment named "default" (the host's system, no network),
 * unless a section of that name replaces it. A malformed line is warned
 * about (with warn) and skipped. */
int environments_load(Environments *e, const char *path, bool warn);
void environments_done(Environments *e);
const Environment *environments_find(const Environments *e, const char *name);

/* The names, comma separated, for "unknown environment" messages. */
char *environments_names(const Environments *e);

/* SECURITY: an image becomes every task's root. It must be an absolute,
 * normalized path whose every component is a real directory (no symlink)
 * owned by root and writable by nobody else, holding usr/; its top-level
 * system directories and those one level below them root's and not group-
 * or world-writable. Returns 0 or a negative errno with *ret_error set to
 * a static-free message naming what is wrong (free it). */
int environment_image_check(const char *image, char **ret_error);

/* The commands' variables for the caches of mask below /cache. */
int environment_cache_vars(unsigned mask, char ***vars);
