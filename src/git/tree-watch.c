/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "string-util.h"
#include "tree-watch.h"

/* Everything that changes what a stage records, for entries of a watched
 * directory and for the directory itself. IN_MODIFY: a file kept open
 * across the step's end is seen before it is closed. No IN_OPEN or
 * IN_ACCESS: a build reads far more than it writes, and the queue (16,384
 * events by default) is for writes. */
#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | \
                    IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

typedef struct WatchedDir {
        int wd;
        char *path;             /* "" or "a/b/" */
        unsigned generation;    /* of the last walk that read it */
} WatchedDir;

struct TreeWatch {
        int fd;
        WatchedDir *dirs;       /* sorted by wd */
        size_t n_dirs, n_alloc;
        unsigned generation;
        int top_wd;
        bool complete;
        bool add_failed;
};

int tree_watch_new(TreeWatch **ret) {
        TreeWatch *w = calloc(1, sizeof(TreeWatch));
        if (!w)
                return -ENOMEM;
        w->top_wd = -1;
        w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->fd < 0) {
                int r = -errno;
                free(w);
                return r;
        }
        *ret = w;
        return 0;
}

TreeWatch *tree_watch_free(TreeWatch *w) {
        if (!w)
                return NULL;
        safe_close(w->fd);
        for (size_t i = 0; i < w->n_dirs; i++)
                free(w->dirs[i].path);
        free(w->dirs);
        free(w);
        return NULL;
}

static WatchedDir *dir_find(TreeWatch *w, int wd, size_t *ret_pos) {
        size_t lo = 0, hi = w->n_dirs;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (w->dirs[mid].wd == wd) {
                        if (ret_pos)
                                *ret_pos = mid;
                        return &w->dirs[mid];
                }
                if (w->dirs[mid].wd < wd)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (ret_pos)
                *ret_pos = lo;
        return NULL;
}

static void dir_remove(TreeWatch *w, int wd) {
        size_t pos;

        if (!dir_find(w, wd, &pos))
                return;
        free(w->dirs[pos].path);
        memmove(w->dirs + pos, w->dirs + pos + 1, (w->n_dirs - pos - 1) * sizeof(WatchedDir));
        w->n_dirs--;
}

/* Pending events are of no use to a walk: it looks at everything. What
 * they say about watches that went (IN_IGNORED) still counts. */
static void events_drop(TreeWatch *w) {
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

        for (;;) {
                ssize_t n = read(w->fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *e = (const struct inotify_event *) p;
                        if (e->mask & IN_IGNORED)
                                dir_remove(w, e->wd);
                        p += sizeof(struct inotify_event) + e->len;
                }
        }
}

void tree_watch_walk_begin(TreeWatch *w) {
        assert(w);
        events_drop(w);
        w->generation++;
        w->complete = false;
        w->add_failed = false;
}

int tree_watch_add(TreeWatch *w, int dir_fd, const char *path) {
        char proc[64];
        _cleanup_free_ char *copy = NULL;
        size_t pos;

        assert(w);
        assert(path);

        /* inotify_add_watch() takes a path: the directory the walk opened
         * (without following a symlink) is reached through its fd. */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%i", dir_fd);
        int wd = inotify_add_watch(w->fd, proc, WATCH_MASK);
        if (wd < 0) {
                /* In a walk: incomplete at its end. Outside one: from now. */
                w->add_failed = true;
                w->complete = false;
                return -errno;
        }
        if (isempty(path))
                w->top_wd = wd;

        /* The same directory again (a later walk): the same wd, perhaps
         * at a new path. */
        WatchedDir *d = dir_find(w, wd, &pos);
        if (d && streq(d->path, path)) {
                d->generation = w->generation;
                return 0;
        }
        copy = strdup(path);
        if (!copy) {
                w->add_failed = true;
                w->complete = false;
                return -ENOMEM;
        }
        if (d) {
                free(d->path);
                d->path = TAKE_PTR(copy);
                d->generation = w->generation;
                return 0;
        }
        if (w->n_dirs >= w->n_alloc) {
                size_t n = MAX(w->n_alloc * 2, (size_t) 64);
                WatchedDir *t = realloc(w->dirs, n * sizeof(WatchedDir));
                if (!t) {
                        (void) inotify_rm_watch(w->fd, wd);
                        w->add_failed = true;
                        w->complete = false;
                        return -ENOMEM;
                }
                w->dirs = t;
                w->n_alloc = n;
        }
        memmove(w->dirs + pos + 1, w->dirs + pos, (w->n_dirs - pos) * sizeof(WatchedDir));
        w->dirs[pos] = (WatchedDir) { .wd = wd, .path = TAKE_PTR(copy), .generation = w->generation };
        w->n_dirs++;
        return 0;
}

