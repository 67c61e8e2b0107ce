/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ledger-internal.h"

/* The review stage's view of a task's change: what it added, line by
 * line, and whole files before and after (manifests, .agentfab.md). The
 * same trees as the diff export, so that a finding's line numbers are the
 * ones a reviewer sees in the delivered patch. */

void ledger_file_lines_free(LedgerFileLines *f, size_t n) {
        for (size_t i = 0; f && i < n; i++) {
                for (size_t k = 0; k < f[i].n_lines; k++)
                        free(f[i].lines[k].text);
                free(f[i].lines);
                free(f[i].path);
        }
        free(f);
}

typedef struct Collect {
        LedgerFileLines *files;
        size_t n, allocated;
        size_t allocated_lines;         /* of the last file's lines */
        size_t bytes;
} Collect;

static int file_lines_add(Collect *c, const git_diff_delta *d, char status) {
        if (c->n >= c->allocated) {
                size_t k = MAX(c->allocated * 2, (size_t) 16);
                LedgerFileLines *t = realloc(c->files, k * sizeof(LedgerFileLines));
                if (!t)
                        return -ENOMEM;
                c->files = t;
                c->allocated = k;
        }
        c->files[c->n] = (LedgerFileLines) {
                .path = strdup(d->new_file.path),
                .status = status,
                .binary = d->flags & GIT_DIFF_FLAG_BINARY,
        };
        if (!c->files[c->n].path)
                return -ENOMEM;
        c->n++;
        c->allocated_lines = 0;
        return 0;
}

static int line_add(Collect *c, const git_diff_line *line) {
        LedgerFileLines *f = &c->files[c->n - 1];
        size_t len = line->content_len;
        char *text;

        if (line->new_lineno <= 0 || (uintmax_t) line->new_lineno > UINT_MAX)
                return 0;
        /* The newline is not part of the line. */
        if (len > 0 && line->content[len - 1] == '\n')
                len--;
        if (len > 0 && line->content[len - 1] == '\r')
                len--;
        c->bytes += len + 1;
        if (c->bytes > LEDGER_ADDED_BYTES_MAX)
                return -E2BIG;
        if (f->n_lines >= c->allocated_lines) {
                size_t k = MAX(c->allocated_lines * 2, (size_t) 16);
                LedgerAddedLine *t = realloc(f->lines, k * sizeof(LedgerAddedLine));
                if (!t)
                        return -ENOMEM;
                f->lines = t;
                c->allocated_lines = k;
        }
        text = malloc(len + 1);
        if (!text)
                return -ENOMEM;
        memcpy(text, line->content, len);
        text[len] = '\0';
        f->lines[f->n_lines++] = (LedgerAddedLine) { .number = (unsigned) line->new_lineno, .text = text, .length = len };
        return 0;
}

static int patch_collect(Collect *c, git_patch *p) {
        for (size_t h = 0; h < git_patch_num_hunks(p); h++) {
                int n = git_patch_num_lines_in_hunk(p, h);
                for (int k = 0; k < n; k++) {
                        const git_diff_line *line;
                        int r;

                        if (git_patch_get_line_in_hunk(&line, p, h, (size_t) k) < 0)
                                return -EIO;
                        if (line->origin != GIT_DIFF_LINE_ADDITION)
                                continue;
                        r = line_add(c, line);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int ledger_added_lines(Ledger *l, LedgerFileLines **ret, size_t *ret_n) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        Collect c = {};
        int r;

        assert(l);
        assert(ret);
        assert(ret_n);

        r = export_repo_open(l, &repo);
        if (r < 0)
                return r;
        r = diff_base_head(l, repo ?: l->repo, false, &diff);
        if (r < 0)
                return r;

        for (size_t i = 0; i < git_diff_num_deltas(diff); i++) {
                const git_diff_delta *d = git_diff_get_delta(diff, i);
                _cleanup_(git_patch_freep) git_patch *p = NULL;
                char status = d->status == GIT_DELTA_ADDED ? 'A' : d->status == GIT_DELTA_MODIFIED ? 'M' :
                              d->status == GIT_DELTA_RENAMED ? 'R' : d->status == GIT_DELTA_TYPECHANGE ? 'T' :
                              d->status == GIT_DELTA_COPIED ? 'A' : 0;

                if (status == 0)
                        continue;       /* deleted: nothing added */
                if (c.n >= 100000U) {
                        r = -E2BIG;
                        break;
                }
                r = file_lines_add(&c, d, status);
                if (r < 0)
                        break;
                if (git_patch_from_diff(&p, diff, i) < 0) {
                        r = -EIO;
                        break;
                }
                /* Binary files: no lines (git_patch knows it only now for some). */
                if (!p || (git_patch_get_delta(p)->flags & GIT_DIFF_FLAG_BINARY)) {
                        c.files[c.n - 1].binary = true;
                        continue;
                }
                r = patch_collect(&c, p);
                if (r < 0)
                        break;
        }
        if (r < 0) {
                ledger_file_lines_free(c.files, c.n);
                return r;
        }
        *ret = c.files;
        *ret_n = c.n;
        return 0;
}

int ledger_read_file(Ledger *l, bool at_tip, const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_blob_freep) git_blob *blob = NULL;
        git_tree_entry *e = NULL;
        git_repository *r_repo;
        git_oid commit = l->base;
        git_filemode_t mode;
        git_object_size_t size;
        char *s;
        int r;

        assert(l);
        assert(ret);

        if (isempty(path) || path[0] == '/')
                return -EINVAL;
        r = export_repo_open(l, &repo);
        if (r < 0)
                return r;
        r_repo = repo ?: l->repo;
        if (at_tip) {
                r = ledger_tip(l, &commit);
                if (r < 0)
                        return r;
        }
        r = review_tree(l, r_repo, &commit, &tree);
        if (r < 0)
                return r;
        if (git_tree_entry_bypath(&e, tree, path) < 0)
                return -ENOENT;
        mode = git_tree_entry_filemode(e);
        r = git_blob_lookup(&blob, r_repo, git_tree_entry_id(e));
        git_tree_entry_free(e);
        if (mode == GIT_FILEMODE_LINK)
                return -ELOOP;
        if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE)
                return -EISDIR;
        if (r < 0)
                return -EBADMSG;
        size = git_blob_rawsize(blob);
        if (size > max)
                return -EFBIG;
        s = malloc((size_t) size + 1);
        if (!s)
                return -ENOMEM;
        memcpy(s, git_blob_rawcontent(blob), (size_t) size);
        s[size] = '\0';
        *ret = s;
        if (ret_size)
                *ret_size = (size_t) size;
        return 0;
}
