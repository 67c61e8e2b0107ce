/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2/sys/mempack.h>

#include "fs-util.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

/* What changed between a commit and the workspace or the staged tree: the
 * file list (by the stat index's staged tree where it can, libgit2's walk
 * otherwise), with the lines added and removed, cached per blob pair. */

#define CHANGES_MAX 100000U

static int commit_tree(git_repository *repo, const git_oid *id, git_tree **ret) {
        _cleanup_(git_commit_freep) git_commit *c = NULL;

        if (git_commit_lookup(&c, repo, id) < 0 || git_commit_tree(ret, c) < 0)
                return -EBADMSG;
        return 0;
}

static char delta_status(git_delta_t t) {
        switch (t) {
        case GIT_DELTA_ADDED:
        case GIT_DELTA_UNTRACKED:
        case GIT_DELTA_COPIED:
                return 'A';
        case GIT_DELTA_MODIFIED:
                return 'M';
        case GIT_DELTA_DELETED:
                return 'D';
        case GIT_DELTA_RENAMED:
                return 'R';
        case GIT_DELTA_TYPECHANGE:
                return 'T';
        default:
                return 0;
        }
}

void file_changes_free(FileChange *c, size_t n) {
        for (size_t i = 0; c && i < n; i++) {
                free(c[i].path);
                free(c[i].old_path);
        }
        free(c);
}

static int changes_add(FileChange **c, size_t *n, size_t *allocated, const FileChange *f, const char *prefix) {
        if (*n >= CHANGES_MAX)
                return -E2BIG;
        if (*n >= *allocated) {
                size_t k = MAX(*allocated * 2, (size_t) 16);
                FileChange *t = realloc(*c, k * sizeof(FileChange));
                if (!t)
                        return -ENOMEM;
                *c = t;
                *allocated = k;
        }
        FileChange *e = &(*c)[*n];
        *e = (FileChange) { .status = f->status, .added = f->added, .removed = f->removed };
        if (asprintf(&e->path, "%s%s", prefix, f->path) < 0)
                return -ENOMEM;
        if (f->old_path && asprintf(&e->old_path, "%s%s", prefix, f->old_path) < 0) {
                e->old_path = NULL;
                free(e->path);
                return -ENOMEM;
        }
        (*n)++;
        return 0;
}

/* The changes inside each fetched submodule, from its gitlink in the tree
 * of `from`, with paths as seen from the superproject ("sub/file.c"). */
static int changes_of_submodules(Ledger *l, git_tree *from_tree, FileChange **c, size_t *n) {
        size_t allocated = *n;
        int r;

        for (size_t i = 0; i < l->n_subs; i++) {
                LedgerSubmodule *s = &l->subs[i];
                _cleanup_free_ char *prefix = NULL;
                FileChange *sc = NULL;
                size_t sn = 0;
                git_tree_entry *e = NULL;
                char hex[GIT_OID_HEXSZ + 1];

                if (git_tree_entry_bypath(&e, from_tree, s->path) < 0)
                        continue;
                bool gitlink = git_tree_entry_filemode(e) == GIT_FILEMODE_COMMIT;
                git_oid_tostr(hex, sizeof(hex), git_tree_entry_id(e));
                git_tree_entry_free(e);
                /* Gone or replaced in the workspace: the superproject's diff shows that. */
                if (!gitlink || ledger_submodule_attach(l, s) < 0)
                        continue;
                r = ledger_changes(s->ledger, hex, &sc, &sn);
                if (r < 0)
                        return r;
                if (asprintf(&prefix, "%s/", s->path) < 0) {
                        file_changes_free(sc, sn);
                        return -ENOMEM;
                }
                r = 0;
                for (size_t j = 0; j < sn && r >= 0; j++)
                        r = changes_add(c, n, &allocated, &sc[j], prefix);
                file_changes_free(sc, sn);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The workspace compared by libgit2's own walk (by full path names, every
 * file): what ledger_changes() does for a ledger with fetched submodules,
 * whose gitlinks only a checkpoint moves, and the baseline bench/step-cost
 * measures the stat index against. */
static int changes_workdir(Ledger *l, git_tree *tree, FileChange **ret, size_t *ret_n) {
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        git_diff_options o;
        (void) git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
        git_diff_find_options fo;
        (void) git_diff_find_options_init(&fo, GIT_DIFF_FIND_OPTIONS_VERSION);
        int r;

        /* The workspace as it is, untracked files included: what the step did. */
        o.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_RECURSE_UNTRACKED_DIRS | GIT_DIFF_SHOW_UNTRACKED_CONTENT |
                  GIT_DIFF_INCLUDE_TYPECHANGE;
        /* SECURITY: libgit2 would look up a gitlink's status through the
         * workspace's .gitmodules and a .git in its directory, both the
         * sandbox's to write. Fetched submodules are diffed in their own
         * ledgers below instead. */
        o.ignore_submodules = GIT_SUBMODULE_IGNORE_ALL;
        if (git_diff_tree_to_workdir(&diff, l->repo, tree, &o) < 0)
                return log_debug_errno(-EIO, "Cannot diff the workspace: %s", ledger_git_message());
        fo.flags = GIT_DIFF_FIND_RENAMES | GIT_DIFF_FIND_FOR_UNTRACKED;
        if (git_diff_find_similar(diff, &fo) < 0)
                return -EIO;

        size_t n = git_diff_num_deltas(diff), k = 0;
        if (n > CHANGES_MAX)
                return -E2BIG;
        FileChange *c = calloc(MAX(n, (size_t) 1), sizeof(FileChange));
        if (!c)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                const git_diff_delta *d = git_diff_get_delta(diff, i);
                _cleanup_(git_patch_freep) git_patch *p = NULL;
                size_t added = 0, removed = 0;
                char s = delta_status(d->status);

                if (s == 0)
                        continue;
                if (git_patch_from_diff(&p, diff, i) >= 0 && p)
                        (void) git_patch_line_stats(NULL, &added, &removed, p);
                c[k].path = strdup(s == 'D' ? d->old_file.path : d->new_file.path);
                c[k].old_path = s == 'R' ? strdup(d->old_file.path) : NULL;
                if (!c[k].path || (s == 'R' && !c[k].old_path)) {
                        file_changes_free(c, k + 1);
                        return -ENOMEM;
                }
                c[k].status = s;
                c[k].added = (unsigned) MIN(added, (size_t) UINT_MAX);
                c[k].removed = (unsigned) MIN(removed, (size_t) UINT_MAX);
                k++;
        }

        r = changes_of_submodules(l, tree, &c, &k);
        if (r < 0) {
                file_changes_free(c, k);
                return r;
        }

        *ret = c;
        *ret_n = k;
        return 0;
}

