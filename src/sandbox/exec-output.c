/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "exec-output.h"
#include "macro.h"

/* Output goes from the command's pipe to the log by splice(): the bytes
 * never pass through our memory. A pipe of this size (the default maximum
 * for unprivileged processes) takes 16 wakeups per MiB fewer than 64 KiB. */
#define OUTPUT_PIPE_SIZE (1024 * 1024)
/* The relay between the pipe and the log (see output_move()): as fast
 * as 1 MiB here, a quarter of the pipes' memory charged to our user
 * (fs.pipe-user-pages-soft). */
#define OUTPUT_RELAY_SIZE (256 * 1024)
/* A flood's log is written out behind the mover and dropped from the page
 * cache once written, in windows of this size (see output_write_behind()). */
#define OUTPUT_WRITE_BEHIND (32ull * 1024 * 1024)
/* ... and allocated on disk this far ahead of the mover (see
 * output_allocate_ahead()). */
#define OUTPUT_ALLOCATE_AHEAD (64ull * 1024 * 1024)
#define OUTPUT_BEHIND_RING 8u
/* The mover looks at its stop signal at least after this much. */
#define OUTPUT_MOVE_BUDGET (4u * OUTPUT_PIPE_SIZE)
/* A command that writes in small pieces (a test printing lines) would
 * wake the mover and cost two splice() calls per piece: when less than this
 * is waiting, the mover lets more come for OUTPUT_BATCH_WAIT_NSEC first. A
 * command writing at 1 GB/s puts 300 KiB into the pipe meanwhile, so it
 * is not held up; what the wait costs a slow one is that much latency. */
#define OUTPUT_BATCH_MIN (64u * 1024u)
#define OUTPUT_BATCH_WAIT_NSEC (300u * 1000u)
#define OUTPUT_MOVER_STACK (256u * 1024u)
/* What a stream client following the output is shown, at most every
 * OUTPUT_SAMPLE_INTERVAL_USEC: the newest bytes; what lies before them is
 * named, not sent. So a flood reaches a terminal at a few hundred KiB/s. */
#define OUTPUT_SAMPLE_MAX (16u * 1024u)
#define OUTPUT_SAMPLE_INTERVAL_USEC (50u * 1000u)

void exec_output_init(ExecOutput *o) {
        *o = (ExecOutput) { .pass_fd = -EBADF, .out_fd = -EBADF, .stop_fd = -EBADF, .news_fd = -EBADF,
                            .relay_in = -EBADF, .relay_out = -EBADF, .log_fd = -EBADF };
}

/* Tells the mover to stop (after moving what the pipe holds now, unless
 * abandon) and waits for it. The wait is bounded: the mover looks at the
 * signal after at most OUTPUT_MOVE_BUDGET bytes, and then moves at most
 * what the pipe holds at that moment. */
