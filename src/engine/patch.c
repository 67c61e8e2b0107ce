/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "patch.h"
#include "string-table.h"
#include "string-util.h"

/* Failures reported per file: past these, one line says how many more. */
#define PATCH_FAILURES_SHOWN 4U

static const char *const patch_format_table[_PATCH_FORMAT_MAX] = {
        [PATCH_FORMAT_CODEX] = "Codex patch",
        [PATCH_FORMAT_UNIFIED] = "unified diff",
};

static const char *const patch_op_table[_PATCH_OP_MAX] = {
        [PATCH_OP_ADD] = "add",
        [PATCH_OP_DELETE] = "delete",
        [PATCH_OP_UPDATE] = "update",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(patch_format, PatchFormat);
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(patch_op, PatchOp);

static void patch_hunk_done(PatchHunk *h) {
        for (size_t i = 0; i < h->n_anchors; i++)
                free(h->anchors[i]);
        free(h->old_text);
        free(h->new_text);
        free(h->new_from_old);
}

static void patch_file_done(PatchFile *f) {
        free(f->path);
        free(f->move_to);
        for (size_t i = 0; i < f->n_hunks; i++)
                patch_hunk_done(&f->hunks[i]);
        free(f->hunks);
        free(f->content);
}

void patch_done(Patch *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_files; i++)
                patch_file_done(&p->files[i]);
        free(p->files);
        *p = (Patch) { .format = _PATCH_FORMAT_INVALID };
}

/* ---- Reading the patch's lines ---- */

typedef struct Parser {
        TextLines lines;
        Patch *patch;
        size_t n_hunks;
        char **error;
} Parser;

static const char *line_at(const Parser *p, size_t i, size_t *ret_len) {
        const TextLines *l = &p->lines;
        size_t b = l->start[i];

        *ret_len = text_line_end(l, i) - b;
        return l->text + b;
}

static bool line_starts(const Parser *p, size_t i, const char *prefix) {
        size_t n, pl = strlen(prefix);
        const char *s;

        if (i >= p->lines.n)
                return false;
        s = line_at(p, i, &n);
        return n >= pl && memcmp(s, prefix, pl) == 0;
}

/* The line, trailing blanks aside, is s. */
static bool line_is(const Parser *p, size_t i, const char *s) {
        size_t n, sl = strlen(s);
        const char *l;

        if (i >= p->lines.n)
                return false;
        l = line_at(p, i, &n);
        while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\t'))
                n--;
        return n == sl && memcmp(l, s, n) == 0;
}

static bool line_blank(const Parser *p, size_t i) {
        size_t n;
        const char *s = line_at(p, i, &n);
        for (size_t k = 0; k < n; k++)
                if (s[k] != ' ' && s[k] != '\t')
                        return false;
        return true;
}

_printf_(3, 4)
static int parse_fail(Parser *p, size_t i, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;
        int k;

        if (!p->error)
                return -EINVAL;
        va_start(ap, fmt);
        k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        if (i == SIZE_MAX)
                return error_set(p->error, -EINVAL, "%s", m);
        return error_set(p->error, -EINVAL, "patch line %zu: %s", i + 1, m);
}

/* Line i for a message: on one line, shortened. */
static char *line_shown(const Parser *p, size_t i) {
        size_t n;
        const char *s = line_at(p, i, &n);
        _cleanup_free_ char *c = strndup(s, n);
        return c ? strshorten_line(c, 120) : NULL;
}

static char *trimmed_dup(const char *s, size_t n) {
        while (n > 0 && (*s == ' ' || *s == '\t')) {
                s++;
                n--;
        }
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                n--;
        return strndup(s, n);
}

/* ---- Building files and hunks ---- */

static PatchFile *file_new(Parser *p, PatchOp op, size_t i) {
        PatchFile *f;

        if (p->patch->n_files >= PATCH_FILES_MAX) {
                (void) parse_fail(p, i, "more than %u files in one patch; split it", PATCH_FILES_MAX);
                return NULL;
        }
        f = realloc(p->patch->files, (p->patch->n_files + 1) * sizeof(PatchFile));
        if (!f)
                return NULL;
        p->patch->files = f;
        f = &p->patch->files[p->patch->n_files++];
        *f = (PatchFile) { .op = op, .patch_line = (unsigned) i + 1 };
        return f;
}

typedef struct HunkBuilder {
        PatchHunk h;
        Buf old, new;
        size_t n_old, allocated;
        size_t trailing_empty;  /* empty lines at the end, read as blank context */
} HunkBuilder;

static void hunk_builder_done(HunkBuilder *b) {
        patch_hunk_done(&b->h);
        buf_done(&b->old);
        buf_done(&b->new);
}

