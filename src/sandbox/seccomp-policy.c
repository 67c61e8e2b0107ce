/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "macro.h"
#include "seccomp-policy.h"

/* What build and test tools need, grouped by purpose. Anything not here is
 * refused: in particular (beyond Docker's default profile) ptrace,
 * process_vm_readv/writev, userfaultfd, perf_event_open, bpf, io_uring_*,
 * keyctl/add_key/request_key, kcmp, pidfd_getfd, the mount API, unshare,
 * setns, chroot, pivot_root, module loading, kexec, reboot, swap, clock and
 * hostname setting, quotactl, open_by_handle_at, NUMA policy calls,
 * modify_ldt, vhangup, acct, syslog. */
static const char *const allowed_syscalls[] = {
        /* files and directories */
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
        "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup", "dup2", "dup3",
        "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
        "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "rename", "renameat",
        "renameat2", "link", "linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat",
        "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "umask", "truncate", "ftruncate",
        "fallocate", "fadvise64", "readahead", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
        "flock", "fcntl", "ioctl", "utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
        "copy_file_range", "sendfile", "splice", "tee", "vmsplice", "name_to_handle_at",
        "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr", "llistxattr",
        "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
        "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fanotify_mark",
        /* memory */
        "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock", "mlock2",
        "munlock", "mlockall", "munlockall", "memfd_create", "membarrier", "remap_file_pages",
        "pkey_alloc", "pkey_free", "pkey_mprotect",
        /* processes, threads, signals */
        "fork", "vfork", "clone", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
        "kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
        "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "pause",
        "signalfd", "signalfd4", "pidfd_open", "pidfd_send_signal", "restart_syscall",
        "getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",
        "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
        "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid",
        "capget", "capset", "prctl", "arch_prctl", "set_tid_address", "set_robust_list", "get_robust_list",
        "rseq", "futex", "futex_waitv", "sched_yield", "sched_getaffinity", "sched_setaffinity",
        "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler", "sched_getattr",
        "sched_setattr", "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
        "getpriority", "setpriority", "ioprio_get", "ioprio_set", "getrlimit", "setrlimit", "prlimit64",
        "getrusage", "times", "uname", "sysinfo", "getcpu", "getrandom", "seccomp",
        "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
        /* time */
        "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
        "alarm", "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
        "timer_getoverrun", "timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime",
        /* polling and IPC within the sandbox */
        "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
        "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
        "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
        "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
        "mq_notify", "mq_getsetattr",
        "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
        /* sockets (families restricted below; the network namespace has only lo) */
        "socketpair", "bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername",
        "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
        "getsockopt", "setsockopt",
};

/* personality() flags that weaken the address space layout or memory protection. */
static const unsigned long unsafe_personality_flags[] = {
        0x0040000, /* ADDR_NO_RANDOMIZE */
        0x0080000, /* FDPIC_FUNCPTRS */
        0x0100000, /* MMAP_PAGE_ZERO */
        0x0200000, /* ADDR_COMPAT_LAYOUT */
        0x0400000, /* READ_IMPLIES_EXEC */
        0x0800000, /* ADDR_LIMIT_32BIT */
        0x8000000, /* ADDR_LIMIT_3GB */
};

static const int allowed_socket_families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };

#define NAMESPACE_FLAGS (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
                         CLONE_NEWNET | CLONE_NEWCGROUP)

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static bool is_allowed(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(allowed_syscalls); i++)
                if (streq(allowed_syscalls[i], name))
                        return true;
        /* Allowed with conditions; or, for clone3(), which passes its flags in
         * memory the filter cannot read, left to the default ENOSYS, so that
         * libc falls back to clone(), whose flags are checked. */
        return streq(name, "personality") || streq(name, "socket") || streq(name, "clone3");
}

static int export_bpf(scmp_filter_ctx ctx, struct sock_filter **ret, size_t *ret_n) {
        _cleanup_close_ int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
        off_t size;
        int r;

        if (fd < 0)
                return -errno;
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % sizeof(struct sock_filter) != 0)
                return -EBADMSG;

        struct sock_filter *f = malloc((size_t) size);
        if (!f)
                return -ENOMEM;
        if (pread(fd, f, (size_t) size, 0) != size) {
                free(f);
                return -EIO;
        }
        *ret = f;
        *ret_n = (size_t) size / sizeof(struct sock_filter);
        return 0;
}

