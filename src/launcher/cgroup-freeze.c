/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup-freeze.h"
#include "launcher-request.h"
#include "macro.h"
#include "string-util.h"
#include "task-id.h"
#include "time-util.h"

#define SMALL_FILE_MAX 16384

int cgroup_task_path_from_proc(const char *text, const char *task, char **ret) {
        char want[64];
        const char *line = NULL;

        if (!task_id_is_valid(task))
                return -EINVAL;
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strneq(p, "0::", 3)) {
                        line = p + 3;
                        break;
                }
        if (!line)
                return -ENOENT;

        _cleanup_free_ char *path = strndup(line, strcspn(line, "\n"));
        if (!path)
                return -ENOMEM;
        if (path[0] != '/')
                return -EPERM;

        /* Every component plain: no "." or "..", nothing empty. */
        for (const char *c = path + 1; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return -EPERM;
                c += n;
                if (*c == '/')
                        c++;
        }

        /* SECURITY: only a task scope, and the one named, inside a slice. */
        snprintf(want, sizeof(want), "/agentfab-task-%s.scope", task);
        size_t n = strlen(path), w = strlen(want);
        if (n <= w || !streq(path + n - w, want))
                return -EPERM;
        if (n - w < strlen("/x.slice") || !strneq(path + n - w - strlen(".slice"), ".slice", strlen(".slice")))
                return -EPERM;

        *ret = TAKE_PTR(path);
        return 0;
}

int cgroup_events_frozen(const char *text) {
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
                if (strneq(p, "frozen 1", 8) && (p[8] == '\n' || p[8] == '\0'))
                        return 1;
                if (strneq(p, "frozen 0", 8) && (p[8] == '\n' || p[8] == '\0'))
                        return 0;
        }
        return -EBADMSG;
}

/* Reads a small kernel file from its start; NUL-terminated. */
static int read_small(int fd, char *buf, size_t size) {
        ssize_t k = pread(fd, buf, size - 1, 0);
        if (k < 0)
                return -errno;
        buf[k] = '\0';
        return 0;
}

static int read_small_at(int dir_fd, const char *name, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return read_small(fd, buf, size);
}

int pidfd_get_pid_of(int pidfd, pid_t *ret) {
        char name[64], buf[4096];
        int r;

        snprintf(name, sizeof(name), "/proc/self/fdinfo/%i", pidfd);
        r = read_small_at(AT_FDCWD, name, buf, sizeof(buf));
        if (r < 0)
                return r;
        const char *p = strstr(buf, "\nPid:");
        if (!p)
                return -EBADF;   /* not a pidfd */
        long pid = strtol(p + 5, NULL, 10);
        if (pid == -1 || pid == 0)
                return -ESRCH;   /* gone (or in no namespace of ours) */
        if (pid < 0)
                return -EBADF;
        *ret = (pid_t) pid;
        return 0;
}

/* The cgroup v2 hierarchy: /sys/fs/cgroup/unified in hybrid mode, else /sys/fs/cgroup. */
static int open_cgroup2_root(void) {
        static const char *const roots[] = { "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };

        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                _cleanup_close_ int fd = open(roots[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                struct statfs sf;
                if (fd < 0 || fstatfs(fd, &sf) < 0 || (long) sf.f_type != (long) CGROUP2_SUPER_MAGIC)
                        continue;
                return TAKE_FD(fd);
        }
        return -ENOENT;
}

/* Waits until cgroup.events says frozen == want. The kernel notifies
 * changes of the file as POLLPRI; a bounded poll also covers a change that
 * came between our read and the poll. */
static int wait_events(int events_fd, bool want, uint64_t deadline) {
        char buf[512];
        int r;

        for (;;) {
                r = read_small(events_fd, buf, sizeof(buf));
                if (r < 0)
                        return r;
                r = cgroup_events_frozen(buf);
                if (r < 0)
                        return r;
                if (r == want)
                        return 0;
                uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = events_fd, .events = POLLPRI };
                int n = poll(&p, 1, (int) MIN((deadline - now + 999) / 1000, (uint64_t) 100));
                if (n < 0 && errno != EINTR)
                        return -errno;
        }
}

static int write_freeze(int dir_fd, bool freeze) {
        _cleanup_close_ int fd = openat(dir_fd, "cgroup.freeze", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (write(fd, freeze ? "1" : "0", 1) != 1)
                return errno > 0 ? -errno : -EIO;
        return 0;
}

int cgroup_task_path_of_pidfd(int pidfd, const char *task, char **ret, const char **ret_error) {
        char name[64], buf[SMALL_FILE_MAX];
        pid_t pid;
        int r;

        r = pidfd_get_pid_of(pidfd, &pid);
        if (r < 0)
                return *ret_error = r == -ESRCH ? "the sandbox is gone" : "the fd sent is no pidfd", r;
        snprintf(name, sizeof(name), "/proc/%i/cgroup", (int) pid);
        r = read_small_at(AT_FDCWD, name, buf, sizeof(buf));
        if (r < 0)
                return *ret_error = "cannot read the sandbox's cgroup", r;
        /* The pid read from the pidfd may have been reused before we read
         * /proc/PID/cgroup: only if the pidfd's process still lives was it
         * that process we read about. */
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
                return *ret_error = "the sandbox is gone", -ESRCH;
        r = cgroup_task_path_from_proc(buf, task, ret);
        if (r == -ENOENT)
                return *ret_error = "the sandbox is in no cgroup v2 hierarchy", r;
        if (r < 0)
                return *ret_error = "the pidfd is not of the task's sandbox", r;
        return 0;
}

int cgroup_freeze_path(const char *path, bool freeze, const char **ret_error) {
        _cleanup_close_ int root = -EBADF, dir = -EBADF, events = -EBADF;
        int r;

        if (!path || path[0] != '/')
                return *ret_error = "invalid cgroup path", -EINVAL;
        root = open_cgroup2_root();
        if (root < 0)
                return *ret_error = "no cgroup v2 hierarchy is mounted", root;
        dir = openat(root, path + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir < 0)
                return *ret_error = "cannot open the scope's cgroup v2 directory", -errno;
        events = openat(dir, "cgroup.events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (events < 0)
                return *ret_error = "the scope's cgroup v2 directory has no cgroup.events", -errno;

        r = write_freeze(dir, freeze);
        if (r < 0)
                return *ret_error = "cannot write the scope's cgroup.freeze", r;
        r = wait_events(events, freeze, clock_now_usec(CLOCK_MONOTONIC) + CGROUP_FREEZE_TIMEOUT_USEC);
        if (r < 0) {
                /* SECURITY: never leave a sandbox half frozen and say
                 * nothing: undo, and fail. */
                if (freeze)
                        (void) write_freeze(dir, false);
                return *ret_error = r == -ETIMEDOUT ? "the scope did not reach the state in time" :
                                    "cannot read the scope's cgroup.events", r;
        }
        return 0;
}
