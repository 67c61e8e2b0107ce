/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

int buf_append(Buf *b, const char *p, size_t l) {
        if (b->n + l + 1 > b->allocated) {
                size_t a = MAX(b->allocated * 2, b->n + l + 1);
                a = MAX(a, (size_t) 64);
                char *t = realloc(b->s, a);
                if (!t)
                        return -ENOMEM;
                b->s = t;
                b->allocated = a;
        }
        memcpy(b->s + b->n, p, l);
        b->n += l;
        b->s[b->n] = '\0';
        return 0;
}

int buf_puts(Buf *b, const char *s) {
        return buf_append(b, s, strlen(s));
}

int buf_printf(Buf *b, const char *fmt, ...) {
        _cleanup_free_ char *t = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&t, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        return buf_append(b, t, (size_t) k);
}

void buf_done(Buf *b) {
        b->s = mfree_ptr(b->s);
        b->n = b->allocated = 0;
}
