/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "fs-util.h"
#include "macro.h"
#include "session-check.h"
#include "string-util.h"

#define SCOPE_PREFIX "agentfab-task-"
#define SCOPE_SUFFIX ".scope"

bool sandbox_cgroup_text_is_task(const char *text, const char *task_id) {
        char want[64];
        bool found = false;

        if (!text || !task_id || strlen(task_id) != AGENTFAB_TASK_ID_LEN)
                return false;
        snprintf(want, sizeof(want), "/" SCOPE_PREFIX "%s" SCOPE_SUFFIX, task_id);

        for (const char *l = text; l && *l;) {
                const char *end = strchrnul(l, '\n');
                const char *c1 = memchr(l, ':', (size_t) (end - l));
                const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t) (end - c1 - 1)) : NULL;

                if (c2) {
                        size_t controllers = (size_t) (c2 - c1 - 1), path = (size_t) (end - c2 - 1);
                        bool systemd = (controllers == 0 && c1 - l == 1 && l[0] == '0') ||
                                       (controllers == strlen("name=systemd") && strneq(c1 + 1, "name=systemd", controllers));
                        if (systemd) {
                                /* A sub-cgroup of the scope is not the scope: PID 1 never leaves it. */
                                if (path < strlen(want) || !strneq(end - strlen(want), want, strlen(want)))
                                        return false;
                                found = true;
                        }
                }
                l = *end ? end + 1 : end;
        }
        return found;
}

static int check_socket(int fd, bool idle, const char **ret_why) {
        struct stat st;
        int v;
        socklen_t l = sizeof(v);

        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
                return *ret_why = "not a socket", -ENOTSOCK;
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_UNIX)
                return *ret_why = "not an AF_UNIX socket", -EPROTOTYPE;
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_STREAM)
                return *ret_why = "not a stream socket", -EPROTOTYPE;

        struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
        int n = poll(&p, 1, 0);
        if (n < 0)
                return *ret_why = "cannot poll the connection", -errno;
        if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))
                return *ret_why = "the sandbox closed the connection", -ECONNRESET;
        if (idle && (p.revents & POLLIN))
                return *ret_why = "the sandbox has something to say (a command was in flight)", -EBUSY;
        return 0;
}

static int check_uid(pid_t pid, uid_t uid, const char **ret_why) {
        _cleanup_free_ char *text = NULL;
        char path[64];
        unsigned ruid, euid;
        const char *u;

        snprintf(path, sizeof(path), "/proc/%i/status", (int) pid);
        if (read_file_at(AT_FDCWD, path, 64 * 1024, &text, NULL) < 0)
                return *ret_why = "cannot read the sandbox's status", -ESRCH;
        u = strstr(text, "\nUid:");
        if (!u || sscanf(u + strlen("\nUid:"), "%u %u", &ruid, &euid) != 2)
                return *ret_why = "cannot parse the sandbox's status", -EBADMSG;
        if (ruid != (unsigned) uid || euid != (unsigned) uid)
                return *ret_why = "the sandbox's PID 1 runs as another uid", -EPERM;
        return 0;
}

int sandbox_connection_check(int fd, const char *task_id, pid_t pid, uid_t uid, bool idle, int *ret_pidfd,
                             const char **ret_why) {
        _cleanup_close_ int pidfd = -EBADF;
        _cleanup_free_ char *text = NULL;
        char path[64];
        const char *why = NULL;
        int r;

        if (!ret_why)
                ret_why = &why;
        if (fd < 0 || !task_id || strlen(task_id) != AGENTFAB_TASK_ID_LEN || pid <= 1 || !ret_pidfd)
                return *ret_why = "invalid arguments", -EINVAL;

        r = check_socket(fd, idle, ret_why);
        if (r < 0)
                return r;

        /* Pinned first: what /proc says below is of this process, if it
         * still lives after the reading. */
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return *ret_why = "the sandbox's PID 1 is gone", -ESRCH;
        snprintf(path, sizeof(path), "/proc/%i/cgroup", (int) pid);
        if (read_file_at(AT_FDCWD, path, 64 * 1024, &text, NULL) < 0)
                return *ret_why = "cannot read the sandbox's cgroup", -ESRCH;
        if (!sandbox_cgroup_text_is_task(text, task_id))
                return *ret_why = "the process is not in the task's scope", -ESRCH;
        if (uid != UID_INVALID) {
                r = check_uid(pid, uid, ret_why);
                if (r < 0)
                        return r;
        }
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0 && errno != EPERM)
                return *ret_why = "the sandbox's PID 1 ended meanwhile", -ESRCH;

        *ret_pidfd = TAKE_FD(pidfd);
        return 0;
}
