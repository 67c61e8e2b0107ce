/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "seccomp-policy.h"
#include "tap.h"

#define RET_EPERM (SECCOMP_RET_ERRNO | EPERM)
#define RET_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)

/* A classic-BPF interpreter for what libseccomp emits, so that decisions
 * can be checked for any argument and ABI, even ones this process must not
 * make: returns the filter's answer and counts the instructions run. */
static uint32_t bpf_run(const SeccompProgram *p, const struct seccomp_data *d, unsigned *ret_steps) {
        uint32_t a = 0;
        unsigned steps = 0;

        for (size_t pc = 0; pc < p->n_filter; pc++) {
                const struct sock_filter *i = &p->filter[pc];

                steps++;
                switch (i->code) {
                case BPF_LD | BPF_W | BPF_ABS:
                        if (i->k > sizeof(*d) - sizeof(a) || i->k % sizeof(a) != 0)
                                return UINT32_MAX;
                        memcpy(&a, (const uint8_t *) d + i->k, sizeof(a));
                        break;
                case BPF_ALU | BPF_AND | BPF_K:
                        a &= i->k;
                        break;
                case BPF_JMP | BPF_JA:
                        pc += i->k;
                        break;
                case BPF_JMP | BPF_JEQ | BPF_K:
                        pc += a == i->k ? i->jt : i->jf;
                        break;
                case BPF_JMP | BPF_JGT | BPF_K:
                        pc += a > i->k ? i->jt : i->jf;
                        break;
                case BPF_JMP | BPF_JGE | BPF_K:
                        pc += a >= i->k ? i->jt : i->jf;
                        break;
                case BPF_JMP | BPF_JSET | BPF_K:
                        pc += (a & i->k) ? i->jt : i->jf;
                        break;
                case BPF_RET | BPF_K:
                        if (ret_steps)
                                *ret_steps = steps;
                        return i->k;
                default:
                        return UINT32_MAX; /* not expected from libseccomp: fail the check */
                }
        }
        return UINT32_MAX;
}

static uint32_t decide(const SeccompProgram *p, int nr, uint64_t a0, uint64_t a1) {
        struct seccomp_data d = {
                .nr = nr,
                .arch = AUDIT_ARCH_X86_64,
                .args = { a0, a1 },
        };
        return bpf_run(p, &d, NULL);
}

static unsigned steps_of(const SeccompProgram *p, int nr) {
        struct seccomp_data d = { .nr = nr, .arch = AUDIT_ARCH_X86_64 };
        unsigned steps = 0;

        return bpf_run(p, &d, &steps) == SECCOMP_RET_ALLOW ? steps : UINT_MAX;
}

