/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "agentfab-bus.h"
#include "log.h"
#include "macro.h"
#include "repository.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free);

void repository_library_init(void) {
        static bool initialized = false;

        if (initialized)
                return;
        initialized = true;

        (void) git_libgit2_init();

        /* SECURITY: repositories belong to their submitters, never to the
         * daemon's user, so git's safe.directory ownership check would refuse
         * every one of them. We only ever read objects and refs: no hooks, no
         * filters, no config-driven programs run, which is what that check
         * protects against. */
        (void) git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);

        /* Never read the daemon's own ~/.gitconfig or /etc/gitconfig: they must
         * not change how a task's repository is seen. */
        (void) git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_GLOBAL, "");
        (void) git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_XDG, "");
        (void) git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_SYSTEM, "");
}

static bool in_groups(const Caller *c, gid_t gid) {
        if (c->gid == gid)
                return true;
        for (size_t i = 0; i < c->n_gids; i++)
                if (c->gids[i] == gid)
                        return true;
        return false;
}

static bool mode_allows(const struct stat *st, const Caller *c, mode_t want) {
        mode_t bits;

        if (c->uid == 0)
                return true;
        if (st->st_uid == c->uid)
                bits = (st->st_mode >> 6) & 7;
        else if (in_groups(c, st->st_gid))
                bits = (st->st_mode >> 3) & 7;
        else
                bits = st->st_mode & 7;
        return (bits & want) == want;
}

int path_accessible_by(int dir_fd, const Caller *caller) {
        struct stat st;

        if (fstat(dir_fd, &st) < 0)
                return -errno;
        if (!mode_allows(&st, caller, 5))
                return -EACCES;

        /* Walk up to the root: every directory above must be searchable. */
        _cleanup_close_ int fd = openat(dir_fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (unsigned depth = 0; depth < PATH_MAX / 2; depth++) {
                struct stat parent;

                if (fstat(fd, &parent) < 0)
                        return -errno;
                if (!mode_allows(&parent, caller, 1))
                        return -EACCES;
                if (parent.st_dev == st.st_dev && parent.st_ino == st.st_ino)
                        return 0; /* ".." of "/" is "/" */
                st = parent;

                int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (up < 0)
                        return -errno;
                safe_close(fd);
                fd = up;
        }
        return -ELOOP;
}

static const char *git_error_message(void) {
        const git_error *e = git_error_last();
        return e && e->message ? e->message : "unknown error";
}

int repository_check(const char *path, const char *base, const Caller *caller,
                     char **ret_canonical, sd_bus_error *error) {
        char proc[64], canonical[PATH_MAX];
        ssize_t n;
        int r;

        repository_library_init();

        if (path[0] != '/')
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Repository '%s' is not an absolute path.", path);

        /* O_RDONLY, not O_PATH: the daemon itself must be able to read it. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Repository '%s' cannot be opened: %s.", path,
                                         errno == ENOENT ? "no such directory" :
                                         errno == ENOTDIR ? "not a directory" :
                                         errno == EACCES ? "permission denied to agentfabd" : strerror(errno));

        /* What we check and store is the directory we opened, whatever
         * symlinks the given path went through. */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%i", fd);
        n = readlink(proc, canonical, sizeof(canonical) - 1);
        if (n < 0)
                return sd_bus_error_set_errnof(error, errno, "Cannot resolve repository path '%s': %m", path);
        canonical[n] = '\0';

        r = path_accessible_by(fd, caller);
        if (r < 0)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Repository '%s' is not readable by the caller (uid %u).",
                                         path, (unsigned) caller->uid);

        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        if (git_repository_open_ext(&repo, canonical, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "'%s' is not a git repository (%s).", path, git_error_message());

        if (git_repository_is_empty(repo) == 1)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Repository '%s' has no commit yet: commit something first.", path);

        _cleanup_(git_object_freep) git_object *commit = NULL;
        if (git_revparse_single(&commit, repo, base ?: "HEAD") < 0)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Base '%s' does not name a commit in '%s'.", base ?: "HEAD", path);
        _cleanup_(git_object_freep) git_object *peeled = NULL;
        if (git_object_peel(&peeled, commit, GIT_OBJECT_COMMIT) < 0)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Base '%s' does not name a commit in '%s'.", base ?: "HEAD", path);

        if (ret_canonical) {
                char *c = strdup(canonical);
                if (!c)
                        return -ENOMEM;
                *ret_canonical = c;
        }
        return 0;
}
