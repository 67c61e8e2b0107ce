/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Preparing a task to work: its workspace (made in a worker thread, since
 * it may mean cloning a big repository) and its sandbox (asked of the
 * launcher on the event loop, a few at a time). */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "audit.h"
#include "cache.h"
#include "conversation-file.h"
#include "egress.h"
#include "environment-identity.h"
#include "exec-session.h"
#include "factory.h"
#include "freezer.h"
#include "fs-util.h"
#include "ledger.h"
#include "log.h"
#include "string-util.h"
#include "worker.h"

/* Sandboxes the launcher makes at a time. systemd makes their scopes one
 * after the other anyway; more requests at once would only make each wait
 * longer, past its timeout when many tasks resume together. The others wait
 * in line, on the event loop. */
#define SANDBOX_OPENS_MAX 2u
static unsigned sandbox_opening = 0;
static AgentRun *sandbox_waiters = NULL;

/* Our turn at the launcher is over (or given up): the next in line goes. */
void agent_sandbox_release(AgentRun *run) {
        if (run->sandbox_waiting) {
                for (AgentRun **i = &sandbox_waiters; *i; i = &(*i)->sandbox_next)
                        if (*i == run) {
                                *i = run->sandbox_next;
                                break;
                        }
                run->sandbox_waiting = false;
                run->sandbox_next = NULL;
        }
        if (!run->sandbox_opening)
                return;
        run->sandbox_opening = false;
        sandbox_opening--;
        while (sandbox_waiters && sandbox_opening < SANDBOX_OPENS_MAX) {
                AgentRun *w = sandbox_waiters;
                sandbox_waiters = w->sandbox_next;
                w->sandbox_next = NULL;
                w->sandbox_waiting = false;
                if (!w->task)
                        continue;   /* stopped meanwhile */
                w->phase = PHASE_IDLE;
                agent_schedule(w);
                break;   /* it takes the free place when it runs */
        }
}

/* Making the workspace may mean cloning a big repository, over the network
 * even: it runs in a worker thread, on data of its own, while the loop
 * serves everything else. */
typedef struct CreateJob {
        int dir_fd;
        char *source;
        char *base;
        char *branch;
        LedgerOptions options;     /* its ssh_key and ssh_known_hosts point into ssh */
        SshCredentials ssh;        /* secret: wiped when the job is freed */
        Ledger *ledger;            /* the result */
        char *error;
} CreateJob;

static int create_job_run(void *p) {
        CreateJob *j = p;

        /* A half-made workspace of an interrupted preparation goes first. */
        (void) rm_rf_at(j->dir_fd, "ledger.git");
        (void) rm_rf_at(j->dir_fd, TASK_WORKSPACE_DIR);
        return ledger_create(j->dir_fd, j->source, -EBADF, j->base, j->branch, &j->options, &j->error, &j->ledger);
}

static void create_job_free(void *p) {
        CreateJob *j = p;

        if (!j)
                return;
        ledger_free(j->ledger);
        safe_close(j->dir_fd);
        free(j->source);
        free(j->base);
        free(j->branch);
        free(j->error);
        ssh_credentials_done(&j->ssh);
        free(j);
}

/* For an ssh:// repository: the [Git] credentials, read now, so a renewed
 * credential counts from the next preparation on. The key is never logged:
 * the messages name the credential only. */
static int create_job_read_ssh(CreateJob *j, const Config *c, char **ret_error) {
        int r;

        r = config_read_ssh_credentials(c, j->source, c->ssh_key_credential, "[Git] SSHKeyCredential=", &j->ssh, ret_error);
        if (r < 0)
                return r;
        j->options.ssh_key = j->ssh.key;
        j->options.ssh_known_hosts = j->ssh.known_hosts;
        return 0;
}

static void on_create_done(Worker *w, int r, void *p, void *userdata) {
        CreateJob *j = p;
        AgentRun *run = userdata;

        (void) w;
        run->worker = NULL;
        run->phase = PHASE_IDLE;
        if (!run->task)
                return;
        if (r < 0)
                return agent_fail(run, "Cannot prepare the workspace: %s", j->error ?: strerror(-r));
        run->ledger = TAKE_PTR(j->ledger);
        ledger_track_changes(run->ledger, true);        /* Every change is reported below. */
        agent_schedule(run);
}

