/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A command's output on the daemon's side of the exec service: a pipe of
 * ours, whose write end goes into the sandbox with the request
 * ("output_fd", exec-service.h), and whose bytes go into the task's log by
 * splice(2) through a second pipe, never through our memory (read() and pwrite() where splice()
 * is refused; counted and dropped once the log cannot be written, so that
 * a full disk does not stop the command; a flood's log is written out and
 * dropped from the page cache behind the mover). The moving is done by a thread
 * of its own, one per running command, not by the event loop: the loop
 * neither wakes for every write of the command nor holds the command up
 * while it serves the bus. What the model gets is the head and the tail,
 * read back from the log and escaped; a follower (on_output) gets at most
 * OUTPUT_SAMPLE_MAX of the newest bytes every OUTPUT_SAMPLE_INTERVAL_USEC,
 * escaped, and a note of what it was not shown; both on the event loop. */

#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "exec-client.h"

typedef struct ExecOutput {
        sd_event *event;           /* borrowed */
        int pass_fd;               /* the write end, until sent with the request */
        int out_fd;                /* the read end, the mover's while it runs */
        int stop_fd;               /* an eventfd: the loop tells the mover to stop */
        int news_fd;               /* an eventfd: the mover tells the loop there is output to sample */
        sd_event_source *news_io;
        pthread_t mover;
        bool mover_running;        /* started and not yet joined */
        bool abandon;              /* stop without moving what the pipe still holds */
        int relay_in, relay_out;   /* a pipe of the mover's own between out_fd and the log */
        int log_fd;                /* the log, opened again without O_APPEND: splice() wants an offset */
        /* Written by the mover, read by the loop with __atomic loads while
         * it runs (a follower's samples), plainly after the join. */
        bool log_broken;           /* a write to the log failed: output is read and dropped */
        bool log_copy;             /* splice() is not to be had: read() and pwrite() */
        uint64_t log_off;          /* the log holds everything before this */
        uint64_t bytes;            /* all output, logged or not */
        /* The mover's: writeback of the log started up to here, by a ring
         * made for the first flood (output_write_behind()). */
        uint64_t behind;
        struct io_uring ring;
        bool ring_ready, ring_failed;
        unsigned behind_inflight;
        /* The mover's: blocks allocated ahead of the log up to here (past
         * its size; freed at the close). */
        uint64_t allocated_end;
        bool allocate_failed;
        bool news_wanted;          /* set by the loop, cleared by the mover when it writes news_fd */
        uint64_t log_start, sample_off;
        uint64_t sample_usec;      /* CLOCK_MONOTONIC of the last sample */
        sd_event_source *sample_timer; /* a follower's next sample */
        size_t keep;
        exec_output_handler_t on_output;
        void *userdata;
} ExecOutput;

void exec_output_init(ExecOutput *o);
/* A new pipe (pass_fd to be sent, out_fd the mover's) and log_fd (a
 * regular file, maybe O_APPEND) opened again for reading and writing at
 * its end; the mover thread runs from here on. On error the caller calls
 * exec_output_close(). */
int exec_output_open(ExecOutput *o, sd_event *e, int log_fd, size_t keep, exec_output_handler_t on_output,
                     void *userdata);
/* The command has ended (every writer of the pipe is gone): the mover
 * moves what the pipe holds now, bounded by that whatever the other side
 * does, and is joined; result gets output_bytes and the escaped head and
 * tail. Closes. */
int exec_output_finish(ExecOutput *o, ExecResult *result);
/* Stops the mover (what the pipe still holds is dropped) and closes. */
void exec_output_close(ExecOutput *o);
