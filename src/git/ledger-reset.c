/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs-util.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"
#include "tree-scan.h"
#include "tree-watch.h"

/* A reset: the workspace back to a checkpoint, exactly (nothing untracked
 * or ignored left, nothing named .git), its stat index with it, and the
 * branch's tip moved back. The sandbox must not run meanwhile.
 *
 * The usual way goes by the stat index (ledger-stage.c): one walk of the
 * tree (tree-scan.c) removes what the checkpoint does not have, keeps every
 * file whose stat data say it still holds the checkpoint's blob, and only
 * the rest is written. A reset where nothing changed costs a walk, one
 * where a step rewrote 1,000 files those 1,000 files. With submodules, or
 * when the walk fails, libgit2's checkout of the whole tree does it. */

#define SCAN_DEPTH_MAX 128
#define RESET_ENTRIES_MAX 1000000U
#define RESET_RING_ENTRIES 256U
#define RESET_RING_WORKERS_MAX 2U

/* Removes every symlink below dir_fd that target does not have as a symlink
 * at the same place, without following any. */
static int remove_foreign_symlinks(Ledger *l, int dir_fd, git_tree *target, git_index *index, const char *prefix, unsigned depth) {
        if (depth > SCAN_DEPTH_MAX)
                return -ELOOP;

        DIR *d = xopendirat(dir_fd, ".", 0);
        if (!d)
                return -errno;

        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                _cleanup_free_ char *path = NULL;
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (asprintf(&path, "%s%s", prefix, de->d_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                /* SECURITY: nothing named .git is ever tracked, and libgit2's
                 * checkout follows one (a "gitdir:" file, a FIFO even) when it
                 * looks at what it takes for a submodule: it goes first. */
                if (strcasecmp(de->d_name, ".git") == 0) {
                        r = S_ISDIR(st.st_mode) ? rm_rf_at(dirfd(d), de->d_name) :
                            unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT ? -errno : 0;
                        continue;
                }
                if (S_ISLNK(st.st_mode)) {
                        git_tree_entry *e = NULL;
                        bool keep = git_tree_entry_bypath(&e, target, path) == 0 &&
                                    git_tree_entry_filemode(e) == GIT_FILEMODE_LINK;
                        git_tree_entry_free(e);
                        if (keep)
                                continue;
                        if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
                                r = -errno;
                        /* Gone from the baseline too: libgit2 trips over a
                         * baseline link that is missing from the work tree. */
                        (void) git_index_remove(index, path, 0);
                        continue;
                }
                if (!S_ISDIR(st.st_mode))
                        continue;
                /* A fetched submodule's links are its own reset's business. */
                if (ledger_submodule_by_path(l, path))
                        continue;
                _cleanup_free_ char *dir = NULL;
                if (asprintf(&dir, "%s/", path) < 0) {
                        r = -ENOMEM;
                        break;
                }
                _cleanup_close_ int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (sub >= 0)
                        r = remove_foreign_symlinks(l, sub, target, index, dir, depth + 1);
        }
        closedir(d);
        return r;
}

/* Opens path below dir_fd as a directory, making what is missing of it;
 * never through a symlink. */
static int open_or_make_dir(int dir_fd, const char *path) {
        int fd = ledger_open_beneath_dir(dir_fd, path);
        if (fd != -ENOENT)
                return fd;

        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        _cleanup_close_ int cur = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return -errno;
        for (char *c = p, *next; c; c = next) {
                next = strchr(c, '/');
                if (next)
                        *next++ = '\0';
                if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST)
                        return -errno;
                int n = openat(cur, c, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (n < 0)
                        return -errno;
                safe_close(cur);
                cur = n;
        }
        return TAKE_FD(cur);
}

typedef struct GitlinkReset {
        Ledger *ledger;
        int error;
} GitlinkReset;

/* Empties the directory of a gitlink that was not fetched: what the task
 * left there is untracked, and goes like any untracked file. */
static int clear_unfetched_cb(const char *root, const git_tree_entry *e, void *userdata) {
        GitlinkReset *g = userdata;
        _cleanup_free_ char *path = NULL;

        if (git_tree_entry_filemode(e) != GIT_FILEMODE_COMMIT)
                return 0;
        if (asprintf(&path, "%s%s", root, git_tree_entry_name(e)) < 0) {
                g->error = -ENOMEM;
                return -1;
        }
        if (ledger_submodule_by_path(g->ledger, path))
                return 0;
        _cleanup_close_ int fd = ledger_open_beneath_dir(g->ledger->workspace_fd, path);
        if (fd < 0)
                return 0;
        DIR *d = xopendirat(fd, ".", 0);
        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir(d));)
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && rm_rf_at(fd, de->d_name) < 0 && g->error == 0)
                        g->error = -EIO;
        closedir(d);
        return 0;
}

