/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "string-util.h"
#include "tree-scan.h"

struct TreeScan {
        const TreeScanLimits *limits;
        const TreeScanOps *ops;
        void *userdata;
        char **error;
        struct io_uring ring;
        bool have_ring;
        unsigned inflight;
        unsigned entries;
        TreeScanDir *stack;     /* directories to read */
};

typedef struct ScanItem {
        TreeScanDir *dir;
        char *path;
        const char *name;       /* in path */
        struct statx stx;
} ScanItem;

static TreeScanDir *scan_dir_unref(TreeScanDir *d) {
        while (d && --d->refs == 0) {
                TreeScanDir *parent = d->parent;
                safe_close(d->fd);
                free(d->name);
                free(d->path);
                free(d);
                d = parent;
        }
        return NULL;
}

static int scan_dir_new(TreeScanDir *parent, const char *name, const char *path, TreeScanDir **ret) {
        TreeScanDir *d = calloc(1, sizeof(TreeScanDir));
        if (!d)
                return -ENOMEM;
        d->fd = -EBADF;
        d->refs = 1;
        d->mark = -1;
        d->name = strdup(name);
        if (asprintf(&d->path, "%s%s", path, isempty(path) ? "" : "/") < 0)
                d->path = NULL;
        if (!d->name || !d->path) {
                free(d->name);
                free(d->path);
                free(d);
                return -ENOMEM;
        }
        if (parent) {
                d->parent = parent;
                d->depth = parent->depth + 1;
                parent->refs++;
        }
        *ret = d;
        return 0;
}

int tree_scan_descend(TreeScan *scan, TreeScanDir *dir, const char *name, const char *path) {
        TreeScanDir *sub = NULL;
        int r;

        assert(scan);
        assert(dir);

        r = scan_dir_new(dir, name, path, &sub);
        if (r < 0)
                return r;
        r = scan->ops->dir(scan, dir, sub, path, scan->userdata);
        if (r <= 0) {
                scan_dir_unref(sub);
                return r;
        }
        if (sub->depth > scan->limits->depth_max) {
                scan_dir_unref(sub);
                return error_set(scan->error, -ELOOP, "Directory '%s' is nested too deeply.", path);
        }
        sub->next = scan->stack;
        scan->stack = sub;
        return 0;
}

static void scan_item_free(ScanItem *item) {
        if (!item)
                return;
        scan_dir_unref(item->dir);
        free(item->path);
        free(item);
}

/* Handles one statx result, from the ring or not. */
static int scan_item_done(TreeScan *scan, ScanItem *item, int res) {
        int r;

        /* A directory of ours that a command made unsearchable (chmod
         * 000): given back its owner's permissions, and asked again. */
        if (res == -EACCES && owner_access_restore_fd(item->dir->fd) > 0)
                res = statx(item->dir->fd, item->name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, TREE_SCAN_STATX_MASK,
                            &item->stx) < 0 ? -errno : 0;
        if (res == -ENOENT)
                r = 0;          /* Gone meanwhile. */
        else if (res < 0)
                r = error_set(scan->error, res, "Cannot look at '%s': %s", item->path, strerror(-res));
        else if (S_ISDIR(item->stx.stx_mode))
                r = tree_scan_descend(scan, item->dir, item->name, item->path);
        else
                r = scan->ops->entry(scan, item->dir, item->name, item->path, &item->stx, scan->userdata);
        scan_item_free(item);
        return r;
}

static int ring_reap(TreeScan *scan, bool wait) {
        struct io_uring_cqe *cqe;
        int r = 0;

        while (scan->inflight > 0) {
                int k = wait ? io_uring_wait_cqe(&scan->ring, &cqe) : io_uring_peek_cqe(&scan->ring, &cqe);
                if (k == -EINTR)
                        continue;
                if (k == -EAGAIN)
                        break;
                if (k < 0)
                        return k;
                ScanItem *item = io_uring_cqe_get_data(cqe);
                int res = cqe->res;
                io_uring_cqe_seen(&scan->ring, cqe);
                scan->inflight--;
                int q = scan_item_done(scan, item, res);
                if (q < 0 && r == 0)
                        r = q;
                wait = false;
        }
        return r;
}

