/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A disk that records every write and flush it is sent, for the crash test
 * (tests/crash/run.sh): a FUSE file system holding one file, "disk", whose
 * contents are the image IMAGE. A loop device over that file is the disk
 * the daemon's state directory lives on; the loop driver turns the file
 * system's block writes into writes of the file and its cache flushes
 * (REQ_PREFLUSH, and FUA, which a loop device does not offer, as a write
 * followed by a flush) into fsync() of the file. Each one is appended to
 * LOG in the format of the kernel's dm-log-writes target
 * (Documentation/admin-guide/device-mapper/log-writes.rst), which this
 * kernel lacks: a super block in the first sector, then per entry one
 * sector with the entry and as many sectors of data as it wrote. The file
 * is opened with direct_io, so that every write reaches this process
 * before the loop driver completes it: a write is logged when it
 * completes, a flush when it is issued, the order dm-log-writes gives.
 *
 * Marks: a client connects to the abstract SOCK_SEQPACKET socket
 * "@SOCKET", sends "TEXT", and is answered "ok" once a mark entry with TEXT
 * follows every write and flush logged before. tests/crash/ack-mark.c sends
 * one from inside agentfabd right before each acknowledgement is
 * announced.
 *
 *   blklog IMAGE LOG SOCKET MOUNTPOINT
 *
 * Runs in the foreground, single-threaded (one request at a time, so that
 * the log's order is the order of completion), until MOUNTPOINT is
 * unmounted or it gets SIGTERM. Test code: no hardening beyond that. */
#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define SECTOR 512U
#define LOG_FLUSH_FLAG (1U << 0)
#define LOG_DISCARD_FLAG (1U << 2)
#define LOG_MARK_FLAG (1U << 3)
#define WRITE_LOG_VERSION 1U
#define WRITE_LOG_MAGIC 0x6a736677736872ULL

/* Both little-endian on disk; this test runs on x86-64 only. */
struct log_write_super {
        uint64_t magic;
        uint64_t version;
        uint64_t nr_entries;
        uint32_t sectorsize;
} __attribute__((packed));

struct log_write_entry {
        uint64_t sector;
        uint64_t nr_sectors;
        uint64_t flags;
        uint64_t data_len;
} __attribute__((packed));

static int image_fd = -1, log_fd = -1;
static off_t image_size;
static uint64_t log_next = SECTOR;      /* where the next entry goes */
static uint64_t log_entries;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static int write_all(int fd, const void *p, size_t n, off_t off) {
        while (n > 0) {
                ssize_t k = pwrite(fd, p, n, off);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p = (const char *) p + k;
                n -= (size_t) k;
                off += k;
        }
        return 0;
}

static int log_super(void) {
        char sector[SECTOR] = {};
        struct log_write_super s = {
                .magic = WRITE_LOG_MAGIC,
                .version = WRITE_LOG_VERSION,
                .nr_entries = log_entries,
                .sectorsize = SECTOR,
        };
        memcpy(sector, &s, sizeof(s));
        return write_all(log_fd, sector, SECTOR, 0);
}

/* One entry and its data, with log_lock held. */
static int log_entry(uint64_t flags, uint64_t sector, uint64_t nr_sectors, const void *data, size_t size,
                     const char *mark) {
        char head[SECTOR] = {};
        struct log_write_entry e = {
                .sector = sector,
                .nr_sectors = nr_sectors,
                .flags = flags,
                .data_len = mark ? strlen(mark) : size,
        };
        int r;

        memcpy(head, &e, sizeof(e));
        if (mark)
                memcpy(head + sizeof(e), mark, strlen(mark));
        r = write_all(log_fd, head, SECTOR, (off_t) log_next);
        if (r < 0)
                return r;
        log_next += SECTOR;
        if (data && size > 0) {
                r = write_all(log_fd, data, size, (off_t) log_next);
                if (r < 0)
                        return r;
                log_next += nr_sectors * SECTOR;
        }
        log_entries++;
        /* The count is kept current at flushes and marks, so that a log cut
         * short (the test killed) still reads up to there. */
        if (flags & (LOG_FLUSH_FLAG | LOG_MARK_FLAG))
                return log_super();
        return 0;
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
        (void) fi;
        memset(st, 0, sizeof(*st));
        if (strcmp(path, "/") == 0) {
                st->st_mode = S_IFDIR | 0700;
                st->st_nlink = 2;
                return 0;
        }
        if (strcmp(path, "/disk") == 0) {
                st->st_mode = S_IFREG | 0600;
                st->st_nlink = 1;
                st->st_size = image_size;
                return 0;
        }
        return -ENOENT;
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
        (void) off, (void) fi, (void) flags;
        if (strcmp(path, "/") != 0)
                return -ENOENT;
        fill(buf, ".", NULL, 0, 0);
        fill(buf, "..", NULL, 0, 0);
        fill(buf, "disk", NULL, 0, 0);
        return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi) {
        if (strcmp(path, "/disk") != 0)
                return -ENOENT;
        /* Every write comes here before it completes: no page cache. */
        fi->direct_io = 1;
        fi->keep_cache = 0;
        return 0;
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
        (void) path, (void) fi;
        if (off >= image_size)
                return 0;
        if ((off_t) size > image_size - off)
                size = (size_t) (image_size - off);
        ssize_t k = pread(image_fd, buf, size, off);
        return k < 0 ? -errno : (int) k;
}

static int op_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
        int r;

        (void) path, (void) fi;
        if (off < 0 || off + (off_t) size > image_size)
                return -ENOSPC;
        if (off % SECTOR != 0 || size % SECTOR != 0)
                return -EINVAL;   /* a block device writes whole sectors */
        pthread_mutex_lock(&log_lock);
        r = write_all(image_fd, buf, size, off);
        if (r >= 0)
                r = log_entry(0, (uint64_t) off / SECTOR, size / SECTOR, buf, size, NULL);
        pthread_mutex_unlock(&log_lock);
        return r < 0 ? r : (int) size;
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
        int r;

        (void) path, (void) datasync, (void) fi;
        pthread_mutex_lock(&log_lock);
        r = log_entry(LOG_FLUSH_FLAG, 0, 0, NULL, 0, NULL);
        pthread_mutex_unlock(&log_lock);
        return r;
}

