/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

/* Who asks: the credentials a repository path is checked against. */
typedef struct Caller {
        uid_t uid;
        gid_t gid;
        const gid_t *gids;
        size_t n_gids;
} Caller;

/* Checks that path names a local git repository that both the daemon and the
 * caller can read, and that base resolves in it. On success returns the
 * canonical path (symlinks resolved, so that what is stored is what was
 * checked). Errors are org.agentfab.Error.InvalidSpec with a message a person
 * can act on. The repository is only read: no hooks, no config written. */
int repository_check(const char *path, const char *base, const Caller *caller,
                     char **ret_canonical, sd_bus_error *error);

/* Mode-bit check of whether caller may search every directory on the way to
 * path and read (r+x) path itself. POSIX ACLs are not consulted: when they
 * would grant more, the caller is refused, never the other way round. */
int path_accessible_by(int dir_fd, const Caller *caller);

void repository_library_init(void);
