/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

#define TASK_UID_N (TASK_UID_MAX - TASK_UID_MIN + 1)

/* SECURITY: newuidmap(1) lets a user map the ids of their /etc/subuid (and
 * newgidmap(1) their /etc/subgid) range into a user namespace of theirs, so
 * an id there is that user's: their processes could run as the task's uid
 * and signal or ptrace its commands. Debian's useradd gives each user 65536
 * ids from 100000 on: the fifth user's range already reaches 0x60000. Marks
 * every id of ours that such a range covers in taken. A file we cannot read
 * is an error: better no sandbox than one that shares its uid. */
static int subid_file_mark(const char *path, uint8_t taken[static TASK_UID_N / 8]) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        FILE *f;

        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;
        while (getline(&line, &size, f) >= 0) {
                /* name:first:count; anything else is no range that newuidmap takes. */
                char *count = strrchr(line, ':'), *end;
                if (!count || count == line)
                        continue;
                *count++ = '\0';
                char *first = strrchr(line, ':');
                if (!first)
                        continue;
                first++;
                if (!isdigit((unsigned char) *first) || !isdigit((unsigned char) *count))
                        continue;
                errno = 0;
                unsigned long long a = strtoull(first, &end, 10);
                if (errno != 0 || *end != '\0')
                        continue;
                unsigned long long k = strtoull(count, &end, 10);
                if (errno != 0 || (*end != '\0' && *end != '\n') || k == 0)
                        continue;
                unsigned long long b = a + k - 1 < a ? ULLONG_MAX : a + k - 1;
                if (b < TASK_UID_MIN || a > TASK_UID_MAX)
                        continue;
                for (unsigned long long id = MAX(a, (unsigned long long) TASK_UID_MIN);
                     id <= MIN(b, (unsigned long long) TASK_UID_MAX); id++)
                        taken[(id - TASK_UID_MIN) / 8] |= (uint8_t) (1U << ((id - TASK_UID_MIN) % 8));
        }
        int r = ferror(f) ? -EIO : 0;
        fclose(f);
        return r;
}

int task_uid_acquire(const char *lock_dir, const char *task_id, uid_t *ret_uid) {
        static const char *const subid_files[] = { "/etc/subuid", "/etc/subgid", NULL };

        return task_uid_acquire_full(lock_dir, subid_files, task_id, ret_uid);
}

int task_uid_acquire_full(const char *lock_dir, const char *const *subid_files, const char *task_id, uid_t *ret_uid) {
        const uint32_t n = TASK_UID_N;
        _cleanup_free_ uint8_t *taken = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        taken = calloc(TASK_UID_N / 8, 1);
        if (!taken)
                return -ENOMEM;
        for (const char *const *p = subid_files; p && *p; p++) {
                r = subid_file_mark(*p, taken);
                if (r < 0)
                        return r;
        }

        fd = open_lock(lock_dir);
        if (fd < 0)
                return fd;

        uint32_t start = hash_id(task_id) % n;
        for (uint32_t i = 0; i < n; i++) {
                uid_t id = TASK_UID_MIN + (start + i) % n;
                if (taken[(id - TASK_UID_MIN) / 8] & (1U << ((id - TASK_UID_MIN) % 8)))
                        continue;
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
