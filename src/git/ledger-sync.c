/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger-internal.h"
#include "trace.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* What makes a ledger's history durable beyond what libgit2 does itself.
 *
 * With GIT_OPT_ENABLE_FSYNC_GITDIR (ledger_library_init()) libgit2 1.5
 * writes every loose object to a temporary file, fsyncs it, renames it into
 * objects/xx/ and fsyncs that directory; refs likewise (the file, then its
 * directory); packs and their indexes through the indexer, with the pack
 * directory. What it does not fsync: the parent of a directory it creates
 * (objects/xx/ when the first object of that fan-out is written, the
 * directories of a new ref), the files and directories of
 * git_repository_init() (config, HEAD, description), and the index, which
 * is a cache of the workspace here (ledger-stage.c discards a torn one). */

/* Every directory and regular file below dir_fd, and dir_fd itself: once,
 * for a ledger just made. */
static int sync_tree_fd(int dir_fd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        int r = 0, k;

        if (depth > 16)
                return -ELOOP;

        k = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (k < 0)
                return -errno;
        d = fdopendir(k);
        if (!d) {
                safe_close(k);
                return -errno;
        }

        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                _cleanup_close_ int fd = -EBADF;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (!IN_SET(de->d_type, DT_DIR, DT_REG, DT_UNKNOWN))
                        continue;
                fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
                if (fd < 0) {
                        if (errno == ELOOP || errno == ENOENT)
                                continue;  /* a symlink; or gone meanwhile (a lock) */
                        k = -errno;
                } else {
                        struct stat st;

                        if (fstat(fd, &st) < 0)
                                k = -errno;
                        else if (S_ISDIR(st.st_mode))
                                k = sync_tree_fd(fd, depth + 1);
                        else if (S_ISREG(st.st_mode))
                                k = RET_NERRNO(fsync(fd));
                        else
                                k = 0;
                }
                if (k < 0 && r == 0)
                        r = k;
        }
        if (errno != 0 && r == 0)
                r = -errno;

        k = fsync_directory(dir_fd);
        return r < 0 ? r : k;
}

int ledger_sync_tree(int parent_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        r = sync_tree_fd(fd, 0);
        if (r < 0)
                return r;
        /* The entry of the tree itself. */
        return fsync_directory(parent_fd);
}

/* After a commit, before it is acknowledged: a fan-out directory libgit2
 * made for one of the new objects is an entry of objects/ that no fsync
 * has covered yet. A new subdirectory changes the link count of objects/,
 * so objects/ is fsynced only when that count moved since the last time
 * this Ledger looked (and once per Ledger: a directory an earlier run made
 * before it stopped may be as new). Costs one open and one fstat in the
 * common case, where all 256 fan-outs exist. */
int ledger_sync(Ledger *l) {
        _cleanup_close_ int fd = -EBADF;
        char path[PATH_MAX];
        struct stat st;
        int r;

        assert(l);

        if (snprintf(path, sizeof(path), "%sobjects", git_repository_path(l->repo)) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (l->have_objects_nlink && st.st_nlink == l->objects_nlink)
                return 0;

        uint64_t t0 = TRACE_BEGIN();
        r = fsync_directory(fd);
        if (r < 0)
                return r;
        TRACE_END("sync", t0);
        l->objects_nlink = st.st_nlink;
        l->have_objects_nlink = true;
        return 0;
}