/* Asks for the metadata of one entry: through the ring, or right away. */
static int scan_submit(TreeScan *scan, TreeScanDir *d, const char *name) {
        ScanItem *item = calloc(1, sizeof(ScanItem));
        if (!item)
                return -ENOMEM;
        if (asprintf(&item->path, "%s%s", d->path, name) < 0) {
                free(item);
                return -ENOMEM;
        }
        item->name = item->path + strlen(d->path);
        item->dir = d;
        d->refs++;

        if (scan->have_ring) {
                struct io_uring_sqe *sqe = io_uring_get_sqe(&scan->ring);
                if (!sqe) {
                        int r = io_uring_submit(&scan->ring);
                        if (r < 0) {
                                scan_item_free(item);
                                return r;
                        }
                        sqe = io_uring_get_sqe(&scan->ring);
                }
                if (sqe) {
                        io_uring_prep_statx(sqe, d->fd, item->name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
                                            TREE_SCAN_STATX_MASK, &item->stx);
                        io_uring_sqe_set_data(sqe, item);
                        scan->inflight++;
                        /* Keep the ring from overflowing: harvest what is done. */
                        if (scan->inflight >= scan->limits->ring_entries) {
                                int r = io_uring_submit(&scan->ring);
                                if (r < 0)
                                        return r;
                                return ring_reap(scan, true);
                        }
                        return 0;
                }
        }

        int res = statx(d->fd, item->name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, TREE_SCAN_STATX_MASK,
                        &item->stx) < 0 ? -errno : 0;
        return scan_item_done(scan, item, res);
}

struct linux_dirent64_ {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
};

/* Reads one directory and submits its entries. Directories (by d_type)
 * go to the stack without a statx: opening them with O_DIRECTORY |
 * O_NOFOLLOW checks what they are. */
static int scan_read_dir(TreeScan *scan, TreeScanDir *d) {
        _cleanup_free_ char *buf = NULL;
        const size_t size = 64 * 1024;
        int r;

        buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                long n = syscall(SYS_getdents64, d->fd, buf, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return error_set(scan->error, -errno, "Cannot read the directory '%s': %m",
                                         isempty(d->path) ? "." : d->path);
                }
                if (n == 0)
                        return 0;
                for (long off = 0; off < n;) {
                        struct linux_dirent64_ *de = (struct linux_dirent64_ *) (buf + off);
                        off += de->d_reclen;

                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        if (strcasecmp(de->d_name, ".git") == 0) {
                                if (!scan->ops->git_entry)
                                        continue;
                                _cleanup_free_ char *path = NULL;
                                if (asprintf(&path, "%s%s", d->path, de->d_name) < 0)
                                        return -ENOMEM;
                                r = scan->ops->git_entry(scan, d, de->d_name, path, scan->userdata);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        if (++scan->entries > scan->limits->entries_max)
                                return error_set(scan->error, -E2BIG, "The workspace has more than %u files.",
                                                 scan->limits->entries_max);
                        if (de->d_type == DT_DIR) {
                                _cleanup_free_ char *path = NULL;
                                if (asprintf(&path, "%s%s", d->path, de->d_name) < 0)
                                        return -ENOMEM;
                                r = tree_scan_descend(scan, d, de->d_name, path);
                        } else
                                r = scan_submit(scan, d, de->d_name);
                        if (r < 0)
                                return r;
                }
        }
}

/* Opens a directory taken off the stack and reads it. One that is not a
 * directory any more is looked at as an entry of its parent. */
