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

#define CHANGES_MAX 100000U
#define BUNDLE_HEADER_MAX (64U * 1024U)

static int commit_tree(git_repository *repo, const git_oid *id, git_tree **ret) {
        _cleanup_(git_commit_freep) git_commit *c = NULL;

        if (git_commit_lookup(&c, repo, id) < 0 || git_commit_tree(ret, c) < 0)
                return -EBADMSG;
        return 0;
}

/* ---- changes and diffs ---- */

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
 * whose gitlinks only a checkpoint moves, and what it did for every ledger
 * before the stat index (bench/step-cost measures it as the old way). */
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

/* ---- submodules flattened into the superproject, for review ---- */

static int add_submodule_objects(git_odb *odb, Ledger *l, unsigned depth) {
        if (depth > LEDGER_SUBMODULE_DEPTH_MAX)
                return -ELOOP;
        for (size_t i = 0; i < l->n_subs; i++) {
                _cleanup_free_ char *objects = NULL;
                const char *p = git_repository_path(l->subs[i].ledger->repo);

                if (!p || asprintf(&objects, "%sobjects", p) < 0)
                        return -ENOMEM;
                if (git_odb_add_disk_alternate(odb, objects) < 0)
                        return -EIO;
                int r = add_submodule_objects(odb, l->subs[i].ledger, depth + 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The repository exports read: the ledger itself, or, with fetched
 * submodules, a second handle on it whose object database also reads the
 * submodules' ledgers and writes to memory only, so that trees with each
 * gitlink replaced by its submodule's tree can be made for a diff without
 * leaving anything behind. */
int export_repo_open(Ledger *l, git_repository **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        git_odb_backend *mem = NULL;
        int r;

        if (l->n_subs == 0) {
                *ret = NULL;
                return 0;
        }
        if (git_repository_open_ext(&repo, git_repository_path(l->repo), GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0 ||
            git_repository_odb(&odb, repo) < 0)
                return -EIO;
        if (git_mempack_new(&mem) < 0)
                return -ENOMEM;
        if (git_odb_add_backend(odb, mem, 1000) < 0) {
                mem->free(mem);
                return -EIO;
        }
        r = add_submodule_objects(odb, l, 1);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(repo);
        return 0;
}

static bool submodule_below(Ledger *l, const char *dir) {
        size_t n = strlen(dir);
        for (size_t i = 0; i < l->n_subs; i++)
                if (strneq(l->subs[i].path, dir, n) && l->subs[i].path[n] == '/')
                        return true;
        return false;
}

/* tree with every gitlink of a fetched submodule replaced by that commit's
 * tree, recursively. */
static int flatten_tree(Ledger *l, git_repository *repo, const git_oid *tree_id, const char *prefix, unsigned depth, git_oid *ret) {
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_treebuilder_freep) git_treebuilder *b = NULL;
        bool changed = false;
        int r;

        if (depth > 256)
                return -ELOOP;
        if (git_tree_lookup(&tree, repo, tree_id) < 0 || git_treebuilder_new(&b, repo, tree) < 0)
                return -EBADMSG;

        for (size_t i = 0; i < git_tree_entrycount(tree); i++) {
                const git_tree_entry *e = git_tree_entry_byindex(tree, i);
                _cleanup_free_ char *path = NULL;
                git_oid flat;

                if (asprintf(&path, "%s%s", prefix, git_tree_entry_name(e)) < 0)
                        return -ENOMEM;
                if (git_tree_entry_filemode(e) == GIT_FILEMODE_COMMIT) {
                        _cleanup_(git_commit_freep) git_commit *c = NULL;
                        LedgerSubmodule *s = NULL;

                        for (size_t j = 0; j < l->n_subs && !s; j++)
                                if (streq(l->subs[j].path, path))
                                        s = &l->subs[j];
                        if (!s || git_commit_lookup(&c, repo, git_tree_entry_id(e)) < 0)
                                continue;       /* Not fetched: stays a gitlink. */
                        r = flatten_tree(s->ledger, repo, git_commit_tree_id(c), "", depth + 1, &flat);
                } else if (git_tree_entry_filemode(e) == GIT_FILEMODE_TREE && submodule_below(l, path)) {
                        _cleanup_free_ char *dir = NULL;
                        if (asprintf(&dir, "%s/", path) < 0)
                                return -ENOMEM;
                        r = flatten_tree(l, repo, git_tree_entry_id(e), dir, depth + 1, &flat);
                        if (r >= 0 && git_oid_equal(&flat, git_tree_entry_id(e)))
                                continue;
                } else
                        continue;
                if (r < 0)
                        return r;
                if (git_treebuilder_insert(NULL, b, git_tree_entry_name(e), &flat, GIT_FILEMODE_TREE) < 0)
                        return -EIO;
                changed = true;
        }
        if (!changed) {
                git_oid_cpy(ret, tree_id);
                return 0;
        }
        return git_treebuilder_write(ret, b) < 0 ? -EIO : 0;
}

/* The tree of commit as a reviewer reads it: submodules' files in place. */
int review_tree(Ledger *l, git_repository *repo, const git_oid *commit, git_tree **ret) {
        _cleanup_(git_commit_freep) git_commit *c = NULL;
        git_oid flat;
        int r;

        if (git_commit_lookup(&c, repo, commit) < 0)
                return -EBADMSG;
        if (l->n_subs == 0)
                return git_commit_tree(ret, c) < 0 ? -EBADMSG : 0;
        r = flatten_tree(l, repo, git_commit_tree_id(c), "", 0, &flat);
        if (r < 0)
                return r;
        return git_tree_lookup(ret, repo, &flat) < 0 ? -EBADMSG : 0;
}

int diff_base_head(Ledger *l, git_repository *repo, bool binary, git_diff **ret) {
        _cleanup_(git_tree_freep) git_tree *from = NULL, *to = NULL;
        git_diff_options o;
        (void) git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
        git_diff_find_options fo;
        (void) git_diff_find_options_init(&fo, GIT_DIFF_FIND_OPTIONS_VERSION);
        git_oid tip;
        int r;

        r = ledger_tip(l, &tip);
        if (r < 0)
                return r;
        r = review_tree(l, repo, &l->base, &from);
        if (r < 0)
                return r;
        r = review_tree(l, repo, &tip, &to);
        if (r < 0)
                return r;

        if (binary)
                o.flags |= GIT_DIFF_SHOW_BINARY;
        if (git_diff_tree_to_tree(ret, repo, from, to, &o) < 0)
                return -EIO;
        fo.flags = GIT_DIFF_FIND_RENAMES;
        if (git_diff_find_similar(*ret, &fo) < 0) {
                git_diff_free(*ret);
                *ret = NULL;
                return -EIO;
        }
        return 0;
}

int ledger_diffstat(Ledger *l, char **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        _cleanup_(git_diff_stats_freep) git_diff_stats *stats = NULL;
        _cleanup_git_buf_ git_buf buf = { 0 };
        int r;

        assert(l);
        assert(ret);

        r = export_repo_open(l, &repo);
        if (r < 0)
                return r;
        r = diff_base_head(l, repo ?: l->repo, false, &diff);
        if (r < 0)
                return r;
        if (git_diff_get_stats(&stats, diff) < 0 ||
            git_diff_stats_to_buf(&buf, stats, GIT_DIFF_STATS_FULL, 80) < 0)
                return -EIO;

        char *s = strdup(buf.ptr ?: "");
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int ledger_export_diff(Ledger *l, int out_fd) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        _cleanup_git_buf_ git_buf buf = { 0 };
        int r;

        assert(l);
        assert(out_fd >= 0);

        r = export_repo_open(l, &repo);
        if (r < 0)
                return r;
        r = diff_base_head(l, repo ?: l->repo, true, &diff);
        if (r < 0)
                return r;
        if (git_diff_to_buf(&buf, diff, GIT_DIFF_FORMAT_PATCH) < 0)
                return -EIO;
        return ledger_write_all(out_fd, buf.ptr, buf.size);
}

int ledger_export_mbox(Ledger *l, int out_fd) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        git_oid ids[1024], id;
        size_t n = 0;
        int r;

        assert(l);
        assert(out_fd >= 0);

        /* Counted first: each mail says "[PATCH i/n]". */
        r = ledger_walk_new(l, &w);
        if (r < 0)
                return r;
        while ((r = git_revwalk_next(&id, w)) == 0) {
                if (n >= ELEMENTSOF(ids))
                        return -E2BIG;
                ids[n++] = id;
        }
        if (r != GIT_ITEROVER)
                return -EIO;
        r = export_repo_open(l, &repo);
        if (r < 0)
                return r;
        git_repository *rr = repo ?: l->repo;

        for (size_t i = 0; i < n; i++) {
                _cleanup_(git_commit_freep) git_commit *c = NULL, *parent = NULL;
                _cleanup_(git_tree_freep) git_tree *tree = NULL, *ptree = NULL;
                _cleanup_(git_diff_freep) git_diff *diff = NULL;
                _cleanup_git_buf_ git_buf buf = { 0 };
                git_diff_options o;
                (void) git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);

                o.flags = GIT_DIFF_SHOW_BINARY;
                if (git_commit_lookup(&c, rr, &ids[i]) < 0 || git_commit_parent(&parent, c, 0) < 0)
                        return -EBADMSG;
                r = review_tree(l, rr, &ids[i], &tree);
                if (r < 0)
                        return r;
                r = review_tree(l, rr, git_commit_id(parent), &ptree);
                if (r < 0)
                        return r;
                if (git_diff_tree_to_tree(&diff, rr, ptree, tree, &o) < 0)
                        return -EIO;
                if (git_email_create_from_diff(&buf, diff, i + 1, n, &ids[i], git_commit_summary(c), git_commit_body(c),
                                               git_commit_author(c), NULL) < 0)
                        return log_debug_errno(-EIO, "Cannot format mail: %s", ledger_git_message());
                r = ledger_write_all(out_fd, buf.ptr, buf.size);
                if (r < 0)
                        return r;
                /* Mails of an mbox are separated by a blank line. */
                r = ledger_write_all(out_fd, "\n", 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- bundles ---- */

static int pack_write_cb(void *buf, size_t size, void *payload) {
        int *fd = payload;
        return ledger_write_all(*fd, buf, size) < 0 ? -1 : 0;
}

int ledger_export_bundle(Ledger *l, int out_fd) {
        _cleanup_(git_packbuilder_freep) git_packbuilder *pb = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_(git_commit_freep) git_commit *bc = NULL;
        _cleanup_free_ char *header = NULL, *comment = NULL;
        char base[GIT_OID_HEXSZ + 1], tip_hex[GIT_OID_HEXSZ + 1];
        git_oid tip;
        int r;

        assert(l);
        assert(out_fd >= 0);

        r = ledger_tip(l, &tip);
        if (r < 0)
                return r;
        if (git_oid_equal(&tip, &l->base))
                return -ENODATA;        /* Like git bundle: nothing to deliver. */

        if (git_commit_lookup(&bc, l->repo, &l->base) < 0)
                return -EBADMSG;
        comment = ledger_one_line(git_commit_summary(bc), LEDGER_SUBJECT_MAX);
        if (!comment)
                return -ENOMEM;
        git_oid_tostr(base, sizeof(base), &l->base);
        git_oid_tostr(tip_hex, sizeof(tip_hex), &tip);
        if (asprintf(&header, "# v2 git bundle\n-%s %s\n%s %s\n\n", base, comment, tip_hex, l->ref) < 0)
                return -ENOMEM;

        /* The pack holds base..tip only, without deltas against objects
         * outside it (libgit2 makes no thin packs): the receiver needs
         * nothing but the prerequisite's history. */
        r = ledger_walk_new(l, &w);
        if (r < 0)
                return r;
        if (git_packbuilder_new(&pb, l->repo) < 0)
                return -EIO;
        (void) git_packbuilder_set_threads(pb, 1);
        if (git_packbuilder_insert_walk(pb, w) < 0)
                return log_debug_errno(-EIO, "Cannot pack: %s", ledger_git_message());

        r = ledger_write_all(out_fd, header, strlen(header));
        if (r < 0)
                return r;
        if (git_packbuilder_foreach(pb, pack_write_cb, &out_fd) < 0)
                return -EIO;
        return 0;
}

/* Parses "# v2 git bundle\n", prerequisites "-<id> [comment]", refs
 * "<id> <refname>", up to the blank line. Takes the first branch ref. */
int ledger_bundle_header_parse(char *text, BundleHeader *h, char **ret_error) {
        char *line = text, *next;

        next = strchr(line, '\n');
        if (!next)
                return ledger_set_error(ret_error, -EBADMSG, "Not a git bundle.");
        *next++ = '\0';
        if (!streq(line, "# v2 git bundle"))
                return ledger_set_error(ret_error, -EBADMSG, "Not a version 2 git bundle.");

        for (line = next; line && *line; line = next) {
                bool prereq = line[0] == '-';
                char hex[GIT_OID_HEXSZ + 1];
                git_oid id;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (prereq)
                        line++;
                if (strlen(line) < GIT_OID_HEXSZ || (line[GIT_OID_HEXSZ] != '\0' && line[GIT_OID_HEXSZ] != ' '))
                        return ledger_set_error(ret_error, -EBADMSG, "Malformed bundle header.");
                memcpy(hex, line, GIT_OID_HEXSZ);
                hex[GIT_OID_HEXSZ] = '\0';
                if (strspn(hex, "0123456789abcdef") != GIT_OID_HEXSZ || git_oid_fromstr(&id, hex) < 0)
                        return ledger_set_error(ret_error, -EBADMSG, "Malformed object id in bundle header.");

                if (prereq) {
                        if (h->n_prereqs >= BUNDLE_PREREQS_MAX)
                                return ledger_set_error(ret_error, -E2BIG, "Bundle has too many prerequisites.");
                        h->prereqs[h->n_prereqs++] = id;
                } else if (!h->have_tip && line[GIT_OID_HEXSZ] == ' ' && strneq(line + GIT_OID_HEXSZ + 1, "refs/heads/", 11)) {
                        h->tip = id;
                        h->have_tip = true;
                }
        }
        if (!h->have_tip)
                return ledger_set_error(ret_error, -EBADMSG, "Bundle carries no branch.");
        return 0;
}

/* The smallest object a pack can hold: a one-byte type and size, and an
 * empty zlib stream (8 bytes). */
#define PACK_OBJECT_MIN 9U
#define PACK_OBJECTS_MAX (UINT32_C(1) << 26)

int ledger_pack_header_check(const uint8_t h[static 12], uint64_t max_bytes, char **ret_error) {
        uint32_t version = (uint32_t) h[4] << 24 | (uint32_t) h[5] << 16 | (uint32_t) h[6] << 8 | h[7];
        uint32_t objects = (uint32_t) h[8] << 24 | (uint32_t) h[9] << 16 | (uint32_t) h[10] << 8 | h[11];

        if (memcmp(h, "PACK", 4) != 0 || !IN_SET(version, 2, 3))
                return ledger_set_error(ret_error, -EBADMSG, "Bundle's pack has no valid header.");
        if (objects > PACK_OBJECTS_MAX)
                return ledger_set_error(ret_error, -EFBIG, "Bundle's pack claims %" PRIu32 " objects, more than the %" PRIu32 " accepted.",
                                        objects, PACK_OBJECTS_MAX);
        if (max_bytes != UINT64_MAX && objects > max_bytes / PACK_OBJECT_MIN)
                return ledger_set_error(ret_error, -EFBIG, "Bundle's pack claims %" PRIu32 " objects, more than fit in the limit of %" PRIu64 " bytes.",
                                        objects, max_bytes);
        return 0;
}

typedef struct ImportLimit {
        uint64_t max, seen;
} ImportLimit;

int ledger_import_bundle(const char *repo_path, int bundle_fd, const char *branch, uint64_t max_bytes, char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_reference_freep) git_reference *existing = NULL, *ref = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        _cleanup_free_ char *buf = NULL, *name = NULL;
        _cleanup_free_ BundleHeader *h = NULL;
        size_t n = 0;
        char *end = NULL;
        int valid = 0, r;

        assert(repo_path);
        assert(bundle_fd >= 0);

        ledger_library_init();
        if (max_bytes == 0)
                max_bytes = UINT64_MAX;

        if (isempty(branch) || asprintf(&name, "refs/heads/%s", branch) < 0 ||
            git_reference_name_is_valid(&valid, name) < 0 || !valid)
                return ledger_set_error(ret_error, -EINVAL, "Invalid branch name '%s'.", strempty(branch));

        if (git_repository_open_ext(&repo, repo_path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
                return ledger_set_error(ret_error, -ENOTDIR, "'%s' is not a git repository: %s", repo_path, ledger_git_message());

        /* Checked up front for a clear message; the final create is
         * exclusive too, so a branch made meanwhile is not overwritten. */
        if (git_reference_lookup(&existing, repo, name) == 0)
                return ledger_set_error(ret_error, -EEXIST, "Branch '%s' exists already in '%s', not overwriting it.", branch, repo_path);

        /* Read the header, keeping whatever of the pack came along with it. */
        buf = malloc(BUNDLE_HEADER_MAX + 1);
        h = calloc(1, sizeof(BundleHeader));
        if (!buf || !h)
                return -ENOMEM;
        while (!end) {
                if (n >= BUNDLE_HEADER_MAX)
                        return ledger_set_error(ret_error, -EBADMSG, "Bundle header too long.");
                ssize_t k = read(bundle_fd, buf + n, BUNDLE_HEADER_MAX - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return ledger_set_error(ret_error, -errno, "Cannot read the bundle: %m");
                }
                if (k == 0)
                        return ledger_set_error(ret_error, -EBADMSG, "Bundle truncated in its header.");
                n += (size_t) k;
                buf[n] = '\0';
                end = memmem(buf, n, "\n\n", 2);
                if (memchr(buf, '\0', end ? (size_t) (end - buf) : n))
                        return ledger_set_error(ret_error, -EBADMSG, "Not a git bundle.");
        }
        end[1] = '\0';
        char *pack = end + 2;
        size_t pack_n = n - (size_t) (pack - buf);

        r = ledger_bundle_header_parse(buf, h, ret_error);
        if (r < 0)
                return r;

        if (git_repository_odb(&odb, repo) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot open the objects of '%s': %s", repo_path, ledger_git_message());
        for (size_t i = 0; i < h->n_prereqs; i++)
                if (!git_odb_exists(odb, &h->prereqs[i])) {
                        char hex[GIT_OID_HEXSZ + 1];
                        git_oid_tostr(hex, sizeof(hex), &h->prereqs[i]);
                        return ledger_set_error(ret_error, -ENOENT,
                                                "'%s' lacks commit %s that the bundle builds on: fetch the task's base first.",
                                                repo_path, hex);
                }

        /* The pack goes through libgit2's indexer, which verifies every
         * object's checksum before anything becomes visible. */
        git_odb_writepack *wp = NULL;
        git_indexer_progress stats = { 0 };
        uint64_t seen = 0;
        if (git_odb_write_pack(&wp, odb, NULL, NULL) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot write into '%s': %s", repo_path, ledger_git_message());
        uint8_t pack_header[12];
        r = 0;
        for (;;) {
                if (pack_n > 0) {
                        /* SECURITY: libgit2's indexer allocates a table for as many
                         * objects as the pack's header claims, up to 2^32: the claim
                         * is checked before the indexer sees it. */
                        if (seen < sizeof(pack_header)) {
                                size_t k = MIN(pack_n, sizeof(pack_header) - (size_t) seen);
                                memcpy(pack_header + seen, pack, k);
                                if (seen + k == sizeof(pack_header)) {
                                        r = ledger_pack_header_check(pack_header, max_bytes, ret_error);
                                        if (r < 0)
                                                break;
                                }
                        }
                        seen += pack_n;
                        if (seen > max_bytes) {
                                r = ledger_set_error(ret_error, -EFBIG, "Bundle is bigger than the limit of %" PRIu64 " bytes.", max_bytes);
                                break;
                        }
                        if (wp->append(wp, pack, pack_n, &stats) < 0) {
                                r = ledger_set_error(ret_error, -EBADMSG, "Bundle's pack is corrupt: %s", ledger_git_message());
                                break;
                        }
                }
                ssize_t k = read(bundle_fd, buf, BUNDLE_HEADER_MAX);
                if (k < 0) {
                        if (errno == EINTR) {
                                pack_n = 0;
                                continue;
                        }
                        r = ledger_set_error(ret_error, -errno, "Cannot read the bundle: %m");
                        break;
                }
                if (k == 0)
                        break;
                pack = buf;
                pack_n = (size_t) k;
        }
        if (r >= 0 && wp->commit(wp, &stats) < 0)
                r = ledger_set_error(ret_error, -EBADMSG, "Bundle's pack is incomplete: %s", ledger_git_message());
        wp->free(wp);
        if (r < 0)
                return r;

        /* The new history must connect to what the repository has. */
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_(git_commit_freep) git_commit *tip = NULL;
        git_oid id;
        if (git_commit_lookup(&tip, repo, &h->tip) < 0 || git_revwalk_new(&w, repo) < 0 || git_revwalk_push(w, &h->tip) < 0)
                return ledger_set_error(ret_error, -EBADMSG, "Bundle does not contain its branch's commit.");
        for (size_t i = 0; i < h->n_prereqs; i++)
                if (git_revwalk_hide(w, &h->prereqs[i]) < 0)
                        return ledger_set_error(ret_error, -EBADMSG, "Cannot walk the bundle's history: %s", ledger_git_message());
        while ((r = git_revwalk_next(&id, w)) == 0)
                ;
        if (r != GIT_ITEROVER)
                return ledger_set_error(ret_error, -EBADMSG, "Bundle's history is incomplete: %s", ledger_git_message());

        r = git_reference_create(&ref, repo, name, &h->tip, 0, "agentfab: fetch");
        if (r == GIT_EEXISTS)
                return ledger_set_error(ret_error, -EEXIST, "Branch '%s' exists already in '%s', not overwriting it.", branch, repo_path);
        if (r < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot create branch '%s': %s", branch, ledger_git_message());
        return 0;
}

/* ---- a whole repository as a bundle (agentfabctl submit, agentfabd) ---- */

#define SOURCE_BUNDLE_BRANCH "agentfab-source"
#define SOURCE_BUNDLE_REF "refs/heads/" SOURCE_BUNDLE_BRANCH

int ledger_bundle_repository(const char *repo_path, const char *rev, int out_fd, char ret_tip[static 41], char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_object_freep) git_object *o = NULL, *c = NULL;
        _cleanup_(git_packbuilder_freep) git_packbuilder *pb = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_free_ char *header = NULL;
        char tip[GIT_OID_HEXSZ + 1];
        int r;

        assert(repo_path);
        assert(out_fd >= 0);

        ledger_library_init();
        if (!rev)
                rev = "HEAD";

        if (git_repository_open_ext(&repo, repo_path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
                return ledger_set_error(ret_error, -ENOTDIR, "'%s' is not a git repository: %s", repo_path, ledger_git_message());
        if (git_revparse_single(&o, repo, rev) < 0) {
                if (streq(rev, "HEAD") && git_repository_head_unborn(repo) == 1)
                        return ledger_set_error(ret_error, -ENOENT, "Repository '%s' has no commit yet: commit something "
                                                "first (or name an existing commit with --base).", repo_path);
                return ledger_set_error(ret_error, -ENOENT, "'%s' names no commit in '%s': %s", rev, repo_path, ledger_git_message());
        }
        if (git_object_peel(&c, o, GIT_OBJECT_COMMIT) < 0)
                return ledger_set_error(ret_error, -EMEDIUMTYPE, "'%s' in '%s' is not a commit.", rev, repo_path);
        git_oid_tostr(tip, sizeof(tip), git_object_id(c));

        if (git_revwalk_new(&w, repo) < 0 || git_revwalk_push(w, git_object_id(c)) < 0 ||
            git_packbuilder_new(&pb, repo) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot walk the history of '%s': %s", repo_path, ledger_git_message());
        (void) git_packbuilder_set_threads(pb, 1);
        if (git_packbuilder_insert_walk(pb, w) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot pack the history of '%s': %s", repo_path, ledger_git_message());

        if (asprintf(&header, "# v2 git bundle\n%s " SOURCE_BUNDLE_REF "\n\n", tip) < 0)
                return -ENOMEM;
        r = ledger_write_all(out_fd, header, strlen(header));
        if (r < 0)
                return ledger_set_error(ret_error, r, "Cannot write the bundle: %s", strerror(-r));
        if (git_packbuilder_foreach(pb, pack_write_cb, &out_fd) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot write the bundle: %s", ledger_git_message());

        memcpy(ret_tip, tip, sizeof(tip));
        return 0;
}

int ledger_create_from_bundle(int task_dir_fd, int bundle_fd, const char *branch, const LedgerOptions *o,
                              char **ret_error, Ledger **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_close_ int source_fd = -EBADF;
        git_repository_init_options io;
        char path[64], tip[GIT_OID_HEXSZ + 1];
        git_oid id;
        int r;

        assert(task_dir_fd >= 0);
        assert(bundle_fd >= 0);
        assert(ret);

        ledger_library_init();

        if (faccessat(task_dir_fd, "ledger.git", F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                return ledger_set_error(ret_error, -EEXIST, "The task directory already has a ledger.");

        /* The bundle is unpacked into a repository of our own first (only
         * libgit2's indexer reads the submitter's bytes), which is then the
         * source of an ordinary local ledger_create(), and goes. */
        (void) rm_rf_at(task_dir_fd, "source.git");
        if (mkdirat(task_dir_fd, "source.git", 0700) < 0)
                return ledger_set_error(ret_error, -errno, "Cannot make a directory for the bundle: %m");
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d/source.git", task_dir_fd);
        (void) git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT;
        if (git_repository_init_ext(&repo, path, &io) < 0)
                r = ledger_set_error(ret_error, -EIO, "Cannot make a repository for the bundle: %s", ledger_git_message());
        else
                r = ledger_import_bundle(path, bundle_fd, SOURCE_BUNDLE_BRANCH,
                                         o ? o->max_bytes : UINT64_MAX, ret_error);
        if (r == -ENOENT) {
                /* The repository it "lacks" them in is ours: say what is wrong with the bundle. */
                r = ledger_set_error(ret_error, -EBADMSG, "The bundle builds on commits it does not carry: "
                                     "it must hold the whole history of its branch.");
        }
        if (r >= 0 && git_reference_name_to_id(&id, repo, SOURCE_BUNDLE_REF) < 0)
                r = ledger_set_error(ret_error, -EBADMSG, "The bundle carries no branch.");
        if (r >= 0) {
                git_oid_tostr(tip, sizeof(tip), &id);
                source_fd = openat(task_dir_fd, "source.git", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (source_fd < 0)
                        r = ledger_set_error(ret_error, -errno, "Cannot open the bundle's repository: %m");
        }
        git_repository_free(TAKE_PTR(repo));
        if (r >= 0)
                r = ledger_create(task_dir_fd, NULL, source_fd, tip, branch, o, ret_error, ret);
        (void) rm_rf_at(task_dir_fd, "source.git");
        return r;
}

/* ---- push ---- */

typedef struct PushState {
        const char *token;
        unsigned attempts;
        char *rejected;
} PushState;

static int push_credentials_cb(git_credential **out, const char *url, const char *username_from_url,
                               unsigned int allowed_types, void *payload) {
        PushState *s = payload;

        /* One try: a wrong token must not loop. */
        if (!s->token || s->attempts++ > 0 || !(allowed_types & GIT_CREDENTIAL_USERPASS_PLAINTEXT))
                return GIT_PASSTHROUGH;
        return git_credential_userpass_plaintext_new(out, username_from_url ?: "x-access-token", s->token);
}

static int push_update_cb(const char *refname, const char *status, void *data) {
        PushState *s = data;

        if (status && !s->rejected)
                s->rejected = strdup(status);
        return 0;
}

static bool branch_pushable(const char *branch) {
        static const char *const refused[] = { "main", "master", "head", "default", "trunk", "develop", "release", "production" };

        if (!strneq(branch, "agentfab/", 9) || isempty(branch + 9))
                return false;
        /* Even below agentfab/, nothing that reads like a shared branch. */
        const char *last = strrchr(branch, '/') + 1;
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (strcasecmp(last, refused[i]) == 0)
                        return false;
        return true;
}

int ledger_push(Ledger *l, const char *url, const char *credential_token, char **ret_error) {
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        git_push_options po;
        (void) git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
        _cleanup_free_ char *spec = NULL;
        PushState s = { .token = credential_token };
        int r;

        assert(l);
        assert(url);

        if (!branch_pushable(l->branch))
                return ledger_set_error(ret_error, -EPERM, "Refusing to push branch '%s': only branches under agentfab/ are pushed.",
                                        l->branch);
        /* No "+": never a forced update. */
        if (asprintf(&spec, "%s:%s", l->ref, l->ref) < 0)
                return -ENOMEM;

        po.callbacks.credentials = push_credentials_cb;
        po.callbacks.push_update_reference = push_update_cb;
        po.callbacks.payload = &s;
        po.pb_parallelism = 1;

        if (git_remote_create_anonymous(&remote, l->repo, url) < 0)
                return ledger_set_error(ret_error, -EINVAL, "Invalid URL '%s': %s", url, ledger_git_message());

        char *specs[] = { spec };
        git_strarray refspecs = { specs, 1 };
        r = git_remote_push(remote, &refspecs, &po);
        if (r < 0) {
                free(s.rejected);
                return ledger_set_error(ret_error, ledger_git_errno(r), "Cannot push to '%s': %s", url, ledger_git_message());
        }
        if (s.rejected) {
                r = ledger_set_error(ret_error, -ESTALE, "'%s' refused branch '%s': %s", url, l->branch, s.rejected);
                free(s.rejected);
                return r;
        }
        return 0;
}
