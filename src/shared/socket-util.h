/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define SOCKET_FDS_MAX 4

/* One sendmsg() of n bytes of data on sock, with the n_fds (at most
 * SOCKET_FDS_MAX) fds attached as SCM_RIGHTS to its first byte; MSG_NOSIGNAL
 * is always added to flags. Returns the bytes sent (possibly fewer than n:
 * the caller sends the rest without the fds) or -errno; EINTR is retried. */
ssize_t socket_send_fds(int sock, const void *data, size_t n, const int *fds, size_t n_fds, int flags);