static int lines_cmp(const git_oid *a_old, const git_oid *a_new, const LedgerLines *b) {
        int c = git_oid_cmp(a_old, &b->old_id);
        return c != 0 ? c : git_oid_cmp(a_new, &b->new_id);
}

static LedgerLines *lines_find(Ledger *l, const git_oid *old_id, const git_oid *new_id) {
        size_t lo = 0, hi = l->n_lines;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = lines_cmp(old_id, new_id, &l->lines[mid]);
                if (c == 0)
                        return &l->lines[mid];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

static int lines_sort_cmp(const void *a, const void *b) {
        const LedgerLines *x = a;
        return lines_cmp(&x->old_id, &x->new_id, b);
}

/* Keeps what the last two calls used (a step asks from its start and from
 * base, in turns), sorted for the next lookup. */
static int lines_update(Ledger *l, LedgerLines *fresh, size_t n_fresh) {
        size_t n = 0;

        for (size_t i = 0; i < l->n_lines; i++)
                if (l->lines[i].used + 1 >= l->lines_generation)
                        l->lines[n++] = l->lines[i];
        if (n_fresh > 0) {
                LedgerLines *t = realloc(l->lines, (n + n_fresh) * sizeof(LedgerLines));
                if (!t)
                        return -ENOMEM;
                l->lines = t;
                memcpy(l->lines + n, fresh, n_fresh * sizeof(LedgerLines));
                n += n_fresh;
        }
        l->n_lines = n;
        if (n > 0)
                qsort(l->lines, n, sizeof(LedgerLines), lines_sort_cmp);
        return 0;
}

/* ---- the quick diff ---- */

typedef struct QuickDelta {
        char *path;
        git_oid old_id, new_id;
        uint32_t old_mode, new_mode;    /* 0: absent */
} QuickDelta;

typedef struct Quick {
        git_repository *repo;
        QuickDelta *d;
        size_t n, allocated;
        bool complex;           /* a case only libgit2's diff gets right */
        bool added, deleted;
} Quick;

static void quick_done(Quick *q) {
        for (size_t i = 0; i < q->n; i++)
                free(q->d[i].path);
        free(q->d);
}

static bool mode_is_file(uint32_t m) {
        return m == GIT_FILEMODE_BLOB || m == GIT_FILEMODE_BLOB_EXECUTABLE || m == GIT_FILEMODE_LINK;
}

static int quick_add(Quick *q, const char *prefix, const char *name, const git_tree_entry *o, const git_tree_entry *n) {
        if (q->n >= CHANGES_MAX)
                return -E2BIG;
        if (q->n >= q->allocated) {
                size_t k = MAX(q->allocated * 2, (size_t) 16);
                QuickDelta *t = realloc(q->d, k * sizeof(QuickDelta));
                if (!t)
                        return -ENOMEM;
                q->d = t;
                q->allocated = k;
        }
        QuickDelta *d = &q->d[q->n];
        *d = (QuickDelta) {};
        if (asprintf(&d->path, "%s%s", prefix, name) < 0)
                return -ENOMEM;
        if (o) {
                d->old_id = *git_tree_entry_id(o);
                d->old_mode = git_tree_entry_filemode(o);
        }
        if (n) {
                d->new_id = *git_tree_entry_id(n);
                d->new_mode = git_tree_entry_filemode(n);
        }
        q->n++;
        return 0;
}

static int quick_tree(Quick *q, const git_oid *old_id, const git_oid *new_id, const char *prefix, unsigned depth);

/* One side only: every file below is added or deleted. */
static int quick_entry(Quick *q, const char *prefix, const git_tree_entry *o, const git_tree_entry *n, unsigned depth) {
        const git_tree_entry *e = o ?: n;
        uint32_t mode = git_tree_entry_filemode(e);

        if (mode == GIT_FILEMODE_TREE) {
                _cleanup_free_ char *dir = NULL;
                if (asprintf(&dir, "%s%s/", prefix, git_tree_entry_name(e)) < 0)
                        return -ENOMEM;
                return quick_tree(q, o ? git_tree_entry_id(o) : NULL, n ? git_tree_entry_id(n) : NULL, dir, depth + 1);
        }
        if (!mode_is_file(mode)) {
                q->complex = true;      /* A gitlink came or went. */
                return 0;
        }
        if (o)
                q->deleted = true;
        else
                q->added = true;
        return quick_add(q, prefix, git_tree_entry_name(e), o, n);
}

/* Both trees side by side, entry by entry; subtrees both have alike are
 * skipped whole, so this costs what changed, not what exists. */
static int quick_tree(Quick *q, const git_oid *old_id, const git_oid *new_id, const char *prefix, unsigned depth) {
        _cleanup_(git_tree_freep) git_tree *ot = NULL, *nt = NULL;
        int r;

        if (depth > 256)
                return -ELOOP;
        if ((old_id && git_tree_lookup(&ot, q->repo, old_id) < 0) || (new_id && git_tree_lookup(&nt, q->repo, new_id) < 0))
                return -EBADMSG;

        size_t on = ot ? git_tree_entrycount(ot) : 0, nn = nt ? git_tree_entrycount(nt) : 0;
        for (size_t i = 0; i < on; i++) {
                const git_tree_entry *o = git_tree_entry_byindex(ot, i);
                const git_tree_entry *n = nt ? git_tree_entry_byname(nt, git_tree_entry_name(o)) : NULL;

                if (!n) {
                        r = quick_entry(q, prefix, o, NULL, depth);
                } else if (git_oid_equal(git_tree_entry_id(o), git_tree_entry_id(n)) &&
                           git_tree_entry_filemode(o) == git_tree_entry_filemode(n)) {
                        continue;
                } else if (git_tree_entry_filemode(o) == GIT_FILEMODE_TREE && git_tree_entry_filemode(n) == GIT_FILEMODE_TREE) {
                        _cleanup_free_ char *dir = NULL;
                        if (asprintf(&dir, "%s%s/", prefix, git_tree_entry_name(o)) < 0)
                                return -ENOMEM;
                        r = quick_tree(q, git_tree_entry_id(o), git_tree_entry_id(n), dir, depth + 1);
                } else {
                        uint32_t om = git_tree_entry_filemode(o), nm = git_tree_entry_filemode(n);
                        /* Regular to regular (content or the executable bit):
                         * a modification. Anything else (links, trees,
                         * gitlinks changing kind) is libgit2's. */
                        if (om == GIT_FILEMODE_LINK || nm == GIT_FILEMODE_LINK || !mode_is_file(om) || !mode_is_file(nm)) {
                                q->complex = true;
                                return 0;
                        }
                        r = quick_add(q, prefix, git_tree_entry_name(o), o, n);
                }
                if (r < 0)
                        return r;
                if (q->complex)
                        return 0;
        }
        for (size_t i = 0; i < nn; i++) {
                const git_tree_entry *n = git_tree_entry_byindex(nt, i);
                if (ot && git_tree_entry_byname(ot, git_tree_entry_name(n)))
                        continue;
                r = quick_entry(q, prefix, NULL, n, depth);
                if (r < 0)
                        return r;
                if (q->complex)
                        return 0;
        }
        return 0;
}

static int quick_cmp(const void *a, const void *b) {
        return strcmp(((const QuickDelta *) a)->path, ((const QuickDelta *) b)->path);
}

static int blob_or_null(git_repository *repo, const git_oid *id, uint32_t mode, git_blob **ret) {
        *ret = NULL;
        if (mode == 0)
                return 0;
        return git_blob_lookup(ret, repo, id) < 0 ? -EBADMSG : 0;
}

/* The change list without libgit2's diff, when no rename can be among it
 * (nothing both added and deleted) and nothing changed kind: what most
 * steps are. 0: *ret filled; 1: not such a case (ask libgit2). */
static int changes_quick(Ledger *l, git_tree *tree, git_tree *staged, FileChange **ret, size_t *ret_n) {
        _cleanup_free_ LedgerLines *fresh = NULL;
        Quick q = { .repo = l->repo };
        size_t n_fresh = 0;
        int r;

        r = quick_tree(&q, git_tree_id(tree), git_tree_id(staged), "", 0);
        if (r < 0 || q.complex || (q.added && q.deleted)) {
                quick_done(&q);
                return r < 0 ? r : 1;
        }
        if (q.n > 0)   /* qsort(NULL, 0) is undefined */
                qsort(q.d, q.n, sizeof(QuickDelta), quick_cmp);

        FileChange *c = calloc(MAX(q.n, (size_t) 1), sizeof(FileChange));
        fresh = calloc(MAX(q.n, (size_t) 1), sizeof(LedgerLines));
        if (!c || !fresh) {
                free(c);
                quick_done(&q);
                return -ENOMEM;
        }
        l->lines_generation++;
        for (size_t i = 0; i < q.n; i++) {
                QuickDelta *d = &q.d[i];
                size_t added = 0, removed = 0;

                if (d->old_mode != 0 && d->new_mode != 0 && git_oid_equal(&d->old_id, &d->new_id))
                        ;       /* The executable bit only. */
                else {
                        LedgerLines *known = lines_find(l, &d->old_id, &d->new_id);
                        if (known) {
                                known->used = l->lines_generation;
                                added = known->added;
                                removed = known->removed;
                        } else {
                                _cleanup_(git_blob_freep) git_blob *ob = NULL, *nb = NULL;
                                _cleanup_(git_patch_freep) git_patch *p = NULL;
                                r = blob_or_null(l->repo, &d->old_id, d->old_mode, &ob);
                                if (r >= 0)
                                        r = blob_or_null(l->repo, &d->new_id, d->new_mode, &nb);
                                if (r < 0) {
                                        file_changes_free(c, i);
                                        quick_done(&q);
                                        return r;
                                }
                                if (git_patch_from_blobs(&p, ob, d->path, nb, d->path, NULL) >= 0 && p)
                                        (void) git_patch_line_stats(NULL, &added, &removed, p);
                                fresh[n_fresh++] = (LedgerLines) {
                                        .old_id = d->old_id, .new_id = d->new_id,
                                        .added = (unsigned) MIN(added, (size_t) UINT_MAX),
                                        .removed = (unsigned) MIN(removed, (size_t) UINT_MAX),
                                        .used = l->lines_generation,
                                };
                        }
                }
                c[i] = (FileChange) {
                        .path = TAKE_PTR(d->path),
                        .status = d->old_mode == 0 ? 'A' : d->new_mode == 0 ? 'D' : 'M',
                        .added = (unsigned) MIN(added, (size_t) UINT_MAX),
                        .removed = (unsigned) MIN(removed, (size_t) UINT_MAX),
                };
        }
        size_t n = q.n;
        quick_done(&q);
        if (lines_update(l, fresh, n_fresh) < 0) {
                file_changes_free(c, n);
                return -ENOMEM;
        }
        *ret = c;
        *ret_n = n;
        return 0;
}

/* From tree to what is staged: a tree-to-tree diff, which skips every
 * subtree both have alike, so it costs what changed, not what exists.
 * Line counts come from the previous calls where the blob pair is the
 * same. */
static int changes_staged(Ledger *l, git_tree *tree, FileChange **ret, size_t *ret_n) {
        _cleanup_(git_tree_freep) git_tree *staged = NULL;
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        _cleanup_free_ LedgerLines *fresh = NULL;
        size_t n_fresh = 0;
        git_diff_options o;
        (void) git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
        git_diff_find_options fo;
        (void) git_diff_find_options_init(&fo, GIT_DIFF_FIND_OPTIONS_VERSION);
        uint64_t t0 = TRACE_BEGIN();

        if (git_tree_lookup(&staged, l->repo, &l->staged_tree) < 0)
                return -EBADMSG;
        int r = changes_quick(l, tree, staged, ret, ret_n);
        if (r <= 0) {
                TRACE_END("changes", t0);
                return r;
        }
        o.flags = GIT_DIFF_INCLUDE_TYPECHANGE;
        o.ignore_submodules = GIT_SUBMODULE_IGNORE_ALL;
        if (git_diff_tree_to_tree(&diff, l->repo, tree, staged, &o) < 0)
                return log_debug_errno(-EIO, "Cannot diff the workspace: %s", ledger_git_message());
        fo.flags = GIT_DIFF_FIND_RENAMES;
        if (git_diff_find_similar(diff, &fo) < 0)
                return -EIO;

        size_t n = git_diff_num_deltas(diff), k = 0;
        if (n > CHANGES_MAX)
                return -E2BIG;
        FileChange *c = calloc(MAX(n, (size_t) 1), sizeof(FileChange));
        fresh = calloc(MAX(n, (size_t) 1), sizeof(LedgerLines));
        if (!c || !fresh) {
                free(c);
                return -ENOMEM;
        }
        l->lines_generation++;

        for (size_t i = 0; i < n; i++) {
                const git_diff_delta *d = git_diff_get_delta(diff, i);
                size_t added = 0, removed = 0;
                char s = delta_status(d->status);

                /* Gitlinks are not files of the change (see ledger_changes()). */
                if (s == 0 || (d->old_file.mode == GIT_FILEMODE_COMMIT && d->new_file.mode == GIT_FILEMODE_COMMIT))
                        continue;
                LedgerLines *known = lines_find(l, &d->old_file.id, &d->new_file.id);
                if (known) {
                        known->used = l->lines_generation;
                        added = known->added;
                        removed = known->removed;
                } else {
                        _cleanup_(git_patch_freep) git_patch *p = NULL;
                        if (git_patch_from_diff(&p, diff, i) >= 0 && p)
                                (void) git_patch_line_stats(NULL, &added, &removed, p);
                        fresh[n_fresh++] = (LedgerLines) {
                                .old_id = d->old_file.id, .new_id = d->new_file.id,
                                .added = (unsigned) MIN(added, (size_t) UINT_MAX),
                                .removed = (unsigned) MIN(removed, (size_t) UINT_MAX),
                                .used = l->lines_generation,
                        };
                }
                c[k].path = strdup(s == 'D' ? d->old_file.path : d->new_file.path);
                c[k].old_path = s == 'R' ? strdup(d->old_file.path) : NULL;
                if (!c[k].path || (s == 'R' && !c[k].old_path)) {
                        file_changes_free(c, k + 1);
                        return -ENOMEM;
                }
                c[k].status = s;
                c[k].added = (unsigned) MIN(added, (size_t) UINT_MAX);
                c[k].removed = (unsigned) MIN(removed, (size_t) UINT_MAX);
                k++;
        }
        if (lines_update(l, fresh, n_fresh) < 0) {
                file_changes_free(c, k);
                return -ENOMEM;
        }
        TRACE_END("changes", t0);

        *ret = c;
        *ret_n = k;
        return 0;
}

int ledger_changes_walk(Ledger *l, const char *from, FileChange **ret, size_t *ret_n) {
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        git_oid id = l->base;
        int r;

        if (from && git_oid_fromstr(&id, from) < 0)
                return -EINVAL;
        r = commit_tree(l->repo, &id, &tree);
        if (r < 0)
                return r;
        return changes_workdir(l, tree, ret, ret_n);
}

int ledger_changes(Ledger *l, const char *from, FileChange **ret, size_t *ret_n) {
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        git_oid id;
        int r;

        assert(l);
        assert(ret);
        assert(ret_n);

        id = l->base;
        if (from && git_oid_fromstr(&id, from) < 0)
                return -EINVAL;
        r = commit_tree(l->repo, &id, &tree);
        if (r < 0)
                return r;

        if (l->n_subs > 0)
                return changes_workdir(l, tree, ret, ret_n);

        /* SECURITY: the stage reads the workspace as a checkpoint does
         * (through directory fds, never following a symlink). A workspace a
         * checkpoint would refuse (a FIFO, a file over the bound) is still
         * listed, by libgit2's walk; the checkpoint then says why it
         * refuses it. */
        r = ledger_stage(l, false, NULL);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return changes_workdir(l, tree, ret, ret_n);
        return changes_staged(l, tree, ret, ret_n);
}
