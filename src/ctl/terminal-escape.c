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
        /* The start of a sequence that may be a C1 control (C2 xx) or a
         * bidirectional control (E2 80 AA-AE, E2 81 A6-A9), kept across
         * writes until its last byte says. */
        unsigned char pending[2];
        size_t n_pending;
} EscapeCookie;

/* A bidirectional control: text after it is shown reordered, so that a
 * file name or a plan can show something else than it is. */
static bool is_bidi(unsigned char b1, unsigned char b2) {
        return (b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9);
}

/* Appends what byte b makes to out (at most 6 bytes more and what was
 * pending). */
static void escape_byte(EscapeCookie *c, unsigned char b, char *out, size_t *n) {
        if (c->n_pending == 0) {
                if (b == 0xC2 || b == 0xE2)
                        c->pending[c->n_pending++] = b;
                else if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f)
                        *n += (size_t) sprintf(out + *n, "\\x%02x", b);
                else
                        out[(*n)++] = (char) b;
                return;
        }
        if (c->pending[0] == 0xC2) {
                c->n_pending = 0;
                if (b >= 0x80 && b <= 0x9F) {
                        *n += (size_t) sprintf(out + *n, "\\u00%02x", b);
                        return;
                }
                out[(*n)++] = (char) 0xC2;
                return escape_byte(c, b, out, n);
        }
        /* 0xE2 */
        if (c->n_pending == 1) {
                if (b == 0x80 || b == 0x81) {
                        c->pending[c->n_pending++] = b;
                        return;
                }
                c->n_pending = 0;
                out[(*n)++] = (char) 0xE2;
                return escape_byte(c, b, out, n);
        }
        c->n_pending = 0;
        if (is_bidi(c->pending[1], b)) {
                *n += (size_t) sprintf(out + *n, "\\u20%02x", (unsigned) (((c->pending[1] & 0x03) << 6) | (b & 0x3F)));
                return;
        }
        out[(*n)++] = (char) 0xE2;
        out[(*n)++] = (char) c->pending[1];
        escape_byte(c, b, out, n);
}

static ssize_t escape_write(void *cookie, const char *buf, size_t size) {
        EscapeCookie *c = cookie;
        char out[4096 + 16];
        size_t n = 0;

        for (size_t i = 0; i < size; i++) {
                escape_byte(c, (unsigned char) buf[i], out, &n);
                if (n >= sizeof(out) - 16) {
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

        /* A sequence cut at the very end: written as it came. */
        return c->n_pending > 0 && loop_write(c->fd, c->pending, c->n_pending) < 0 ? -1 : 0;
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
