/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "patch.h"
#include "string-util.h"
#include "text-match.h"
#include "tools-internal.h"
#include "tools.h"
#include "workspace-path.h"

/* The tools that change part of a file: edit_file and apply_patch. The
 * matching is text-match.c's and the patch parser patch.c's; here the
 * files are opened, read and written, with every path resolved beneath the
 * workspace. */

/* After a change the model sees this many lines of context around it, and
 * at most this many lines per change. */
#define SNIPPET_CONTEXT 2U
#define SNIPPET_LINES_MAX 16U
/* apply_patch shows this many of a file's hunks, fewer lines of each. */
#define PATCH_HUNKS_SHOWN 6U
#define PATCH_SNIPPET_LINES_MAX 10U

static const char *plural(unsigned n) {
        return n == 1 ? "" : "s";
}

static char *copy_text(const char *s, size_t n) {
        char *c = malloc(n + 1);
        if (!c)
                return NULL;
        memcpy(c, s, n);
        c[n] = '\0';
        return c;
}

/* ---- edit_file ---- */

int tool_edit_file(int ws_fd, const ToolCallArgs *a, size_t max_file, char **ret_output) {
        _cleanup_free_ char *name = NULL, *shown = NULL, *what = NULL, *data = NULL, *error = NULL;
        _cleanup_(text_edit_done) TextEdit e = {};
        _cleanup_close_ int dir_fd = -EBADF;
        _cleanup_(buf_done) Buf out = {};
        size_t size;
        mode_t mode;
        int r;

        assert(a);
        assert(ret_output);

        shown = quote_short(a->path);
        if (!shown)
                return -ENOMEM;
        if (isempty(a->old_text))
                return tool_message(ret_output, -EINVAL, "edit_file: 'old_text' must not be empty");

        r = workspace_open_parent(ws_fd, a->path, false, &dir_fd, &name);
        if (r < 0)
                return tool_path_error(TOOL_EDIT_FILE, a->path, r, ret_output);

        r = check_write_target(dir_fd, name, TOOL_EDIT_FILE, a->path, true, &mode, ret_output);
        if (r < 0)
                return r;

        r = read_file_at(dir_fd, name, max_file, &data, &size);
        if (r == -EFBIG)
                return tool_message(ret_output, r, "edit_file: '%s' is bigger than the limit of %zu bytes", shown, max_file);
        if (r < 0)
                return tool_path_error(TOOL_EDIT_FILE, a->path, r, ret_output);
        if (looks_binary(data, size))
                return tool_message(ret_output, -EMEDIUMTYPE, "edit_file: '%s' is a binary file", shown);

        if (asprintf(&what, "'%s'", shown) < 0)
                return -ENOMEM;
        r = text_edit(data, size, a->old_text, a->new_text, a->replace_all, max_file, what, &e, &error);
        if (r < 0) {
                if (!error)
                        return r == -ENOMEM ? r : tool_message(ret_output, r, "edit_file: %s", strerror(-r));
                return tool_message(ret_output, r, "%s", error);
        }

        r = write_replace(dir_fd, name, TOOL_EDIT_FILE, a->path, e.text, e.size, mode, ret_output);
        if (r < 0)
                return r;

        if (a->replace_all)
                r = buf_printf(&out, "edited '%s': replaced %u occurrence%s (at line%s %s) of %u line%s each with %u "
                               "line%s; the first is now:\n", shown, e.count, plural(e.count), plural(e.count),
                               e.lines, e.old_lines, plural(e.old_lines), e.new_lines, plural(e.new_lines));
        else
                r = buf_printf(&out, "edited '%s' (%s%s): replaced %u line%s at line %u with %u line%s; now:\n", shown,
                               match_rule_description(e.rule),
                               e.numbers_stripped ? "; the read_file line numbers in your text were left out" : "",
                               e.old_lines, plural(e.old_lines), e.line, e.new_lines, plural(e.new_lines));
        if (r < 0)
                return -ENOMEM;
        r = text_snippet(e.text, e.size, e.line, e.line + MAX(e.new_lines, 1U) - 1, SNIPPET_CONTEXT,
                         SNIPPET_LINES_MAX, &out);
        if (r < 0)
                return r;
        return buf_steal(&out, ret_output);
}

/* ---- apply_patch ---- */

