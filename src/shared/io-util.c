/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "io-util.h"
#include "time-util.h"

int fd_wait_readable(int fd, uint64_t deadline) {
        for (;;) {
                uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return -ETIMEDOUT;

                struct pollfd p = { .fd = fd, .events = POLLIN };
                uint64_t ms = (deadline - now + 999) / 1000;
                int n = poll(&p, 1, ms > INT32_MAX ? INT32_MAX : (int) ms);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0)
                        return 1;
        }
}

int loop_write(int fd, const void *buf, size_t n) {
        const char *p = buf;

        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}
