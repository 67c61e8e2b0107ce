/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
static const uint32_t unsafe_personality_flags[] = {
        0x0040000, /* ADDR_NO_RANDOMIZE */
        0x0080000, /* FDPIC_FUNCPTRS */
        0x0100000, /* MMAP_PAGE_ZERO */
        0x0200000, /* ADDR_COMPAT_LAYOUT */
        0x0400000, /* READ_IMPLIES_EXEC */
        0x0800000, /* ADDR_LIMIT_32BIT */
        0x8000000, /* ADDR_LIMIT_3GB */
};

/* No real persona has bit 31: personality(0xffffffff) is the query. */
#define PERSONALITY_QUERY_BIT 0x80000000U

static const uint32_t allowed_socket_families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };

/* No typing into somebody's terminal. */
static const uint32_t refused_ioctls[] = { TIOCSTI, TIOCLINUX };

static const uint32_t namespace_flags[] = {
        CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};

/* The syscalls that syscall-heavy tools (dd, cp, cc, git) make most: the
 * filter tests them one by one before libseccomp's program, whose binary
 * tree costs some 15 instructions for any syscall (seccomp_syscall_priority()
 * does not change the tree). Each costs every other syscall one more
 * instruction, so the list is short. All are allowed whatever their
 * arguments. The kernel's action cache (Linux >= 5.11) answers such
 * syscalls without running the filter at all; this serves older kernels. */
static const char *const hot_syscalls[] = {
        "read", "write", "close", "newfstatat", "openat", "mmap",
};

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

/* Allowed or refused only by their arguments: each has conditional rules
 * that together cover every argument value, and no unconditional rule,
 * because in one libseccomp filter an unconditional rule for a syscall
 * silently overrides every conditional rule for it. */
static bool is_conditional(const char *name) {
        return streq(name, "clone") || streq(name, "ioctl") || streq(name, "personality") || streq(name, "socket");
}

static bool is_allowed(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(allowed_syscalls); i++)
                if (streq(allowed_syscalls[i], name))
                        return true;
        /* Allowed with conditions; or, for clone3(), which passes its flags in
         * memory the filter cannot read, left to the default ENOSYS, so that
         * libc falls back to clone(), whose flags are checked. */
        return is_conditional(name) || streq(name, "clone3");
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

/* One rule: action when the low 32 bits of argument arg, masked, equal value.
 * The arguments checked here are int or unsigned int in the kernel, which
 * ignores the upper half of the register: so must the filter, or a caller
 * could pass a refused value with bits set above bit 31. */
static int add_masked(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg, uint32_t mask, uint32_t value) {
        return seccomp_rule_add(ctx, action, nr, 1, SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask, value));
}