static int hunk_add(HunkBuilder *b, char kind, const char *s, size_t n, bool empty) {
        if (kind != '-') {
                if (b->h.n_new >= b->allocated) {
                        size_t a = MAX(b->allocated * 2, (size_t) 16);
                        int *m = realloc(b->h.new_from_old, a * sizeof(int));
                        if (!m)
                                return -ENOMEM;
                        b->h.new_from_old = m;
                        b->allocated = a;
                }
                if (b->n_old >= INT_MAX)
                        return -E2BIG;
                b->h.new_from_old[b->h.n_new++] = kind == ' ' ? (int) b->n_old : -1;
                if (buf_append(&b->new, s, n) < 0 || buf_append(&b->new, "\n", 1) < 0)
                        return -ENOMEM;
        }
        if (kind != '+') {
                b->n_old++;
                if (buf_append(&b->old, s, n) < 0 || buf_append(&b->old, "\n", 1) < 0)
                        return -ENOMEM;
        }
        b->trailing_empty = empty ? b->trailing_empty + 1 : 0;
        return 0;
}

/* Takes back up to k empty context lines from the end: blank lines that
 * separate a hunk from what follows. */
static void hunk_trim_empty(HunkBuilder *b, size_t k) {
        k = MIN(k, b->trailing_empty);
        b->old.n -= k;
        b->new.n -= k;
        if (b->old.s)
                b->old.s[b->old.n] = '\0';
        if (b->new.s)
                b->new.s[b->new.n] = '\0';
        b->n_old -= k;
        b->h.n_new -= k;
        b->trailing_empty -= k;
}

static int hunk_finish(Parser *p, PatchFile *f, HunkBuilder *b, size_t i) {
        PatchHunk *hunks;

        if (b->n_old == 0 && b->h.n_new == 0)
                return parse_fail(p, i, "an empty hunk in '%s': a hunk has at least one line", f->path);
        if (p->n_hunks >= PATCH_HUNKS_MAX)
                return parse_fail(p, i, "more than %u hunks in one patch; split it", PATCH_HUNKS_MAX);
        hunks = realloc(f->hunks, (f->n_hunks + 1) * sizeof(PatchHunk));
        if (!hunks)
                return -ENOMEM;
        f->hunks = hunks;
        if ((!b->old.s && buf_append(&b->old, "", 0) < 0) || (!b->new.s && buf_append(&b->new, "", 0) < 0))
                return -ENOMEM;
        b->h.old_size = b->old.n;
        b->h.new_size = b->new.n;
        b->h.old_text = TAKE_PTR(b->old.s);
        b->h.new_text = TAKE_PTR(b->new.s);
        f->hunks[f->n_hunks++] = b->h;
        p->n_hunks++;
        *b = (HunkBuilder) {};
        return 0;
}

/* "-l[,n] +l[,n] @@": a unified hunk header after its "@@". */
static bool parse_range(const char *s, const char *e, unsigned *ret_old_start, unsigned *ret_old_count,
                        unsigned *ret_new_count) {
        unsigned v[4] = { 0, 1, 0, 1 };

        for (unsigned side = 0; side < 2; side++) {
                while (s < e && *s == ' ')
                        s++;
                if (s >= e || *s != (side == 0 ? '-' : '+'))
                        return false;
                s++;
                for (unsigned part = 0; part < 2; part++) {
                        const char *d = s;
                        unsigned x = 0;
                        while (s < e && *s >= '0' && *s <= '9' && s - d < 9)
                                x = x * 10 + (unsigned) (*s++ - '0');
                        if (s == d)
                                return false;
                        v[side * 2 + part] = x;
                        if (part == 0 && !(s < e && *s == ','))
                                break;
                        if (part == 0)
                                s++;
                }
        }
        while (s < e && *s == ' ')
                s++;
        if (e - s < 2 || s[0] != '@' || s[1] != '@')
                return false;
        *ret_old_start = v[0];
        *ret_old_count = v[1];
        *ret_new_count = v[3];
        return true;
}

/* ---- Codex's format ---- */

static bool codex_header(const Parser *p, size_t i) {
        return line_starts(p, i, "*** ") && !line_is(p, i, "*** End of File");
}

static int codex_path(Parser *p, size_t i, const char *prefix, char **ret) {
        size_t n, pl = strlen(prefix);
        const char *s = line_at(p, i, &n);

        *ret = trimmed_dup(s + pl, n - pl);
        if (!*ret)
                return -ENOMEM;
        if (isempty(*ret))
                return parse_fail(p, i, "'%s' without a path", prefix);
        return 0;
}

