/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-freeze.h"
#include "tap.h"

#define TASK "0123456789ab"

static void path_ok(const char *text, const char *want, const char *why) {
        char *p = NULL;
        int r = cgroup_task_path_from_proc(text, TASK, &p);
        CHECK(r == 0 && p && streq(p, want), "%s: %s", why, p ?: strerror(-r));
        free(p);
}

static void path_refused(const char *text, int want, const char *why) {
        char *p = NULL;
        int r = cgroup_task_path_from_proc(text, TASK, &p);
        CHECK(r == want && !p, "%s: %d", why, r);
        free(p);
}

int main(void) {
        /* The launcher freezes what the kernel says the sandbox's PID 1 is
         * in: the "0::" line, in a hybrid hierarchy among the v1 lines. */
        path_ok("12:pids:/agentfab.slice/agentfab-task-" TASK ".scope\n"
                "1:name=systemd:/agentfab.slice/agentfab-task-" TASK ".scope\n"
                "0::/agentfab.slice/agentfab-task-" TASK ".scope\n",
                "/agentfab.slice/agentfab-task-" TASK ".scope", "hybrid hierarchy");
        path_ok("0::/agentfab.slice/agentfab-task-" TASK ".scope", "/agentfab.slice/agentfab-task-" TASK ".scope",
                "pure v2, no newline");
        path_ok("0::/system.slice/agentfab.slice/agentfab-task-" TASK ".scope\n",
                "/system.slice/agentfab.slice/agentfab-task-" TASK ".scope", "nested slice");

        /* SECURITY: only that task's scope: never the daemon's own cgroup,
         * another task's scope, the root, or anything with a ".." in it. */
        path_refused("1:name=systemd:/agentfab.slice/agentfab-task-" TASK ".scope\n", -ENOENT, "no 0:: line");
        path_refused("0::/system.slice/agentfab.service\n", -EPERM, "the daemon's cgroup");
        path_refused("0::/agentfab.slice/agentfab-task-ba9876543210.scope\n", -EPERM, "another task's scope");
        path_refused("0::/\n", -EPERM, "the root cgroup");
        path_refused("0::/agentfab-task-" TASK ".scope\n", -EPERM, "no slice above the scope");
        path_refused("0::/agentfab.slice/../agentfab.slice/agentfab-task-" TASK ".scope\n", -EPERM, "a .. component");
        path_refused("0::/agentfab.slice//agentfab-task-" TASK ".scope\n", -EPERM, "an empty component");
        path_refused("0::agentfab.slice/agentfab-task-" TASK ".scope\n", -EPERM, "relative path");
        path_refused("0::/agentfab.slice/agentfab-task-" TASK ".scope/sub\n", -EPERM, "a cgroup below the scope");
        char *p = NULL;
        CHECK(cgroup_task_path_from_proc("0::/agentfab.slice/agentfab-task-x.scope\n", "../x", &p) == -EINVAL && !p,
              "an invalid task id");

        /* cgroup.events: only an explicit "frozen 1" is frozen. */
        CHECK_ERRNO(cgroup_events_frozen("populated 1\nfrozen 1\n"), 1, "frozen 1");
        CHECK_ERRNO(cgroup_events_frozen("populated 1\nfrozen 0\n"), 0, "frozen 0");
        CHECK_ERRNO(cgroup_events_frozen("populated 1\nfrozen 1"), 1, "frozen 1 without newline");
        CHECK_ERRNO(cgroup_events_frozen("populated 1\n"), -EBADMSG, "no frozen line (a kernel without the freezer)");
        CHECK_ERRNO(cgroup_events_frozen("frozen 10\n"), -EBADMSG, "frozen 10 is no answer");

        /* A pidfd names its process; a plain fd is no pidfd; a dead
         * process is gone, whatever its number is now. */
        pid_t pid = fork();
        if (pid == 0) {
                pause();
                _exit(0);
        }
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        pid_t got = 0;
        CHECK(pidfd >= 0 && pidfd_get_pid_of(pidfd, &got) == 0 && got == pid, "pidfd names its process");
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CHECK_ERRNO(pidfd_get_pid_of(fd, &got), -EBADF, "a plain fd is no pidfd");
        close(fd);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        CHECK_ERRNO(pidfd_get_pid_of(pidfd, &got), -ESRCH, "a reaped process is gone");
        const char *why = NULL;
        char *path = NULL;
        CHECK(cgroup_task_path_of_pidfd(pidfd, TASK, &path, &why) == -ESRCH && why && !path, "no freezing of a gone process: %s",
              strempty(why));
        close(pidfd);

        return tap_done();
}
