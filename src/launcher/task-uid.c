/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "task-uid.h"

bool task_uid_in_range(uid_t id) {
        return id >= TASK_UID_MIN && id <= TASK_UID_MAX;
}

static uint32_t hash_id(const char *s) {
        uint32_t h = 2166136261U;       /* FNV-1a */

        for (; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619U;
        return h;
}

static int open_lock(const char *lock_dir) {
        _cleanup_close_ int dir = -EBADF;
        struct stat st;

        if (mkdir(lock_dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        dir = open(lock_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        /* SECURITY: ours alone, or someone could hold every id, or swap the file. */
        if (fstat(dir, &st) < 0)
                return -errno;
        if (st.st_uid != geteuid() || (st.st_mode & 0022))
                return -EPERM;
        int fd = openat(dir, TASK_UID_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        return fd < 0 ? -errno : fd;
}

int task_uid_acquire(const char *lock_dir, const char *task_id, uid_t *ret_uid) {
        const uint32_t n = TASK_UID_MAX - TASK_UID_MIN + 1;
        _cleanup_close_ int fd = -EBADF;

        fd = open_lock(lock_dir);
        if (fd < 0)
                return fd;

        uint32_t start = hash_id(task_id) % n;
        for (uint32_t i = 0; i < n; i++) {
                uid_t id = TASK_UID_MIN + (start + i) % n;
                struct flock fl = {
                        .l_type = F_WRLCK,
                        .l_whence = SEEK_SET,
                        .l_start = (off_t) (id - TASK_UID_MIN),
                        .l_len = 1,
                };

                if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
                        if (IN_SET(errno, EAGAIN, EACCES))
                                continue;
                        return -errno;
                }
                /* Someone's id (a user the administrator made there) is not ours to take. */
                if (getpwuid(id) || getgrgid((gid_t) id)) {
                        fl.l_type = F_UNLCK;
                        (void) fcntl(fd, F_OFD_SETLK, &fl);
                        continue;
                }
                *ret_uid = id;
                return TAKE_FD(fd);
        }
        return -EBUSY;
}

static int write_map(pid_t pid, const char *which, unsigned from, unsigned to) {
        char path[64], line[64];

        snprintf(path, sizeof(path), "/proc/%i/%s", (int) pid, which);
        int n = snprintf(line, sizeof(line), "%u %u 1\n", from, to);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, line, (size_t) n) != n)
                return -errno;
        return 0;
}

int task_uid_idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to, int *ret_fd) {
        _cleanup_close_ int ns = -EBADF;
        int pipes[2], r;
        char path[64];

        /* A child that only holds the namespace open until we have its fd. */
        if (pipe2(pipes, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = (pid_t) syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
        if (pid < 0) {
                r = -errno;
                safe_close(pipes[0]);
                safe_close(pipes[1]);
                return r;
        }
        if (pid == 0) {
                char c;
                safe_close(pipes[1]);
                (void) !read(pipes[0], &c, 1);
                _exit(0);
        }
        safe_close(pipes[0]);

        r = write_map(pid, "uid_map", (unsigned) from_uid, (unsigned) to);
        if (r >= 0)
                r = write_map(pid, "gid_map", (unsigned) from_gid, (unsigned) to);
        if (r >= 0) {
                snprintf(path, sizeof(path), "/proc/%i/ns/user", (int) pid);
                ns = open(path, O_RDONLY | O_CLOEXEC);
                if (ns < 0)
                        r = -errno;
        }
        safe_close(pipes[1]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(ns);
        return 0;
}