void tree_watch_walk_done(TreeWatch *w) {
        size_t k = 0;

        assert(w);
        /* Directories the walk no longer reads (removed, or ignored now):
         * their events would only cost. */
        for (size_t i = 0; i < w->n_dirs; i++) {
                if (w->dirs[i].generation != w->generation) {
                        (void) inotify_rm_watch(w->fd, w->dirs[i].wd);
                        free(w->dirs[i].path);
                        continue;
                }
                w->dirs[k++] = w->dirs[i];
        }
        w->n_dirs = k;
        w->complete = !w->add_failed && w->top_wd >= 0 && dir_find(w, w->top_wd, NULL);
}

void tree_watch_invalidate(TreeWatch *w) {
        if (w)
                w->complete = false;
}

bool tree_watch_complete(const TreeWatch *w) {
        return w && w->complete;
}

size_t tree_watch_size(const TreeWatch *w) {
        return w ? w->n_dirs : 0;
}

static int path_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* One event: 1 a path changed (*ret set), 0 nothing to record, -ESTALE. */
static int event_path(TreeWatch *w, const struct inotify_event *e, char **ret) {
        if (e->mask & IN_Q_OVERFLOW)
                return -ESTALE;
        if (e->mask & IN_IGNORED) {
                /* The directory went (or its file system): its parent said so
                 * already, unless it is the top. */
                if (e->wd == w->top_wd)
                        return -ESTALE;
                dir_remove(w, e->wd);
                return 0;
        }
        const WatchedDir *d = dir_find(w, e->wd, NULL);
        if (!d)
                return 0;       /* A watch removed after a walk: not ours any more. */
        if (e->mask & IN_UNMOUNT)
                return -ESTALE;
        if (e->mask & (IN_MOVE_SELF | IN_DELETE_SELF))
                /* Its parent names it (below, as a directory moved or
                 * removed), unless it is the top. */
                return e->wd == w->top_wd ? -ESTALE : 0;
        if (e->len == 0 || isempty(e->name))
                return 0;       /* The directory's own attributes: git has none. */
        /* A directory renamed is one gone and one new: the caller walks
         * the new one, which moves the watches below it to their new
         * paths (inotify keeps a directory's wd through a rename). Until
         * then their events name the old paths, which are gone: looking
         * at them finds nothing, and the walk finds everything. */
        if ((e->mask & IN_ISDIR) && !(e->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)))
                return 0;
        if (asprintf(ret, "%s%s", d->path, e->name) < 0)
                return -ENOMEM;
        return 1;
}

int tree_watch_changes(TreeWatch *w, char ***ret, size_t *ret_n) {
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        char **paths = NULL;
        size_t n = 0, n_alloc = 0;
        int r = 0;

        assert(w);
        assert(ret);

        if (!w->complete)
                return -ESTALE;

        while (r >= 0) {
                ssize_t k = read(w->fd, buf, sizeof(buf));
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = errno == EAGAIN ? 0 : -errno;
                        break;
                }
                if (k == 0)
                        break;
                for (char *p = buf; r >= 0 && p < buf + k;) {
                        const struct inotify_event *e = (const struct inotify_event *) p;
                        char *path = NULL;

                        p += sizeof(struct inotify_event) + e->len;
                        r = event_path(w, e, &path);
                        if (r <= 0)
                                continue;
                        /* The kernel merges only identical events in a row:
                         * a file written, then closed, comes twice. */
                        if (n > 0 && streq(paths[n - 1], path)) {
                                free(path);
                                continue;
                        }
                        if (n >= TREE_WATCH_CHANGES_MAX * 4) {
                                free(path);
                                r = -ESTALE;
                                break;
                        }
                        if (n + 1 >= n_alloc) {
                                size_t m = MAX(n_alloc * 2, (size_t) 64);
                                char **t = realloc(paths, m * sizeof(char *));
                                if (!t) {
                                        free(path);
                                        r = -ENOMEM;
                                        break;
                                }
                                paths = t;
                                n_alloc = m;
                        }
                        paths[n++] = path;
                        paths[n] = NULL;
                }
        }

        if (r >= 0 && n > 0) {
                size_t k = 0;
                qsort(paths, n, sizeof(char *), path_cmp);
                for (size_t i = 0; i < n; i++) {
                        if (k > 0 && streq(paths[k - 1], paths[i])) {
                                free(paths[i]);
                                continue;
                        }
                        paths[k++] = paths[i];
                }
                n = k;
                paths[n] = NULL;
                if (n > TREE_WATCH_CHANGES_MAX)
                        r = -ESTALE;
        }
        if (r < 0) {
                /* What was read is gone: only a walk can say it now. */
                w->complete = false;
                for (size_t i = 0; i < n; i++)
                        free(paths[i]);
                free(paths);
                return r == -ENOMEM ? r : -ESTALE;
        }
        *ret = paths;
        *ret_n = n;
        return 0;
}