static int new_filter(uint32_t default_action, scmp_filter_ctx *ret) {
        scmp_filter_ctx ctx = seccomp_init(default_action);
        if (!ctx)
                return -ENOMEM;
        /* No other ABI: i386 (int 0x80) and x32 calls fail. */
        if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)) < 0 ||
            /* A binary tree instead of a linear list: the filter runs on every syscall. */
            seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0 ||
            seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0) {
                seccomp_release(ctx);
                return -EINVAL;
        }
        *ret = ctx;
        return 0;
}

static int build_allowlist(scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        r = new_filter(SCMP_ACT_ERRNO(ENOSYS), &ctx);
        if (r < 0)
                return r;

        for (size_t i = 0; i < ELEMENTSOF(allowed_syscalls); i++) {
                int nr = seccomp_syscall_resolve_name(allowed_syscalls[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue; /* not on this architecture */
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
                if (r < 0)
                        return r;
        }

        /* personality() and socket() are allowed here and narrowed by the
         * argument checks. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 0);
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 0);
        if (r < 0)
                return r;

        /* Every other syscall this libseccomp knows is refused with EPERM;
         * numbers it has no name for are newer than it and fall through to
         * the default, ENOSYS, as on a kernel that lacks them. */
        for (int nr = 0; nr < 1024; nr++) {
                _cleanup_free_ char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
                if (!name || is_allowed(name))
                        continue;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(ctx);
        return 0;
}

static int build_argument_checks(scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        static const unsigned long ns_flags[] = {
                CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
        };
        int r;

        r = new_filter(SCMP_ACT_ALLOW, &ctx);
        if (r < 0)
                return r;

        /* No new namespaces after setup. */
        for (size_t i = 0; i < ELEMENTSOF(ns_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
                if (r < 0)
                        return r;
        }

        /* No unsafe personality flags. Bit 31 is in the mask so that the
         * query, personality(0xffffffff), still works: no real persona has it. */
        for (size_t i = 0; i < ELEMENTSOF(unsafe_personality_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, unsafe_personality_flags[i] | 0x80000000UL,
                                             unsafe_personality_flags[i]));
                if (r < 0)
                        return r;
        }

        /* Only local, IP and netlink sockets (the network namespace has only lo):
         * no packet, crypto API, vsock, bluetooth ... sockets. */
        for (int family = 0; family < AF_MAX; family++) {
                bool allowed = false;
                for (size_t i = 0; i < ELEMENTSOF(allowed_socket_families); i++)
                        if (allowed_socket_families[i] == family)
                                allowed = true;
                if (allowed)
                        continue;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_EQ, (uint64_t) family));
                if (r < 0)
                        return r;
        }

        /* No typing into somebody's terminal. The command is an int: compare 32 bits. */
        static const unsigned long bad_ioctls[] = { TIOCSTI, TIOCLINUX };
        for (size_t i = 0; i < ELEMENTSOF(bad_ioctls); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, bad_ioctls[i]));
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(ctx);
        return 0;
}

int seccomp_policy_compile(SeccompProgram *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx allow = NULL, args = NULL;
        SeccompProgram p = {};
        int r;

        r = build_allowlist(&allow);
        if (r < 0)
                return r;
        r = build_argument_checks(&args);
        if (r < 0)
                return r;

        r = export_bpf(allow, &p.filters[0], &p.n_filters[0]);
        if (r >= 0)
                r = export_bpf(args, &p.filters[1], &p.n_filters[1]);
        if (r < 0) {
                seccomp_program_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}

void seccomp_program_done(SeccompProgram *p) {
        for (size_t i = 0; i < ELEMENTSOF(p->filters); i++) {
                free(p->filters[i]);
                p->filters[i] = NULL;
                p->n_filters[i] = 0;
        }
}

int seccomp_program_load(const SeccompProgram *p) {
        /* The kernel runs every installed filter and keeps the strictest answer. */
        for (size_t i = ELEMENTSOF(p->filters); i > 0; i--) {
                struct sock_fprog prog = {
                        .len = (unsigned short) p->n_filters[i - 1],
                        .filter = p->filters[i - 1],
                };
                if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                        return -errno;
        }
        return 0;
}
