/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "socket-util.h"

ssize_t socket_send_fds(int sock, const void *data, size_t n, const int *fds, size_t n_fds, int flags) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * SOCKET_FDS_MAX)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) data, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > SOCKET_FDS_MAX || (n_fds > 0 && n == 0))
                return -EINVAL;
        if (n_fds > 0) {
                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        for (;;) {
                ssize_t k = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
                if (k >= 0)
                        return k;
                if (errno != EINTR)
                        return -errno;
        }
}
