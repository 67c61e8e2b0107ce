/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "io-util.h"
#include "json-util.h"
#include "launcher-client.h"
#include "macro.h"
#include "socket-util.h"
#include "string-util.h"
#include "time-util.h"

int launcher_connect(const char *path, uint64_t timeout_usec, int *ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = {
                .tv_sec = (time_t) (timeout_usec / USEC_PER_SEC),
                .tv_usec = (suseconds_t) (timeout_usec % USEC_PER_SEC),
        };

        if (strlen(path) >= sizeof(sa.sun_path))
                return -EINVAL;
        strcpy(sa.sun_path, path);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* Bounds the connect() (a full backlog) and the request's send. */
        if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        *ret = TAKE_FD(fd);
        return 0;
}

/* Sends the request line with the fds of pass (those >= 0, in order). */
int launcher_send(int fd, const char *line, const int pass[static LAUNCHER_FDS_MAX]) {
        size_t n = strlen(line), done = 0;
        int fds[LAUNCHER_FDS_MAX];
        size_t n_fds = 0;

        for (size_t i = 0; i < LAUNCHER_FDS_MAX; i++)
                if (pass[i] >= 0)
                        fds[n_fds++] = pass[i];

        while (done < n) {
                /* The fds go with the first byte only. */
                ssize_t k = socket_send_fds(fd, line + done, n - done, fds, done == 0 ? n_fds : 0, 0);
                if (k < 0)
                        return k == -EAGAIN ? -ETIMEDOUT : (int) k;
                done += (size_t) k;
        }
        return 0;
}

/* Reads until buf holds a whole line, at most until deadline. Returns the
 * line's length (without the newline, which becomes NUL); what follows it
 * stays in buf, *len counts all. */
int launcher_read_line(int fd, char *buf, size_t max, size_t *len, uint64_t deadline) {
        for (;;) {
                char *nl = memchr(buf, '\n', *len);
                if (nl) {
                        *nl = '\0';
                        return (int) (nl - buf);
                }
                if (*len >= max)
                        return -EBADMSG;
                int r = fd_wait_readable(fd, deadline);
                if (r < 0)
                        return r;
                ssize_t k = recv(fd, buf + *len, max - *len, MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -ECONNRESET;
                *len += (size_t) k;
        }
}

int launcher_reply_error(json_object *j, char **ret_error) {
        const char *message = NULL;

        /* The launcher is trusted, but its words go into logs: one safe line, bounded. */
        if (ret_error && json_get_string(j, "message", &message) >= 0) {
                _cleanup_free_ char *m = strshorten_line(message, LAUNCHER_ERROR_MAX);
                if (m && !string_is_safe(m, false))
                        m = mfree_ptr(m);
                *ret_error = m ? TAKE_PTR(m) : strdup("the launcher refused the request");
        }
        return -EREMOTEIO;
}
