/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Waits until fd can be read (data, end of file or an error to read) or
 * CLOCK_MONOTONIC passes deadline (usec). Returns 1 when readable,
 * -ETIMEDOUT, or -errno from poll(); EINTR waits on. */
int fd_wait_readable(int fd, uint64_t deadline);

/* Writes all n bytes of buf to fd, again after EINTR and short writes.
 * 0, or -errno of the write that failed (-EIO if one wrote nothing). */
int loop_write(int fd, const void *buf, size_t n);
