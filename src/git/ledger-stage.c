/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
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

/* Staging: what a checkpoint records, found without reading the whole tree.
 *
 * The ledger's index (ledger.git/index, kept open in the Ledger) is a stat
 * cache of the workspace: for every recorded file its blob, mode and the
 * stat data it had when it was hashed. A stage compares the workspace's
 * stat data with it and hashes only files whose stat data moved, then makes
 * the tree from the index. Which files it looks at:
 *
 *   - the paths the watch (tree-watch.c, inotify on every directory the
 *     last scan read) says changed, after a command ran in the sandbox;
 *   - all of them (a "scan"): when the watch cannot say (see
 *     ledger_note_rescan()), after a reset, when the caller does not report
 *     changes (ledger_track_changes() off, the default), and whenever a
 *     reported path is odd (a .gitignore, a file that was a directory, a
 *     gitlink). A directory the watch names (made, renamed, made anew) is
 *     scanned alone. The scan
 *     (tree-scan.c) reads each directory with getdents64() on a directory fd opened
 *     relative to its parent (O_NOFOLLOW) and asks for the metadata of its
 *     entries with statx() relative to that fd, many at a time through
 *     io_uring: no path is ever looked up from the top, no symlink followed.
 *   - only the paths the file tools reported (ledger_note_path()), when
 *     nothing else can have changed the workspace since the last stage.
 *   - none, when nothing was reported since the last stage: the staged tree
 *     stands, so ledger_changes() and ledger_checkpoint() of one step
 *     commit exactly what was hashed for its change list.
 *
 * Racy files (git's "racily clean"): an entry is trusted only when the
 * file's last change is older than the stage that recorded it. A file
 * whose mtime or ctime is not older than the start of the scan that hashed
 * it could have changed again within the timestamp granularity without its
 * stat data moving; its entry is "smudged" (ctime nanoseconds set to a value
 * no clock gives) so that the next stage hashes it again. Entries written
 * at or after the index file's own mtime are hashed again as well (git's
 * rule, which also covers indexes written before smudging existed).
 *
 * A file that changes while it is hashed (its stat data before and after
 * the read differ, or it shrank) is tried again twice; if it still moves,
 * its entry stays what it was (the last version recorded, or absent) and
 * the next stage looks at it again: a checkpoint records one whole version
 * of every file, never a mix, and what it could not pin down shows up in
 * the next step. */

#define SCAN_DEPTH_MAX 128U
#define SCAN_ENTRIES_MAX 1000000U
#define NOTED_MAX 1024U
#define RING_ENTRIES 256U
/* The kernel's io-wq threads that run the ring's statx() calls, at most:
 * by default up to four a CPU, each as runnable as the daemon's event loop,
 * which then waits for a core (the slowest bus answers while a 100,000-file
 * tree was scanned, 100-290 ms on two CPUs at load 13). Two keep the
 * calls spread and leave room for the loop. */
#define RING_WORKERS_MAX 2U
#define HASH_ATTEMPTS 3U
#define SMUDGED_NSEC 1999999999U      /* > any tv_nsec: never matches */

static bool use_ring = true;
static bool use_watch = true;
static LedgerStageHook stage_hook = NULL;
static void *stage_hook_userdata = NULL;

void ledger_set_io_uring(bool b) {
        use_ring = b;
}

void ledger_set_watch(bool b) {
        use_watch = b;
}

const char *ledger_last_stage_kind(Ledger *l) {
        return l->last_stage_kind ?: "none";
}

void ledger_set_stage_hook(LedgerStageHook hook, void *userdata) {
        stage_hook = hook;
        stage_hook_userdata = userdata;
}

static int index_file_stat(Ledger *l, struct stat *ret) {
        const char *p = git_index_path(l->index);
        if (!p)
                return -ENOENT;
        return stat(p, ret) < 0 ? -errno : 0;
}