static void output_stop_mover(ExecOutput *o, bool abandon) {
        uint64_t one = 1;

        if (!o->mover_running)
                return;
        __atomic_store_n(&o->abandon, abandon, __ATOMIC_RELEASE);
        while (write(o->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
                ;
        (void) pthread_join(o->mover, NULL);
        o->mover_running = false;
}

/* The blocks allocated past the log's end and not written are freed: on
 * ext4 a truncation to the size the file has frees what lies beyond it.
 * Only the loop writes the log once the mover is joined. */
static void output_trim(ExecOutput *o) {
        struct stat st;

        if (o->allocated_end > 0 && o->log_fd >= 0 && fstat(o->log_fd, &st) >= 0 && (uint64_t) st.st_size < o->allocated_end)
                (void) ftruncate(o->log_fd, st.st_size);
        o->allocated_end = 0;
}

void exec_output_close(ExecOutput *o) {
        output_stop_mover(o, true);
        output_trim(o);
        o->sample_timer = sd_event_source_disable_unref(o->sample_timer);
        o->news_io = sd_event_source_disable_unref(o->news_io);
        o->news_fd = safe_close(o->news_fd);
        o->out_fd = safe_close(o->out_fd);
        o->pass_fd = safe_close(o->pass_fd);
        o->stop_fd = safe_close(o->stop_fd);
        o->relay_in = safe_close(o->relay_in);
        o->relay_out = safe_close(o->relay_out);
        o->log_fd = safe_close(o->log_fd);
}

/* In the mover: the counters, and news for a follower that waits for it. */
static void output_advance(ExecOutput *o, uint64_t logged, uint64_t read) {
        uint64_t one = 1;

        if (logged > 0)
                __atomic_store_n(&o->log_off, o->log_off + logged, __ATOMIC_SEQ_CST);
        __atomic_store_n(&o->bytes, o->bytes + read, __ATOMIC_RELEASE);
        if (logged > 0 && __atomic_exchange_n(&o->news_wanted, false, __ATOMIC_SEQ_CST))
                while (write(o->news_fd, &one, sizeof(one)) < 0 && errno == EINTR)
                        ;
}

/* In the mover: what the ring has done (wait: all of it). */
static void output_behind_reap(ExecOutput *o, bool wait) {
        struct io_uring_cqe *cqe;

        while (o->behind_inflight > 0) {
                if ((wait ? io_uring_wait_cqe(&o->ring, &cqe) : io_uring_peek_cqe(&o->ring, &cqe)) < 0)
                        break;
                io_uring_cqe_seen(&o->ring, cqe);
                o->behind_inflight--;
        }
}

/* In the mover, during a flood: the log's blocks are allocated ahead of
 * it (FALLOC_FL_KEEP_SIZE: its size, which readers go by, stays what was
 * written), so that a write into the page cache finds its blocks mapped
 * instead of reserving each one for delayed allocation, which the mover
 * would pay for on every page. What is left past the end is freed when
 * the command ends (exec_output_close()). A file system without it, or a
 * full disk, leaves the log to delayed allocation. */
static void output_allocate_ahead(ExecOutput *o) {
        uint64_t from = MAX(o->allocated_end, o->log_off);

        if (o->allocate_failed || o->log_broken || o->log_copy || from >= o->log_off + OUTPUT_ALLOCATE_AHEAD)
                return;
        if (fallocate(o->log_fd, FALLOC_FL_KEEP_SIZE, (off_t) from, (off_t) (o->log_off + OUTPUT_ALLOCATE_AHEAD - from)) < 0) {
                o->allocate_failed = true;
                return;
        }
        o->allocated_end = o->log_off + OUTPUT_ALLOCATE_AHEAD;
}

/* In the mover: a flood must not take its size in page cache, which on a
 * VM whose balloon hands free memory back to its host is fresh memory for
 * every byte, and each page comes back at a cost (a third of the speed).
 * So once the log has grown by a window since the last look, writeback of
 * that window starts, and the two windows before it are dropped from the
 * page cache where their writeback is done: the pages go back to the
 * allocator while still warm and carry the next windows. It never waits
 * for the disk: pages still dirty stay, and a disk slower than the command
 * leaves things as they were without this. The work (the file system's
 * writeback) is the ring's, in a kernel worker, not the mover's: done by
 * the mover, it would halve what the mover moves on warm memory. */
static void output_write_behind(ExecOutput *o) {
        uint64_t drop_from, n;
        struct io_uring_sqe *sqe;
        int k;

        if (o->log_off - o->behind < OUTPUT_WRITE_BEHIND)
                return;
        output_allocate_ahead(o);
        if (!o->ring_ready) {
                if (o->ring_failed || io_uring_queue_init(OUTPUT_BEHIND_RING, &o->ring, 0) < 0) {
                        o->ring_failed = true;
                        return;
                }
                o->ring_ready = true;
                /* One kernel worker at most (threads count against the
                 * service's TasksMax=, and hundreds of commands may flood). */
                unsigned workers[2] = { 1, 1 };
                (void) io_uring_register_iowq_max_workers(&o->ring, workers);
        }
        output_behind_reap(o, false);
        /* The disk or the workers lag: let them catch up first. */
        if (o->behind_inflight + 2 > OUTPUT_BEHIND_RING)
                return;

        drop_from = o->behind - o->log_start > 2 * OUTPUT_WRITE_BEHIND ? o->behind - 2 * OUTPUT_WRITE_BEHIND : o->log_start;
        if (o->behind > drop_from && (sqe = io_uring_get_sqe(&o->ring)))
                io_uring_prep_fadvise(sqe, o->log_fd, drop_from, (off_t) (o->behind - drop_from), POSIX_FADV_DONTNEED);
        n = o->log_off - o->behind;
        if ((sqe = io_uring_get_sqe(&o->ring)))
                io_uring_prep_sync_file_range(sqe, o->log_fd, (unsigned) MIN(n, (uint64_t) UINT32_MAX), o->behind,
                                              SYNC_FILE_RANGE_WRITE);
        /* Only what the kernel took is waited for at the mover's end (what
         * it did not stays queued and goes with the next submission). */
        k = io_uring_submit(&o->ring);
        if (k < 0)
                return;
        o->behind_inflight += (unsigned) k;
        o->behind = o->log_off;
}

/* In the mover: n bytes waiting in the relay pipe go to the log; returns
 * how many of them the log got (the rest are dropped: a full disk). */
static uint64_t output_relay_to_log(ExecOutput *o, size_t n) {
        uint64_t logged = 0;

        while (n > 0) {
                char buf[64 * 1024];
                ssize_t k;

                if (!o->log_broken && !o->log_copy) {
                        loff_t off = (loff_t) (o->log_off + logged);
                        k = splice(o->relay_out, NULL, o->log_fd, &off, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (k > 0) {
                                logged += (uint64_t) k;
                                n -= (size_t) k;
                        } else if (k < 0 && errno == EINTR)
                                continue;
                        else if (k < 0 && IN_SET(errno, EINVAL, ENOSYS, EPERM))
                                /* No splice() to this file system: copied
                                 * through our memory. */
                                __atomic_store_n(&o->log_copy, true, __ATOMIC_RELEASE);
                        else
                                /* A full disk must not stop the command: from
                                 * here on its output is counted and dropped. */
                                __atomic_store_n(&o->log_broken, true, __ATOMIC_RELEASE);
                        continue;
                }
                k = read(o->relay_out, buf, MIN(n, sizeof(buf)));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;   /* cannot be: the bytes are there */
                n -= (size_t) k;
                if (o->log_broken)
                        continue;
                if (pwrite(o->log_fd, buf, (size_t) k, (off_t) (o->log_off + logged)) == k)
                        logged += (uint64_t) k;
                else
                        __atomic_store_n(&o->log_broken, true, __ATOMIC_RELEASE);
        }
        return logged;
}

/* In the mover: moves at most max bytes from the pipe to the log. Returns
 * 1 at the end of the output, 0 when the pipe is empty or max is reached.
 *
 * The bytes go through a second pipe of ours, the relay: splice() from
 * pipe to pipe moves the pages and holds the command's pipe only as long,
 * while a splice() from its pipe to the log would hold it (its lock) for
 * the whole copy into the page cache, and a command writing in small
 * pieces would wait for every copy. So the copy into the log and the
 * command's next writes run at once: 2-3x on 8 KiB writes here
 * (bench/output-paths, "loop" against "mover"). */
static int output_move(ExecOutput *o, uint64_t max) {
        while (max > 0) {
                size_t want = (size_t) MIN(max, (uint64_t) OUTPUT_PIPE_SIZE);
                ssize_t k;

                if (!o->log_broken && !o->log_copy) {
                        k = splice(o->out_fd, NULL, o->relay_in, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (k < 0 && IN_SET(errno, EINVAL, ENOSYS, EPERM)) {
                                __atomic_store_n(&o->log_copy, true, __ATOMIC_RELEASE);
                                continue;
                        }
                        if (k > 0) {
                                output_advance(o, output_relay_to_log(o, (size_t) k), (uint64_t) k);
                                output_write_behind(o);
                        }
                } else {
                        char buf[64 * 1024];
                        k = read(o->out_fd, buf, MIN(want, sizeof(buf)));
                        if (k > 0) {
                                uint64_t logged = 0;
                                if (!o->log_broken) {
                                        ssize_t w = pwrite(o->log_fd, buf, (size_t) k, (off_t) o->log_off);
                                        if (w == k)
                                                logged = (uint64_t) k;
                                        else
                                                __atomic_store_n(&o->log_broken, true, __ATOMIC_RELEASE);
                                }
                                output_advance(o, logged, (uint64_t) k);
                                output_write_behind(o);
                        }
                }
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : 1;
                }
                if (k == 0)
                        return 1;
                max -= (uint64_t) k;
        }
        return 0;
}

static bool output_stop_requested(ExecOutput *o, int timeout_nsec) {
        struct pollfd p = { .fd = o->stop_fd, .events = POLLIN };
        struct timespec ts = { .tv_nsec = timeout_nsec };

        return ppoll(&p, 1, &ts, NULL) > 0;
}

/* The mover's end: the ring's work on the log is done before the loop may
 * close it. */
static void *output_mover_done(ExecOutput *o) {
        if (o->ring_ready) {
                output_behind_reap(o, true);
                io_uring_queue_exit(&o->ring);
                o->ring_ready = false;
        }
        return NULL;
}

/* The mover: from the pipe to the log until the end of the output (every
 * writer gone) or until the loop says stop. It touches only the fds and
 * the counters of o; the loop joins it before it closes them. */
static void *output_mover(void *userdata) {
        ExecOutput *o = userdata;
        int avail;

        for (;;) {
                struct pollfd p[2] = {
                        { .fd = o->out_fd, .events = POLLIN },
                        { .fd = o->stop_fd, .events = POLLIN },
                };
                if (poll(p, ELEMENTSOF(p), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[1].revents)
                        break;
                /* Little there and the writers still at it: let more come. */
                if (!(p[0].revents & (POLLHUP | POLLERR)) && ioctl(o->out_fd, FIONREAD, &avail) >= 0 &&
                    (unsigned) avail < OUTPUT_BATCH_MIN && output_stop_requested(o, OUTPUT_BATCH_WAIT_NSEC))
                        break;
                if (output_move(o, OUTPUT_MOVE_BUDGET) != 0)
                        return output_mover_done(o);   /* the end of the output */
        }

        /* Stopped: the command has ended, so what the pipe holds is all
         * there is; a subverted sandbox that keeps writing gets no more
         * than what is there now. */
        if (!__atomic_load_n(&o->abandon, __ATOMIC_ACQUIRE) && ioctl(o->out_fd, FIONREAD, &avail) >= 0 && avail > 0)
                (void) output_move(o, (uint64_t) avail);
        return output_mover_done(o);
}

/* A follower of the output (the stream socket) gets the newest bytes,
 * escaped, at most OUTPUT_SAMPLE_MAX every OUTPUT_SAMPLE_INTERVAL_USEC,
 * read back from the log up to where the mover has got. */
static void output_sample(ExecOutput *o) {
        char buf[OUTPUT_SAMPLE_MAX];
        uint64_t n, end = __atomic_load_n(&o->log_off, __ATOMIC_ACQUIRE);
        ssize_t k;

        if (!o->on_output || __atomic_load_n(&o->log_broken, __ATOMIC_ACQUIRE) || o->log_fd < 0 || end <= o->sample_off)
                return;
        n = end - o->sample_off;
        if (n > OUTPUT_SAMPLE_MAX) {
                char marker[128];
                (void) snprintf(marker, sizeof(marker), "\n[... %llu bytes of output not shown here: they are in the log ...]\n",
                                (unsigned long long) (n - OUTPUT_SAMPLE_MAX));
                o->on_output("stdout", marker, strlen(marker), o->userdata);
                o->sample_off = end - OUTPUT_SAMPLE_MAX;
                n = OUTPUT_SAMPLE_MAX;
        }
        k = pread(o->log_fd, buf, (size_t) n, (off_t) o->sample_off);
        o->sample_off = end;
        if (k <= 0)
                return;
        _cleanup_free_ char *text = exec_output_escape(buf, (size_t) k);
        if (text)
                o->on_output("stdout", text, strlen(text), o->userdata);
}

/* The loop wakes for a follower only while there is output: after a
 * sample with nothing new, the next comes when the mover says there is
 * (news_fd), at the earliest OUTPUT_SAMPLE_INTERVAL_USEC after the last. */
static int on_sample_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        ExecOutput *o = userdata;
        uint64_t before = o->sample_off;

        output_sample(o);
        o->sample_usec = usec;
        if (o->sample_off == before) {
                __atomic_store_n(&o->news_wanted, true, __ATOMIC_SEQ_CST);
                /* Bytes that came between the sample and the flag: no news
                 * may be sent for them, so look once more. */
                if (__atomic_load_n(&o->log_off, __ATOMIC_SEQ_CST) == o->sample_off)
                        return 0;
                __atomic_store_n(&o->news_wanted, false, __ATOMIC_SEQ_CST);
        }
        if (sd_event_source_set_time(source, usec + OUTPUT_SAMPLE_INTERVAL_USEC) >= 0)
                (void) sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
        return 0;
}

static int on_output_news(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        ExecOutput *o = userdata;
        uint64_t n;

        (void) !read(fd, &n, sizeof(n));
        if (sd_event_source_set_time(o->sample_timer, o->sample_usec + OUTPUT_SAMPLE_INTERVAL_USEC) >= 0)
                (void) sd_event_source_set_enabled(o->sample_timer, SD_EVENT_ONESHOT);
        return 0;
}

/* n bytes of the log at off, escaped. */
static char *output_read_escaped(ExecOutput *o, uint64_t off, size_t n) {
        _cleanup_free_ char *buf = malloc(n ?: 1);
        ssize_t k;

        if (!buf)
                return NULL;
        k = n > 0 ? pread(o->log_fd, buf, n, (off_t) off) : 0;
        return exec_output_escape(buf, k > 0 ? (size_t) k : 0);
}

/* What the model gets: the head and the tail of the output, as the log has
 * them, escaped, with a marker saying how much lies between. */
static char *output_render(ExecOutput *o, uint64_t total) {
        size_t head_cap = o->keep / 2, tail_cap = o->keep - head_cap;
        uint64_t avail = o->log_broken ? 0 : o->log_off - o->log_start;
        size_t head_n = (size_t) MIN(avail, (uint64_t) head_cap);
        size_t tail_n = (size_t) MIN(avail - head_n, (uint64_t) tail_cap);
        uint64_t cut = total > head_n + tail_n ? total - head_n - tail_n : 0;
        _cleanup_free_ char *head = NULL, *tail = NULL;
        char marker[96] = "";
        char *r;

        if (o->log_fd < 0)
                return strdup("");
        head = output_read_escaped(o, o->log_start, head_n);
        tail = output_read_escaped(o, o->log_off - tail_n, tail_n);
        if (!head || !tail)
                return NULL;
        if (cut > 0)
                (void) snprintf(marker, sizeof(marker), "\n[... %llu bytes of output cut ...]\n", (unsigned long long) cut);
        if (asprintf(&r, "%s%s%s", head, marker, tail) < 0)
                return NULL;
        return r;
}

/* The command's end: every writer is dead by now, so what the command
 * wrote is in the log or in the pipe; the mover moves the rest (bounded by
 * what the pipe holds now, whatever the other side does) and is joined,
 * then the head and tail replace what the collector kept. */
int exec_output_finish(ExecOutput *o, ExecResult *result) {
        output_stop_mover(o, false);
        output_sample(o);
        free(result->output);
        result->output_bytes = o->bytes;
        result->output = output_render(o, o->bytes);
        exec_output_close(o);
        return result->output ? 0 : -ENOMEM;
}

int exec_output_open(ExecOutput *o, sd_event *e, int log_fd, size_t keep, exec_output_handler_t on_output, void *userdata) {
        char path[64];
        struct stat st;
        pthread_attr_t attr;
        sigset_t all, old;
        int p[2];
        int r;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        o->out_fd = p[0];
        o->pass_fd = p[1];
        /* Only our end is non-blocking: the command writes as to any pipe. */
        if (fcntl(o->out_fd, F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        (void) fcntl(o->out_fd, F_SETPIPE_SZ, OUTPUT_PIPE_SIZE);
        /* The relay: ours at both ends, empty between two moves. */
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        o->relay_out = p[0];
        o->relay_in = p[1];
        (void) fcntl(o->relay_in, F_SETPIPE_SZ, OUTPUT_RELAY_SIZE);
        o->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (o->stop_fd < 0)
                return -errno;
        o->news_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (o->news_fd < 0)
                return -errno;

        /* splice() refuses a file opened with O_APPEND: the same file again,
         * written at offsets of our own, from its end. */
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d", log_fd);
        o->log_fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);   /* read: head and tail come back from it */
        if (o->log_fd < 0)
                return -errno;
        if (fstat(o->log_fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADF;
        o->log_start = o->log_off = o->sample_off = o->behind = (uint64_t) st.st_size;
        o->event = e;
        o->bytes = 0;
        o->log_broken = o->log_copy = o->abandon = o->news_wanted = false;
        o->ring_ready = o->ring_failed = false;
        o->behind_inflight = 0;
        o->allocated_end = 0;
        o->allocate_failed = false;
        o->keep = keep;
        o->on_output = on_output;
        o->userdata = userdata;

        if (on_output) {
                r = sd_event_now(e, CLOCK_MONOTONIC, &o->sample_usec);
                if (r < 0)
                        return r;
                r = sd_event_add_time(e, &o->sample_timer, CLOCK_MONOTONIC, o->sample_usec + OUTPUT_SAMPLE_INTERVAL_USEC,
                                      0, on_sample_timer, o);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(o->sample_timer, "sandbox-output-sample");
                r = sd_event_add_io(e, &o->news_io, o->news_fd, EPOLLIN, on_output_news, o);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(o->news_io, "sandbox-output-news");
        }

        /* The mover takes no signals: they belong to the loop's signalfd.
         * One runs for each command at work: a small stack (it needs its
         * copy buffer and a few frames), not the default 8 MiB. */
        sigfillset(&all);
        (void) pthread_attr_init(&attr);
        (void) pthread_attr_setstacksize(&attr, OUTPUT_MOVER_STACK);
        (void) pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&o->mover, &attr, output_mover, o);
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        (void) pthread_attr_destroy(&attr);
        if (r < 0)
                return r;
        o->mover_running = true;
        return 0;
}
