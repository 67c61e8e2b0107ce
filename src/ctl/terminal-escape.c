/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "io-util.h"
#include "macro.h"
#include "terminal-escape.h"

typedef struct EscapeCookie {
        int fd;
        bool c2;        /* the last write ended in 0xC2: a C1 control may follow */
} EscapeCookie;

static ssize_t escape_write(void *cookie, const char *buf, size_t size) {
        EscapeCookie *c = cookie;
        char out[4096 + 8];
        size_t n = 0;

        for (size_t i = 0; i < size; i++) {
                unsigned char b = (unsigned char) buf[i];

                if (c->c2) {
                        c->c2 = false;
                        if (b >= 0x80 && b <= 0x9F) {
                                n += (size_t) snprintf(out + n, sizeof(out) - n, "\\u00%02x", b);
                                goto next;
                        }
                        out[n++] = (char) 0xC2;
                }
                if (b == 0xC2)
                        c->c2 = true;
                else if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f)
                        n += (size_t) snprintf(out + n, sizeof(out) - n, "\\x%02x", b);
                else
                        out[n++] = (char) b;
        next:
                if (n >= sizeof(out) - 8) {
                        if (loop_write(c->fd, out, n) < 0)
                                return -1;
                        n = 0;
                }
        }
        if (n > 0 && loop_write(c->fd, out, n) < 0)
                return -1;
        return (ssize_t) size;
}

static int escape_close(void *cookie) {
        EscapeCookie *c = cookie;

        /* A lone 0xC2 at the very end: written as it came. */
        return c->c2 && loop_write(c->fd, "\xC2", 1) < 0 ? -1 : 0;
}

int terminal_escape_stream(FILE **f, int fd, int unbuffered) {
        /* Static: the streams live until exit(), which flushes but does
         * not close them. One each for stdout and stderr. */
        static EscapeCookie cookies[2];
        static size_t n_cookies = 0;
        EscapeCookie *c;
        FILE *e;

        if (n_cookies >= ELEMENTSOF(cookies))
                return -ENOSPC;
        c = &cookies[n_cookies];
        *c = (EscapeCookie) { .fd = fd };
        e = fopencookie(c, "w", (cookie_io_functions_t) { .write = escape_write, .close = escape_close });
        if (!e)
                return -ENOMEM;
        n_cookies++;
        (void) fflush(*f);
        (void) setvbuf(e, NULL, unbuffered ? _IONBF : _IOLBF, 0);
        *f = e;
        return 0;
}