static int codex_add(Parser *p, size_t *i) {
        _cleanup_(buf_done) Buf content = {};
        size_t trailing = 0;
        PatchFile *f = file_new(p, PATCH_OP_ADD, *i);
        int r;

        if (!f)
                return p->error && *p->error ? -EINVAL : -ENOMEM;
        r = codex_path(p, *i, "*** Add File:", &f->path);
        if (r < 0)
                return r;
        for ((*i)++; *i < p->lines.n && !codex_header(p, *i); (*i)++) {
                size_t n;
                const char *s = line_at(p, *i, &n);

                if (n > 0 && s[0] == '+') {
                        r = buf_append(&content, s + 1, n - 1);
                        trailing = 0;
                } else if (n == 0) {
                        r = 0;
                        trailing++;
                } else {
                        _cleanup_free_ char *shown = line_shown(p, *i);
                        return parse_fail(p, *i, "a line of the new file '%s' that does not start with '+': '%s' "
                                          "(every line of an added file starts with '+')", f->path, strempty(shown));
                }
                if (r < 0 || buf_append(&content, "\n", 1) < 0)
                        return -ENOMEM;
        }
        /* Empty lines before the next header separate; they are not content. */
        content.n -= trailing;
        if (!content.s && buf_append(&content, "", 0) < 0)
                return -ENOMEM;
        content.s[content.n] = '\0';
        f->content_size = content.n;
        f->content = TAKE_PTR(content.s);
        return 0;
}

static int codex_hunk(Parser *p, PatchFile *f, size_t *i) {
        _cleanup_(hunk_builder_done) HunkBuilder b = { .h.new_final_eol = -1 };
        size_t start = *i;
        int r;

        b.h.patch_line = (unsigned) *i + 1;
        for (; line_starts(p, *i, "@@"); (*i)++) {
                size_t n;
                const char *s = line_at(p, *i, &n);
                unsigned os, oc, nc;

                /* A unified header in a Codex patch: its numbers are a hint. */
                if (parse_range(s + 2, s + n, &os, &oc, &nc)) {
                        b.h.old_start = os;
                        b.h.has_start = true;
                        continue;
                }
                _cleanup_free_ char *a = trimmed_dup(s + 2, n - 2);
                if (!a)
                        return -ENOMEM;
                if (isempty(a))
                        continue;
                if (b.h.n_anchors >= PATCH_ANCHORS_MAX)
                        return parse_fail(p, *i, "more than %u '@@' lines before one hunk", PATCH_ANCHORS_MAX);
                b.h.anchors[b.h.n_anchors++] = TAKE_PTR(a);
        }

        for (; *i < p->lines.n && !codex_header(p, *i) && !line_starts(p, *i, "@@"); (*i)++) {
                size_t n;
                const char *s = line_at(p, *i, &n);

                if (line_is(p, *i, "*** End of File")) {
                        b.h.at_end = true;
                        (*i)++;
                        break;
                }
                if (n == 0)
                        r = hunk_add(&b, ' ', "", 0, true);
                else if (IN_SET(s[0], ' ', '-', '+'))
                        r = hunk_add(&b, s[0], s + 1, n - 1, false);
                else {
                        _cleanup_free_ char *shown = line_shown(p, *i);
                        return parse_fail(p, *i, "unexpected line in a hunk of '%s': '%s' (each line of a hunk starts "
                                          "with ' ' for context, '-' for a removed line or '+' for an added one)",
                                          f->path, strempty(shown));
                }
                if (r < 0)
                        return r == -E2BIG ? parse_fail(p, *i, "a hunk too long") : r;
        }
        if (!b.h.at_end)
                hunk_trim_empty(&b, SIZE_MAX);
        return hunk_finish(p, f, &b, start);
}

static int codex_update(Parser *p, size_t *i) {
        PatchFile *f = file_new(p, PATCH_OP_UPDATE, *i);
        size_t start = *i;
        int r;

        if (!f)
                return p->error && *p->error ? -EINVAL : -ENOMEM;
        r = codex_path(p, *i, "*** Update File:", &f->path);
        if (r < 0)
                return r;
        (*i)++;
        if (line_starts(p, *i, "*** Move to:")) {
                r = codex_path(p, *i, "*** Move to:", &f->move_to);
                if (r < 0)
                        return r;
                (*i)++;
        }
        while (*i < p->lines.n && !codex_header(p, *i)) {
                /* A blank line between hunks. */
                if (line_blank(p, *i) && !line_starts(p, *i, " ")) {
                        (*i)++;
                        continue;
                }
                r = codex_hunk(p, f, i);
                if (r < 0)
                        return r;
        }
        if (f->n_hunks == 0 && !f->move_to)
                return parse_fail(p, start, "'*** Update File: %s' without a hunk: the changes follow as '@@' "
                                  "and lines that start with ' ', '-' or '+'", f->path);
        return 0;
}