/* After the superproject's checkout: every fetched submodule back at the
 * gitlink of the target, the directories of the others empty. */
static int reset_gitlinks(Ledger *l, git_tree *tree) {
        GitlinkReset g = { .ledger = l };
        int r;

        if (git_tree_walk(tree, GIT_TREEWALK_PRE, clear_unfetched_cb, &g) < 0 && g.error == 0)
                g.error = -EIO;
        if (g.error < 0)
                return log_debug_errno(g.error, "Cannot empty the directories of submodules that were not fetched: %m");

        for (size_t i = 0; i < l->n_subs; i++) {
                LedgerSubmodule *s = &l->subs[i];
                git_tree_entry *e = NULL;
                char hex[GIT_OID_HEXSZ + 1];

                if (git_tree_entry_bypath(&e, tree, s->path) < 0)
                        continue;       /* Not in the target: nothing to restore. */
                bool gitlink = git_tree_entry_filemode(e) == GIT_FILEMODE_COMMIT;
                git_oid_tostr(hex, sizeof(hex), git_tree_entry_id(e));
                git_tree_entry_free(e);
                if (!gitlink)
                        continue;

                int fd = open_or_make_dir(l->workspace_fd, s->path);
                if (fd < 0)
                        return log_debug_errno(fd, "Cannot make the directory of submodule '%s': %m", s->path);
                safe_close(fd);
                r = ledger_submodule_attach(l, s);
                if (r >= 0)
                        r = ledger_reset(s->ledger, hex);
                if (r < 0)
                        return log_debug_errno(r, "Cannot reset submodule '%s' to %s: %m", s->path, hex);
        }
        return 0;
}

typedef struct FastReset {
        Ledger *ledger;
        git_index *want;        /* the checkpoint's tree */
        size_t n_want;
        uint8_t *seen;          /* a bit per position in want: it stands as it should */
        struct timespec racy;
        unsigned removed;
} FastReset;

static int fast_dir(TreeScan *scan, TreeScanDir *parent, TreeScanDir *sub, const char *path, void *userdata) {
        FastReset *f = userdata;

        int r = ledger_index_has_dir(f->want, path);
        if (r != 0)
                return r;
        /* Not in the checkpoint: goes whole, without a look inside. */
        f->removed++;
        return rm_rf_at(parent->fd, sub->name);
}

static int fast_entry(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path, const struct statx *x,
                      void *userdata) {
        FastReset *f = userdata;
        size_t pos;

        if (git_index_find(&pos, f->want, path) == 0) {
                const git_index_entry *w = git_index_get_byindex(f->want, pos);
                const git_index_entry *c = git_index_get_bypath(f->ledger->index, path, 0);

                /* Its stat data say it holds the checkpoint's blob. */
                if (w && c && c->mode == w->mode && git_oid_equal(&c->id, &w->id) &&
                    ledger_entry_clean(c, x, &f->racy)) {
                        f->seen[pos / 8] |= (uint8_t) (1U << (pos % 8));
                        return 0;
                }
        }
        /* Not the checkpoint's: written again after the walk, if it has it. */
        f->removed++;
        int r = RET_NERRNO(unlinkat(dir->fd, name, 0));
        /* A directory of ours that a command made read-only. */
        if (r == -EACCES && owner_access_restore_fd(dir->fd) > 0)
                r = RET_NERRNO(unlinkat(dir->fd, name, 0));
        return r == -ENOENT ? 0 : r;
}