static int op_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
        int r;

        (void) path, (void) fi;
        /* A discard: the loop driver punches a hole (or zeroes the range). */
        if (!(mode & FALLOC_FL_KEEP_SIZE) || !(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)))
                return -EOPNOTSUPP;
        if (off % SECTOR != 0 || len % SECTOR != 0 || off < 0 || off + len > image_size)
                return -EINVAL;
        pthread_mutex_lock(&log_lock);
        r = fallocate(image_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) < 0 ? -errno : 0;
        if (r >= 0)
                r = log_entry(LOG_DISCARD_FLAG, (uint64_t) off / SECTOR, (uint64_t) len / SECTOR, NULL, 0, NULL);
        pthread_mutex_unlock(&log_lock);
        return r;
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
        (void) path, (void) fi;
        return size == image_size ? 0 : -EPERM;
}

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
        /* Writes as large as the loop driver makes them, where the kernel
         * allows (fewer entries; a torn write is still possible between
         * the pieces of a larger one, as on a disk). */
        conn->max_write = 1024 * 1024;
        cfg->direct_io = 1;
        cfg->kernel_cache = 0;
        return NULL;
}

static void op_destroy(void *userdata) {
        (void) userdata;
        pthread_mutex_lock(&log_lock);
        (void) log_super();
        (void) fsync(log_fd);
        pthread_mutex_unlock(&log_lock);
}

static void *mark_thread(void *p) {
        int sfd = *(int *) p;

        for (;;) {
                char buf[SECTOR];
                int c = accept4(sfd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        return NULL;
                }
                for (;;) {
                        ssize_t n = recv(c, buf, sizeof(buf) - sizeof(struct log_write_entry) - 1, 0);
                        if (n <= 0)
                                break;
                        buf[n] = '\0';
                        pthread_mutex_lock(&log_lock);
                        int r = log_entry(LOG_MARK_FLAG, 0, 0, NULL, 0, buf);
                        pthread_mutex_unlock(&log_lock);
                        if (send(c, r < 0 ? "error" : "ok", r < 0 ? 5 : 2, MSG_NOSIGNAL) < 0)
                                break;
                }
                close(c);
        }
}

static const struct fuse_operations ops = {
        .getattr = op_getattr,
        .readdir = op_readdir,
        .open = op_open,
        .read = op_read,
        .write = op_write,
        .fsync = op_fsync,
        .fallocate = op_fallocate,
        .truncate = op_truncate,
        .init = op_init,
        .destroy = op_destroy,
};

int main(int argc, char *argv[]) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        pthread_t th;
        int sfd;

        if (argc != 5) {
                fprintf(stderr, "usage: %s IMAGE LOG SOCKET MOUNTPOINT\n", argv[0]);
                return 2;
        }
        image_fd = open(argv[1], O_RDWR | O_CLOEXEC);
        if (image_fd < 0 || fstat(image_fd, &st) < 0) {
                perror(argv[1]);
                return 1;
        }
        image_size = st.st_size;
        if (image_size % SECTOR != 0) {
                fprintf(stderr, "%s: not a whole number of sectors\n", argv[1]);
                return 1;
        }
        log_fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (log_fd < 0 || log_super() < 0) {
                perror(argv[2]);
                return 1;
        }

        if (strlen(argv[3]) + 1 >= sizeof(sa.sun_path)) {
                fprintf(stderr, "socket name too long\n");
                return 1;
        }
        memcpy(sa.sun_path + 1, argv[3], strlen(argv[3]));
        sfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (sfd < 0 || bind(sfd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + strlen(argv[3]))) < 0 ||
            listen(sfd, 16) < 0) {
                perror("mark socket");
                return 1;
        }
        if (pthread_create(&th, NULL, mark_thread, &sfd) != 0) {
                fprintf(stderr, "cannot start the mark thread\n");
                return 1;
        }

        char *fargv[] = { argv[0], "-f", "-s", "-o", "fsname=blklog,subtype=blklog", argv[4], NULL };
        return fuse_main(6, fargv, &ops, NULL);
}