static int scan_open_dir(TreeScan *scan, TreeScanDir *d, int root_fd) {
        int r;

        if (d->parent) {
                d->fd = openat(d->parent->fd, d->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (d->fd < 0 && errno == EACCES) {
                        /* Not searchable, or not readable: whichever a command took. */
                        int a = owner_access_restore_fd(d->parent->fd), b = owner_access_restore(d->parent->fd, d->name);
                        if (a > 0 || b > 0)
                                d->fd = openat(d->parent->fd, d->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        else
                                errno = EACCES;
                }
                if (d->fd < 0) {
                        if (errno == ENOENT)
                                return 0;
                        if (errno == ENOTDIR || errno == ELOOP)
                                return scan_submit(scan, d->parent, d->name);
                        return error_set(scan->error, -errno, "Cannot open '%.*s': %m", (int) strlen(d->path) - 1, d->path);
                }
        } else {
                /* A new open file description: reading must not move the
                 * offset of the caller's fd. */
                d->fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (d->fd < 0 && errno == EACCES && owner_access_restore_fd(root_fd) > 0)
                        d->fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (d->fd < 0)
                        return -errno;
        }
        if (scan->ops->dir_opened) {
                r = scan->ops->dir_opened(scan, d, scan->userdata);
                if (r < 0)
                        return r;
        }
        r = scan_read_dir(scan, d);
        if (r >= 0 && scan->have_ring && scan->inflight > 0)
                r = io_uring_submit(&scan->ring) < 0 ? -EIO : 0;
        return r;
}

int tree_scan_run(int root_fd, bool use_ring, const TreeScanLimits *limits, const TreeScanOps *ops, void *userdata,
                  char **ret_error) {
        return tree_scan_run_at(root_fd, "", 0, use_ring, limits, ops, userdata, ret_error);
}

int tree_scan_run_at(int root_fd, const char *prefix, int root_mark, bool use_ring, const TreeScanLimits *limits, const TreeScanOps *ops,
                     void *userdata, char **ret_error) {
        TreeScan scan = { .limits = limits, .ops = ops, .userdata = userdata, .error = ret_error };
        TreeScanDir *root = NULL;
        int r;

        assert(root_fd >= 0);
        assert(limits && limits->ring_entries > 0);
        assert(ops && ops->dir && ops->entry);

        /* Without a ring (too old a kernel, a filter that forbids it), the
         * same statx() calls, one at a time. */
        scan.have_ring = use_ring && io_uring_queue_init(limits->ring_entries, &scan.ring, 0) >= 0;
        if (scan.have_ring && limits->ring_workers_max > 0) {
                unsigned workers[2] = { limits->ring_workers_max, limits->ring_workers_max };  /* bounded, unbounded */
                /* Older kernels lack the call: they keep their default. */
                (void) io_uring_register_iowq_max_workers(&scan.ring, workers);
        }

        assert(prefix);
        r = scan_dir_new(NULL, "", prefix, &root);
        if (r >= 0) {
                root->mark = root_mark;
                scan.stack = root;
        }

        while (r >= 0 && (scan.stack || scan.inflight > 0)) {
                if (scan.stack) {
                        TreeScanDir *d = scan.stack;
                        scan.stack = d->next;
                        r = scan_open_dir(&scan, d, root_fd);
                        scan_dir_unref(d);
                        /* Completions first when many are waiting: they hold fds. */
                        if (r >= 0 && scan.have_ring)
                                r = ring_reap(&scan, false);
                } else
                        r = ring_reap(&scan, true);
        }

        /* On failure: wait for what is in flight (the kernel writes into the
         * items), then drop the rest. */
        if (scan.have_ring && scan.inflight > 0)
                (void) io_uring_submit(&scan.ring);
        while (scan.have_ring && scan.inflight > 0) {
                struct io_uring_cqe *cqe;
                if (io_uring_wait_cqe(&scan.ring, &cqe) < 0)
                        break;
                scan_item_free(io_uring_cqe_get_data(cqe));
                io_uring_cqe_seen(&scan.ring, cqe);
                scan.inflight--;
        }
        while (scan.stack) {
                TreeScanDir *d = scan.stack;
                scan.stack = d->next;
                scan_dir_unref(d);
        }
        if (scan.have_ring)
                io_uring_queue_exit(&scan.ring);
        return r;
}