/* One file of the patch, from its check to its write (or its undoing). */
typedef struct Change {
        const PatchFile *f;
        char *path, *dest;      /* normalized; dest: where the content goes (path, or the move's target) */
        int dir_fd;             /* path's directory */
        char *name;
        int dest_dir_fd;        /* dest's directory; -EBADF while it is to be made */
        char *dest_name;
        char *old;              /* path's content before: for an update, and to undo */
        size_t old_size;
        bool dest_existed;      /* an add over an existing file */
        char *dest_old;
        size_t dest_old_size;
        mode_t mode, dest_mode;
        char *new;
        size_t new_size;
        PatchHunkResult *results;
        bool refused;           /* its path is: it is not looked at further */
        /* What was done, to be undone should a later step fail. */
        bool written, removed;
} Change;

static void change_done(Change *c) {
        if (c->dest != c->path)
                free(c->dest);
        free(c->path);
        safe_close(c->dir_fd);
        free(c->name);
        safe_close(c->dest_dir_fd);
        free(c->dest_name);
        free(c->old);
        free(c->dest_old);
        free(c->new);
        free(c->results);
}

typedef struct PatchRun {
        int ws_fd;
        size_t max_file, total, max_total;
        Patch patch;
        Change *changes;
        size_t n_changes;
        Buf errors;
        int error;
} PatchRun;

static void patch_run_done(PatchRun *p) {
        for (size_t i = 0; i < p->n_changes; i++)
                change_done(&p->changes[i]);
        free(p->changes);
        patch_done(&p->patch);
        buf_done(&p->errors);
}

/* Notes a failure of one file; the compute phase goes on, so that the
 * model hears of every problem at once. */
_printf_(3, 4)
static int run_fail(PatchRun *p, int error, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0 || buf_printf(&p->errors, "  - %s\n", m) < 0)
                return -ENOMEM;
        if (p->error == 0)
                p->error = error;
        return 0;
}

static int run_path_fail(PatchRun *p, const char *path, int error) {
        _cleanup_free_ char *m = NULL;
        int r = workspace_path_error(path, error, &m);
        if (r == -ENOMEM && error != -ENOMEM)
                return r;
        return run_fail(p, error, "%s", m);
}

/* A message of check_write_target() into the list. */
static int run_take_message(PatchRun *p, int error, char *m) {
        const char *s = strempty(m);
        int r;

        if (error == -ENOMEM) {
                free(m);
                return error;
        }
        if (strneq(s, "apply_patch: ", 13))
                s += 13;
        r = run_fail(p, error, "%s", s);
        free(m);
        return r;
}

/* The parents of a file to be made where they are missing: the nearest
 * that exists must be a directory inside the workspace and outside .git;
 * the rest are made at write time. */
static int check_missing_parents(int ws_fd, const char *path) {
        _cleanup_free_ char *p = strdup(path);
        char *slash;

        if (!p)
                return -ENOMEM;
        while ((slash = strrchr(p, '/'))) {
                _cleanup_close_ int fd = -EBADF;
                int r;

                *slash = '\0';
                r = workspace_open(ws_fd, p, O_RDONLY | O_DIRECTORY, 0, &fd);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                r = workspace_dir_in_git(ws_fd, fd);
                if (r < 0)
                        return r;
                return r > 0 ? -EPERM : 0;
        }
        return 0;
}

/* Resolves where an added or moved file goes: 1 when something is there
 * already (an add replaces it: its content is read, to be put back should
 * the patch fail), 0 when not; a move must go to a new path. */
static int resolve_dest(PatchRun *p, Change *c, bool may_exist) {
        _cleanup_free_ char *m = NULL;
        int r;

        r = workspace_open_parent(p->ws_fd, c->dest, false, &c->dest_dir_fd, &c->dest_name);
        if (r == -ENOENT) {
                r = check_missing_parents(p->ws_fd, c->dest);
                if (r < 0)
                        return run_path_fail(p, c->dest, r);
                c->dest_mode = 0644;
                return 0;
        }
        if (r < 0)
                return run_path_fail(p, c->dest, r);

        r = check_write_target(c->dest_dir_fd, c->dest_name, TOOL_APPLY_PATCH, c->dest, false, &c->dest_mode, &m);
        if (r < 0)
                return run_take_message(p, r, TAKE_PTR(m));
        if (r == 0)
                return 0;
        if (!may_exist)
                return run_fail(p, -EEXIST, "'%s' exists already; a file is moved only to a new path", c->dest);

        /* An added file over an existing one replaces it: read what to
         * put back should the patch fail. */
        r = read_file_at(c->dest_dir_fd, c->dest_name, p->max_file, &c->dest_old, &c->dest_old_size);
        if (r == -EFBIG)
                return run_fail(p, r, "'%s' exists and is bigger than the limit of %zu bytes", c->dest, p->max_file);
        if (r < 0)
                return run_path_fail(p, c->dest, r);
        c->dest_existed = true;
        p->total += c->dest_old_size;
        return 1;
}

