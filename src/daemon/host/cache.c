/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "cache.h"
#include "fs-util.h"
#include "log.h"
#include "string-util.h"
#include "worker.h"

int cache_open(int state_fd, const char *environment, uid_t owner, bool create) {
        char uid[32];
        const char *parts[] = { CACHE_DIR, environment, uid };
        int fd = -EBADF;

        if (!environment_name_is_valid(environment))
                return -EINVAL;
        snprintf(uid, sizeof(uid), "%u", (unsigned) owner);
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                int dir = i == 0 ? state_fd : fd, next;

                if (create && mkdirat(dir, parts[i], 0700) < 0 && errno != EEXIST) {
                        int r = -errno;
                        if (i > 0)
                                safe_close(fd);
                        return r;
                }
                next = openat(dir, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (i > 0)
                        safe_close(fd);
                if (next < 0)
                        return -errno;
                fd = next;
        }
        return fd;
}

typedef struct CacheFile {
        char *path;                /* relative to the cache's top */
        uint64_t bytes;
        int64_t mtime;             /* ns */
} CacheFile;

typedef struct Walk {
        uint64_t bytes, files;
        CacheFile *list;           /* with collect */
        size_t n, allocated;
        bool collect;
} Walk;

static int walk(int dir_fd, const char *prefix, unsigned depth, Walk *w) {
        DIR *d;
        int r = 0;

        if (depth > CACHE_WALK_DEPTH_MAX)
                return 0;   /* deeper than any package manager goes: left alone */
        d = xopendirat(dir_fd, ".", O_NOFOLLOW);
        if (!d)
                return -errno;
        for (struct dirent *de; r >= 0 && (de = readdir(d)); ) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;   /* gone meanwhile */
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_free_ char *sub = NULL;
                        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0)
                                continue;
                        if (asprintf(&sub, "%s%s/", prefix, de->d_name) < 0) {
                                safe_close(fd);
                                r = -ENOMEM;
                                break;
                        }
                        r = walk(fd, sub, depth + 1, w);
                        safe_close(fd);
                        continue;
                }
                w->bytes += (uint64_t) st.st_blocks * 512;
                if (++w->files > CACHE_WALK_FILES_MAX)
                        r = -E2BIG;
                if (r < 0 || !w->collect)
                        continue;
                if (w->n == w->allocated) {
                        size_t a = w->allocated ? w->allocated * 2 : 256;
                        CacheFile *l = realloc(w->list, a * sizeof(CacheFile));
                        if (!l) {
                                r = -ENOMEM;
                                break;
                        }
                        w->list = l, w->allocated = a;
                }
                CacheFile *f = w->list + w->n;
                if (asprintf(&f->path, "%s%s", prefix, de->d_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                f->bytes = (uint64_t) st.st_blocks * 512;
                f->mtime = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
                w->n++;
        }
        closedir(d);
        return r;
}

static void walk_done(Walk *w) {
        for (size_t i = 0; i < w->n; i++)
                free(w->list[i].path);
        free(w->list);
}

int cache_usage(int dir_fd, uint64_t *ret_bytes, uint64_t *ret_files) {
        Walk w = {};
        int r = walk(dir_fd, "", 0, &w);

        if (r < 0 && r != -E2BIG)
                return r;
        *ret_bytes = w.bytes;
        if (ret_files)
                *ret_files = w.files;
        return 0;
}

/* Oldest first; files written within the same clock tick (file times are
 * coarse) go largest first, so that as few as possible are removed. */
static int compare_mtime(const void *a, const void *b) {
        const CacheFile *x = a, *y = b;
        if (x->mtime != y->mtime)
                return (x->mtime > y->mtime) - (x->mtime < y->mtime);
        if (x->bytes != y->bytes)
                return (x->bytes < y->bytes) - (x->bytes > y->bytes);
        return strcmp(x->path, y->path);
}

/* SECURITY: the cache is written by sandboxed code, which may swap a
 * directory for a symlink between the walk and the removal: the parent is
 * opened beneath the cache without following any symlink, and only the
 * last component is unlinked. */
static int unlink_beneath(int dir_fd, const char *path) {
        _cleanup_free_ char *parent = strdup(path);
        _cleanup_close_ int fd = -EBADF;
        char *slash;

        if (!parent)
                return -ENOMEM;
        slash = strrchr(parent, '/');
        if (!slash)
                return RET_NERRNO(unlinkat(dir_fd, path, 0));
        *slash = '\0';
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        fd = (int) syscall(SYS_openat2, dir_fd, parent, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        return RET_NERRNO(unlinkat(fd, slash + 1, 0));
}

int cache_prune(int dir_fd, uint64_t max_bytes, uint64_t *ret_removed) {
        Walk w = { .collect = true };
        uint64_t removed = 0;
        int r;

        r = walk(dir_fd, "", 0, &w);
        if (r < 0 && r != -E2BIG) {
                walk_done(&w);
                return r;
        }
        if (w.n > 0)
                qsort(w.list, w.n, sizeof(CacheFile), compare_mtime);
        for (size_t i = 0; i < w.n && w.bytes - removed > max_bytes; i++)
                if (unlink_beneath(dir_fd, w.list[i].path) >= 0)
                        removed += w.list[i].bytes;
        walk_done(&w);
        if (ret_removed)
                *ret_removed = removed;
        return 0;
}

int cache_clear(int dir_fd) {
        DIR *d = xopendirat(dir_fd, ".", O_NOFOLLOW);
        int r = 0;

        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d)); ) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                int k = rm_rf_at(dirfd(d), de->d_name);
                if (k < 0 && r == 0)
                        r = k;
        }
        closedir(d);
        return r;
}

/* ---- Pruning after a task ---- */

typedef struct PruneJob {
        int dir_fd;
        uint64_t max_bytes;
} PruneJob;

static int prune_job_run(void *p) {
        PruneJob *j = p;
        return cache_prune(j->dir_fd, j->max_bytes, NULL);
}

static void prune_job_free(void *p) {
        PruneJob *j = p;
        if (!j)
                return;
        safe_close(j->dir_fd);
        free(j);
}

void cache_prune_later(Factory *f, const Environment *e, uid_t owner) {
        Worker *w = NULL;
        PruneJob *j;
        int fd;

        if (!e || !e->caches || e->cache_max_bytes == 0)
                return;
        fd = cache_open(f->state_fd, e->name, owner, false);
        if (fd < 0)
                return;
        j = calloc(1, sizeof(PruneJob));
        if (!j) {
                safe_close(fd);
                return;
        }
        *j = (PruneJob) { .dir_fd = fd, .max_bytes = e->cache_max_bytes };
        if (worker_start(f->event, prune_job_run, NULL, prune_job_free, j, NULL, &w) < 0) {
                prune_job_free(j);
                return;
        }
        worker_detach(w);   /* nobody waits for it: it frees itself */
}
