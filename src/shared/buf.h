/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A growing string that knows its length: text assembled from many small
 * pieces (a tool's output, the deltas of a model's stream), where strlen()
 * on each would make the assembly quadratic. Zero-initialized, it is
 * empty; s stays NULL until the first append, even of nothing, so a caller
 * can tell "nothing yet" from "an empty value". s is always NUL-terminated
 * once set. */

#include <stddef.h>

#include "macro.h"

typedef struct Buf {
        char *s;
        size_t n, allocated;
} Buf;

int buf_append(Buf *b, const char *p, size_t l);
int buf_puts(Buf *b, const char *s);
int buf_printf(Buf *b, const char *fmt, ...) _printf_(2, 3);
/* Frees the text; b is empty again. */
void buf_done(Buf *b);
