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
#include "ledger-stage.h"
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
 * rule, for entries read from the file, whose smudging this Ledger cannot
 * vouch for).
 *
 * A file that changes while it is hashed (its stat data before and after
 * the read differ, or it shrank) is tried again twice; if it still moves,
 * its entry stays what it was (the last version recorded, or absent) and
 * the next stage looks at it again: a checkpoint records one whole version
 * of every file, never a mix, and what it could not pin down shows up in
 * the next step. */

#define NOTED_MAX 1024U
#define HASH_ATTEMPTS 3U
#define SMUDGED_NSEC 1999999999U      /* > any tv_nsec: never matches */

static bool use_watch = true;
static LedgerStageHook stage_hook = NULL;
static void *stage_hook_userdata = NULL;

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

static bool ts_before(int64_t sec, uint32_t nsec, const struct timespec *t) {
        return sec < (int64_t) t->tv_sec || (sec == (int64_t) t->tv_sec && (long) nsec < t->tv_nsec);
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
                /* None left (fs.inotify.max_user_instances): a stage after a command scans. */
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

void ledger_stage_take_reset(Ledger *l, const git_oid *tree) {
        struct stat st;

        noted_clear(l);
        l->dirty_command = false;
        l->staged_tree = *tree;
        l->have_staged = true;
        /* The file as the reset wrote it: not read again, its entries are
         * this Ledger's own (smudged where racy). */
        l->have_index_st = index_file_stat(l, &st) >= 0;
        if (l->have_index_st)
                l->index_st = st;
        l->index_dirty = false;
        /* Without a complete watch a command's changes cannot be told
         * from the reset's: the next stage scans, as after any reset. */
        l->dirty_all = !l->have_index_st || !tree_watch_complete(l->watch);
}

void ledger_entry_smudge_racy(git_index_entry *e, const struct timespec *start) {
        if (!ts_before(e->mtime.seconds, e->mtime.nanoseconds, start) ||
            !ts_before(e->ctime.seconds, e->ctime.nanoseconds, start))
                e->ctime.nanoseconds = SMUDGED_NSEC;
}

int stage_path_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int stage_left_out(Stage *s, const char *path, const git_index_entry *old) {
        return stage_left_out_why(s, path, old, NULL);
}

int stage_left_out_why(Stage *s, const char *path, const git_index_entry *old, const char *why) {
        Ledger *l = s->ledger;
        int r;

        if (old && (r = stage_edit_add(s, path, NULL)) < 0)
                return r;
        /* Reported once. Past the bound of the known list a stage that
         * meets one reports it again: more, never less. */
        if (l->n_left_out_known > 0 &&
            bsearch(&path, l->left_out_known, l->n_left_out_known, sizeof(char *), stage_path_cmp))
                return 0;
        if (l->n_left_out_known < LEDGER_LEFT_OUT_KNOWN_MAX) {
                char **k = reallocarray(l->left_out_known, l->n_left_out_known + 1, sizeof(char *));
                if (!k)
                        return -ENOMEM;
                l->left_out_known = k;
                char *copy = strdup(path);
                if (!copy)
                        return -ENOMEM;
                size_t i = l->n_left_out_known;
                while (i > 0 && strcmp(k[i - 1], path) > 0) {
                        k[i] = k[i - 1];
                        i--;
                }
                k[i] = copy;
                l->n_left_out_known++;
        }
        if (l->n_left_out_new < LEDGER_LEFT_OUT_SHOWN) {
                char **n = reallocarray(l->left_out_new, l->n_left_out_new + 2, sizeof(char *));
                if (!n)
                        return -ENOMEM;
                l->left_out_new = n;
                if (why) {
                        if (asprintf(&n[l->n_left_out_new], "%s (%s)", path, why) < 0)
                                n[l->n_left_out_new] = NULL;
                } else
                        n[l->n_left_out_new] = strdup(path);
                if (!n[l->n_left_out_new])
                        return -ENOMEM;
                n[l->n_left_out_new + 1] = NULL;
        }
        l->n_left_out_new++;
        return 0;
}

bool stage_name_refused(const char *name) {
        const char *rest;

        if (strncasecmp(name, ".git", 4) == 0)
                rest = name + 4;
        else if (strncasecmp(name, "git~1", 5) == 0)
                rest = name + 5;
        else
                return false;
        if (*rest == '\\' || *rest == ':')
                return true;
        return rest[strspn(rest, ". ")] == '\0';
}

size_t ledger_take_left_out(Ledger *l, char ***ret_paths) {
        size_t n = l->n_left_out_new;

        *ret_paths = TAKE_PTR(l->left_out_new);
        l->n_left_out_new = 0;
        return n;
}

static void ledger_left_out_free(Ledger *l) {
        for (size_t i = 0; i < l->n_left_out_known; i++)
                free(l->left_out_known[i]);
        l->left_out_known = mfree_ptr(l->left_out_known);
        l->n_left_out_known = 0;
        strv_free(TAKE_PTR(l->left_out_new));
        l->n_left_out_new = 0;
}

void ledger_stage_free(Ledger *l) {
        struct stat st;

        ledger_leave_out_done(&l->leave_out);
        ledger_left_out_free(l);

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


static void stage_done(Stage *s) {
        for (size_t i = 0; i < s->n_edits; i++)
                free(s->edits[i].path);
        free(s->edits);
        free(s->seen);
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

bool stage_entry_clean(const Stage *s, const git_index_entry *e, const struct statx *x) {
        return ledger_entry_clean(e, x, &s->racy);
}

int stage_edit_add(Stage *s, const char *path, const git_index_entry *entry) {
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

/* Records one non-directory entry whose stat data moved (or that is new):
 * a symlink as a link, a regular file by its content. SECURITY: read
 * through dir_fd (opened without following symlinks, all the way down from
 * the workspace fd) with O_NOFOLLOW, never by path; O_NONBLOCK keeps a FIFO
 * swapped in from blocking us. No filters apply: content is stored as it
 * is, as checkout writes it back. */
int stage_file(Stage *s, int dir_fd, const char *name, const char *path, const git_index_entry *old) {
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
                                r = stage_edit_add(s, path, &keep);
                                if (r >= 0)
                                        s->edits[s->n_edits - 1].stat_only = true;
                        } else
                                r = 0;
                        goto finish;
                }

                if (fstatat(dir_fd, name, &before, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == EACCES && owner_access_restore_fd(dir_fd) > 0)
                                continue;       /* Made unsearchable: searchable again. */
                        if (errno == ENOENT) {
                                r = old ? stage_edit_add(s, path, NULL) : 0;  /* Gone meanwhile. */
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

                if (!S_ISREG(before.st_mode)) {
                        r = stage_left_out(s, path, old);
                        goto finish;
                }

                _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
                if (fd < 0) {
                        if (errno == ENOENT || errno == ELOOP)
                                continue;       /* Replaced meanwhile: look again. */
                        if (errno == EACCES && owner_access_restore(dir_fd, name) > 0)
                                continue;       /* Made unreadable (chmod 000): readable again. */
                        r = error_set(s->error, -errno, "Cannot open '%s' (did it change meanwhile?): %m", path);
                        goto finish;
                }
                if (fstat(fd, &before) < 0) {
                        r = -errno;
                        goto finish;
                }
                if (!S_ISREG(before.st_mode))
                        continue;       /* Replaced meanwhile: look again. */
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
        ledger_entry_smudge_racy(&entry, &s->start);
        r = stage_edit_add(s, path, &entry);
        if (r >= 0 && old && old->mode == entry.mode && git_oid_equal(&old->id, &entry.id))
                s->edits[s->n_edits - 1].stat_only = true;
finish:
        s->hash_usec += trace_now_usec() - t0;
        return r;
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

/* The index is a cache, written without an fsync (libgit2 1.5 has none for
 * it): after a power cut it may be torn. Then it goes, and is made again
 * from the branch's tip without stat data, so that every file is hashed
 * again once and the gitlinks (which the workspace does not show) stay. */
static int index_discard(Ledger *l) {
        _cleanup_(git_commit_freep) git_commit *tip = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        char path[PATH_MAX];
        git_oid id;
        int r;

        log_warning("The index of ledger '%s' cannot be read (%s), making it again.", l->branch, ledger_git_message());
        if (snprintf(path, sizeof(path), "%sindex", git_repository_path(l->repo)) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        if (!l->index && git_repository_index(&l->index, l->repo) < 0)
                return -EIO;
        r = ledger_tip(l, &id);
        if (r < 0)
                return r;
        /* Written, so that the file is there to be read as ever (libgit2
         * reads a missing one as empty). */
        if (git_commit_lookup(&tip, l->repo, &id) < 0 || git_commit_tree(&tree, tip) < 0 ||
            git_index_read_tree(l->index, tree) < 0 || git_index_write(l->index) < 0)
                return -EIO;
        return 0;
}

int ledger_index_refresh(Ledger *l, const struct timespec *now, struct timespec *ret_racy, char **ret_error) {
        struct stat ist = {};
        int ir;

        if (!l->index) {
                if (git_repository_index(&l->index, l->repo) < 0 && index_discard(l) < 0)
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
        if (git_index_read(l->index, 1) < 0) {
                if (index_discard(l) < 0)
                        return error_set(ret_error, -EIO, "Cannot read the index: %s", ledger_git_message());
                ir = index_file_stat(l, &ist);
        }
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
