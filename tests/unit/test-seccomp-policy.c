/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "seccomp-policy.h"
#include "tap.h"

/* Runs fn in a child under the policy; the child's exit code is fn's. */
static int in_filtered_child(const SeccompProgram *p, int (*fn)(void)) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_program_load(p) < 0)
                        _exit(99);
                _exit(fn());
        }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

static int errno_of(long r) {
        return r < 0 ? errno : 0;
}

static int do_getpid(void) { return syscall(SYS_getpid) > 0 ? 0 : 1; }
static int do_unshare(void) { return errno_of(syscall(SYS_unshare, CLONE_NEWUSER)); }
static int do_clone3(void) { return errno_of(syscall(SYS_clone3, NULL, 0)); }
static int do_unknown(void) { return errno_of(syscall(1000)); }
static int do_ptrace(void) { return errno_of(syscall(SYS_ptrace, 0, 0, 0, 0)); }
static int do_io_uring(void) { return errno_of(syscall(SYS_io_uring_setup, 1, NULL)); }
static int do_bad_personality(void) { return errno_of(syscall(SYS_personality, 0x0040000)); }
static int do_query_personality(void) { return syscall(SYS_personality, 0xffffffffUL) >= 0 ? 0 : 1; }
static int do_packet_socket(void) { return errno_of(socket(AF_PACKET, SOCK_RAW, 0)); }
static int do_unix_socket(void) { return socket(AF_UNIX, SOCK_STREAM, 0) >= 0 ? 0 : 1; }
static int do_clone_newns(void) { return errno_of(syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0)); }
static int do_fork(void) {
        pid_t p = fork();
        if (p == 0)
                _exit(0);
        return p > 0 ? 0 : 1;
}
static int do_tiocsti(void) {
        int fd = open("/dev/ptmx", O_RDWR | O_NOCTTY);
        char c = 'x';
        if (fd < 0)
                return EPERM; /* no pty here: nothing to test, count as refused */
        return errno_of(ioctl(fd, TIOCSTI, &c));
}

int main(void) {
        SeccompProgram p = {};

        /* The policy compiles, and the copy built into agentfab-sandbox at
         * build time is the same program. */
        CHECK(seccomp_policy_compile(&p) == 0 && p.n_filters[0] > 0 && p.n_filters[1] > 0,
              "policy compiles (%zu + %zu instructions)", p.n_filters[0], p.n_filters[1]);
        bool same = true;
        for (int i = 0; i < 2; i++)
                same = same && p.n_filters[i] == seccomp_builtin_program.n_filters[i] &&
                       memcmp(p.filters[i], seccomp_builtin_program.filters[i], p.n_filters[i] * sizeof(struct sock_filter)) == 0;
        CHECK(same, "the program built into agentfab-sandbox is the policy");

        CHECK(in_filtered_child(&p, do_getpid) == 0, "ordinary syscalls work");
        CHECK(in_filtered_child(&p, do_fork) == 0, "fork works");
        CHECK(in_filtered_child(&p, do_unix_socket) == 0, "unix sockets work");
        CHECK(in_filtered_child(&p, do_query_personality) == 0, "personality query works");
        /* Denials are EPERM, so that tools print a readable error... */
        CHECK(in_filtered_child(&p, do_unshare) == EPERM, "unshare: EPERM");
        CHECK(in_filtered_child(&p, do_ptrace) == EPERM, "ptrace: EPERM");
        CHECK(in_filtered_child(&p, do_io_uring) == EPERM, "io_uring_setup: EPERM");
        CHECK(in_filtered_child(&p, do_bad_personality) == EPERM, "personality(ADDR_NO_RANDOMIZE): EPERM");
        CHECK(in_filtered_child(&p, do_packet_socket) == EPERM, "packet socket: EPERM");
        CHECK(in_filtered_child(&p, do_clone_newns) == EPERM, "clone(CLONE_NEWNS): EPERM");
        CHECK(in_filtered_child(&p, do_tiocsti) == EPERM, "ioctl(TIOCSTI): EPERM");
        /* ...while what is newer than the policy looks absent, so that libc falls back. */
        CHECK(in_filtered_child(&p, do_clone3) == ENOSYS, "clone3: ENOSYS");
        CHECK(in_filtered_child(&p, do_unknown) == ENOSYS, "unknown syscall 1000: ENOSYS");

        seccomp_program_done(&p);
        return tap_done();
}
