/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Loading a compiled policy needs no libseccomp: what runs in every sandbox
 * links only this file, not the compiler in seccomp-policy.c (the library
 * would cost each start-up its loading, for nothing). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp-policy.h"

int seccomp_program_load(const SeccompProgram *p) {
        struct sock_fprog prog = {
                .len = (unsigned short) p->n_filter,
                .filter = p->filter,
        };

        if (p->n_filter == 0 || p->n_filter > BPF_MAXINSNS)
                return -EINVAL;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return -errno;
        return 0;
}