/* Opens and reads the file a change updates, moves or deletes. */
static int read_source(PatchRun *p, Change *c) {
        _cleanup_free_ char *m = NULL;
        int r;

        r = workspace_open_parent(p->ws_fd, c->path, false, &c->dir_fd, &c->name);
        if (r < 0)
                return run_path_fail(p, c->path, r) < 0 ? -ENOMEM : 0;
        r = check_write_target(c->dir_fd, c->name, TOOL_APPLY_PATCH, c->path, true, &c->mode, &m);
        if (r < 0)
                return run_take_message(p, r, TAKE_PTR(m)) < 0 ? -ENOMEM : 0;
        r = read_file_at(c->dir_fd, c->name, p->max_file, &c->old, &c->old_size);
        if (r == -EFBIG)
                return run_fail(p, r, "'%s' is bigger than the limit of %zu bytes", c->path, p->max_file) < 0 ? -ENOMEM : 0;
        if (r < 0)
                return run_path_fail(p, c->path, r) < 0 ? -ENOMEM : 0;
        if (looks_binary(c->old, c->old_size))
                return run_fail(p, -EMEDIUMTYPE, "'%s' is a binary file", c->path) < 0 ? -ENOMEM : 0;
        p->total += c->old_size;
        return 1;
}

static int compute_change(PatchRun *p, Change *c) {
        const PatchFile *f = c->f;
        int r;

        switch (f->op) {
        case PATCH_OP_ADD:
                if (f->content_size > p->max_file)
                        return run_fail(p, -EFBIG, "the new file '%s' is %zu bytes, more than the limit of %zu",
                                        c->dest, f->content_size, p->max_file);
                r = resolve_dest(p, c, true);
                if (r < 0)
                        return r;
                c->new = copy_text(f->content, f->content_size);
                if (!c->new)
                        return -ENOMEM;
                c->new_size = f->content_size;
                p->total += c->new_size;
                return 0;

        case PATCH_OP_DELETE:
                return read_source(p, c) < 0 ? -ENOMEM : 0;

        case PATCH_OP_UPDATE: {
                size_t before = p->errors.n;

                r = read_source(p, c);
                if (r <= 0)
                        return r;
                if (c->dest != c->path) {
                        r = resolve_dest(p, c, false);
                        if (r < 0)
                                return r;
                }
                c->dest_mode = c->mode;
                c->results = calloc(MAX(f->n_hunks, (size_t) 1), sizeof(PatchHunkResult));
                if (!c->results)
                        return -ENOMEM;
                if (f->n_hunks == 0) {
                        /* A move alone. */
                        c->new = copy_text(c->old, c->old_size);
                        if (!c->new)
                                return -ENOMEM;
                        c->new_size = c->old_size;
                } else {
                        r = patch_apply(f, c->old, c->old_size, p->max_file, &c->new, &c->new_size, c->results,
                                        &p->errors);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0 && p->error == 0)
                                p->error = r;
                        if (r < 0 && p->errors.n == before)
                                return run_fail(p, r, "'%s': %s", c->path, strerror(-r));
                }
                p->total += c->new_size;
                return 0;
        }

        default:
                assert(false);
                return -EINVAL;
        }
}

/* ---- Writing, and undoing ---- */

/* An update in place writes through the directory it read from. */
static bool change_in_place(const Change *c) {
        return c->f->op == PATCH_OP_UPDATE && c->dest == c->path;
}

static int change_write(PatchRun *p, Change *c, char **ret_output) {
        int r;

        if (change_in_place(c)) {
                r = write_replace(c->dir_fd, c->name, TOOL_APPLY_PATCH, c->path, c->new, c->new_size, c->mode,
                                  ret_output);
                if (r < 0)
                        return r;
                c->written = true;
                return 0;
        }
        if (c->dest_dir_fd < 0) {
                free(c->dest_name);
                c->dest_name = NULL;
                r = workspace_open_parent(p->ws_fd, c->dest, true, &c->dest_dir_fd, &c->dest_name);
                if (r < 0)
                        return tool_path_error(TOOL_APPLY_PATCH, c->dest, r, ret_output);
        }
        r = write_replace(c->dest_dir_fd, c->dest_name, TOOL_APPLY_PATCH, c->dest, c->new, c->new_size, c->dest_mode,
                          ret_output);
        if (r < 0)
                return r;
        c->written = true;
        return 0;
}

static int change_remove(Change *c, char **ret_output) {
        if (unlinkat(c->dir_fd, c->name, 0) < 0)
                return tool_path_error(TOOL_APPLY_PATCH, c->path, -errno, ret_output);
        c->removed = true;
        return 0;
}