static bool same_file_version(const struct stat *a, const struct stat *b) {
        return a->st_ino == b->st_ino && a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* ---- what the caller reports ---- */

void ledger_track_changes(Ledger *l, bool track) {
        assert(l);
        /* Submodules' ledgers keep scanning: a ledger with submodules
         * scans anyway (see ledger_checkpoint()). */
        l->track = track;
        l->dirty_all = true;
        if (!track || !use_watch || l->n_subs > 0)
                l->watch = tree_watch_free(l->watch);
        else if (!l->watch) {
                /* None left (fs.inotify.max_user_instances): scans, as before. */
                int r = tree_watch_new(&l->watch);
                if (r < 0)
                        log_debug("Not watching the workspace (scanning it after each command): %s", strerror(-r));
        }
}

void ledger_note_all(Ledger *l) {
        if (!l)
                return;
        if (tree_watch_complete(l->watch))
                l->dirty_command = true;
        else
                l->dirty_all = true;
}

void ledger_note_rescan(Ledger *l) {
        if (l)
                l->dirty_all = true;
}

void ledger_note_path(Ledger *l, const char *path) {
        if (!l || l->dirty_all)
                return;
        /* Only plain relative paths are worth keeping; anything else is
         * looked for by a scan. */
        if (isempty(path) || path[0] == '/' || strlen(path) > PATH_MAX || l->n_dirty >= NOTED_MAX) {
                l->dirty_all = true;
                return;
        }
        char **t = realloc(l->dirty, (l->n_dirty + 1) * sizeof(char *));
        if (!t) {
                l->dirty_all = true;
                return;
        }
        l->dirty = t;
        l->dirty[l->n_dirty] = strdup(path);
        if (!l->dirty[l->n_dirty]) {
                l->dirty_all = true;
                return;
        }
        l->n_dirty++;
}

static void noted_clear(Ledger *l) {
        for (size_t i = 0; i < l->n_dirty; i++)
                free(l->dirty[i]);
        l->dirty = mfree_ptr(l->dirty);
        l->n_dirty = 0;
}

void ledger_stage_forget(Ledger *l) {
        /* The index itself stays: entries are checked against the
         * workspace by their stat data, whatever wrote them. */
        l->have_staged = false;
        l->dirty_all = true;
        noted_clear(l);
}

void ledger_stage_free(Ledger *l) {
        struct stat st;

        /* The stat data for the next time, unless someone else wrote the
         * file since we read it. */
        if (l->index && l->index_dirty && l->have_index_st && index_file_stat(l, &st) >= 0 &&
            same_file_version(&st, &l->index_st))
                (void) git_index_write(l->index);
        noted_clear(l);
        l->watch = tree_watch_free(l->watch);
        git_index_free(l->index);
        l->index = NULL;
        free(l->lines);
        l->lines = NULL;
        l->n_lines = 0;
}

/* ---- one stage ---- */

typedef struct Edit {
        char *path;
        git_index_entry entry;  /* mode 0: remove the entry */
        bool stat_only;         /* same blob and mode: the tree stays */
} Edit;

typedef struct Stage {
        Ledger *ledger;
        git_repository *repo;
        git_odb *odb;
        git_index *index;
        uint64_t max;
        struct timespec racy;   /* the index file's mtime: entries changed at or after it are hashed again */
        struct timespec start;  /* the scan's start: what changed at or after it is smudged */
        uint8_t *seen;          /* a bit per index position */
        size_t n_index;
        Edit *edits;
        size_t n_edits, n_alloc;
        unsigned hashed;
        uint64_t hash_usec;
        bool saw_gitlink;       /* a watch cannot see into their directories */
        char **error;
} Stage;

static void stage_done(Stage *s) {
        for (size_t i = 0; i < s->n_edits; i++)
                free(s->edits[i].path);
        free(s->edits);
        free(s->seen);
}

static bool ts_before(int64_t sec, uint32_t nsec, const struct timespec *t) {
        return sec < (int64_t) t->tv_sec || (sec == (int64_t) t->tv_sec && (long) nsec < t->tv_nsec);
}

static uint32_t stx_git_mode(const struct statx *x) {
        return S_ISLNK(x->stx_mode) ? GIT_FILEMODE_LINK :
               (x->stx_mode & 0100) ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
}

/* The entry still describes the file (what git calls "stat clean"), and it
 * was not racy when it was recorded. ctime is compared too: no one can set
 * it back, unlike mtime. */
bool ledger_entry_clean(const git_index_entry *e, const struct statx *x, const struct timespec *racy) {
        if (e->ctime.nanoseconds == SMUDGED_NSEC)
                return false;
        if (!(e->mode == stx_git_mode(x) && e->file_size == (uint32_t) x->stx_size && e->ino == (uint32_t) x->stx_ino &&
              e->mtime.seconds == (int32_t) x->stx_mtime.tv_sec && e->mtime.nanoseconds == x->stx_mtime.tv_nsec &&
              e->ctime.seconds == (int32_t) x->stx_ctime.tv_sec && e->ctime.nanoseconds == x->stx_ctime.tv_nsec))
                return false;
        return ts_before(x->stx_mtime.tv_sec, x->stx_mtime.tv_nsec, racy) &&
               ts_before(x->stx_ctime.tv_sec, x->stx_ctime.tv_nsec, racy);
}

static bool entry_clean(const Stage *s, const git_index_entry *e, const struct statx *x) {
        return ledger_entry_clean(e, x, &s->racy);
}

static int edit_add(Stage *s, const char *path, const git_index_entry *entry) {
        if (s->n_edits >= s->n_alloc) {
                size_t n = MAX(s->n_alloc * 2, (size_t) 64);
                Edit *t = realloc(s->edits, n * sizeof(Edit));
                if (!t)
                        return -ENOMEM;
                s->edits = t;
                s->n_alloc = n;
        }
        Edit *e = &s->edits[s->n_edits];
        *e = (Edit) { .path = strdup(path) };
        if (!e->path)
                return -ENOMEM;
        if (entry)
                e->entry = *entry;
        s->n_edits++;
        return 0;
}

void ledger_entry_set_stat(git_index_entry *entry, const struct stat *st) {
        entry->ctime.seconds = (int32_t) st->st_ctim.tv_sec;
        entry->ctime.nanoseconds = (uint32_t) st->st_ctim.tv_nsec;
        entry->mtime.seconds = (int32_t) st->st_mtim.tv_sec;
        entry->mtime.nanoseconds = (uint32_t) st->st_mtim.tv_nsec;
        entry->dev = (uint32_t) st->st_dev;
        entry->ino = (uint32_t) st->st_ino;
        entry->uid = (uint32_t) st->st_uid;
        entry->gid = (uint32_t) st->st_gid;
        entry->file_size = (uint32_t) st->st_size;
}

static bool same_version(const struct stat *a, const struct stat *b) {
        return a->st_size == b->st_size && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
               a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Streams size bytes of fd into a blob. -EBUSY: it shrank meanwhile. */
static int hash_fd(git_odb *odb, int fd, uint64_t size, git_oid *ret) {
        git_odb_stream *stream = NULL;
        char buf[64 * 1024];
        uint64_t left = size;
        off_t offset = 0;
        int r = 0;

        if (git_odb_open_wstream(&stream, odb, (git_object_size_t) size, GIT_OBJECT_BLOB) < 0)
                return -EIO;
        while (left > 0) {
                ssize_t k = pread(fd, buf, (size_t) MIN((uint64_t) sizeof(buf), left), offset);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (k == 0) {
                        r = -EBUSY;
                        break;
                }
                if (git_odb_stream_write(stream, buf, (size_t) k) < 0) {
                        r = -EIO;
                        break;
                }
                left -= (uint64_t) k;
                offset += k;
        }
        if (r >= 0 && git_odb_stream_finalize_write(ret, stream) < 0)
                r = -EIO;
        git_odb_stream_free(stream);
        return r;
}

static bool racy_now(const Stage *s, const struct stat *st) {
        return !ts_before(st->st_mtim.tv_sec, (uint32_t) st->st_mtim.tv_nsec, &s->start) ||
               !ts_before(st->st_ctim.tv_sec, (uint32_t) st->st_ctim.tv_nsec, &s->start);
}

/* Records one non-directory entry whose stat data moved (or that is new):
 * a symlink as a link, a regular file by its content. SECURITY: read
 * through dir_fd (opened without following symlinks, all the way down from
 * the workspace fd) with O_NOFOLLOW, never by path; O_NONBLOCK keeps a FIFO
 * swapped in from blocking us. No filters apply: content is stored as it
 * is, as checkout writes it back. */
static int stage_file(Stage *s, int dir_fd, const char *name, const char *path, const git_index_entry *old) {
        git_index_entry entry = {};
        struct stat before = {}, after = {};
        uint64_t t0 = trace_now_usec();
        int r;

        s->hashed++;
        for (unsigned attempt = 0;; attempt++) {
                if (attempt >= HASH_ATTEMPTS) {
                        /* Still moving: keep the entry as it was, and make sure the
                         * next stage looks again. */
                        if (s->ledger->track)
                                ledger_note_path(s->ledger, path);
                        if (old) {
                                git_index_entry keep = *old;
                                keep.ctime.nanoseconds = SMUDGED_NSEC;
                                r = edit_add(s, path, &keep);
                                if (r >= 0)
                                        s->edits[s->n_edits - 1].stat_only = true;
                        } else
                                r = 0;
                        goto finish;
                }

                if (fstatat(dir_fd, name, &before, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT) {
                                r = old ? edit_add(s, path, NULL) : 0;  /* Gone meanwhile. */
                                goto finish;
                        }
                        r = error_set(s->error, -errno, "Cannot look at '%s': %m", path);
                        goto finish;
                }

                if (S_ISLNK(before.st_mode)) {
                        char target[PATH_MAX + 1];

                        if (stage_hook)
                                stage_hook(path, stage_hook_userdata);
                        ssize_t n = readlinkat(dir_fd, name, target, sizeof(target) - 1);
                        if (n < 0) {
                                if (errno == EINVAL || errno == ENOENT)
                                        continue;       /* Replaced meanwhile. */
                                r = error_set(s->error, -errno, "Cannot read the symlink '%s': %m", path);
                                goto finish;
                        }
                        if (fstatat(dir_fd, name, &after, AT_SYMLINK_NOFOLLOW) < 0 || !same_version(&before, &after))
                                continue;
                        if (git_odb_write(&entry.id, s->odb, target, (size_t) n, GIT_OBJECT_BLOB) < 0) {
                                r = error_set(s->error, -EIO, "Cannot record '%s': %s", path, ledger_git_message());
                                goto finish;
                        }
                        entry.mode = GIT_FILEMODE_LINK;
                        after.st_size = n;
                        break;
                }

                if (S_ISDIR(before.st_mode)) {
                        /* A directory now: the scan (which stops here) goes there. */
                        r = -EAGAIN;
                        goto finish;
                }

                _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
                if (fd < 0) {
                        if (errno == ENOENT || errno == ELOOP)
                                continue;       /* Replaced meanwhile: look again. */
                        r = error_set(s->error, -errno, "Cannot open '%s' (did it change meanwhile?): %m", path);
                        goto finish;
                }
                if (fstat(fd, &before) < 0) {
                        r = -errno;
                        goto finish;
                }
                if (!S_ISREG(before.st_mode)) {
                        r = error_set(s->error, -EPERM,
                                             "'%s' is a special file (device, FIFO or socket) and cannot be checkpointed.", path);
                        goto finish;
                }
                if (s->max != UINT64_MAX && (uint64_t) before.st_size > s->max) {
                        r = error_set(s->error, -EFBIG,
                                             "'%s' is bigger than the limit of %" PRIu64 " bytes and cannot be checkpointed.",
                                             path, s->max);
                        goto finish;
                }
                if (stage_hook)
                        stage_hook(path, stage_hook_userdata);
                r = hash_fd(s->odb, fd, (uint64_t) before.st_size, &entry.id);
                if (r == -EBUSY)
                        continue;
                if (r < 0) {
                        r = error_set(s->error, r, "Cannot read '%s': %s", path,
                                             r == -EIO ? ledger_git_message() : strerror(-r));
                        goto finish;
                }
                if (fstat(fd, &after) < 0) {
                        r = -errno;
                        goto finish;
                }
                if (!same_version(&before, &after))
                        continue;
                entry.mode = (after.st_mode & 0100) ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
                break;
        }

        ledger_entry_set_stat(&entry, &after);
        if (racy_now(s, &after))
                entry.ctime.nanoseconds = SMUDGED_NSEC;
        r = edit_add(s, path, &entry);
        if (r >= 0 && old && old->mode == entry.mode && git_oid_equal(&old->id, &entry.id))
                s->edits[s->n_edits - 1].stat_only = true;
finish:
        s->hash_usec += trace_now_usec() - t0;
        return r;
}

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
                        return edit_add(s, path, &entry);
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
        return r != 0 ? r : !dir_only_tracked(s, sub);
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

        if (!S_ISLNK(x->stx_mode)) {
                if (!S_ISREG(x->stx_mode))
                        return error_set(s->error, -EPERM,
                                         "'%s' is a special file (device, FIFO or socket) and cannot be checkpointed.", path);
                if (s->max != UINT64_MAX && x->stx_size > s->max)
                        return error_set(s->error, -EFBIG,
                                         "'%s' is bigger than the limit of %" PRIu64 " bytes and cannot be checkpointed.",
                                         path, s->max);
        }
        if (e && entry_clean(s, e, x))
                return 0;

        int r = stage_file(s, d->fd, name, path, e);
        if (r == -EAGAIN) {     /* It became a directory meanwhile. */
                if (e && (r = edit_add(s, path, NULL)) < 0)
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

static int stage_scan(Stage *s) {
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
                r = edit_add(s, e->path, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- only what the tools reported ---- */

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
                r = edit_add(s, e->path, NULL);
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
                r = edit_add(s, e->path, NULL);
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
                r = edit_add(s, path, NULL);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* Looks at one reported path (a file the tools wrote, or what the watch
 * says changed). 1: done; 0: it needs a scan (anything but a plain file
 * or link below plain, untracked-as-a-file directories, a directory gone
 * or an ignored one created; and .gitignore, whose change may bring in
 * what was ignored). */
static int stage_noted(Stage *s, const char *noted) {
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
                if (streq(tok, "..") || strcasecmp(tok, ".git") == 0)
                        return 0;
                if (len > 0)
                        path[len++] = '/';
                memcpy(path + len, tok, strlen(tok));
                len += strlen(tok);
        }
        if (len == 0)
                return 0;
        path[len] = '\0';
        const char *base = strrchr(path, '/');
        if (strcasecmp(base ? base + 1 : path, ".gitignore") == 0)
                return 0;

        fd = openat(s->ledger->workspace_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
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
                        return errno == ENOENT ? stage_gone(s, path) : 0;
                safe_close(fd);
                fd = sub;
        }

        struct statx x;
        if (statx(fd, c, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, TREE_SCAN_STATX_MASK, &x) < 0) {
                return errno == ENOENT ? stage_gone(s, path) : 0;
        }
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
                if (e && (r = edit_add(s, path, NULL)) < 0)
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
        if (!e && untracked_ignored(s, path))
                return 1;
        if (!S_ISLNK(x.stx_mode)) {
                if (!S_ISREG(x.stx_mode))
                        return error_set(s->error, -EPERM,
                                                "'%s' is a special file (device, FIFO or socket) and cannot be checkpointed.", path);
                if (s->max != UINT64_MAX && x.stx_size > s->max)
                        return error_set(s->error, -EFBIG,
                                                "'%s' is bigger than the limit of %" PRIu64 " bytes and cannot be checkpointed.",
                                                path, s->max);
        }
        if (e && entry_clean(s, e, &x))
                return 1;
        r = stage_file(s, fd, c, path, e);
        if (r == -EAGAIN)
                return 0;
        return r < 0 ? r : 1;
}

/* ---- the stage ---- */

static int stage_apply(Stage *s) {
        /* Removals first: a file that became a directory (or the other way
         * round) must leave before what replaces it comes. */
        for (size_t i = 0; i < s->n_edits; i++)
                if (s->edits[i].entry.mode == 0 && git_index_remove(s->index, s->edits[i].path, 0) < 0 &&
                    git_index_get_bypath(s->index, s->edits[i].path, 0))
                        return error_set(s->error, -EIO, "Cannot drop '%s': %s", s->edits[i].path, ledger_git_message());
        for (size_t i = 0; i < s->n_edits; i++) {
                Edit *e = &s->edits[i];
                if (e->entry.mode == 0)
                        continue;
                e->entry.path = e->path;
                if (git_index_add(s->index, &e->entry) < 0)
                        return error_set(s->error, -EIO, "Cannot record '%s': %s", e->path, ledger_git_message());
        }
        return 0;
}

static int edit_path_cmp(const void *a, const void *b) {
        return strcmp(((const Edit *) a)->path, ((const Edit *) b)->path);
}

/* The new tree from the last one and the edits, writing only the trees on
 * their paths (git_index_write_tree() would read every tree of the
 * workspace back into the index's cache). -EXDEV: a file became a
 * directory or the other way round, which git_tree_create_updated() does
 * not do; the caller builds the tree from the index then. */
static int stage_tree_update(Stage *s, const git_oid *last, git_oid *ret) {
        _cleanup_(git_tree_freep) git_tree *baseline = NULL;
        _cleanup_free_ git_tree_update *u = NULL;
        size_t n = 0;

        if (s->n_edits == 0) {
                *ret = *last;
                return 0;
        }
        qsort(s->edits, s->n_edits, sizeof(Edit), edit_path_cmp);
        /* A path removed twice (below a directory that went, and on its
         * own): once. */
        size_t k = 0;
        for (size_t i = 0; i < s->n_edits; i++) {
                if (k > 0 && streq(s->edits[k - 1].path, s->edits[i].path) && s->edits[k - 1].entry.mode == 0 &&
                    s->edits[i].entry.mode == 0) {
                        free(s->edits[i].path);
                        continue;
                }
                s->edits[k++] = s->edits[i];
        }
        s->n_edits = k;
        for (size_t i = 0; i < s->n_edits; i++) {
                const char *p = s->edits[i].path;
                for (const char *slash = strchr(p, '/'); slash; slash = strchr(slash + 1, '/')) {
                        _cleanup_free_ char *dir = strndup(p, (size_t) (slash - p));
                        if (!dir)
                                return -ENOMEM;
                        Edit key = { .path = dir };
                        if (bsearch(&key, s->edits, s->n_edits, sizeof(Edit), edit_path_cmp))
                                return -EXDEV;
                }
        }

        u = calloc(MAX(s->n_edits, (size_t) 1), sizeof(git_tree_update));
        if (!u)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_edits; i++) {
                const Edit *e = &s->edits[i];
                if (e->stat_only)
                        continue;
                u[n++] = e->entry.mode == 0 ?
                        (git_tree_update) { .action = GIT_TREE_UPDATE_REMOVE, .path = e->path } :
                        (git_tree_update) { .action = GIT_TREE_UPDATE_UPSERT, .path = e->path, .id = e->entry.id,
                                            .filemode = (git_filemode_t) e->entry.mode };
        }
        if (n == 0) {
                *ret = *last;
                return 0;
        }
        if (git_tree_lookup(&baseline, s->repo, last) < 0)
                return -EXDEV;
        return git_tree_create_updated(ret, s->repo, baseline, n, u) < 0 ? -EXDEV : 0;
}

int ledger_index_refresh(Ledger *l, const struct timespec *now, struct timespec *ret_racy, char **ret_error) {
        struct stat ist = {};
        int ir;

        if (!l->index) {
                if (git_repository_index(&l->index, l->repo) < 0)
                        return error_set(ret_error, -EIO, "Cannot read the index: %s", ledger_git_message());
                l->have_staged = false;
        }
        /* The index is written when the ledger is freed (it is a cache: a
         * resume resets the workspace anyway). Someone else wrote it (a
         * reset, by another Ledger of this task): read it again, and trust
         * nothing staged before. */
        ir = index_file_stat(l, &ist);
        if (ir >= 0 && l->have_index_st && same_file_version(&ist, &l->index_st)) {
                /* Entries this Ledger recorded were smudged when they were racy. */
                *ret_racy = (struct timespec) { .tv_sec = INT64_MAX };
                return 0;
        }
        if (git_index_read(l->index, 1) < 0)
                return error_set(ret_error, -EIO, "Cannot read the index: %s", ledger_git_message());
        l->have_staged = false;
        l->index_dirty = false;
        l->index_st = ist;
        l->have_index_st = ir >= 0;
        /* Entries read from the file: git's rule (not older than the file:
         * hashed again). */
        *ret_racy = ir >= 0 ? ist.st_mtim : *now;
        if (ts_before(now->tv_sec, (uint32_t) now->tv_nsec, ret_racy))
                *ret_racy = *now;
        return 1;
}

int ledger_stage(Ledger *l, bool full, char **ret_error) {
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        struct timespec start, racy;
        uint64_t t0 = TRACE_BEGIN();
        int r;

        assert(l);

        (void) clock_gettime(CLOCK_REALTIME_COARSE, &start);
        r = ledger_index_refresh(l, &start, &racy, ret_error);
        if (r < 0)
                return r;

        bool need_scan = full || !l->track || !l->have_staged || l->dirty_all;
        bool command = l->dirty_command;
        l->dirty_command = false;
        _cleanup_strv_free_ char **changed = NULL;
        size_t n_changed = 0;
        if (!need_scan && command && tree_watch_changes(l->watch, &changed, &n_changed) < 0)
                need_scan = true;       /* The watch lost track: a scan, which watches anew. */
        if (!need_scan && l->n_dirty == 0 && n_changed == 0) {
                l->last_stage_kind = command ? "watch" : "none";
                return 0;       /* Nothing changed since the last stage: it stands. */
        }

        if (git_repository_odb(&odb, l->repo) < 0)
                return error_set(ret_error, -EIO, "Cannot open the ledger's objects: %s", ledger_git_message());

        Stage s = { .ledger = l, .repo = l->repo, .odb = odb, .index = l->index, .max = l->max_bytes, .error = ret_error,
                    .start = start, .racy = racy };

        /* Taken over: what the stage itself notes (a file still moving) is
         * for the next one. */
        char **noted = TAKE_PTR(l->dirty);
        size_t n_noted = l->n_dirty;
        l->n_dirty = 0;
        l->dirty_all = false;
        r = 0;
        for (size_t i = 0; !need_scan && r >= 0 && i < n_noted; i++) {
                r = stage_noted(&s, noted[i]);
                need_scan = r == 0;
        }
        for (size_t i = 0; !need_scan && r >= 0 && i < n_changed; i++) {
                r = stage_noted(&s, changed[i]);
                need_scan = r == 0;
        }
        for (size_t i = 0; i < n_noted; i++)
                free(noted[i]);
        free(noted);
        if (need_scan && r >= 0) {
                /* Start again, with everything. */
                for (size_t i = 0; i < s.n_edits; i++)
                        free(s.edits[i].path);
                s.n_edits = 0;
                r = stage_scan(&s);
        }
        uint64_t t1 = TRACE_BEGIN();
        l->last_stage_kind = need_scan ? "scan" : command ? "watch" : "noted";
        TRACE_END(l->last_stage_kind, t0);
        if (t0 != 0 && s.hashed > 0)
                trace_add("hash", s.hash_usec);
        if (r < 0) {
                /* Nothing was applied: the index is as it was. */
                stage_done(&s);
                ledger_stage_forget(l);
                return ret_error && *ret_error ? r : error_set(ret_error, r, "Cannot scan the workspace: %s", strerror(-r));
        }

        git_oid tree;
        r = l->have_staged ? stage_tree_update(&s, &l->staged_tree, &tree) : -EXDEV;
        if (r == -ENOMEM) {
                stage_done(&s);
                ledger_stage_forget(l);
                return error_set(ret_error, r, "Out of memory.");
        }
        bool from_index = r < 0;
        r = stage_apply(&s);
        if (r >= 0 && s.n_edits > 0)
                l->index_dirty = true;
        if (r >= 0 && from_index && git_index_write_tree(&tree, l->index) < 0)
                r = error_set(ret_error, -EIO, "Cannot record the workspace: %s", ledger_git_message());
        stage_done(&s);
        if (r < 0) {
                /* Half applied: start again from the file. */
                (void) git_index_read(l->index, 1);
                l->index_dirty = false;
                ledger_stage_forget(l);
                return r;
        }
        TRACE_END("tree", t1);
        l->staged_tree = tree;
        l->have_staged = true;
        return 0;
}
