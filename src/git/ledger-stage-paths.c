/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger-stage.h"
#include "log.h"
#include "string-util.h"
#include "tree-scan.h"
#include "tree-watch.h"

/* Which paths a stage looks at (see ledger-stage.c): every file's metadata
 * by a walk of the tree (tree-scan.c), which also watches each directory
 * it reads; a directory alone (made, renamed or made anew, as the watch
 * says); or one path the tools wrote or the watch named. */

#define SCAN_DEPTH_MAX 128U
#define SCAN_ENTRIES_MAX 1000000U
#define RING_ENTRIES 256U
/* The kernel's io-wq threads that run the ring's statx() calls, at most:
 * by default up to four a CPU, each as runnable as the daemon's event loop,
 * which then waits for a core and answers the bus late while a big tree is
 * scanned. Two keep the calls spread and leave room for the loop. */
#define RING_WORKERS_MAX 2U

static bool use_ring = true;

void ledger_set_io_uring(bool b) {
        use_ring = b;
}

/* ---- the scan ---- */

int ledger_index_has_dir(git_index *index, const char *path) {
        _cleanup_free_ char *prefix = NULL;
        size_t pos;

        if (asprintf(&prefix, "%s/", path) < 0)
                return -ENOMEM;
        return git_index_find_prefix(&pos, index, prefix) == 0;
}

/* The entry at path; mark: it stands in the workspace (not deleted). */
static const git_index_entry *index_lookup(Stage *s, const char *path, bool mark) {
        size_t pos;

        if (git_index_find(&pos, s->index, path) < 0)
                return NULL;
        if (mark && s->seen && pos < s->n_index)
                s->seen[pos / 8] |= (uint8_t) (1U << (pos % 8));
        return git_index_get_byindex(s->index, pos);
}

/* A gitlink's directory. A fetched submodule was checkpointed in its own
 * ledger already: the gitlink moves to its tip. The directory of one that
 * was not fetched must stay empty: whatever the task put there cannot be
 * recorded, and must not vanish without a word. */
static int stage_gitlink(Stage *s, int dir_fd, const char *name, const char *path, const git_index_entry *e) {
        LedgerSubmodule *sub = ledger_submodule_by_path(s->ledger, path);

        if (sub) {
                if (!sub->have_staged)
                        return error_set(s->error, -EBUSY, "Submodule '%s' changed while it was checkpointed.", path);
                if (!git_oid_equal(&e->id, &sub->staged)) {
                        git_index_entry entry = { .mode = GIT_FILEMODE_COMMIT, .id = sub->staged };
                        return stage_edit_add(s, path, &entry);
                }
                return 0;
        }

        DIR *d = xopendirat(dir_fd, name, O_NOFOLLOW);
        if (!d)
                return error_set(s->error, -errno, "Cannot open '%s': %m", path);
        int r = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..") || strcasecmp(de->d_name, ".git") == 0)
                        continue;
                r = error_set(s->error, -ENOTEMPTY,
                                     "'%s/%s' is inside '%s', a submodule that was not fetched: it cannot be checkpointed. "
                                     "Move it out of '%s' (or create the task with submodules).",
                                     path, de->d_name, path, path);
                break;
        }
        closedir(d);
        return r;
}

static bool path_ignored(Stage *s, const char *path) {
        int ignored = 0;
        return git_ignore_path_is_ignored(&ignored, s->repo, path) >= 0 && ignored;
}

/* Whether only tracked files count below d (d or a parent is ignored),
 * kept in the directory's mark. Asked only when an untracked entry shows
 * up: a tree without untracked files costs no lookup of ignore rules. */
static bool dir_only_tracked(Stage *s, TreeScanDir *d) {
        if (d->mark < 0)
                d->mark = (d->parent && dir_only_tracked(s, d->parent)) || (!isempty(d->path) && path_ignored(s, d->path));
        return d->mark > 0;
}

