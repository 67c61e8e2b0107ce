/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The exec service: what a live sandbox's PID 1 does with the connection it
 * was given (agentfab-sandbox --serve-fd=N). One JSON object per line.
 *
 * Requests (from the daemon's side, one command at a time):
 *   {"type":"exec","id":N,"argv":["cmd","arg"...],"cwd":"/workspace/...",
 *    "env":{"NAME":"VALUE",...},"timeout_ms":N,"output_fd":true}
 *   {"type":"extend","id":N,"usec":U}   (while command N runs: the sandbox was
 *    frozen for U microseconds, which do not count towards its timeout; the
 *    daemon writes it before the thaw, so it is read before the deadline is)
 * With "output_fd", the request line's first byte carries a pipe's write
 * end (SCM_RIGHTS): the command's stdout and stderr both go there, straight
 * to the other side, and no "output" replies come. Every writer of that
 * pipe is dead when "exit" is sent, so what the command wrote is in the
 * pipe by then.
 * Replies:
 *   {"type":"started","id":N}
 *   {"type":"output","id":N,"stream":"stdout"|"stderr","data":"..."}
 *   {"type":"exit","id":N,"status":S,"signal":G,"timed_out":B,"duration_usec":U,"last_pid":P}
 *     (last_pid: the sandbox's PID namespace's last id given, if readable)
 *   {"type":"error","id":N,"message":"..."}        (request refused)
 *
 * After each command every other process in the sandbox is killed, so
 * nothing a command left running reaches the next one. When the connection
 * closes, the sandbox ends. The other side must treat every reply as
 * untrusted input: it comes from inside the sandbox. */

#define EXEC_REQUEST_MAX   (1024 * 1024)   /* one request line */
#define EXEC_ARGV_MAX      4096
#define EXEC_ENV_MAX       1024
#define EXEC_OUTPUT_CHUNK  (64 * 1024)

typedef struct SandboxConfig SandboxConfig;

/* Runs in the sandbox's PID 1, privileges dropped and filter loaded. Never returns. */
void exec_service_run(const SandboxConfig *c, int fd) __attribute__((noreturn));