int agent_open_workspace(AgentRun *run, bool create) {
        Task *t = run->task;
        CreateJob *j;
        int r;

        if (run->ledger)
                return 0;

        r = ledger_open(run->dir_fd, t->branch, &run->ledger);
        if (r >= 0)
                ledger_track_changes(run->ledger, true);        /* Every change is reported below. */
        if (r >= 0 || !create) {
                if (r < 0)
                        agent_fail(run, "Cannot open the task's workspace: %s", strerror(-r));
                return r;
        }

        j = calloc(1, sizeof(CreateJob));
        if (!j)
                return agent_fail(run, "Out of memory."), -ENOMEM;
        *j = (CreateJob) {
                .dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3),
                .source = strdup(t->spec.repository),
                .base = strdup(t->spec.base ?: "HEAD"),
                .branch = strdup(t->branch),
                .options = { .max_bytes = run->factory->config.max_repository_size, .submodules = t->spec.submodules },
        };
        if (j->dir_fd < 0 || !j->source || !j->base || !j->branch) {
                create_job_free(j);
                return agent_fail(run, "Cannot prepare the workspace: out of resources."), -ENOMEM;
        }
        _cleanup_free_ char *ssh_error = NULL;
        r = create_job_read_ssh(j, &run->factory->config, &ssh_error);
        if (r < 0) {
                create_job_free(j);
                return agent_fail(run, "Cannot prepare the workspace: %s", ssh_error ?: strerror(-r)), r;
        }
        r = worker_start(run->factory->event, create_job_run, on_create_done, create_job_free, j, run, &run->worker);
        if (r < 0) {
                create_job_free(j);
                return agent_fail(run, "Cannot start preparing the workspace: %s", strerror(-r)), r;
        }
        run->phase = PHASE_PREPARE;
        return 1;
}

static void on_sandbox_ready(SandboxSession *s, int error, const char *error_message, void *userdata) {
        AgentRun *run = userdata;
        Task *t = run->task;

        (void) s;
        agent_sandbox_release(run);
        if (!t)
                return;   /* stopped meanwhile: the session goes with the run */
        run->phase = PHASE_IDLE;
        if (error < 0) {
                run->session = sandbox_session_free(run->session);
                egress_unregister(run->factory->egress, t->id);
                return agent_fail(run, "Cannot start the task's sandbox: %s", error_message ?: strerror(-error));
        }
        audit_sandbox(t, sandbox_session_get_unit(run->session), sandbox_session_get_pid(run->session),
                      sandbox_session_get_uid(run->session));
        agent_resources_sandbox_new(run);
        agent_schedule(run);
}

