/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The checks a sandbox connection passes before a restarted daemon talks to
 * it again (session-check.h): whatever comes back from the fd store is
 * taken up only if it still is the task's sandbox, between commands. No
 * root, no systemd: a real sandbox's side is the integration test's. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "session-check.h"
#include "tap.h"

#define TASK "0123456789ab"

/* The process must be in the scope on systemd's own hierarchy; another
 * controller's path says nothing, a sub-cgroup of the scope or another
 * task's scope is not it. */
static void test_cgroup_text(void) {
        CHECK(sandbox_cgroup_text_is_task("1:name=systemd:/agentfab-task-" TASK ".scope\n0::/agentfab-task-" TASK ".scope\n", TASK),
              "hybrid: both of systemd's lines name the scope");
        CHECK(sandbox_cgroup_text_is_task("0::/system.slice/agentfab-task-" TASK ".scope\n", TASK),
              "cgroup v2 only, below a slice");
        CHECK(sandbox_cgroup_text_is_task("7:memory:/x\n1:name=systemd:/agentfab-task-" TASK ".scope", TASK),
              "the last line without a newline");
        CHECK(!sandbox_cgroup_text_is_task("1:name=systemd:/agentfab-task-" TASK ".scope\n0::/agentfab.service\n", TASK),
              "one of systemd's lines elsewhere: refused");
        CHECK(!sandbox_cgroup_text_is_task("1:name=systemd:/agentfab-task-" TASK ".scope/sub\n", TASK),
              "a sub-cgroup of the scope: refused");
        CHECK(!sandbox_cgroup_text_is_task("1:name=systemd:/agentfab-task-ba9876543210.scope\n", TASK),
              "another task's scope: refused");
        CHECK(!sandbox_cgroup_text_is_task("1:name=systemd:/xagentfab-task-" TASK ".scope\n", TASK),
              "a name that only ends like it: refused");
        CHECK(!sandbox_cgroup_text_is_task("5:memory:/agentfab-task-" TASK ".scope\n", TASK),
              "only another controller's line: refused");
        CHECK(!sandbox_cgroup_text_is_task("", TASK), "empty: refused");
        CHECK(!sandbox_cgroup_text_is_task("garbage without colons\n", TASK), "garbage: refused");
        CHECK(!sandbox_cgroup_text_is_task("0::/agentfab-task-" TASK ".scope\n", "short"), "a bad task id: refused");
}

/* The connection: a stream socket with nothing waiting and no hang-up. */
static void test_connection(void) {
        int sv[2], pipefd[2], dg[2], pidfd = -EBADF, r;
        const char *why = NULL;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(pipefd, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, dg) < 0) {
                CHECK(false, "socketpair: %m");
                return;
        }

        /* Our own process is in no task's scope: everything up to that check passes. */
        r = sandbox_connection_check(sv[0], TASK, getpid(), getuid(), true, &pidfd, &why);
        CHECK(r == -ESRCH && why && strstr(why, "scope"), "an idle socket gets as far as the scope check (%s)", why);

        CHECK_INT_EQ(write(sv[1], "x", 1), 1, "the peer says something");
        why = NULL;
        r = sandbox_connection_check(sv[0], TASK, getpid(), getuid(), true, &pidfd, &why);
        CHECK_ERRNO(r, -EBUSY, "something to read on an idle connection: a command was in flight (%s)", why);
        why = NULL;
        r = sandbox_connection_check(sv[0], TASK, getpid(), getuid(), false, &pidfd, &why);
        CHECK_ERRNO(r, -ESRCH, "the same is allowed for a frozen one (%s)", why);

        close(sv[1]);
        why = NULL;
        r = sandbox_connection_check(sv[0], TASK, getpid(), getuid(), false, &pidfd, &why);
        CHECK_ERRNO(r, -ECONNRESET, "the peer closed it: refused (%s)", why);

        why = NULL;
        r = sandbox_connection_check(pipefd[0], TASK, getpid(), getuid(), true, &pidfd, &why);
        CHECK_ERRNO(r, -ENOTSOCK, "a pipe: refused (%s)", why);
        why = NULL;
        r = sandbox_connection_check(dg[0], TASK, getpid(), getuid(), true, &pidfd, &why);
        CHECK_ERRNO(r, -EPROTOTYPE, "a datagram socket: refused (%s)", why);
        why = NULL;
        r = sandbox_connection_check(dg[0], TASK, 1, getuid(), true, &pidfd, &why);
        CHECK_ERRNO(r, -EINVAL, "pid 1: refused (%s)", why);
        CHECK_ERRNO(pidfd, -EBADF, "no pidfd handed out on failure");

        close(sv[0]);
        close(pipefd[0]);
        close(pipefd[1]);
        close(dg[0]);
        close(dg[1]);
}

/* A process that ended: its pid is not taken up. */
static void test_gone(void) {
        int sv[2], pidfd = -EBADF, r;
        const char *why = NULL;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                CHECK(false, "socketpair: %m");
                return;
        }
        pid = fork();
        if (pid == 0)
                _exit(0);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        r = sandbox_connection_check(sv[0], TASK, pid, UID_INVALID, true, &pidfd, &why);
        CHECK_ERRNO(r, -ESRCH, "an ended process: refused (%s)", why);
        close(sv[0]);
        close(sv[1]);
}

int main(void) {
        test_cgroup_text();
        test_connection();
        test_gone();
        return tap_done();
}
