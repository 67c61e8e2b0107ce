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

/* The task's branch for people and the review: its diff, mbox and diffstat
 * against the base, with fetched submodules flattened into the superproject
 * so that a change inside one reads as a change of its files. */

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

typedef struct DiffText {
        FILE *f;
        size_t size, max;
        uint64_t total;            /* bytes of the whole patch */
        bool full;
} DiffText;

static int diff_text_line(const git_diff_delta *delta, const git_diff_hunk *hunk, const git_diff_line *line,
                          void *payload) {
        DiffText *t = payload;
        bool origin = IN_SET(line->origin, GIT_DIFF_LINE_CONTEXT, GIT_DIFF_LINE_ADDITION, GIT_DIFF_LINE_DELETION);
        size_t n = line->content_len + origin;

        (void) delta;
        (void) hunk;
        /* Counted to the end, kept while it fits: whole lines only. */
        t->total += n;
        if (t->full || t->size + n > t->max) {
                t->full = true;
                return 0;
        }
        if (origin)
                fputc(line->origin, t->f);
        fwrite(line->content, 1, line->content_len, t->f);
        t->size += n;
        return 0;
}

int ledger_review_diff(Ledger *l, size_t max, char **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        _cleanup_(git_diff_stats_freep) git_diff_stats *stats = NULL;
        _cleanup_git_buf_ git_buf stat = { 0 };
        _cleanup_free_ char *patch = NULL, *s = NULL;
        size_t patch_size = 0, size = 0;
        DiffText t = { .max = max };
        FILE *f;
        int r;

        assert(l);
        assert(ret);

        *ret = NULL;
        r = export_repo_open(l, &repo);
        if (r < 0)
                return r;
        r = diff_base_head(l, repo ?: l->repo, false, &diff);
        if (r < 0)
                return r;
        if (git_diff_num_deltas(diff) == 0)
                return 0;

        t.f = open_memstream(&patch, &patch_size);
        if (!t.f)
                return -ENOMEM;
        r = git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, diff_text_line, &t);
        if (fclose(t.f) != 0)
                return -ENOMEM;
        if (r < 0)
                return -EIO;
        /* Files are not always UTF-8; the model's conversation is JSON. */
        utf8_sanitize(patch, patch_size);
        if (!t.full) {
                *ret = TAKE_PTR(patch);
                return 0;
        }

        /* Too long: what it touches first, then its beginning. The
         * diffstat takes at most a quarter of max, and the patch what
         * is left of it. */
        if (git_diff_get_stats(&stats, diff) < 0 ||
            git_diff_stats_to_buf(&stat, stats, GIT_DIFF_STATS_FULL | GIT_DIFF_STATS_INCLUDE_SUMMARY, 80) < 0)
                return -EIO;
        size_t stat_size = MIN(stat.size, max / 4);
        while (stat_size > 0 && stat_size < stat.size && stat.ptr[stat_size - 1] != '\n')
                stat_size--;
        size_t keep = MIN(patch_size, max > stat_size ? max - stat_size : 0);
        while (keep > 0 && keep < patch_size && patch[keep - 1] != '\n')
                keep--;

        f = open_memstream(&s, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "[The diff is %" PRIu64 " bytes, more than the %zu shown: its diffstat%s, then its first %zu bytes.]\n",
                t.total, max, stat_size < stat.size ? " (cut)" : "", keep);
        fwrite(stat.ptr, 1, stat_size, f);
        fputc('\n', f);
        fwrite(patch, 1, keep, f);
        fprintf(f, "[... %" PRIu64 " bytes of the diff not shown: read the files, or run git diff on them.]\n",
                t.total - keep);
        if (fclose(f) != 0)
                return -ENOMEM;
        utf8_sanitize(s, size);
        *ret = TAKE_PTR(s);
        return 0;
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