/* SECURITY: libgit2 follows a .git it finds (a "gitdir:" file, a FIFO
 * even) when it looks at what it takes for a submodule; nothing named .git
 * is ever tracked. */
/* Before a directory the checkpoint has is read: the watch (the next
 * stage's) sees what changes in it from now on. */
static int fast_dir_opened(TreeScan *scan, TreeScanDir *dir, void *userdata) {
        FastReset *f = userdata;

        (void) tree_watch_add(f->ledger->watch, dir->fd, dir->path);
        return 0;
}

static int fast_git_entry(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path, void *userdata) {
        FastReset *f = userdata;

        f->removed++;
        return rm_rf_at(dir->fd, name);
}

/* Writes one entry of the checkpoint into the directory dir_fd (nothing
 * stands there now) and records its stat data in *entry. */
static int fast_write(FastReset *f, int dir_fd, const char *name, git_index_entry *entry) {
        _cleanup_(git_blob_freep) git_blob *blob = NULL;
        struct stat st;

        if (git_blob_lookup(&blob, f->ledger->repo, &entry->id) < 0)
                return -EBADMSG;
        const char *data = git_blob_rawcontent(blob);
        size_t size = (size_t) git_blob_rawsize(blob);

        if (entry->mode == GIT_FILEMODE_LINK) {
                _cleanup_free_ char *target = strndup(data, size);
                if (!target)
                        return -ENOMEM;
                if (strlen(target) != size)
                        return -EBADMSG;        /* A NUL in a link's target. */
                int r = RET_NERRNO(symlinkat(target, dir_fd, name));
                if (r == -EACCES && owner_access_restore_fd(dir_fd) > 0)
                        r = RET_NERRNO(symlinkat(target, dir_fd, name));
                if (r < 0)
                        return r;
                if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
        } else {
                /* The mode as git's checkout makes it, less the umask. */
                mode_t mode = entry->mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0777 : 0666;
                _cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd < 0 && errno == EACCES && owner_access_restore_fd(dir_fd) > 0)
                        fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd < 0)
                        return -errno;
                int r = ledger_write_all(fd, data, size);
                if (r < 0)
                        return r;
                if (fstat(fd, &st) < 0)
                        return -errno;
        }
        ledger_entry_set_stat(entry, &st);
        return 0;
}

/* Writes what the walk did not find as it should be. The index is sorted:
 * entries of one directory come one after the other, and its fd is kept
 * while they do. */
static int fast_write_missing(FastReset *f, git_index_entry **ret, size_t *ret_n) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        git_index_entry *written = NULL;
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < f->n_want; i++) {
                if (f->seen[i / 8] & (1U << (i % 8)))
                        continue;
                const git_index_entry *w = git_index_get_byindex(f->want, i);
                if (!w)
                        continue;
                const char *slash = strrchr(w->path, '/');
                size_t len = slash ? (size_t) (slash - w->path) : 0;
                if (!dir || strlen(dir) != len || !strneq(dir, w->path, len)) {
                        free(dir);
                        dir = strndup(w->path, len);
                        if (!dir) {
                                r = -ENOMEM;
                                break;
                        }
                        safe_close(dir_fd);
                        dir_fd = len == 0 ? fcntl(f->ledger->workspace_fd, F_DUPFD_CLOEXEC, 3) :
                                            open_or_make_dir(f->ledger->workspace_fd, dir);
                        if (dir_fd < 0) {
                                r = len == 0 ? -errno : dir_fd;
                                break;
                        }
                }
                if ((n & 63) == 0) {
                        git_index_entry *t = realloc(written, (n + 64) * sizeof(git_index_entry));
                        if (!t) {
                                r = -ENOMEM;
                                break;
                        }
                        written = t;
                }
                written[n] = *w;
                r = fast_write(f, dir_fd, slash ? slash + 1 : w->path, &written[n]);
                if (r >= 0)
                        n++;
        }
        *ret = written;         /* their paths are want's: valid while it is */
        *ret_n = n;
        return r;
}

/* Every component a plain name: not empty, not "." or "..", not .git in
 * any case. */
static bool reset_path_ok(const char *path) {
        for (const char *p = path;;) {
                size_t n = strcspn(p, "/");
                if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && strneq(p, "..", 2)) ||
                    (n == 4 && strncasecmp(p, ".git", 4) == 0))
                        return false;
                if (!p[n])
                        return true;
                p += n + 1;
        }
}

