/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "agent-run.h"
#include "agent.h"
#include "audit.h"
#include "context.h"
#include "log.h"
#include "string-util.h"
#include "symbol-outline.h"
#include "time-util.h"

/* The symbol outline of the first prompt (symbol-outline.h): the files the
 * goal, the acceptance criteria and the baseline's failed tests point to
 * are chosen here, on the loop, with a walk as bounded as the tree's;
 * ctags runs on them in the task's sandbox, since it parses the
 * repository's files, which are untrusted, and what it writes is read here
 * as untrusted too. The outline is a help, never a condition: a sandbox
 * image without ctags, a timeout or garbage make no outline, a debug line,
 * and the task goes on. */

static void on_outline_done(SandboxSession *s, int error, const ExecResult *result, void *userdata) {
        _cleanup_strv_free_ char **files = NULL;
        _cleanup_(outline_done) Outline o = {};
        AgentRun *run = userdata;
        Task *t = run->task;
        size_t budget;
        int r;

        (void) s;
        files = TAKE_PTR(run->outline_files);
        if (!t)
                return;
        run->phase = PHASE_IDLE;
        if (error < 0 && error != -EINVAL) {
                /* The sandbox is gone: as for any command of the task. */
                if (error == -ECONNRESET || error == -EPIPE)
                        return agent_fail(run, "The task's sandbox ended unexpectedly.");
                return agent_fail(run, "Cannot run a command in the sandbox: %s", strerror(-error));
        }
        if (error == 0) {
                _cleanup_strv_free_ char **argv = NULL;
                _cleanup_free_ char *command = NULL;

                if (outline_ctags_argv(files, &argv) >= 0)
                        command = strv_join(argv, " ");
                audit_command(t, t->progress.step + 1, "outline", command ?: "ctags", result->status, result->signal,
                              result->timed_out, result->duration_usec, result->output_bytes);
        }
        if (error < 0 || result->status != 0 || result->signal > 0 || result->timed_out) {
                log_debug("Task '%s': no symbol outline, ctags %s in the sandbox.", t->id,
                          error < 0 ? "was refused" : result->timed_out ? "timed out" :
                          result->status == 127 ? "is not installed" : "failed");
                return agent_schedule(run);
        }
        /* The window's share at the bytes per token the context counts
         * with before any server's count. */
        budget = outline_budget_bytes(run->profile ? run->profile->context_budget : 0, CONTEXT_BPT_DEFAULT_MILLI);
        r = outline_parse(result->output, strlen(strempty(result->output)), files, &o);
        if (r >= 0)
                r = outline_format(&o, files, budget, &run->outline);
        if (r < 0)
                return agent_fail(run, "Out of memory.");
        log_debug("Task '%s': symbol outline of %zu files, %zu symbols (%zu lines skipped, %zu dropped), %zu bytes "
                  "of %zu.", t->id, strv_length(files), o.n, o.skipped, o.dropped, strlen(strempty(run->outline)),
                  budget);
        agent_schedule(run);
}

int agent_outline_start(AgentRun *run) {
        _cleanup_strv_free_ char **files = NULL, **argv = NULL;
        _cleanup_free_ char *req = NULL;
        Task *t = run->task;
        int r;

        if (run->outline_tried)
                return 0;
        run->outline_tried = true;

        req = agent_requirement(t);
        if (!req)
                return -ENOMEM;
        r = outline_pick_files(ledger_workspace_fd(run->ledger), req,
                               t->progress.baseline_recorded ? t->progress.baseline_failures : NULL,
                               OUTLINE_FILES_MAX, &files);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !files) {
                if (r < 0)
                        log_debug_errno(r, "Task '%s': no symbol outline, the workspace's files cannot be listed: %m",
                                        t->id);
                return 0;
        }
        r = outline_ctags_argv(files, &argv);
        if (r < 0)
                return r;

        ExecRequest req_exec = {
                .argv = argv,
                .timeout_usec = OUTLINE_TIMEOUT_SEC * USEC_PER_SEC,
        };
        /* Not in the task's log (output.log): the outline is the daemon's,
         * and its JSON is read here, bounded. */
        r = sandbox_session_exec(run->session, &req_exec, -EBADF, OUTLINE_OUTPUT_MAX, NULL, on_outline_done, run);
        if (r < 0) {
                log_debug_errno(r, "Task '%s': no symbol outline, ctags cannot be run in the sandbox: %m", t->id);
                return 0;
        }
        run->outline_files = TAKE_PTR(files);
        run->phase = PHASE_OUTLINE;
        return 1;
}
