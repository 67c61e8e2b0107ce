/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "exec-client.h"
#include "macro.h"

/* The daemon's end of a task sandbox: asks agentfab-launcher(8) for a
 * sandbox in agentfab-task-ID.scope, then runs its commands through the
 * sandbox's exec service on the same connection, without blocking the
 * event loop. Everything read from the sandbox is untrusted and bounded.
 * Closing the session (sandbox_session_free()) ends the sandbox and its scope. */

#define SANDBOX_LAUNCHER_SOCKET "/run/agentfab/launcher.sock"
#define SANDBOX_SESSION_OPEN_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define SANDBOX_SESSION_REAP_TIMEOUT_USEC (60 * USEC_PER_SEC)
/* A command with a timeout that the sandbox does not end in time plus this
 * is given up on, and the sandbox with it. */
#define SANDBOX_SESSION_EXEC_GRACE_USEC (30 * USEC_PER_SEC)
/* The launcher waits at most 5 s for a freeze; this bounds the rest. */
#define SANDBOX_SESSION_FREEZE_TIMEOUT_USEC (15 * USEC_PER_SEC)

/* What the scope may use; 0: the launcher's default (also its maximum:
 * more than the maximum is clamped by the launcher). */
typedef struct SandboxLimits {
        uint64_t memory_max;            /* bytes */
        uint64_t tasks_max;
        uint64_t cpu_quota_percent;     /* 100: one CPU */
        uint64_t runtime_max_sec;       /* 0: none (unless the launcher has a maximum) */
} SandboxLimits;

typedef struct SandboxSession SandboxSession;

/* Connects to the launcher socket, sends the request with the workspace fd
 * (the caller keeps its own), and waits for "ready": this part blocks, at
 * most SANDBOX_SESSION_OPEN_TIMEOUT_USEC. env: NAME=VALUE entries for every
 * command, may be NULL. On refusal returns -EREMOTEIO and, if ret_error is
 * given, the launcher's reason. */
int sandbox_session_open(sd_event *e, const char *launcher_socket, const char *task_id, int workspace_fd,
                         const SandboxLimits *limits, char **env, char **ret_error, SandboxSession **ret);

/* The same, in a task environment (environments.h; NULL: the default),
 * with the dependency cache directory cache_fd (-EBADF: none) mounted
 * writable at /cache, and the task's channel to the egress proxy proxy_fd
 * (-EBADF: no network; agentfab-proxy(8)), which the sandbox keeps for
 * its life. The launcher finds the environment's image itself. The caller
 * keeps its own copies of the fds. */
int sandbox_session_open_in(sd_event *e, const char *launcher_socket, const char *task_id, int workspace_fd,
                            const SandboxLimits *limits, char **env, const char *environment, int cache_fd,
                            int proxy_fd, char **ret_error, SandboxSession **ret);

/* The same without blocking: returns once the request is sent (ret is the
 * session, not yet ready for commands), and calls done on the event loop
 * with error 0 and the session ready, or a negative errno (-EREMOTEIO with
 * the launcher's reason in error_message, which may be NULL, valid during
 * the call only); then the session is dead and the handler frees it. Freeing
 * the session before that gives the request up. */
typedef void (*session_open_handler_t)(SandboxSession *s, int error, const char *error_message, void *userdata);
/* history_fd (-EBADF: none) is the task's ledger, a bare git directory,
 * which the sandbox mounts read-only at /history.git with GIT_DIR and
 * GIT_WORK_TREE set, so that git answers about the task's history in
 * /workspace and can change nothing of it. */
int sandbox_session_open_async(sd_event *e, const char *launcher_socket, const char *task_id, int workspace_fd,
                               const SandboxLimits *limits, char **env, const char *environment, int cache_fd,
                               int history_fd, int proxy_fd, session_open_handler_t done, void *userdata,
                               SandboxSession **ret);
/* True once the launcher said "ready" (until then exec is -ENOTCONN). */
bool sandbox_session_is_ready(const SandboxSession *s);

/* error: 0, or -EINVAL (the sandbox refused the request), -ECONNRESET (the
 * sandbox ended), -EBADMSG (it sent nonsense), -ETIMEDOUT (it did not end
 * a timed-out command); after any but -EINVAL the session is dead. result
 * is the session's and valid during the call only; with an error it holds
 * what came so far. The handler may start the next command or free the session. */