/* -EOPNOTSUPP: the checkpoint has gitlinks or odd paths; the way by
 * checkout handles them. */
static int reset_fast(Ledger *l, git_tree *tree) {
        static const TreeScanOps ops = { .dir = fast_dir, .entry = fast_entry, .git_entry = fast_git_entry };
        static const TreeScanOps ops_watch = { .dir = fast_dir, .entry = fast_entry, .git_entry = fast_git_entry,
                                               .dir_opened = fast_dir_opened };
        static const TreeScanLimits limits = {
                .depth_max = SCAN_DEPTH_MAX,
                .entries_max = RESET_ENTRIES_MAX,
                .ring_entries = RESET_RING_ENTRIES,
                .ring_workers_max = RESET_RING_WORKERS_MAX,
        };
        _cleanup_(git_index_freep) git_index *want = NULL;
        _cleanup_free_ char *error = NULL;
        _cleanup_free_ uint8_t *seen = NULL;
        _cleanup_free_ git_index_entry *written = NULL;
        size_t n_written = 0;
        struct timespec now;
        uint64_t t0 = TRACE_BEGIN();
        int r;

        if (l->n_subs > 0)
                return -EOPNOTSUPP;
        if (git_index_new(&want) < 0 || git_index_read_tree(want, tree) < 0)
                return -EIO;
        FastReset f = { .ledger = l, .want = want, .n_want = git_index_entrycount(want) };
        for (size_t i = 0; i < f.n_want; i++) {
                const git_index_entry *e = git_index_get_byindex(want, i);
                if (!e)
                        return -EIO;
                /* SECURITY: the checkpoint comes from an imported
                 * repository; a path libgit2's checkout would refuse (a
                 * .git, "..") goes there, and is refused there. */
                if (e->mode == GIT_FILEMODE_COMMIT || !reset_path_ok(e->path))
                        return -EOPNOTSUPP;
        }
        (void) clock_gettime(CLOCK_REALTIME_COARSE, &now);
        r = ledger_index_refresh(l, &now, &f.racy, &error);
        if (r < 0)
                return r;
        seen = calloc(f.n_want / 8 + 1, 1);
        if (!seen)
                return -ENOMEM;
        f.seen = seen;
        TRACE_END("reset_index", t0);

        t0 = TRACE_BEGIN();
        if (l->watch)
                tree_watch_walk_begin(l->watch);
        r = tree_scan_run(l->workspace_fd, true, &limits, l->watch ? &ops_watch : &ops, &f, &error);
        TRACE_END("reset_walk", t0);
        if (r < 0)
                return log_debug_errno(r, "Cannot walk the workspace: %s", error ?: strerror(-r));
        if (l->watch)
                tree_watch_walk_done(l->watch);

        t0 = TRACE_BEGIN();
        r = fast_write_missing(&f, &written, &n_written);
        TRACE_END("reset_write", t0);
        if (r < 0)
                return log_debug_errno(r, "Cannot write the checkpoint's files: %m");

        /* The index: the checkpoint's tree, the stat data kept where the
         * entry is the same (libgit2 keeps them), fresh for what was
         * written. Its file is newer than the ledger's copy of it: the next
         * stage reads it again, and hashes anything that changed in the
         * same tick as it was written (git's racy rule). */
        t0 = TRACE_BEGIN();
        if (git_index_read_tree(l->index, tree) < 0)
                return -EIO;
        /* git's racy rule: what was written in the clock's last tick
         * could change again unseen by its stat data. */
        (void) clock_gettime(CLOCK_REALTIME_COARSE, &now);
        for (size_t i = 0; i < n_written; i++) {
                ledger_entry_smudge_racy(&written[i], &now);
                if (git_index_add(l->index, &written[i]) < 0)
                        return -EIO;
        }
        if (git_index_write(l->index) < 0)
                return log_debug_errno(-EIO, "Cannot write the index: %s", ledger_git_message());
        ledger_stage_take_reset(l, git_tree_id(tree));
        TRACE_END("reset_index", t0);
        log_debug("Reset by the stat index: %u removed, %zu written, %zu kept.", f.removed, n_written,
                  f.n_want - n_written);
        return 0;
}

