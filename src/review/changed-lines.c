/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "changed-lines.h"
#include "macro.h"

bool review_file_is_valid(const ReviewFile *f) {
        if (!f || !f->path || (f->n_lines > 0 && !f->lines))
                return false;
        for (size_t i = 0; i < f->n_lines; i++) {
                if (!f->lines[i].text || f->lines[i].number == 0)
                        return false;
                if (i > 0 && f->lines[i].number <= f->lines[i - 1].number)
                        return false;
        }
        return true;
}

const ReviewFile *review_files_find(const ReviewFile *files, size_t n, const char *path) {
        for (size_t i = 0; path && i < n; i++)
                if (streq_ptr(files[i].path, path))
                        return &files[i];
        return NULL;
}

bool review_files_line_changed(const ReviewFile *files, size_t n, const char *path, unsigned line) {
        const ReviewFile *f = review_files_find(files, n, path);
        size_t lo = 0, hi;

        if (!f || line == 0)
                return false;
        hi = f->n_lines;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (f->lines[mid].number == line)
                        return true;
                if (f->lines[mid].number < line)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return false;
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

char *review_path_normalize(const char *path, size_t n) {
        _cleanup_free_ char *p = NULL;
        size_t k = 0;
        bool uri = false;
        char *s, *out;

        if (!path || n == 0 || n > 4096)
                return NULL;

        p = malloc(n + 1);
        if (!p)
                return NULL;
        if (n >= 7 && strneq(path, "file://", 7)) {
                uri = true;
                path += 7;
                n -= 7;
                /* file://host/path: only an empty host or localhost is ours. */
                if (n >= 9 && strneq(path, "localhost", 9)) {
                        path += 9;
                        n -= 9;
                }
                if (n == 0 || path[0] != '/')
                        return NULL;
        }
        for (size_t i = 0; i < n; i++) {
                char c = path[i];
                if (uri && c == '%' && i + 2 < n && hex_value(path[i + 1]) >= 0 &&
                    hex_value(path[i + 2]) >= 0) {
                        c = (char) (hex_value(path[i + 1]) * 16 + hex_value(path[i + 2]));
                        i += 2;
                }
                if ((unsigned char) c < 0x20 || c == 0x7F)
                        return NULL;
                p[k++] = c;
        }
        p[k] = '\0';

        s = p;
        if (s[0] == '/') {
                if (!strneq(s, "/workspace/", 11))
                        return NULL;
                s += 11;
        }

        /* Component by component: "." and empty ones go, ".." refuses. */
        out = p;
        k = 0;
        for (char *c = s, *next; c; c = next) {
                size_t l;
                next = strchr(c, '/');
                l = next ? (size_t) (next - c) : strlen(c);
                if (next)
                        next++;
                if (l == 0 || (l == 1 && c[0] == '.'))
                        continue;
                if (l == 2 && c[0] == '.' && c[1] == '.')
                        return NULL;
                if (k > 0)
                        out[k++] = '/';
                memmove(out + k, c, l);
                k += l;
        }
        if (k == 0)
                return NULL;
        out[k] = '\0';
        return TAKE_PTR(p);
}