/* Puts back what was done, newest first. Directories made for new files
 * stay (empty). */
static void changes_undo(PatchRun *p) {
        for (size_t i = p->n_changes; i > 0; i--) {
                Change *c = &p->changes[i - 1];

                if (c->removed)
                        (void) write_file_atomic(c->dir_fd, c->name, c->old, c->old_size, c->mode);
                if (c->written) {
                        if (change_in_place(c))
                                (void) write_file_atomic(c->dir_fd, c->name, c->old, c->old_size, c->mode);
                        else if (c->dest_existed)
                                (void) write_file_atomic(c->dest_dir_fd, c->dest_name, c->dest_old, c->dest_old_size,
                                                         c->dest_mode);
                        else
                                (void) unlinkat(c->dest_dir_fd, c->dest_name, 0);
                }
        }
}

static int changes_commit(PatchRun *p, char **ret_output) {
        _cleanup_free_ char *m = NULL;
        int r = 0;

        /* Every content first, then the removals: a failure among the
         * writes leaves nothing removed. */
        for (size_t i = 0; r >= 0 && i < p->n_changes; i++)
                if (p->changes[i].f->op != PATCH_OP_DELETE)
                        r = change_write(p, &p->changes[i], &m);
        for (size_t i = 0; r >= 0 && i < p->n_changes; i++) {
                Change *c = &p->changes[i];
                if (c->f->op == PATCH_OP_DELETE || c->dest != c->path)
                        r = change_remove(c, &m);
        }
        if (r >= 0)
                return 0;

        changes_undo(p);
        if (r == -ENOMEM && !m)
                return r;
        return tool_message(ret_output, r, "%s; what the patch had written before was put back, so nothing was "
                            "changed", strempty(m));
}

/* ---- The answer ---- */

static int describe_update(Buf *out, const Change *c) {
        const PatchFile *f = c->f;
        int r;

        if (c->dest != c->path)
                r = buf_printf(out, "moved '%s' to '%s'", c->path, c->dest);
        else
                r = buf_printf(out, "updated '%s'", c->path);
        if (r < 0)
                return -ENOMEM;
        for (size_t k = 0; k < f->n_hunks; k++)
                if (buf_printf(out, "%s hunk %zu at line %u (%s)", k == 0 ? ":" : ",", k + 1, c->results[k].line,
                               match_rule_to_string(c->results[k].rule)) < 0)
                        return -ENOMEM;
        if (buf_puts(out, "\n") < 0)
                return -ENOMEM;
        for (size_t k = 0; k < MIN(f->n_hunks, (size_t) PATCH_HUNKS_SHOWN); k++) {
                const PatchHunkResult *h = &c->results[k];
                r = text_snippet(c->new, c->new_size, h->line, h->line + MAX(h->n_lines, 1U) - 1, 1,
                                 PATCH_SNIPPET_LINES_MAX, out);
                if (r < 0)
                        return r;
        }
        if (f->n_hunks > PATCH_HUNKS_SHOWN &&
            buf_printf(out, "[... %zu more hunks not shown ...]\n", f->n_hunks - PATCH_HUNKS_SHOWN) < 0)
                return -ENOMEM;
        return 0;
}

static int describe(PatchRun *p, char **ret_output) {
        _cleanup_(buf_done) Buf out = {};

        if (buf_printf(&out, "applied the %s to %zu file%s:\n", patch_format_to_string(p->patch.format),
                       p->n_changes, plural((unsigned) p->n_changes)) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_changes; i++) {
                const Change *c = &p->changes[i];
                int r = 0;

                switch (c->f->op) {
                case PATCH_OP_ADD:
                        r = buf_printf(&out, "%s '%s' (%u line%s)\n", c->dest_existed ? "replaced" : "added", c->dest,
                                       count_lines(c->new, c->new_size), plural(count_lines(c->new, c->new_size)));
                        break;
                case PATCH_OP_DELETE:
                        r = buf_printf(&out, "deleted '%s'\n", c->path);
                        break;
                case PATCH_OP_UPDATE:
                        r = describe_update(&out, c);
                        break;
                default:
                        break;
                }
                if (r < 0)
                        return -ENOMEM;
        }
        return buf_steal(&out, ret_output);
}

/* ---- The tool ---- */

static int patch_paths(PatchRun *p, char ***ret_paths) {
        _cleanup_strv_free_ char **l = NULL;

        for (size_t i = 0; i < p->n_changes; i++) {
                const Change *c = &p->changes[i];
                if (strv_extend(&l, c->path) < 0 || (c->dest != c->path && strv_extend(&l, c->dest) < 0))
                        return -ENOMEM;
        }
        if (ret_paths)
                *ret_paths = TAKE_PTR(l);
        return 0;
}