/* The whole tree checked out by libgit2. */
static int reset_checkout(Ledger *l, git_tree *tree, git_tree *tip_tree) {
        _cleanup_(git_index_freep) git_index *index = NULL;
        uint64_t t0 = TRACE_BEGIN();
        int r;

        /* Start from the index of the tip, so that whatever a failed
         * checkpoint staged counts as untracked and goes too. */
        if (git_repository_index(&index, l->repo) < 0 || git_index_read_tree(index, tip_tree) < 0 || git_index_write(index) < 0)
                return log_debug_errno(-EIO, "Cannot reset the index: %s", ledger_git_message());
        TRACE_END("reset_index", t0);

        /* SECURITY: libgit2's checkout writes through a symlink that stands
         * where the target has a directory (it wrote deep/er/f.txt into the
         * link's target in our test). So every symlink the target does not
         * have goes first: they would go anyway, and a symlink the target
         * has cannot stand where the target has a directory. */
        t0 = TRACE_BEGIN();
        r = remove_foreign_symlinks(l, l->workspace_fd, tree, index, "", 0);
        if (r < 0)
                return log_debug_errno(r, "Cannot clear symlinks from the workspace: %m");
        if (git_index_write(index) < 0)
                return log_debug_errno(-EIO, "Cannot write the index: %s", ledger_git_message());
        TRACE_END("reset_symlinks", t0);

        t0 = TRACE_BEGIN();
        git_checkout_options co;
        (void) git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
        co.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_REMOVE_UNTRACKED | GIT_CHECKOUT_REMOVE_IGNORED;
        co.disable_filters = 1;
        co.dir_mode = 0755;
        co.baseline_index = index;
        if (git_checkout_tree(l->repo, (git_object *) tree, &co) < 0)
                return log_debug_errno(-EIO, "Checkout failed: %s", ledger_git_message());
        TRACE_END("reset_checkout", t0);

        t0 = TRACE_BEGIN();
        if (git_index_read_tree(index, tree) < 0 || git_index_write(index) < 0)
                return log_debug_errno(-EIO, "Cannot write the index: %s", ledger_git_message());
        TRACE_END("reset_index", t0);

        return reset_gitlinks(l, tree);
}

int ledger_reset(Ledger *l, const char *commit) {
        _cleanup_(git_commit_freep) git_commit *c = NULL, *tip_commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL, *tip_tree = NULL;
        _cleanup_(git_reference_freep) git_reference *ref = NULL;
        git_oid id, tip;
        int r;

        assert(l);

        if (ledger_oid_from_hex(commit, &id) < 0)
                return -EINVAL;
        r = ledger_tip(l, &tip);
        if (r < 0)
                return r;

        /* Whatever was staged is void now; the next stage scans. */
        ledger_stage_forget(l);

        /* Only the branch's own history since base: never anything the
         * sandbox could not have produced. */
        if (!git_oid_equal(&id, &l->base) && !git_oid_equal(&id, &tip) &&
            !(git_graph_descendant_of(l->repo, &tip, &id) == 1 && git_graph_descendant_of(l->repo, &id, &l->base) == 1))
                return -ENXIO;

        if (git_commit_lookup(&c, l->repo, &id) < 0 || git_commit_tree(&tree, c) < 0 ||
            git_commit_lookup(&tip_commit, l->repo, &tip) < 0 || git_commit_tree(&tip_tree, tip_commit) < 0)
                return -EBADMSG;

        r = reset_fast(l, tree);
        if (r < 0) {
                /* Whatever the walk left, the checkout makes right. */
                if (r != -EOPNOTSUPP)
                        log_debug_errno(r, "Resetting by the stat index failed, checking out the whole tree: %m");
                r = reset_checkout(l, tree, tip_tree);
                if (r < 0)
                        return r;
        }

        if (!git_oid_equal(&id, &tip) &&
            git_reference_create_matching(&ref, l->repo, l->ref, &id, 1, &tip, "agentfab: reset") < 0)
                return -ESTALE;
        return 0;
}
