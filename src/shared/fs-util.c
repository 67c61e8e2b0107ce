/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "io-util.h"
#include "log.h"
#include "macro.h"

int fsync_directory(int dir_fd) {
        return RET_NERRNO(fsync(dir_fd));
}

int write_file_atomic(int dir_fd, const char *name, const void *data, size_t size, mode_t mode) {
        char tmp[256];
        uint64_t rnd = 0;
        int r;

        if (strlen(name) > 200 || strchr(name, '/'))
                return -EINVAL;

        (void) getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK);
        snprintf(tmp, sizeof(tmp), ".#%s.%016llx", name, (unsigned long long) rnd);

        _cleanup_close_ int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;

        r = loop_write(fd, data, size);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dir_fd, tmp, 0);
                return r;
        }

        return fsync_directory(dir_fd);
}

int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_size) {
        struct stat st;
        size_t n = 0, allocated;

        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;

        allocated = (size_t) st.st_size + 1;
        _cleanup_free_ char *buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;

        /* The file may grow while we read: read until EOF, but never past max. */
        for (;;) {
                if (n + 1 >= allocated) {
                        if (allocated > max)
                                return -EFBIG;
                        size_t na = allocated * 2 + 64;
                        if (na > max + 1)
                                na = max + 1;
                        char *t = realloc(buf, na);
                        if (!t)
                                return -ENOMEM;
                        buf = t;
                        allocated = na;
                }
                ssize_t k = read(fd, buf + n, allocated - n - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }

        buf[n] = '\0';
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = n;
        return 0;
}

int append_whole(int fd, const void *data, size_t size) {
        struct stat st;
        int r;

        /* A record of a JSON lines file is whole or absent: when the file
         * system fills up (or the quota is reached) half-way through, the
         * part that made it is cut off again, so that no reader finds a torn
         * line. We are the files' only writer, so the size cannot move
         * under us. */
        if (fstat(fd, &st) < 0)
                return -errno;
        r = loop_write(fd, data, size);
        if (r < 0 && ftruncate(fd, st.st_size) < 0)
                log_warning_errno(errno, "Failed to cut off a partly written record, ignoring: %m");
        return r;
}

int append_file_at(int dir_fd, const char *name, const void *data, size_t size, mode_t mode) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        return append_whole(fd, data, size);
}

int openat_created(int dir_fd, const char *name, int flags, mode_t mode, bool *ret_created) {
        assert(!(flags & O_CREAT));

        /* Twice at most: someone else may make it between the two. */
        for (unsigned i = 0; i < 2; i++) {
                int fd = openat(dir_fd, name, flags);
                if (fd >= 0) {
                        *ret_created = false;
                        return fd;
                }
                if (errno != ENOENT)
                        return -errno;
                fd = openat(dir_fd, name, flags | O_CREAT | O_EXCL, mode);
                if (fd >= 0) {
                        *ret_created = true;
                        return fd;
                }
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

int append_file_at_sync(int dir_fd, const char *name, const void *data, size_t size, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;
        bool created;
        int r;

        fd = openat_created(dir_fd, name, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW, mode, &created);
        if (fd < 0)
                return fd;
        r = append_whole(fd, data, size);
        if (r < 0)
                return r;
        /* The size is metadata that fdatasync() writes too: the lines are
         * found again after a power cut. */
        if (fdatasync(fd) < 0)
                return -errno;
        return created ? fsync_directory(dir_fd) : 0;
}

DIR *xopendirat(int dir_fd, const char *name, int flags) {
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags);
        if (fd < 0)
                return NULL;
        DIR *d = fdopendir(fd);
        if (!d)
                safe_close(fd);
        return d;
}

/* An entry of a directory being removed, by the type readdir() gave: no
 * fstatat() for each (a workspace of a few thousand files is removed at the
 * end of each task, and fuzz-tool-call removes its own every 250 inputs).
 * What turns out not to be of that type (replaced since) is looked at again
 * by rm_rf_at(), once: its fstatat() said so (checked). */
static int rm_rf_entry(int dir_fd, const char *name, unsigned char type, bool checked) {
        if (type == DT_DIR) {
                DIR *d = xopendirat(dir_fd, name, O_NOFOLLOW);
                /* A directory of ours that a command made unreadable. */
                if (!d && errno == EACCES && owner_access_restore(dir_fd, name) > 0)
                        d = xopendirat(dir_fd, name, O_NOFOLLOW);
                if (!d)
                        return !checked && IN_SET(errno, ENOTDIR, ELOOP) ? rm_rf_at(dir_fd, name) : -errno;
                int r = 0;
                for (struct dirent *de; (de = readdir(d));) {
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        int k = rm_rf_entry(dirfd(d), de->d_name, de->d_type, false);
                        /* Readable, but not to be changed or searched. */
                        if (k == -EACCES && owner_access_restore_fd(dirfd(d)) > 0)
                                k = rm_rf_entry(dirfd(d), de->d_name, de->d_type, false);
                        if (k < 0 && r == 0)
                                r = k;
                }
                closedir(d);
                if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && r == 0)
                        r = -errno;
                return r;
        }
        if (type != DT_UNKNOWN) {
                if (unlinkat(dir_fd, name, 0) >= 0)
                        return 0;
                if (errno == ENOENT)
                        return 0;
                if (errno != EISDIR)
                        return -errno;
        }
        return rm_rf_at(dir_fd, name);
}

static int rm_rf_at_once(int dir_fd, const char *name) {
        struct stat st;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return RET_NERRNO(unlinkat(dir_fd, name, 0));
        return rm_rf_entry(dir_fd, name, DT_DIR, true);
}

int rm_rf_at(int dir_fd, const char *name) {
        int r = rm_rf_at_once(dir_fd, name);

        /* In a directory of ours that a command made read-only. */
        if (r == -EACCES && owner_access_restore_fd(dir_fd) > 0)
                r = rm_rf_at_once(dir_fd, name);
        return r;
}

static mode_t owner_access_needed(const struct stat *st) {
        if (st->st_uid != geteuid())
                return 0;
        mode_t need = S_ISDIR(st->st_mode) ? 0700 : S_ISREG(st->st_mode) ? 0600 : 0;
        return (st->st_mode & need) == need ? 0 : need;
}

int owner_access_restore_fd(int fd) {
        char path[64];
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        mode_t need = owner_access_needed(&st);
        if (need == 0)
                return 0;
        if (fchmod(fd, (st.st_mode | need) & 07777) >= 0)
                return 1;
        if (errno != EBADF)
                return -errno;
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        return chmod(path, (st.st_mode | need) & 07777) < 0 ? -errno : 1;
}

int owner_access_restore(int dir_fd, const char *name) {
        /* O_PATH: a symlink is itself, never its target (and has no
         * permissions to give back). */
        _cleanup_close_ int fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return owner_access_restore_fd(fd);
}