typedef void (*exec_done_handler_t)(SandboxSession *s, int error, const ExecResult *result, void *userdata);

/* Sends one exec request and returns at once; output is parsed as it
 * arrives on the event loop, written to log_fd (if >= 0) in full, passed
 * to on_output (if set) chunk by chunk, and kept bounded (keep bytes,
 * head and tail) for the result; done runs once, unless the session is
 * freed first. on_output must not free the session (done may). One command at a time: -EBUSY otherwise; -ENOTCONN once
 * the sandbox is gone. */
int sandbox_session_exec(SandboxSession *s, const ExecRequest *req, int log_fd, size_t keep,
                         exec_output_handler_t on_output, exec_done_handler_t done, void *userdata);

/* hook runs in sandbox_session_exec() once the command is sure to be sent,
 * before it is: a connection kept in systemd's fd store for a restart of
 * the daemon is taken out of it there, as a command in flight is never
 * taken up again (NULL: none). It must not free the session. */
typedef void (*session_exec_hook_t)(SandboxSession *s, void *userdata);
void sandbox_session_set_exec_hook(SandboxSession *s, session_exec_hook_t hook, void *userdata);

const char *sandbox_session_get_unit(const SandboxSession *s);
pid_t sandbox_session_get_pid(const SandboxSession *s);
/* The last id its PID namespace gave, as its last command's end said: the
 * processes and threads started in it so far (UINT64_MAX: not said yet). */
uint64_t sandbox_session_get_last_pid(const SandboxSession *s);
/* The uid the sandbox's commands run as, as the launcher said (UID_INVALID: it did not). */
uid_t sandbox_session_get_uid(const SandboxSession *s);
bool sandbox_session_is_busy(const SandboxSession *s);

/* Freezes the whole sandbox, every process of its scope, through the
 * launcher (systemd's FreezeUnit(), else the scope's cgroup v2
 * cgroup.freeze), in the middle of a command too. Blocking, at most
 * SANDBOX_SESSION_FREEZE_TIMEOUT_USEC. Until it is thawed, the session
 * reads nothing and its command's deadline stands still. ret_method:
 * "systemd" or "cgroup" (static); ret_usec: how long the freeze took. On
 * refusal returns -EREMOTEIO and the launcher's reason in ret_error. */
int sandbox_session_freeze(SandboxSession *s, const char *launcher_socket, const char **ret_method, uint64_t *ret_usec,
                           char **ret_error);

/* Thaws it; a command in flight gets the time it stood frozen added to its
 * timeout (told to the sandbox before the thaw). */
int sandbox_session_thaw(SandboxSession *s, const char *launcher_socket, char **ret_error);

bool sandbox_session_is_frozen(const SandboxSession *s);
/* Its PID 1 still lives (a frozen sandbox's connection cannot say). */
bool sandbox_session_is_alive(const SandboxSession *s);
/* How long it has been frozen so far (0: it is not). */
uint64_t sandbox_session_frozen_usec(const SandboxSession *s);

/* The connection, for systemd's fd store (a frozen sandbox kept across a
 * restart of the daemon); still the session's. */
int sandbox_session_get_fd(const SandboxSession *s);

/* Takes over fd, the connection of a sandbox that an earlier instance of
 * the daemon left in the fd store (frozen, or running between commands):
 * pid and uid as the launcher said when it was made. The connection, pid
 * and uid are checked first (session-check.h); on failure returns a
 * negative errno with the reason in ret_why (static; may be NULL), and fd
 * stays the caller's. */
int sandbox_session_adopt(sd_event *e, int fd, const char *task_id, pid_t pid, uid_t uid, bool frozen,
                          const char **ret_why, SandboxSession **ret);

/* Asks the launcher to stop every agentfab-task-*.scope whose id is not in
 * keep_ids (may be NULL: all). Blocking, at most
 * SANDBOX_SESSION_REAP_TIMEOUT_USEC. Returns how many were stopped. */
int sandbox_session_reap(const char *launcher_socket, char **keep_ids);

/* Closes the connection: the sandbox and its scope end. A pending
 * command's handler is not called. */
SandboxSession *sandbox_session_free(SandboxSession *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(SandboxSession *, sandbox_session_free);
