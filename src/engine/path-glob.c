/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "path-glob.h"
#include "string-util.h"

/* Globs over workspace paths ("**" across directories, sets, escapes),
 * bounded in the work a hostile glob or path can cause. */

static char fold(char c, bool casefold) {
        return casefold && c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

/* Matches the bracket expression at *g against c and moves *g past it.
 * Returns -1 when the expression is not closed (then '[' is literal). */
static int bracket_match(const char **g, char c, bool casefold) {
        const char *p = *g + 1, *first;
        bool negate = false, match = false;

        if (*p == '!' || *p == '^') {
                negate = true;
                p++;
        }
        first = p;

        for (;;) {
                char lo, hi;

                if (*p == '\0')
                        return -1;
                if (*p == ']' && p != first)
                        break;
                if (*p == '\\' && p[1])
                        p++;
                lo = hi = *p++;
                if (p[0] == '-' && p[1] && p[1] != ']') {
                        p++;
                        if (*p == '\\' && p[1])
                                p++;
                        hi = *p++;
                }
                char fc = fold(c, casefold);
                if ((c >= lo && c <= hi) || (fc >= fold(lo, casefold) && fc <= fold(hi, casefold)))
                        match = true;
        }

        *g = p + 1;
        if (c == '/')
                return 0;
        return match != negate;
}

typedef struct GlobContext {
        const char *glob, *path;
        size_t path_len;
        bool casefold;
        uint8_t *failed;        /* one bit per (glob offset, path offset) known not to match */
} GlobContext;

static bool glob_match_inner(GlobContext *c, const char *g, const char *p, unsigned depth);

/* Memoizes failures, so that "*a*a*a*b" against "aaaa...a" stays polynomial:
 * each (glob position, path position) pair is tried once. */
static bool glob_match(GlobContext *c, const char *g, const char *p, unsigned depth) {
        size_t bit = 0;

        if (c->failed) {
                bit = (size_t) (g - c->glob) * (c->path_len + 1) + (size_t) (p - c->path);
                if (c->failed[bit / 8] & (1U << (bit % 8)))
                        return false;
        }
        if (glob_match_inner(c, g, p, depth))
                return true;
        if (c->failed)
                c->failed[bit / 8] |= (uint8_t) (1U << (bit % 8));
        return false;
}

static bool glob_match_inner(GlobContext *c, const char *g, const char *p, unsigned depth) {
        bool casefold = c->casefold;

        /* Recursion happens once per star of the glob; bound it anyway. */
        if (depth > 64)
                return false;

        for (;;) {
                if (*g == '\0')
                        return *p == '\0';

                if (g[0] == '*' && g[1] == '*' && (g == c->glob || g[-1] == '/') && (g[2] == '/' || g[2] == '\0')) {
                        if (g[2] == '\0')
                                return true;
                        /* "**" "/": none or more whole directories. */
                        for (const char *q = p;;) {
                                if (glob_match(c, g + 3, q, depth + 1))
                                        return true;
                                q = strchr(q, '/');
                                if (!q)
                                        return false;
                                q++;
                        }
                }

                if (*g == '*') {
                        while (*g == '*')
                                g++;
                        for (const char *q = p;; q++) {
                                if (glob_match(c, g, q, depth + 1))
                                        return true;
                                if (*q == '\0' || *q == '/')
                                        return false;
                        }
                }

                if (*p == '\0')
                        return false;

                if (*g == '?') {
                        if (*p == '/')
                                return false;
                        g++, p++;
                        continue;
                }

                if (*g == '[') {
                        const char *e = g;
                        int k = bracket_match(&e, *p, casefold);
                        if (k == 0)
                                return false;
                        if (k > 0) {
                                g = e;
                                p++;
                                continue;
                        }
                        /* Not closed: a literal '['. */
                }

                if (*g == '\\' && g[1])
                        g++;
                if (fold(*g, casefold) != fold(*p, casefold))
                        return false;
                g++, p++;
        }
}

bool path_glob_match_full(const char *glob, const char *path, bool casefold) {
        GlobContext c = { .glob = glob, .path = path, .casefold = casefold };
        size_t bits;
        bool m;

        if (!glob || !path)
                return false;

        c.path_len = strlen(path);
        bits = (strlen(glob) + 1) * (c.path_len + 1);
        /* Without memory for the memo the match is still right, only slower. */
        if (bits <= 64U * 1024U * 1024U)
                c.failed = calloc(bits / 8 + 1, 1);

        m = glob_match(&c, glob, path, 0);
        free(c.failed);
        return m;
}

bool path_glob_match(const char *glob, const char *path) {
        return path_glob_match_full(glob, path, false);
}