static int parse_codex(Parser *p, size_t i) {
        int r;

        if (line_is(p, i, "*** Begin Patch"))
                i++;
        while (i < p->lines.n) {
                if (line_is(p, i, "*** End Patch"))
                        break;
                if (line_blank(p, i)) {
                        i++;
                        continue;
                }
                if (line_starts(p, i, "*** Add File:"))
                        r = codex_add(p, &i);
                else if (line_starts(p, i, "*** Update File:"))
                        r = codex_update(p, &i);
                else if (line_starts(p, i, "*** Delete File:")) {
                        PatchFile *f = file_new(p, PATCH_OP_DELETE, i);
                        if (!f)
                                return p->error && *p->error ? -EINVAL : -ENOMEM;
                        r = codex_path(p, i, "*** Delete File:", &f->path);
                        i++;
                } else {
                        _cleanup_free_ char *shown = line_shown(p, i);
                        return parse_fail(p, i, "expected '*** Add File: PATH', '*** Update File: PATH', "
                                          "'*** Delete File: PATH' or '*** End Patch', not '%s'", strempty(shown));
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- Unified diffs ---- */

/* A header's path: C-quoted as git writes unusual names, or up to a tab
 * (a timestamp follows); "/dev/null" is none (*ret NULL, returns 0). */
static int unified_path(const char *s, size_t n, char **ret) {
        _cleanup_(buf_done) Buf b = {};

        *ret = NULL;
        while (n > 0 && (*s == ' ' || *s == '\t')) {
                s++;
                n--;
        }
        if (n > 0 && *s == '"') {
                size_t k = 1;
                for (; k < n && s[k] != '"'; k++) {
                        char c = s[k];
                        if (c == '\\' && k + 1 < n) {
                                c = s[++k];
                                if (c >= '0' && c <= '7') {
                                        unsigned v = 0;
                                        for (unsigned d = 0; d < 3 && k < n && s[k] >= '0' && s[k] <= '7'; d++)
                                                v = v * 8 + (unsigned) (s[k++] - '0');
                                        k--;
                                        c = (char) v;
                                } else
                                        c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'a' ? '\a' :
                                            c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'v' ? '\v' : c;
                        }
                        if (c == '\0')
                                return -EINVAL;
                        if (buf_append(&b, &c, 1) < 0)
                                return -ENOMEM;
                }
                if (k >= n)
                        return -EINVAL;
        } else {
                const char *tab = memchr(s, '\t', n);
                if (tab)
                        n = (size_t) (tab - s);
                while (n > 0 && s[n - 1] == ' ')
                        n--;
                if (buf_append(&b, s, n) < 0)
                        return -ENOMEM;
        }
        if (!b.s || b.n == 0)
                return -EINVAL;
        if (streq(b.s, "/dev/null"))
                return 0;
        *ret = TAKE_PTR(b.s);
        return 0;
}

static bool unified_header(const Parser *p, size_t i) {
        return line_starts(p, i, "@@") || line_starts(p, i, "diff ") || line_starts(p, i, "Index: ") ||
               (line_starts(p, i, "--- ") && line_starts(p, i + 1, "+++ "));
}

static int unified_hunk(Parser *p, PatchFile *f, size_t *i) {
        _cleanup_(hunk_builder_done) HunkBuilder b = { .h.new_final_eol = -1 };
        size_t n, start = *i;
        const char *s = line_at(p, *i, &n);
        unsigned os = 0, oc = 0, nc = 0;
        long old_left, new_left;
        bool counted;
        char prev = 0;
        int r;

        b.h.patch_line = (unsigned) *i + 1;
        counted = parse_range(s + 2, s + n, &os, &oc, &nc);
        if (counted) {
                b.h.old_start = os;
                b.h.has_start = true;
        }
        old_left = oc;
        new_left = nc;

        for ((*i)++; *i < p->lines.n; (*i)++) {
                bool open = counted && (old_left > 0 || new_left > 0);
                char c;

                s = line_at(p, *i, &n);
                if (!open && unified_header(p, *i))
                        break;
                c = n > 0 ? s[0] : 0;
                if (c == '\\') {
                        /* "\ No newline at end of file", of the line before. */
                        if (prev == '-' || prev == ' ')
                                b.h.at_end = true;
                        if (prev == '+' || prev == ' ')
                                b.h.new_final_eol = 0;
                        else if (prev == '-' && b.h.new_final_eol < 0)
                                b.h.new_final_eol = 1;
                        continue;
                }
                if (!IN_SET(c, ' ', '-', '+', 0))
                        break;
                r = hunk_add(&b, c ?: ' ', n > 0 ? s + 1 : "", n > 0 ? n - 1 : 0, c == 0);
                if (r < 0)
                        return r == -E2BIG ? parse_fail(p, *i, "a hunk too long") : r;
                if (c != '+')
                        old_left--;
                if (c != '-')
                        new_left--;
                prev = c ?: ' ';
        }
        /* Empty lines past the counts (or without counts) separate. */
        if (!counted)
                hunk_trim_empty(&b, SIZE_MAX);
        else if (old_left < 0 || new_left < 0)
                hunk_trim_empty(&b, (size_t) -MIN(old_left, new_left));
        return hunk_finish(p, f, &b, start);
}

typedef struct GitHeader {
        bool active;
        size_t line;
        char *a, *b, *rename_from, *rename_to;
        bool new_file, deleted;
} GitHeader;

static void git_header_done(GitHeader *g) {
        free(g->a);
        free(g->b);
        free(g->rename_from);
        free(g->rename_to);
        *g = (GitHeader) {};
}

/* A "diff --git" section that had no "---"/"+++": a rename, an empty new
 * file or a deleted one, or only a mode change (nothing to do). */
static int git_header_flush(Parser *p, GitHeader *g) {
        PatchFile *f = NULL;

        if (!g->active)
                return 0;
        if (!isempty(g->rename_from) && !isempty(g->rename_to)) {
                f = file_new(p, PATCH_OP_UPDATE, g->line);
                if (f) {
                        f->path = TAKE_PTR(g->rename_from);
                        f->move_to = TAKE_PTR(g->rename_to);
                }
        } else if (g->new_file && !isempty(g->b)) {
                f = file_new(p, PATCH_OP_ADD, g->line);
                if (f) {
                        f->path = TAKE_PTR(g->b);
                        f->content = strdup("");
                        if (!f->content)
                                return -ENOMEM;
                }
        } else if (g->deleted && !isempty(g->a)) {
                f = file_new(p, PATCH_OP_DELETE, g->line);
                if (f)
                        f->path = TAKE_PTR(g->a);
        } else {
                git_header_done(g);
                return 0;
        }
        git_header_done(g);
        if (!f)
                return p->error && *p->error ? -EINVAL : -ENOMEM;
        return 0;
}

static int git_header_start(Parser *p, GitHeader *g, size_t i) {
        size_t n;
        const char *s = line_at(p, i, &n), *e = s + n, *mid;

        g->active = true;
        g->line = i;
        s += strlen("diff --git ");
        if (e - s > 2 && strneq(s, "a/", 2) && (mid = memmem(s, (size_t) (e - s), " b/", 3))) {
                g->a = strndup(s + 2, (size_t) (mid - s - 2));
                g->b = trimmed_dup(mid + 3, (size_t) (e - mid - 3));
                if (!g->a || !g->b)
                        return -ENOMEM;
        }
        return 0;
}

static int unified_file(Parser *p, size_t *i) {
        _cleanup_free_ char *old = NULL, *new = NULL;
        size_t n, start = *i;
        const char *s;
        PatchFile *f;
        int r;

        s = line_at(p, *i, &n);
        r = unified_path(s + 4, n - 4, &old);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return parse_fail(p, *i, "a '---' line without a path");
        s = line_at(p, *i + 1, &n);
        r = unified_path(s + 4, n - 4, &new);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return parse_fail(p, *i + 1, "a '+++' line without a path");
        if (!old && !new)
                return parse_fail(p, *i, "both '---' and '+++' name /dev/null");

        /* git's a/ and b/ (patch -p1), when the sides use them. */
        if ((!old || strneq(old, "a/", 2)) && (!new || strneq(new, "b/", 2))) {
                if (old)
                        memmove(old, old + 2, strlen(old + 2) + 1);
                if (new)
                        memmove(new, new + 2, strlen(new + 2) + 1);
                if ((old && !*old) || (new && !*new))
                        return parse_fail(p, *i, "a header names a directory, not a file");
        }

        f = file_new(p, !old ? PATCH_OP_ADD : !new ? PATCH_OP_DELETE : PATCH_OP_UPDATE, *i);
        if (!f)
                return p->error && *p->error ? -EINVAL : -ENOMEM;
        f->path = TAKE_PTR(old);
        if (!f->path)
                f->path = TAKE_PTR(new);
        else if (new && !streq(f->path, new))
                f->move_to = TAKE_PTR(new);

        for (*i += 2; line_starts(p, *i, "@@");) {
                r = unified_hunk(p, f, i);
                if (r < 0)
                        return r;
        }

        if (f->op == PATCH_OP_ADD) {
                _cleanup_(buf_done) Buf c = {};
                int final_eol = -1;
                for (size_t k = 0; k < f->n_hunks; k++) {
                        if (buf_append(&c, f->hunks[k].new_text, f->hunks[k].new_size) < 0)
                                return -ENOMEM;
                        final_eol = f->hunks[k].new_final_eol;
                }
                if (final_eol == 0 && c.n > 0)
                        c.s[--c.n] = '\0';
                if (!c.s && buf_append(&c, "", 0) < 0)
                        return -ENOMEM;
                f->content_size = c.n;
                f->content = TAKE_PTR(c.s);
        } else if (f->op == PATCH_OP_UPDATE && f->n_hunks == 0 && !f->move_to)
                return parse_fail(p, start, "'%s' has a header but no hunk ('@@ -l,n +l,n @@' and its lines)", f->path);
        return 0;
}

static int parse_unified(Parser *p) {
        _cleanup_(git_header_done) GitHeader g = {};
        int r;

        for (size_t i = 0; i < p->lines.n;) {
                if (line_starts(p, i, "diff --git ")) {
                        r = git_header_flush(p, &g);
                        if (r >= 0)
                                r = git_header_start(p, &g, i);
                        if (r < 0)
                                return r;
                        i++;
                } else if (line_starts(p, i, "--- ") && line_starts(p, i + 1, "+++ ")) {
                        git_header_done(&g);
                        r = unified_file(p, &i);
                        if (r < 0)
                                return r;
                } else if (line_starts(p, i, "Binary files ") || line_starts(p, i, "GIT binary patch")) {
                        return parse_fail(p, i, "binary patches are not supported");
                } else if (g.active && (line_starts(p, i, "rename from ") || line_starts(p, i, "rename to "))) {
                        size_t n;
                        const char *s = line_at(p, i, &n);
                        bool from = line_starts(p, i, "rename from ");
                        size_t pl = from ? strlen("rename from ") : strlen("rename to ");
                        char **dst = from ? &g.rename_from : &g.rename_to;
                        free(*dst);
                        *dst = trimmed_dup(s + pl, n - pl);
                        if (!*dst)
                                return -ENOMEM;
                        i++;
                } else {
                        if (g.active && line_starts(p, i, "new file mode"))
                                g.new_file = true;
                        if (g.active && line_starts(p, i, "deleted file mode"))
                                g.deleted = true;
                        if (line_starts(p, i, "@@"))
                                return parse_fail(p, i, "a hunk without the '--- a/PATH' and '+++ b/PATH' lines "
                                                  "that name its file");
                        /* Anything else (git's index lines, text around the diff) is no part of it. */
                        i++;
                }
        }
        return git_header_flush(p, &g);
}

/* ---- Either ---- */

int patch_parse(const char *text, Patch *ret, char **ret_error) {
        _cleanup_(patch_done) Patch patch = { .format = _PATCH_FORMAT_INVALID };
        Parser p = { .patch = &patch, .error = ret_error };
        size_t first = 0;
        int r;

        assert(text);
        assert(ret);

        *ret = (Patch) { .format = _PATCH_FORMAT_INVALID };
        if (ret_error)
                *ret_error = NULL;

        r = text_lines_split(text, strlen(text), &p.lines);
        if (r == -E2BIG)
                return error_set(ret_error, -E2BIG, "the patch has more than %u lines; split it", TEXT_LINES_MAX);
        if (r < 0)
                return r;

        /* What models put around a patch: blank lines, a Markdown fence, a
         * shell here-document ("apply_patch <<'EOF'"). */
        while (first < p.lines.n && (line_blank(&p, first) || line_starts(&p, first, "```") ||
                                     (line_starts(&p, first, "apply_patch") && !line_starts(&p, first, "*** "))))
                first++;

        if (line_is(&p, first, "*** Begin Patch") || line_starts(&p, first, "*** Add File:") ||
            line_starts(&p, first, "*** Update File:") || line_starts(&p, first, "*** Delete File:")) {
                patch.format = PATCH_FORMAT_CODEX;
                r = parse_codex(&p, first);
        } else {
                bool unified = false;
                for (size_t i = first; i < p.lines.n && !unified; i++)
                        unified = line_starts(&p, i, "diff --git ") ||
                                  (line_starts(&p, i, "--- ") && line_starts(&p, i + 1, "+++ "));
                if (!unified)
                        r = parse_fail(&p, SIZE_MAX, "this is not a patch: it begins neither with '*** Begin Patch' "
                                       "(then '*** Update File: PATH', '@@' hunks, '*** End Patch') nor is it a "
                                       "unified diff ('--- a/PATH', '+++ b/PATH', '@@ -l,n +l,n @@')");
                else {
                        patch.format = PATCH_FORMAT_UNIFIED;
                        r = parse_unified(&p);
                }
        }
        text_lines_done(&p.lines);
        if (r < 0)
                return r;
        if (patch.n_files == 0)
                return error_set(ret_error, -EINVAL, "the patch changes no file");
        for (size_t i = 0; i < patch.n_files; i++) {
                const PatchFile *f = &patch.files[i];
                if (strlen(f->path) >= PATH_MAX || (f->move_to && strlen(f->move_to) >= PATH_MAX))
                        return error_set(ret_error, -EINVAL, "patch line %u: a path longer than %u bytes",
                                         f->patch_line, PATH_MAX - 1);
        }

        *ret = patch;
        patch = (Patch) { .format = _PATCH_FORMAT_INVALID };
        return 0;
}

/* ---- Applying ---- */

typedef struct Placed {
        size_t at, n_old;
        MatchRule rule;
        TextLines old, new;
} Placed;

_printf_(5, 6)
static int hunk_fail(Buf *errors, const PatchFile *f, size_t k, int error, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (n < 0 || buf_printf(errors, "  - '%s', hunk %zu (patch line %u): %s\n", f->path, k + 1,
                                f->hunks[k].patch_line, m) < 0)
                return -ENOMEM;
        return error;
}

/* The first line at or after from that is the anchor, under the loosest
 * rule that finds it. */
static int find_anchor(const TextLines *file, const char *anchor, size_t from, size_t *ret) {
        _cleanup_(text_lines_done) TextLines a = {};
        BlockFound found;
        int r;

        r = text_lines_split(anchor, strlen(anchor), &a);
        if (r < 0)
                return r;
        for (MatchRule rule = MATCH_EXACT; rule < _MATCH_RULE_MAX; rule++) {
                if (rule == MATCH_LINE_ENDINGS)
                        continue;
                r = text_find_block(file, &a, rule, from, false, &found);
                if (r < 0)
                        return r;
                if (found.n > 0) {
                        *ret = found.at[0];
                        return 1;
                }
        }
        return 0;
}

/* Where hunk k goes, at line cursor (where the hunk before ended) or
 * later: 1 and *p set, or the failure, explained in errors (with the
 * nearest lines, which cost a search of their own) when explain is set. */
static int place_hunk(const PatchFile *f, size_t k, const TextLines *file, size_t cursor, bool explain, Placed *p,
                      Buf *errors) {
        const PatchHunk *h = &f->hunks[k];
        BlockFound found = {};
        size_t from = cursor;
        MatchRule rule;
        int r;

        for (size_t a = 0; a < h->n_anchors; a++) {
                size_t at;
                r = find_anchor(file, h->anchors[a], from, &at);
                if (r < 0)
                        return r;
                if (r == 0) {
                        _cleanup_free_ char *shown = strshorten_line(h->anchors[a], 120);
                        return hunk_fail(errors, f, k, -ENODATA, "the line '@@ %s' was not found%s%s", strempty(shown),
                                         from > cursor ? " after the '@@' line before it" :
                                         cursor > 0 ? " after the previous hunk" : "",
                                         cursor > 0 ? " (hunks go in the order of the file)" : "");
                }
                from = at + 1;
        }

        r = text_lines_split(h->old_text, h->old_size, &p->old);
        if (r >= 0)
                r = text_lines_split(h->new_text, h->new_size, &p->new);
        if (r == -E2BIG)
                return hunk_fail(errors, f, k, r, "the hunk has more than %u lines", TEXT_LINES_MAX);
        if (r < 0)
                return r;

        if (p->old.n == 0) {
                /* Only added lines: after the '@@' line, after line l of
                 * "@@ -l,0", or at the end. */
                size_t at = h->n_anchors > 0 ? from : h->has_start ? MIN((size_t) h->old_start, file->n) : file->n;
                p->at = MAX(at, from);
                p->n_old = 0;
                p->rule = MATCH_EXACT;
                return 1;
        }

        for (rule = MATCH_EXACT; rule < _MATCH_RULE_MAX; rule++) {
                if (rule == MATCH_LINE_ENDINGS)
                        continue;       /* Lines are compared without their endings anyway. */
                r = text_find_block(file, &p->old, rule, from, h->at_end, &found);
                if (r < 0)
                        return r;
                if (found.n > 0)
                        break;
        }

        if (found.n == 0 && !explain)
                return -ENODATA;
        if (found.n == 0) {
                _cleanup_(buf_done) Buf near = {};
                BlockFound before = {};

                /* Found, but before where the previous hunk left off. */
                for (MatchRule x = MATCH_EXACT; cursor > 0 && x < _MATCH_RULE_MAX && before.n == 0; x++) {
                        r = text_find_block(file, &p->old, x, 0, h->at_end, &before);
                        if (r < 0)
                                return r;
                }
                if (before.n > 0 && before.at[0] < cursor)
                        return hunk_fail(errors, f, k, -ENODATA, "its lines are at line %zu, before the previous "
                                         "hunk's: hunks go in the order of the file", before.at[0] + 1);
                r = text_nearest(file, &p->old, from, &near);
                if (r < 0)
                        return r;
                return hunk_fail(errors, f, k, -ENODATA, "the lines it removes and its context lines were not found%s%s, "
                                 "not even with whitespace, indentation, quotes and dashes let differ.%s%s",
                                 h->at_end ? " at the end of the file" : "",
                                 from > cursor ? " after its '@@' line" : cursor > 0 ? " after the previous hunk" : "",
                                 r > 0 ? "\n" : " Nothing in the file "
                                 "resembles them.", r > 0 ? near.s : "");
        }

        /* After an '@@' line, the first match is the one it points at. */
        size_t at = found.at[0];
        if ((found.n > 1 || found.more) && h->n_anchors == 0) {
                /* The hunk's line number picks the nearest, if one is nearest. */
                size_t best = SIZE_MAX, ties = 0;
                for (size_t i = 0; h->has_start && i < found.n; i++) {
                        size_t want = h->old_start > 0 ? h->old_start - 1 : 0;
                        size_t d = found.at[i] > want ? found.at[i] - want : want - found.at[i];
                        if (d < best) {
                                best = d;
                                at = found.at[i];
                                ties = 1;
                        } else if (d == best)
                                ties++;
                }
                if (ties != 1 || found.more) {
                        _cleanup_(buf_done) Buf where = {};
                        for (size_t i = 0; i < MIN(found.n, (size_t) 8); i++)
                                if (buf_printf(&where, "%s%zu", i > 0 ? ", " : "", found.at[i] + 1) < 0)
                                        return -ENOMEM;
                        return hunk_fail(errors, f, k, -ENOTUNIQ, "its lines occur %s%zu times%s%s (at lines %s%s); "
                                         "add context lines, or an '@@' line naming the function or class, to tell "
                                         "them apart", found.more ? "at least " : "", found.n,
                                         from > 0 ? " after the previous hunk" : "",
                                         rule == MATCH_EXACT ? "" : " when whitespace and punctuation may differ",
                                         where.s, found.n > 8 || found.more ? ", ..." : "");
                }
        }
        p->at = at;
        p->n_old = p->old.n;
        p->rule = rule;
        return 1;
}

int patch_apply(const PatchFile *f, const char *data, size_t size, size_t max_size, char **ret, size_t *ret_size,
                PatchHunkResult *results, Buf *errors) {
        _cleanup_(text_lines_done) TextLines file = {};
        _cleanup_(buf_done) Buf b = {};
        Placed *placed;
        size_t from = 0, failed = 0, pos = 0;
        unsigned out_line = 0;
        int r, error = 0;

        assert(f);
        assert(data);
        assert(ret);
        assert(errors);

        r = text_lines_split(data, size, &file);
        if (r == -E2BIG) {
                if (buf_printf(errors, "  - '%s': the file has more than %u lines; change it with edit_file\n",
                               f->path, TEXT_LINES_MAX) < 0)
                        return -ENOMEM;
                return r;
        }
        if (r < 0)
                return r;

        placed = calloc(MAX(f->n_hunks, (size_t) 1), sizeof(Placed));
        if (!placed)
                return -ENOMEM;

        for (size_t k = 0; k < f->n_hunks; k++) {
                Buf *e = failed < PATCH_FAILURES_SHOWN ? errors : &(Buf) {};
                r = place_hunk(f, k, &file, from, e == errors, &placed[k], e);
                if (e != errors)
                        buf_done(e);
                if (r == -ENOMEM) {
                        error = r;
                        break;
                }
                if (r < 0) {
                        if (error == 0)
                                error = r;
                        failed++;
                        continue;
                }
                from = placed[k].at + placed[k].n_old;
        }
        if (failed > PATCH_FAILURES_SHOWN &&
            buf_printf(errors, "  - '%s': %zu more hunks failed\n", f->path, failed - PATCH_FAILURES_SHOWN) < 0)
                error = -ENOMEM;

        for (size_t k = 0; error == 0 && k < f->n_hunks; k++) {
                const PatchHunk *h = &f->hunks[k];
                Placed *p = &placed[k];
                size_t region_start = file.start[p->at], region_end = file.start[p->at + p->n_old];
                bool at_eof = p->at + p->n_old == file.n, final_eol = true;

                if (buf_append(&b, data + pos, region_start - pos) < 0) {
                        error = -ENOMEM;
                        break;
                }
                for (const char *c = data + pos; (c = memchr(c, '\n', (size_t) (data + region_start - c))); c++)
                        out_line++;

                /* The file's last line keeps lacking its line ending, unless
                 * the diff says otherwise. */
                if (at_eof && file.n > 0 && !file.final_eol) {
                        final_eol = h->new_final_eol == 1;
                        if (p->n_old == 0 && p->new.n > 0 && buf_puts(&b, file.crlf ? "\r\n" : "\n") < 0) {
                                error = -ENOMEM;
                                break;
                        }
                        if (p->n_old == 0)
                                out_line++;
                } else if (at_eof && h->new_final_eol == 0)
                        final_eol = false;

                size_t change = b.n;
                if (text_render_block(&file, p->at, &p->old, &p->new, h->new_from_old, p->rule, final_eol, &b) < 0) {
                        error = -ENOMEM;
                        break;
                }
                if (results)
                        results[k] = (PatchHunkResult) {
                                .rule = p->rule,
                                .line = out_line + 1,
                                .n_lines = (unsigned) p->new.n,
                        };
                for (const char *c = b.s + change; (c = memchr(c, '\n', (size_t) (b.s + b.n - c))); c++)
                        out_line++;
                pos = region_end;
                if (b.n > max_size)
                        break;
        }
        if (error == 0 && b.n + (size - pos) > max_size) {
                if (buf_printf(errors, "  - '%s': it would become %zu bytes, more than the limit of %zu\n", f->path,
                               b.n + (size - pos), max_size) < 0)
                        error = -ENOMEM;
                else
                        error = -EFBIG;
        }
        if (error == 0 && buf_append(&b, data + pos, size - pos) < 0)
                error = -ENOMEM;

        for (size_t k = 0; k < f->n_hunks; k++) {
                text_lines_done(&placed[k].old);
                text_lines_done(&placed[k].new);
        }
        free(placed);
        if (error < 0)
                return error;

        *ret_size = b.n;
        *ret = TAKE_PTR(b.s);
        return 0;
}