/* Every path normalized and checked before any is opened; each named once. */
static int check_paths(PatchRun *p) {
        for (size_t i = 0; i < p->patch.n_files; i++) {
                const PatchFile *f = &p->patch.files[i];
                Change *c = &p->changes[p->n_changes++];
                int r;

                *c = (Change) { .f = f, .dir_fd = -EBADF, .dest_dir_fd = -EBADF };
                r = workspace_path_normalize(f->path, &c->path);
                if (r == -ENOMEM)
                        return r;
                if (r >= 0 && streq(c->path, "."))
                        r = -EISDIR;
                if (r < 0) {
                        if (run_path_fail(p, f->path, r) < 0)
                                return -ENOMEM;
                        if (!c->path) {
                                c->path = strdup(f->path);
                                if (!c->path)
                                        return -ENOMEM;
                        }
                        c->dest = c->path;
                        c->refused = true;
                        continue;
                }
                c->dest = c->path;
                if (f->move_to) {
                        r = workspace_path_normalize(f->move_to, &c->dest);
                        if (r >= 0 && streq(c->dest, ".")) {
                                free(c->dest);
                                r = -EISDIR;
                        }
                        if (r < 0) {
                                c->dest = c->path;
                                if (r == -ENOMEM || run_path_fail(p, f->move_to, r) < 0)
                                        return -ENOMEM;
                                c->refused = true;
                                continue;
                        }
                        if (streq(c->dest, c->path)) {
                                free(c->dest);
                                c->dest = c->path;
                        }
                }
        }

        /* Every name (a path, a move's target) once in the whole patch. */
        for (size_t i = 0; i < p->n_changes; i++)
                for (size_t j = i + 1; j < p->n_changes; j++) {
                        const Change *a = &p->changes[i], *b = &p->changes[j];
                        const char *an[2] = { a->path, a->dest != a->path ? a->dest : NULL };
                        const char *bn[2] = { b->path, b->dest != b->path ? b->dest : NULL };
                        const char *same = NULL;

                        for (size_t x = 0; x < 2 && !same; x++)
                                for (size_t y = 0; y < 2 && !same; y++)
                                        if (an[x] && bn[y] && streq(an[x], bn[y]))
                                                same = an[x];
                        if (same && run_fail(p, -EINVAL, "'%s' is named twice (patch lines %u and %u); give each "
                                             "file one section", same, a->f->patch_line,
                                             b->f->patch_line) < 0)
                                return -ENOMEM;
                }
        return 0;
}

int tool_apply_patch(int ws_fd, const ToolCallArgs *a, size_t max_file, char ***ret_paths, char **ret_output) {
        _cleanup_(patch_run_done) PatchRun p = { .ws_fd = ws_fd, .max_file = max_file, .max_total = 4 * max_file };
        _cleanup_free_ char *error = NULL;
        int r;

        assert(a);
        assert(ret_output);

        if (ret_paths)
                *ret_paths = NULL;
        if (isempty(a->patch))
                return tool_message(ret_output, -EINVAL, "apply_patch: 'patch' must not be empty");

        r = patch_parse(a->patch, &p.patch, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_message(ret_output, r, "apply_patch: %s; nothing was changed", strempty(error));

        p.changes = calloc(p.patch.n_files, sizeof(Change));
        if (!p.changes)
                return -ENOMEM;
        r = check_paths(&p);
        if (r < 0)
                return r;

        /* Every new content, before anything is written. */
        for (size_t i = 0; i < p.n_changes; i++) {
                if (p.changes[i].refused)
                        continue;
                r = compute_change(&p, &p.changes[i]);
                if (r < 0)
                        return r;
                if (p.total > p.max_total) {
                        r = run_fail(&p, -EFBIG, "the patch's files come to more than %zu bytes; split it",
                                     p.max_total);
                        if (r < 0)
                                return r;
                        break;
                }
        }
        /* The paths refused before, with the others' problems. */
        for (size_t i = 0; p.error == 0 && i < p.n_changes; i++)
                if (p.changes[i].refused)
                        p.error = -EINVAL;
        if (p.error < 0)
                return tool_message(ret_output, p.error, "apply_patch: nothing was changed; the patch does not "
                                    "apply:\n%s", strempty(p.errors.s));

        r = patch_paths(&p, ret_paths);
        if (r < 0)
                return r;
        r = changes_commit(&p, ret_output);
        if (r < 0)
                return r;
        return describe(&p, ret_output);
}
