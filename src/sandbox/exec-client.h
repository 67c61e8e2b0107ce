/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec-service.h"

/* The outside end of the exec service (exec-service.h): runs one command
 * in a live sandbox and collects its result. Everything read from the
 * sandbox is untrusted and bounded. */

typedef struct ExecRequest {
        char **argv;
        const char *cwd;          /* NULL: /workspace */
        char **env;               /* NAME=VALUE, added to the sandbox's declared environment */
        uint64_t timeout_usec;    /* UINT64_MAX: none */
        bool output_fd;           /* output into a pipe sent with the request (exec-service.h) */
} ExecRequest;

typedef struct ExecResult {
        int status;               /* exit status, -1 if a signal ended it */
        int signal;
        bool timed_out;
        bool limit_killed;        /* the scope's memory limit killed something during the command */
        uint64_t duration_usec;
        uint64_t peak_memory;     /* bytes the scope used at most, UINT64_MAX if unknown */
        uint64_t output_bytes;    /* all output, as written to the log */
        /* The last id the sandbox's PID namespace gave, after the command
         * (processes and threads started in it so far); UINT64_MAX if the
         * sandbox did not say. From inside the sandbox: a count to show,
         * nothing to trust. */
        uint64_t last_pid;
        char *output;             /* kept for the model: all of it, or head and tail with a marker */
} ExecResult;

void exec_result_done(ExecResult *r);

/* Called for every chunk of output as it arrives; stream is "stdout" or "stderr". */
typedef void (*exec_output_handler_t)(const char *stream, const char *data, size_t n, void *userdata);

/* memory_cgroup: the sandbox's memory cgroup directory (exec_client_memory_cgroup()), or NULL. */
int exec_client_run(int fd, const ExecRequest *req, int log_fd, size_t keep_bytes, const char *memory_cgroup,
                    ExecResult *ret);

/* Finds the memory cgroup directory of pid (v1 memory controller; -ENOENT on a pure v2 host). */
int exec_client_memory_cgroup(pid_t pid, char **ret);

/* Head and tail of a stream, for output that must stay bounded. */
typedef struct HeadTail {
        size_t keep;              /* bytes kept in all: half head, half tail */
        char *head;
        size_t head_len;
        char *tail;               /* ring buffer */
        size_t tail_len, tail_pos;
        uint64_t total;
} HeadTail;

int head_tail_init(HeadTail *h, size_t keep);
void head_tail_add(HeadTail *h, const char *data, size_t n);
char *head_tail_render(const HeadTail *h);   /* "head\n[... N bytes cut ...]\ntail" */

/* Output made fit for the model, a journal entry or a terminal: valid
 * UTF-8 passes, and so do newlines and tabs; other control characters,
 * DEL and bytes that are not UTF-8 become "\xNN". At most 4n + 1 bytes. */
char *exec_output_escape(const char *data, size_t n);
void head_tail_done(HeadTail *h);

/* The pieces both clients are made of: the blocking exec_client_run() and
 * the asynchronous session (exec-session.h). */

/* A reply line is at most one output chunk, JSON-escaped (6x), plus framing. */
#define EXEC_REPLY_LINE_MAX (EXEC_OUTPUT_CHUNK * 6 + 4096)

/* The request line for req, newline included. */
int exec_request_format(const ExecRequest *req, int64_t id, char **ret_line);

/* One command's replies, parsed line by line. */
typedef struct ExecCollector {
        int64_t id;
        int log_fd;
        HeadTail ht;
        ExecResult result;
        const char *memory_cgroup;      /* borrowed */
        uint64_t oom_before;
        exec_output_handler_t on_output;
        void *userdata;
} ExecCollector;

/* Also resets the peak memory figure of the cgroup (best effort) and
 * remembers its OOM kill count. */
int exec_collector_begin(ExecCollector *c, int64_t id, int log_fd, size_t keep_bytes, const char *memory_cgroup,
                         exec_output_handler_t on_output, void *userdata);
/* Feeds one reply line (without its newline; modified). Returns 0 when more
 * is to come, 1 when the command's "exit" came, -EINVAL when the sandbox
 * refused the request, -EBADMSG when it sent nonsense. */
int exec_collector_feed(ExecCollector *c, char *line, size_t n);
/* Adds the scope's figures and the bounded output; hands the result over. */
int exec_collector_end(ExecCollector *c, ExecResult *ret);
void exec_collector_done(ExecCollector *c);