static void test_decisions(const SeccompProgram *p) {
        static const int hot[] = { SYS_read, SYS_write, SYS_pread64, SYS_pwrite64, SYS_close, SYS_fstat,
                                   SYS_newfstatat, SYS_lseek, SYS_mmap, SYS_futex, SYS_openat, SYS_brk };
        static const int refused[] = { SYS_ptrace, SYS_unshare, SYS_setns, SYS_mount, SYS_pivot_root,
                                       SYS_chroot, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd,
                                       SYS_io_uring_setup, SYS_keyctl, SYS_kexec_load, SYS_init_module,
                                       SYS_reboot, SYS_process_vm_readv, SYS_open_by_handle_at,
                                       SYS_fsopen, SYS_move_mount, SYS_swapon, SYS_settimeofday };
        unsigned worst = 0;
        bool ok = true;

        for (size_t i = 0; i < ELEMENTSOF(hot); i++) {
                ok = ok && decide(p, hot[i], 0, 0) == SECCOMP_RET_ALLOW;
                worst = MAX(worst, steps_of(p, hot[i]));
        }
        CHECK(ok, "read, write and the other hot syscalls: allowed");
        /* read and write are tested first, before libseccomp's tree; the rest
         * go through its tree (some 15 instructions), not a linear list. The
         * kernel's action cache skips even these for syscalls allowed
         * whatever their arguments. */
        CHECK(steps_of(p, SYS_read) <= 5 && steps_of(p, SYS_write) <= 6,
              "read and write are decided in %u and %u instructions", steps_of(p, SYS_read), steps_of(p, SYS_write));
        CHECK(worst <= 28, "the other hot syscalls in at most %u instructions", worst);

        ok = true;
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                ok = ok && decide(p, refused[i], 0, 0) == RET_EPERM;
        CHECK(ok, "a sample of refused syscalls: EPERM");

        CHECK_INT_EQ(decide(p, SYS_clone, CLONE_NEWUSER | SIGCHLD, 0), RET_EPERM, "clone(CLONE_NEWUSER): EPERM");
        ok = true;
        static const uint64_t ns[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                                       CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP };
        for (size_t i = 0; i < ELEMENTSOF(ns); i++)
                ok = ok && decide(p, SYS_clone, ns[i] | CLONE_VM | CLONE_THREAD | SIGCHLD, 0) == RET_EPERM &&
                     decide(p, SYS_clone, ns[i] | UINT64_C(0xffffffff00000000), 0) == RET_EPERM;
        CHECK(ok, "clone with any namespace flag, also with other bits: EPERM");
        CHECK(decide(p, SYS_clone, SIGCHLD, 0) == SECCOMP_RET_ALLOW &&
              decide(p, SYS_clone, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                     CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID, 0) == SECCOMP_RET_ALLOW,
              "clone of a process or a thread: allowed");
        CHECK_INT_EQ(decide(p, SYS_clone3, 0, 0), RET_ENOSYS, "clone3: ENOSYS");

        CHECK_INT_EQ(decide(p, SYS_socket, AF_PACKET, SOCK_RAW), RET_EPERM, "socket(AF_PACKET): EPERM");
        CHECK_INT_EQ(decide(p, SYS_socket, AF_INET, SOCK_STREAM), SECCOMP_RET_ALLOW, "socket(AF_INET): allowed");
        ok = true;
        for (uint64_t family = 0; family < 256; family++) {
                bool allowed = IN_SET(family, AF_UNIX, AF_INET, AF_INET6, AF_NETLINK);
                uint32_t want = allowed ? SECCOMP_RET_ALLOW : RET_EPERM;
                ok = ok && decide(p, SYS_socket, family, 0) == want &&
                     decide(p, SYS_socket, family | UINT64_C(0x100000000), 0) == want &&
                     decide(p, SYS_socket, family | UINT64_C(0xffffffff00000000), 0) == want;
        }
        CHECK(ok, "socket: only unix, inet, inet6, netlink, whatever the upper 32 bits (the kernel ignores them)");
        CHECK(decide(p, SYS_socket, UINT32_MAX, 0) == RET_EPERM && decide(p, SYS_socket, 0x40000001, 0) == RET_EPERM,
              "socket of a made-up family: EPERM");

        CHECK(decide(p, SYS_ioctl, 0, TIOCSTI) == RET_EPERM && decide(p, SYS_ioctl, 0, TIOCLINUX) == RET_EPERM &&
              decide(p, SYS_ioctl, 0, TIOCSTI | UINT64_C(0x500000000)) == RET_EPERM,
              "ioctl(TIOCSTI), ioctl(TIOCLINUX): EPERM");
        ok = true;
        static const uint64_t fine_ioctls[] = { TCGETS, TCSETS, TIOCGWINSZ, TIOCSWINSZ, FIONREAD, FIONBIO,
                                                FIOCLEX, TIOCGPGRP, TIOCSPGRP, 0, UINT32_MAX,
                                                TIOCSTI ^ 1, TIOCSTI ^ 0x10000, TIOCLINUX ^ 2 };
        for (size_t i = 0; i < ELEMENTSOF(fine_ioctls); i++)
                ok = ok && decide(p, SYS_ioctl, 3, fine_ioctls[i]) == SECCOMP_RET_ALLOW;
        /* And every command near the refused ones. */
        for (uint64_t cmd = 0x5400; cmd < 0x5500; cmd++)
                ok = ok && decide(p, SYS_ioctl, 3, cmd) == (IN_SET(cmd, TIOCSTI, TIOCLINUX) ? RET_EPERM : SECCOMP_RET_ALLOW);
        CHECK(ok, "other ioctls: allowed");

        CHECK(decide(p, SYS_personality, 0x0040000, 0) == RET_EPERM &&
              decide(p, SYS_personality, 0x0400000 | 0x0008, 0) == RET_EPERM,
              "personality(ADDR_NO_RANDOMIZE), personality(READ_IMPLIES_EXEC): EPERM");
        CHECK(decide(p, SYS_personality, 0, 0) == SECCOMP_RET_ALLOW &&
              decide(p, SYS_personality, 0x0008, 0) == SECCOMP_RET_ALLOW &&
              decide(p, SYS_personality, UINT32_MAX, 0) == SECCOMP_RET_ALLOW,
              "personality(PER_LINUX), personality(PER_BSD), the query: allowed");

        CHECK(decide(p, 1000, 0, 0) == RET_ENOSYS && decide(p, 600, 0, 0) == RET_ENOSYS,
              "unknown syscall numbers: ENOSYS");

        struct seccomp_data i386 = { .nr = 20 /* getpid */, .arch = AUDIT_ARCH_I386 };
        struct seccomp_data x32 = { .nr = 0x40000000 | SYS_getpid, .arch = AUDIT_ARCH_X86_64 };
        CHECK(bpf_run(p, &i386, NULL) == RET_EPERM && bpf_run(p, &x32, NULL) == RET_EPERM,
              "other ABIs (i386, x32): EPERM");
}

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
static int do_inet_socket(void) { return socket(AF_INET, SOCK_STREAM, 0) >= 0 ? 0 : 1; }
/* AF_ALG needs no privilege: only the filter stands in the way. */
static int do_alg_socket_high_bits(void) { return errno_of(syscall(SYS_socket, AF_ALG | (1L << 32), SOCK_SEQPACKET, 0)); }
static int do_clone_newuser(void) { return errno_of(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)); }
static int do_read_write(void) {
        int fd[2];
        char c = 'x';
        if (pipe(fd) < 0)
                return 1;
        return write(fd[1], &c, 1) == 1 && read(fd[0], &c, 1) == 1 ? 0 : 1;
}
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
        CHECK(seccomp_policy_compile(&p) == 0 && p.n_filter > 0,
              "policy compiles to one filter of %zu instructions", p.n_filter);
        CHECK(p.n_filter == seccomp_builtin_program.n_filter &&
              memcmp(p.filter, seccomp_builtin_program.filter, p.n_filter * sizeof(struct sock_filter)) == 0,
              "the program built into agentfab-sandbox is the policy");

        test_decisions(&p);

        /* The same decisions made by the kernel. */
        CHECK_INT_EQ(in_filtered_child(&p, do_getpid), 0, "ordinary syscalls work");
        CHECK_INT_EQ(in_filtered_child(&p, do_read_write), 0, "read and write work");
        CHECK_INT_EQ(in_filtered_child(&p, do_fork), 0, "fork works");
        CHECK_INT_EQ(in_filtered_child(&p, do_inet_socket), 0, "inet sockets work");
        CHECK_INT_EQ(in_filtered_child(&p, do_unix_socket), 0, "unix sockets work");
        CHECK_INT_EQ(in_filtered_child(&p, do_query_personality), 0, "personality query works");
        /* Denials are EPERM, so that tools print a readable error... */
        CHECK_INT_EQ(in_filtered_child(&p, do_unshare), EPERM, "unshare: EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_ptrace), EPERM, "ptrace: EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_io_uring), EPERM, "io_uring_setup: EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_bad_personality), EPERM, "personality(ADDR_NO_RANDOMIZE): EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_packet_socket), EPERM, "packet socket: EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_alg_socket_high_bits), EPERM, "AF_ALG socket, family with bit 32 set: EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_clone_newns), EPERM, "clone(CLONE_NEWNS): EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_clone_newuser), EPERM, "clone(CLONE_NEWUSER): EPERM");
        CHECK_INT_EQ(in_filtered_child(&p, do_tiocsti), EPERM, "ioctl(TIOCSTI): EPERM");
        /* ...while what is newer than the policy looks absent, so that libc falls back. */
        CHECK_INT_EQ(in_filtered_child(&p, do_clone3), ENOSYS, "clone3: ENOSYS");
        CHECK_INT_EQ(in_filtered_child(&p, do_unknown), ENOSYS, "unknown syscall 1000: ENOSYS");

        seccomp_program_done(&p);
        return tap_done();
}