/* action when the argument's low 32 bits are one of values. */
static int add_values(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg,
                      const uint32_t *values, size_t n_values) {
        int r;

        for (size_t i = 0; i < n_values; i++) {
                r = add_masked(ctx, action, nr, arg, UINT32_MAX, values[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* action when the argument's low 32 bits are none of values. libseccomp
 * rules can only say "equal under a mask", and one rule cannot test an
 * argument twice, so the complement is built from such rules: a value
 * differs from all of them if it differs from them in a bit where they all
 * agree (one rule per such bit), or else if its pattern in the bits where
 * they disagree is none of theirs (one rule per other pattern). */
static int add_values_complement(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg,
                                 const uint32_t *values, size_t n_values) {
        uint32_t varying = 0;
        int r;

        assert(n_values > 0);

        for (size_t i = 1; i < n_values; i++)
                varying |= values[i] ^ values[0];
        /* Bounds the rules for the disagreeing bits (2^n of them); ours need 3 and 4 bits. */
        if (__builtin_popcount(varying) > 6)
                return -E2BIG;

        for (unsigned b = 0; b < 32; b++) {
                uint32_t bit = UINT32_C(1) << b;
                if (varying & bit)
                        continue;
                r = add_masked(ctx, action, nr, arg, bit, ~values[0] & bit);
                if (r < 0)
                        return r;
        }

        /* Every pattern of the varying bits: walk the subsets of the mask. */
        uint32_t pattern = 0;
        do {
                uint32_t v = (values[0] & ~varying) | pattern;
                bool listed = false;
                for (size_t i = 0; i < n_values; i++)
                        if (values[i] == v)
                                listed = true;
                if (!listed) {
                        r = add_masked(ctx, action, nr, arg, UINT32_MAX, v);
                        if (r < 0)
                                return r;
                }
                pattern = (pattern - varying) & varying;
        } while (pattern != 0);

        return 0;
}

/* Each conditional syscall gets ALLOW and EPERM rules that are disjoint and
 * together cover every argument value: none falls through to the filter's
 * default, ENOSYS. */
static int add_argument_checks(scmp_filter_ctx ctx) {
        uint32_t all_unsafe = 0, all_ns = 0;
        int r;

        /* No new namespaces after setup. */
        for (size_t i = 0; i < ELEMENTSOF(namespace_flags); i++) {
                all_ns |= namespace_flags[i];
                r = add_masked(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 0, namespace_flags[i], namespace_flags[i]);
                if (r < 0)
                        return r;
        }
        r = add_masked(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 0, all_ns, 0);
        if (r < 0)
                return r;

        /* No unsafe personality flags, but the query works. */
        for (size_t i = 0; i < ELEMENTSOF(unsafe_personality_flags); i++) {
                all_unsafe |= unsafe_personality_flags[i];
                r = add_masked(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 0,
                               unsafe_personality_flags[i] | PERSONALITY_QUERY_BIT, unsafe_personality_flags[i]);
                if (r < 0)
                        return r;
        }
        r = add_masked(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 0, all_unsafe, 0);
        if (r >= 0)
                r = add_masked(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 0,
                               PERSONALITY_QUERY_BIT, PERSONALITY_QUERY_BIT);
        if (r < 0)
                return r;

        /* Only local, IP and netlink sockets (the network namespace has only lo):
         * no packet, crypto API, vsock, bluetooth ... sockets. */
        r = add_values(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 0,
                       allowed_socket_families, ELEMENTSOF(allowed_socket_families));
        if (r >= 0)
                r = add_values_complement(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 0,
                                          allowed_socket_families, ELEMENTSOF(allowed_socket_families));
        if (r < 0)
                return r;

        /* The ioctl command is an unsigned int. */
        r = add_values(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1, refused_ioctls, ELEMENTSOF(refused_ioctls));
        if (r >= 0)
                r = add_values_complement(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                          refused_ioctls, ELEMENTSOF(refused_ioctls));
        return r;
}

static int build_policy(scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
        if (!ctx)
                return -ENOMEM;
        /* No other ABI: i386 (int 0x80) and x32 calls fail. */
        if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)) < 0 ||
            /* A binary tree instead of a linear list: the filter runs on every syscall. */
            seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0 ||
            seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0)
                return -EINVAL;

        for (size_t i = 0; i < ELEMENTSOF(allowed_syscalls); i++) {
                if (is_conditional(allowed_syscalls[i]))
                        continue;
                int nr = seccomp_syscall_resolve_name(allowed_syscalls[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue; /* not on this architecture */
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
                if (r < 0)
                        return r;
        }

        r = add_argument_checks(ctx);
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

static bool is_unconditionally_allowed(const char *name) {
        if (is_conditional(name))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(allowed_syscalls); i++)
                if (streq(allowed_syscalls[i], name))
                        return true;
        return false;
}

/* Puts in front of libseccomp's program a short test for the hot syscalls:
 * native ABI and one of them: allow; anything else goes on to the first
 * instruction of libseccomp's program, which decides as if the prefix were
 * not there (the prefix only allows what that program allows for every
 * argument value). x32 numbers carry bit 30 and never equal a hot one. */
static int prepend_hot_path(struct sock_filter **filter, size_t *n_filter) {
        enum { HEAD = 3 }; /* load arch, test it, load nr */
        const size_t n_hot = ELEMENTSOF(hot_syscalls);
        const size_t n_prefix = HEAD + n_hot + 2; /* + jump over the allow, allow */
        struct sock_filter *f;
        size_t k = 0;

        _Static_assert(ELEMENTSOF(hot_syscalls) + 3 <= UINT8_MAX, "BPF jumps are 8-bit");

        if (*n_filter > BPF_MAXINSNS - n_prefix)
                return -E2BIG;
        f = malloc((n_prefix + *n_filter) * sizeof(struct sock_filter));
        if (!f)
                return -ENOMEM;

        f[k++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
        /* Another ABI: straight to libseccomp's program, n_hot + 3 ahead. */
        f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_arch_native(), 0, n_hot + 3);
        f[k++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
        for (size_t i = 0; i < n_hot; i++) {
                int nr = seccomp_syscall_resolve_name(hot_syscalls[i]);
                if (nr < 0 || !is_unconditionally_allowed(hot_syscalls[i])) {
                        free(f);
                        return -EINVAL;
                }
                /* Equal: to the allow, n_hot - i ahead. */
                f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t) nr, n_hot - i, 0);
        }
        f[k++] = (struct sock_filter) BPF_STMT(BPF_JMP | BPF_JA, 1);
        f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        assert(k == n_prefix);

        memcpy(f + n_prefix, *filter, *n_filter * sizeof(struct sock_filter));
        free(*filter);
        *filter = f;
        *n_filter += n_prefix;
        return 0;
}

int seccomp_policy_compile(SeccompProgram *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        SeccompProgram p = {};
        int r;

        r = build_policy(&ctx);
        if (r < 0)
                return r;
        r = export_bpf(ctx, &p.filter, &p.n_filter);
        if (r >= 0)
                r = prepend_hot_path(&p.filter, &p.n_filter);
        if (r < 0) {
                seccomp_program_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}

void seccomp_program_done(SeccompProgram *p) {
        p->filter = mfree_ptr(p->filter);
        p->n_filter = 0;
}