static int scan_dir(TreeScan *scan, TreeScanDir *parent, TreeScanDir *sub, const char *path, void *userdata) {
        Stage *s = userdata;
        const git_index_entry *e = index_lookup(s, path, false);
        int r;

        /* Deeper than a scan goes (counted from the top: a directory's
         * own scan starts lower): left out, as a path too long. */
        size_t depth = 1;
        for (const char *c = path; *c; c++)
                depth += *c == '/';
        if (stage_name_refused(sub->name) || strlen(path) >= LEDGER_PATH_MAX || depth > SCAN_DEPTH_MAX) {
                r = stage_left_out(s, path, NULL);
                return r < 0 ? r : 0;
        }

        /* A gitlink (a submodule of base). A file the index has here is
         * not marked: it is gone, a directory stands there now. */
        if (e && e->mode == GIT_FILEMODE_COMMIT) {
                s->saw_gitlink = true;
                (void) index_lookup(s, path, true);
                r = stage_gitlink(s, parent->fd, sub->name, path, e);
                return r < 0 ? r : 0;
        }

        /* Ignored and nothing tracked inside: not read at all. */
        r = ledger_index_has_dir(s->index, path);
        if (r != 0)
                return r;
        /* Build output nobody tracks: not read either, named once. */
        if (!dir_only_tracked(s, sub) && stage_build_output_dir(s, path)) {
                _cleanup_free_ char *d = NULL;
                if (asprintf(&d, "%s/", path) < 0)
                        return -ENOMEM;
                r = stage_left_out_why(s, d, NULL, "build output");
                return r < 0 ? r : 0;
        }
        return !dir_only_tracked(s, sub);
}

static int scan_entry(TreeScan *scan, TreeScanDir *d, const char *name, const char *path, const struct statx *x,
                      void *userdata) {
        Stage *s = userdata;

        /* A gitlink replaced by a file is recorded as what stands there:
         * its mode differs, so it is never clean. */
        const git_index_entry *e = index_lookup(s, path, true);

        /* An ignored file is recorded only if it is tracked already. */
        if (!e && (dir_only_tracked(s, d) || path_ignored(s, path)))
                return 0;
        if (stage_name_refused(name) || strlen(path) >= LEDGER_PATH_MAX)
                return stage_left_out(s, path, e);

        if (!S_ISLNK(x->stx_mode)) {
                if (!S_ISREG(x->stx_mode))
                        return stage_left_out(s, path, e);
                if (s->max != UINT64_MAX && x->stx_size > s->max)
                        return error_set(s->error, -EFBIG,
                                         "'%s' is bigger than the limit of %" PRIu64 " bytes and cannot be checkpointed.",
                                         path, s->max);
        }
        if (e && stage_entry_clean(s, e, x))
                return 0;
        int r = stage_leave_out(s, d->fd, name, path, e, x);
        if (r != 0)
                return r < 0 ? r : 0;

        r = stage_file(s, d->fd, name, path, e);
        if (r == -EAGAIN) {     /* It became a directory meanwhile. */
                if (e && (r = stage_edit_add(s, path, NULL)) < 0)
                        return r;
                return tree_scan_descend(scan, d, name, path);
        }
        return r;
}

static int scan_dir_opened(TreeScan *scan, TreeScanDir *d, void *userdata) {
        Stage *s = userdata;

        /* Before it is read: what changes from now on is an event. A
         * failure leaves the watch incomplete, and the next stage scans. */
        (void) tree_watch_add(s->ledger->watch, d->fd, d->path);
        return 0;
}

/* Walks the whole workspace (tree-scan.c) rather than using
 * git_index_add_all(): libgit2 stops at directories holding a .git (an
 * agent's "git init" or "cargo new") and refuses them, while their files
 * belong to the work like any other. Anything named .git is skipped. Below
 * an ignored directory only files the index has already count. */
static const TreeScanOps scan_ops = { .dir = scan_dir, .entry = scan_entry };
static const TreeScanOps scan_ops_watch = { .dir = scan_dir, .entry = scan_entry, .dir_opened = scan_dir_opened };
static const TreeScanLimits scan_limits = {
        .depth_max = SCAN_DEPTH_MAX,
        .entries_max = SCAN_ENTRIES_MAX,
        .ring_entries = RING_ENTRIES,
        .ring_workers_max = RING_WORKERS_MAX,
};

static int stage_seen_alloc(Stage *s) {
        if (s->seen)
                return 0;
        s->n_index = git_index_entrycount(s->index);
        s->seen = calloc(s->n_index / 8 + 1, 1);
        return s->seen ? 0 : -ENOMEM;
}

