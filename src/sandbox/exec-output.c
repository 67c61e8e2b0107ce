/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exec-output.h"
#include "macro.h"

/* Output goes from the command's pipe to the log by splice(): the bytes
 * never pass through our memory. A pipe of this size (the default maximum
 * for unprivileged processes) takes 16 wakeups per MiB fewer than 64 KiB. */
#define OUTPUT_PIPE_SIZE (1024 * 1024)
/* At most this much is moved per wakeup, so that the bus and the other
 * tasks are served between two such runs. */
#define OUTPUT_SPLICE_BUDGET (16u * 1024u * 1024u)
/* What a stream client following the output is shown, at most every
 * OUTPUT_SAMPLE_INTERVAL_USEC: the newest bytes; what lies before them is
 * named, not sent. So a flood reaches a terminal at a few hundred KiB/s. */
#define OUTPUT_SAMPLE_MAX (16u * 1024u)
#define OUTPUT_SAMPLE_INTERVAL_USEC (50u * 1000u)

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

void exec_output_init(ExecOutput *o) {
        *o = (ExecOutput) { .pass_fd = -EBADF, .out_fd = -EBADF, .log_fd = -EBADF };
}

void exec_output_close(ExecOutput *o) {
        o->sample_timer = sd_event_source_disable_unref(o->sample_timer);
        o->out_io = sd_event_source_disable_unref(o->out_io);
        o->out_fd = safe_close(o->out_fd);
        o->pass_fd = safe_close(o->pass_fd);
        o->log_fd = safe_close(o->log_fd);
}

/* Moves at most max bytes from the pipe to the log. Returns 1 at the end of
 * the output, 0 when the pipe is empty or max is reached. */
static int output_move(ExecOutput *o, uint64_t max) {
        while (max > 0) {
                size_t want = (size_t) MIN(max, (uint64_t) OUTPUT_PIPE_SIZE);
                ssize_t k;

                if (!o->log_broken && !o->log_copy) {
                        loff_t off = (loff_t) o->log_off;
                        k = splice(o->out_fd, NULL, o->log_fd, &off, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (k < 0 && IN_SET(errno, EINVAL, ENOSYS, EPERM)) {
                                /* No splice() here (a filter, a file system
                                 * without it): copied through our memory. */
                                o->log_copy = true;
                                continue;
                        }
                        if (k < 0 && errno != EINTR && errno != EAGAIN) {
                                /* A full disk must not stop the command: from
                                 * here on its output is counted and dropped. */
                                o->log_broken = true;
                                continue;
                        }
                        if (k > 0)
                                o->log_off += (uint64_t) k;
                } else {
                        char buf[64 * 1024];
                        k = read(o->out_fd, buf, MIN(want, sizeof(buf)));
                        if (k > 0 && !o->log_broken) {
                                ssize_t w = pwrite(o->log_fd, buf, (size_t) k, (off_t) o->log_off);
                                if (w == k)
                                        o->log_off += (uint64_t) k;
                                else
                                        o->log_broken = true;
                        }
                }
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 0 : 1;
                }
                if (k == 0)
                        return 1;
                o->bytes += (uint64_t) k;
                max -= (uint64_t) k;
        }
        return 0;
}

/* A follower of the output (the stream socket) gets the newest bytes,
 * escaped, at most OUTPUT_SAMPLE_MAX per wakeup, read back from the log. */
static int on_sample_timer(sd_event_source *source, uint64_t usec, void *userdata);

static void output_sample(ExecOutput *o, bool last) {
        char buf[OUTPUT_SAMPLE_MAX];
        uint64_t n, now = now_usec();
        ssize_t k;

        if (!o->on_output || o->log_broken || o->log_fd < 0 || o->log_off <= o->sample_off)
                return;
        if (!last && now < o->sample_usec + OUTPUT_SAMPLE_INTERVAL_USEC) {
                /* Held back, not lost: the timer shows it, unless more comes first. */
                if (!o->sample_timer)
                        (void) sd_event_add_time(o->event, &o->sample_timer, CLOCK_MONOTONIC,
                                                 o->sample_usec + OUTPUT_SAMPLE_INTERVAL_USEC, 0, on_sample_timer, o);
                return;
        }
        o->sample_timer = sd_event_source_disable_unref(o->sample_timer);
        o->sample_usec = now;
        n = o->log_off - o->sample_off;
        if (n > OUTPUT_SAMPLE_MAX) {
                char marker[128];
                (void) snprintf(marker, sizeof(marker), "\n[... %llu bytes of output not shown here: they are in the log ...]\n",
                                (unsigned long long) (n - OUTPUT_SAMPLE_MAX));
                o->on_output("stdout", marker, strlen(marker), o->userdata);
                o->sample_off = o->log_off - OUTPUT_SAMPLE_MAX;
                n = OUTPUT_SAMPLE_MAX;
        }
        k = pread(o->log_fd, buf, (size_t) n, (off_t) o->sample_off);
        o->sample_off = o->log_off;
        if (k <= 0)
                return;
        _cleanup_free_ char *text = exec_output_escape(buf, (size_t) k);
        if (text)
                o->on_output("stdout", text, strlen(text), o->userdata);
}

static int on_sample_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        ExecOutput *o = userdata;

        o->sample_timer = sd_event_source_disable_unref(o->sample_timer);
        output_sample(o, true);
        return 0;
}

static int on_output_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        ExecOutput *o = userdata;

        if (output_move(o, OUTPUT_SPLICE_BUDGET) != 0) {
                o->out_io = sd_event_source_disable_unref(o->out_io);
                o->out_fd = safe_close(o->out_fd);
        }
        output_sample(o, false);
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

/* The command's end: what the pipe still holds goes to the log (every
 * writer is dead by now, so it is all there; FIONREAD bounds it, whatever
 * the other side does), then the head and tail replace what the collector
 * kept. */
int exec_output_finish(ExecOutput *o, ExecResult *result) {
        int avail = 0;

        if (o->out_fd >= 0 && ioctl(o->out_fd, FIONREAD, &avail) >= 0 && avail > 0)
                (void) output_move(o, (uint64_t) avail);
        output_sample(o, true);
        free(result->output);
        result->output_bytes = o->bytes;
        result->output = output_render(o, o->bytes);
        exec_output_close(o);
        return result->output ? 0 : -ENOMEM;
}

int exec_output_open(ExecOutput *o, sd_event *e, int log_fd, size_t keep, exec_output_handler_t on_output, void *userdata) {
        char path[64];
        struct stat st;
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
        o->log_start = o->log_off = o->sample_off = (uint64_t) st.st_size;
        o->sample_usec = 0;
        o->event = e;
        o->bytes = 0;
        o->log_broken = o->log_copy = false;
        o->keep = keep;
        o->on_output = on_output;
        o->userdata = userdata;

        r = sd_event_add_io(e, &o->out_io, o->out_fd, EPOLLIN, on_output_io, o);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(o->out_io, "sandbox-output");
        return 0;
}