int agent_open_sandbox(AgentRun *run) {
        _cleanup_free_ char *error = NULL;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_close_ int cache_fd = -EBADF, proxy_fd = -EBADF, history_fd = -EBADF;
        const Config *c = &run->factory->config;
        Task *t = run->task;
        const Environment *e;
        int r;

        /* A sandbox whose network went with the egress proxy (restarted)
         * is replaced before the task's next step (until then its commands
         * find no network at all); nothing else of it is kept between
         * steps but the workspace and the cache. One being made is
         * replaced once it is ready. */
        if (run->session && !run->sandbox_opening && egress_task_lost(run->factory->egress, t->id)) {
                log_info("Task '%s': the egress proxy went away; making its sandbox again.", t->id);
                agent_resources_sample(run);
                egress_unregister(run->factory->egress, t->id);
                run->session = sandbox_session_free(run->session);
        }
        /* The sandbox frozen while the task waited: thawed, as it was; or
         * the one a restarted daemon took up again. Between commands its
         * connection waits in the fd store, for the next restart. */
        if (!run->session) {
                run->session = freezer_take_parked(t);
                if (run->session)
                        agent_resources_sandbox_taken(run);
        }
        if (run->session) {
                freezer_store_running(t, run->session);
                return 0;
        }
        if (sandbox_opening >= SANDBOX_OPENS_MAX) {
                AgentRun **i = &sandbox_waiters;
                while (*i)
                        i = &(*i)->sandbox_next;
                *i = run;
                run->sandbox_waiting = true;
                run->phase = PHASE_SANDBOX;
                return 1;
        }

        e = environments_find(&run->factory->environments, t->spec.environment ?: ENVIRONMENT_DEFAULT);
        if (!e) {
                _cleanup_free_ char *known = environments_names(&run->factory->environments);
                agent_fail(run, "The task's environment '%s' is no longer configured; known: %s.",
                           t->spec.environment, strempty(known));
                return -ENOENT;
        }
        /* SECURITY: a mode that needs the egress proxy never silently runs
         * without it (nor with more than it allows): no proxy, no sandbox. */
        if (e->network != NETWORK_OFF) {
                r = egress_register(run->factory->egress, t, e, &proxy_fd, &error);
                if (r < 0) {
                        agent_fail(run, "Environment '%s' has Network=%s, and %s", e->name,
                                   network_mode_to_string(e->network), error ?: strerror(-r));
                        return r;
                }
        }
        /* Where the branch is built, once: every commit names the same.
         * Kept in memory here and written with the state file's next write
         * (off the loop): no commit is kept before a write acknowledges it,
         * and a restart before that reads the image again. */
        if (!t->progress.environment_identity) {
                r = environment_identity(e, &t->progress.environment_identity);
                if (r < 0) {
                        agent_fail(run, "Cannot read the image of environment '%s': %s", e->name, strerror(-r));
                        return r;
                }
        }
        for (char **v = e->vars; v && *v; v++)
                if (strv_env_set(&env, *v) < 0)
                        return agent_fail(run, "Out of memory."), -ENOMEM;
        if (e->caches) {
                /* SECURITY: per environment and per owner, never shared between
                 * users, so that a poisoned cache reaches nobody else's task. */
                cache_fd = cache_open(run->factory->state_fd, e->name, t->owner, true);
                if (cache_fd < 0) {
                        agent_fail(run, "Cannot open the dependency cache of environment '%s': %s", e->name,
                                   strerror(-cache_fd));
                        return cache_fd;
                }
                if (environment_cache_vars(e->caches, &env) < 0)
                        return agent_fail(run, "Out of memory."), -ENOMEM;
        }

        /* git in the sandbox answers about the task's history, read-only
         * (exec-session.h); without it git still works on a clone the
         * commands make themselves. */
        history_fd = openat(run->dir_fd, "ledger.git", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (history_fd < 0)
                log_warning_errno(errno, "Task '%s': cannot open its ledger for git in the sandbox, ignoring: %m", t->id);

        SandboxLimits limits = {
                .memory_max = t->spec.limits[TASK_LIMIT_MEMORY_MAX] != TASK_LIMIT_UNSET ?
                        t->spec.limits[TASK_LIMIT_MEMORY_MAX] : e->memory_max != UINT64_MAX ? e->memory_max : c->memory_max,
                .tasks_max = t->spec.limits[TASK_LIMIT_TASKS_MAX] != TASK_LIMIT_UNSET ?
                        t->spec.limits[TASK_LIMIT_TASKS_MAX] : e->tasks_max != UINT64_MAX ? e->tasks_max : c->tasks_max,
                .cpu_quota_percent = t->spec.limits[TASK_LIMIT_CPU_QUOTA_PERCENT] != TASK_LIMIT_UNSET ?
                        t->spec.limits[TASK_LIMIT_CPU_QUOTA_PERCENT] :
                        e->cpu_quota_percent != UINT64_MAX ? e->cpu_quota_percent : c->cpu_quota_percent,
        };
        /* The task's wall-clock budget is checked between steps; the scope's
         * RuntimeMaxSec= is the backstop that ends the sandbox even if a step
         * never ends: what is left of the budget, plus one command's time. */
        uint64_t wall = agent_wall_budget_usec(run), used = t->progress.wall_usec;
        limits.runtime_max_sec = ((wall > used ? wall - used : 0) + agent_command_timeout_usec(run)) / USEC_PER_SEC + 60;
        /* Waited for on the event loop: a daemon that resumes many tasks at
         * once must answer its callers meanwhile. */
        r = sandbox_session_open_async(run->factory->event, c->launcher_socket ?: SANDBOX_LAUNCHER_SOCKET, t->id,
                                       ledger_workspace_fd(run->ledger), &limits, env,
                                       streq(e->name, ENVIRONMENT_DEFAULT) ? NULL : e->name, cache_fd, history_fd, proxy_fd,
                                       on_sandbox_ready, run, &run->session);
        if (r < 0) {
                egress_unregister(run->factory->egress, t->id);
                agent_fail(run, "Cannot start the task's sandbox: %s", strerror(-r));
                return r;
        }
        run->sandbox_opening = true;
        sandbox_opening++;
        run->phase = PHASE_SANDBOX;
        return 1;
}