int stage_scan(Stage *s) {
        TreeWatch *w = s->ledger->watch;
        int r;

        free(s->seen);
        s->seen = NULL;
        r = stage_seen_alloc(s);
        if (r < 0)
                return r;

        if (w)
                tree_watch_walk_begin(w);
        r = tree_scan_run(s->ledger->workspace_fd, use_ring, &scan_limits, w ? &scan_ops_watch : &scan_ops, s, s->error);
        if (r < 0)
                return r;
        if (w) {
                tree_watch_walk_done(w);
                if (s->saw_gitlink)
                        tree_watch_invalidate(w);
        }

        /* Every entry the scan did not see is gone from the workspace. */
        for (size_t i = 0; i < s->n_index; i++) {
                if (s->seen[i / 8] & (1U << (i % 8)))
                        continue;
                const git_index_entry *e = git_index_get_byindex(s->index, i);
                if (!e)
                        continue;
                r = stage_edit_add(s, e->path, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- named paths: what the tools wrote, what the watch saw ---- */

/* Untracked path (a file, or a directory with a trailing slash): whether
 * it or a directory above it is ignored, i.e. it is not recorded. */
static bool untracked_ignored(Stage *s, char *path) {
        for (char *q = path; (q = strchr(q, '/')) && q[1]; q++) {
                char save = q[1];
                q[1] = '\0';
                bool ignored = path_ignored(s, path);
                q[1] = save;
                if (ignored)
                        return true;
        }
        return path_ignored(s, path);
}

/* path (a directory once) is gone: so is everything the index has below
 * it. 1: done; 0: a gitlink was there, a scan sorts that out. */
static int stage_gone_dir(Stage *s, const char *path) {
        _cleanup_free_ char *prefix = NULL;
        size_t pos, n = git_index_entrycount(s->index);
        int r;

        if (asprintf(&prefix, "%s/", path) < 0)
                return -ENOMEM;
        if (git_index_find_prefix(&pos, s->index, prefix) < 0)
                return 1;
        for (; pos < n; pos++) {
                const git_index_entry *e = git_index_get_byindex(s->index, pos);
                if (!e || strncmp(e->path, prefix, strlen(prefix)) != 0)
                        break;
                if (e->mode == GIT_FILEMODE_COMMIT)
                        return 0;
                r = stage_edit_add(s, e->path, NULL);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* The directory name in dir_fd, at path, is new or was renamed or made
 * anew: a scan of it alone (which watches it) records what is in it, and
 * what the index has below it and it does not hold is gone. */
static int stage_subtree(Stage *s, int dir_fd, const char *name, const char *path, int mark) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *prefix = NULL;
        TreeWatch *w = s->ledger->watch;
        size_t pos;
        int r;

        r = stage_seen_alloc(s);
        if (r < 0)
                return r;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return 0;       /* Replaced meanwhile: a scan. */
        s->saw_gitlink = false;
        r = tree_scan_run_at(fd, path, mark, use_ring, &scan_limits, w ? &scan_ops_watch : &scan_ops, s, s->error);
        if (r < 0)
                return r;
        if (s->saw_gitlink)
                return 0;       /* Its directory is not watched: a scan, and scans from then on. */

        if (asprintf(&prefix, "%s/", path) < 0)
                return -ENOMEM;
        if (git_index_find_prefix(&pos, s->index, prefix) < 0)
                return 1;
        for (; pos < s->n_index; pos++) {
                const git_index_entry *e = git_index_get_byindex(s->index, pos);
                if (!e || strncmp(e->path, prefix, strlen(prefix)) != 0)
                        break;
                if (s->seen[pos / 8] & (1U << (pos % 8)))
                        continue;
                r = stage_edit_add(s, e->path, NULL);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* path is gone, and everything below it. */
static int stage_gone(Stage *s, const char *path) {
        int r = stage_gone_dir(s, path);
        if (r <= 0)
                return r;
        if (git_index_get_bypath(s->index, path, 0)) {
                r = stage_edit_add(s, path, NULL);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* Looks at one reported path (a file the tools wrote, or what the watch
 * says changed). 1: done; 0: it needs a scan (anything but a plain file
 * or link below plain, untracked-as-a-file directories, a directory gone
 * or an ignored one created; and a .gitignore that came, went or holds
 * other rules now, which may bring in what was ignored). */
int stage_noted(Stage *s, const char *noted) {
        _cleanup_free_ char *path = NULL, *copy = NULL;
        _cleanup_close_ int fd = -EBADF;
        char *p, *c;
        size_t len = 0;
        int r;

        /* Normalized: no "", "." components; "..", .git: a scan decides. */
        path = malloc(strlen(noted) + 1);
        copy = strdup(noted);
        if (!path || !copy)
                return -ENOMEM;
        for (char *save = NULL, *tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
                if (streq(tok, "."))
                        continue;
                if (streq(tok, ".."))
                        return 0;
                /* Nothing named .git is recorded, nor anything in it. */
                if (strcasecmp(tok, ".git") == 0)
                        return 1;
                if (stage_name_refused(tok) || len + 1 + strlen(tok) >= LEDGER_PATH_MAX)
                        return 0;       /* A scan leaves it out, and says so. */
                if (len > 0)
                        path[len++] = '/';
                memcpy(path + len, tok, strlen(tok));
                len += strlen(tok);
        }
        if (len == 0)
                return 0;
        path[len] = '\0';
        const char *base = strrchr(path, '/');
        bool rules = strcasecmp(base ? base + 1 : path, ".gitignore") == 0;

        fd = openat(s->ledger->workspace_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == EACCES ? 0 : -errno;     /* A scan gives the top its permissions back. */
        for (c = path; (p = strchr(c, '/')); c = p + 1) {
                *p = '\0';
                /* A directory of the path that the index has as a file or a
                 * gitlink: a scan sorts that out. */
                if (git_index_get_bypath(s->index, path, 0)) {
                        *p = '/';
                        return 0;
                }
                int sub = openat(fd, c, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                *p = '/';
                if (sub < 0)
                        return errno == ENOENT && !rules ? stage_gone(s, path) : 0;
                safe_close(fd);
                fd = sub;
        }

        struct statx x;
        if (statx(fd, c, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, TREE_SCAN_STATX_MASK, &x) < 0) {
                return errno == ENOENT && !rules ? stage_gone(s, path) : 0;
        }
        if (S_ISDIR(x.stx_mode) && rules)
                return 0;
        if (S_ISDIR(x.stx_mode)) {
                /* A directory new, renamed or made anew (the watch says so),
                 * or the tools wrote a file that is one now. */
                const git_index_entry *e = git_index_get_bypath(s->index, path, 0);
                if (e && e->mode == GIT_FILEMODE_COMMIT)
                        return 0;
                int tracked = ledger_index_has_dir(s->index, path);
                if (tracked < 0)
                        return tracked;
                _cleanup_free_ char *dir = NULL;
                if (asprintf(&dir, "%s/", path) < 0)
                        return -ENOMEM;
                bool ignored = untracked_ignored(s, dir);
                /* Ignored, and nothing tracked below (a build's output):
                 * nothing in it is recorded. */
                if (!e && !tracked && ignored)
                        return 1;
                if (!e && !tracked && stage_build_output_dir(s, path)) {
                        r = stage_left_out_why(s, dir, NULL, "build output");
                        return r < 0 ? r : 1;
                }
                if (e && (r = stage_edit_add(s, path, NULL)) < 0)
                        return r;
                return stage_subtree(s, fd, c, path, ignored ? 1 : 0);
        }
        const git_index_entry *e = git_index_get_bypath(s->index, path, 0);
        if (e && e->mode == GIT_FILEMODE_COMMIT)
                return 0;
        /* A directory once (the watch reports its replacement by a file
         * or a link as one path): a scan drops what was below it. */
        if (!e) {
                r = ledger_index_has_dir(s->index, path);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        /* Untracked: not recorded if it or a directory above is ignored. */
        if (!e && !rules && untracked_ignored(s, path))
                return 1;
        if (!S_ISLNK(x.stx_mode)) {
                if (!S_ISREG(x.stx_mode)) {
                        r = stage_left_out(s, path, e);
                        return r < 0 ? r : 1;
                }
                if (s->max != UINT64_MAX && x.stx_size > s->max)
                        return error_set(s->error, -EFBIG,
                                                "'%s' is bigger than the limit of %" PRIu64 " bytes and cannot be checkpointed.",
                                                path, s->max);
        }
        if (e && stage_entry_clean(s, e, &x))
                return 1;
        r = stage_leave_out(s, fd, c, path, e, &x);
        if (r != 0)
                return r < 0 ? r : 1;
        size_t n_edits = s->n_edits;
        r = stage_file(s, fd, c, path, e);
        if (r == -EAGAIN)
                return 0;
        if (r < 0)
                return r;
        /* Rules written again as they were (a reset does that): nothing
         * else changes. */
        if (rules && !(e && s->n_edits == n_edits + 1 && s->edits[n_edits].stat_only))
                return 0;
        return 1;
}

