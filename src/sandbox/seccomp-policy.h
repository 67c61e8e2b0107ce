/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <linux/filter.h>
#include <stddef.h>

/* The sandbox's seccomp policy, compiled once (libseccomp) and loaded as
 * raw BPF in each sandbox, so that the per-sandbox cost is a prctl(), not a
 * compilation.
 *
 * One program:
 *  - every syscall a build or test tool needs is allowed; a few only with
 *    safe arguments: clone without namespace flags, ioctl but TIOCSTI and
 *    TIOCLINUX, personality without flags that weaken the address space,
 *    socket of the unix, inet, inet6 and netlink families;
 *  - every other syscall libseccomp knows fails with EPERM;
 *  - syscall numbers it does not know (newer than this libseccomp) fail with
 *    ENOSYS, so that programs fall back as on an older kernel; clone3 also
 *    fails with ENOSYS, for the same reason (its flags cannot be inspected);
 *  - other ABIs (i386, x32) fail with EPERM.
 * Denials are errors, never kills, so that tools fail readably. One filter,
 * not an allowlist and a second filter of argument checks: the kernel runs
 * every installed filter on each syscall that its action cache cannot
 * answer. */

typedef struct SeccompProgram {
        struct sock_filter *filter;
        size_t n_filter;
} SeccompProgram;

int seccomp_policy_compile(SeccompProgram *ret);
void seccomp_program_done(SeccompProgram *p);

/* Async-signal-safe: only syscalls. Needs no_new_privs (or CAP_SYS_ADMIN). */
int seccomp_program_load(const SeccompProgram *p);

/* The same policy, compiled when agentfab was built (seccomp-bpf-gen). */
extern const SeccompProgram seccomp_builtin_program;
