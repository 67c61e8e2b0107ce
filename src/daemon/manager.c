/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "agent.h"
#include "fleet-people.h"
#include "fleet.h"
#include "audit.h"
#include "cache.h"
#include "egress.h"
#include "quota.h"
#include "exec-session.h"
#include "fs-util.h"
#include "ledger.h"
#include "log.h"
#include "manager.h"
#include "string-util.h"
#include "task-store.h"
#include "time-util.h"
#include "worker.h"

/* ---- What the rooms below tell the manager (FactoryHooks) ---- */

static void on_task_state_changed(Factory *f, Task *t, TaskState old_state, uid_t caller) {
        Manager *m = manager_from_factory(f);

        /* A task that stopped being worked on (cancelled, failed, waiting
         * for approval) loses its agent; one that may be worked on gets one.
         * A paused one keeps it, frozen with its sandbox (freezer.h). */
        freezer_task_state_changed(t);
        if (!task_state_is_active(t->state) && !IN_SET(t->state, TASK_QUEUED, TASK_PAUSED)) {
                /* After a task worked, its owner's cache of the environment
                 * is pruned to CacheMaxSize=, in a worker thread. Here,
                 * where every end of a task passes, however it was written. */
                if (task_state_is_active(old_state) || old_state == TASK_PAUSED)
                        cache_prune_later(f, environments_find(&f->environments,
                                                               t->spec.environment ?: ENVIRONMENT_DEFAULT), t->owner);
                agent_stop(t);
        }
        manager_schedule(m);
        /* In a fleet, an end is written back and frees a slot. */
        fleet_task_state_changed(m->fleet, t);

        audit_task_state(t, old_state, caller);
        /* What it used, once, after its agent's last reading (agent_stop()). */
        if (task_state_is_final(t->state))
                audit_task_resources(t);
        if (m->hooks && m->hooks->task_state_changed)
                m->hooks->task_state_changed(m, t, old_state);
        manager_update_status(m);
        manager_touch(m);
}

static void on_task_changed(Factory *f, Task *t, unsigned what) {
        Manager *m = manager_from_factory(f);

        /* In a fleet, what status shows reaches the other hosts. */
        fleet_task_changed(m->fleet, t);
        if (m->hooks && m->hooks->task_changed)
                m->hooks->task_changed(m, t, what);
}

static void on_task_jobs_idle(Factory *f, Task *t) {
        (void) f;
        agent_wake(t);
}

static void on_task_event(Factory *f, Task *t, json_object *event) {
        Manager *m = manager_from_factory(f);

        if (m->hooks && m->hooks->task_event)
                m->hooks->task_event(m, t, event);
}

static void on_task_output(Factory *f, Task *t, const char *data, size_t size) {
        Manager *m = manager_from_factory(f);

        if (m->hooks && m->hooks->task_output)
                m->hooks->task_output(m, t, data, size);
}

static void on_schedule_hook(Factory *f) {
        manager_schedule(manager_from_factory(f));
}

static const FactoryHooks factory_hooks = {
        .task_state_changed = on_task_state_changed,
        .task_changed = on_task_changed,
        .task_jobs_idle = on_task_jobs_idle,
        .task_event = on_task_event,
        .task_output = on_task_output,
        .schedule = on_schedule_hook,
};

void manager_init(Manager *m) {
        *m = (Manager) {};
        factory_init(&m->factory);
        m->factory.hooks = &factory_hooks;
}

int manager_new(Manager **ret, const char *state_dir, const char *config_path) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        manager_init(m);

        m->factory.state_dir = strdup(state_dir);
        m->config_path = strdup(config_path);
        if (!m->factory.state_dir || !m->config_path)
                return -ENOMEM;

        r = config_load(&m->factory.config, m->config_path);
        if (r < 0)
                return r;
        r = fleet_config_verify(&m->factory.config.fleet, m->factory.config.ssh_known_hosts_credential);
        if (r < 0)
                return r;
        /* Once, here: worker threads use libgit2 later. */
        ledger_library_init();

        r = model_profiles_init(&m->factory.profiles);
        if (r >= 0)
                r = model_profiles_load(&m->factory.profiles, m->config_path);
        if (r < 0)
                return log_error_errno(r, "Failed to load model profiles: %m");
        r = environments_load(&m->factory.environments, m->config_path, true);
        if (r < 0)
                return log_error_errno(r, "Failed to load the environments: %m");

        r = sd_event_default(&m->factory.event);
        if (r < 0)
                return r;
        (void) sd_event_set_watchdog(m->factory.event, true);

        r = model_client_new(m->factory.event, &m->factory.model);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the model client: %m");
        r = egress_new(&m->factory, &m->factory.egress);
        if (r < 0)
                return log_oom();

        *ret = TAKE_PTR(m);
        return 0;
}

void manager_done(Manager *m) {
        /* The bus room is gone by now (bus_server_free(), agentfabd.c). */
        m->idle_timer = sd_event_source_unref(m->idle_timer);
        m->quota_timer = sd_event_source_disable_unref(m->quota_timer);
        m->fleet = fleet_free(m->fleet);
        for (size_t i = 0; i < m->factory.n_tasks; i++)
                agent_destroy(m->factory.tasks[i]);
        m->schedule = sd_event_source_disable_unref(m->schedule);
        m->factory.model = model_client_free(m->factory.model);
        m->factory.egress = egress_free(m->factory.egress);
        factory_done(&m->factory);
        m->factory.event = sd_event_unref(m->factory.event);
        free(m->config_path);
        m->config_path = NULL;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        manager_done(m);
        free(m);
        return NULL;
}

void manager_touch(Manager *m) {
        factory_touch(&m->factory);
}

Task *manager_find_task(Manager *m, const char *id) {
        return factory_find_task(&m->factory, id);
}

int manager_add_submitted(Manager *m, Task *t) {
        int r;

        r = factory_add_task(&m->factory, t);
        if (r < 0) {
                task_free(t);
                return r;
        }
        audit_task_submitted(t, t->owner);
        manager_update_status(m);
        return 0;
}

unsigned manager_unfinished_tasks_of(Manager *m, uid_t uid) {
        unsigned n = factory_unfinished_tasks_of(&m->factory, uid);

        if (m->hooks && m->hooks->pending_tasks_of)
                n += m->hooks->pending_tasks_of(m, uid);
        return n;
}

void manager_update_status(Manager *m) {
        (void) sd_notifyf(false, "STATUS=%zu tasks, %u active.", m->factory.n_tasks, factory_active_tasks(&m->factory));
}


int manager_load_tasks(Manager *m) {
        int r;

        (void) mkdir(m->factory.state_dir, 0700);
        m->factory.state_fd = open(m->factory.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (m->factory.state_fd < 0)
                return log_error_errno(errno, "Failed to open state directory '%s': %m", m->factory.state_dir);

        if (mkdirat(m->factory.state_fd, "tasks", 0700) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create '%s/tasks': %m", m->factory.state_dir);
        m->factory.tasks_fd = openat(m->factory.state_fd, "tasks", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (m->factory.tasks_fd < 0)
                return log_error_errno(errno, "Failed to open '%s/tasks': %m", m->factory.state_dir);

        task_store_clean(m->factory.tasks_fd);

        DIR *d = xopendirat(m->factory.tasks_fd, ".", 0);
        if (!d)
                return log_error_errno(errno, "Failed to read '%s/tasks': %m", m->factory.state_dir);

        for (struct dirent *de; (de = readdir(d));) {
                Task *t = NULL;

                if (de->d_name[0] == '.')
                        continue;
                if (!task_id_is_valid(de->d_name)) {
                        log_warning("Ignoring '%s/tasks/%s': not a task id.", m->factory.state_dir, de->d_name);
                        continue;
                }
                r = task_load(m->factory.tasks_fd, de->d_name, &t);
                if (r == -ENOMEM) {
                        closedir(d);
                        return log_oom();
                }
                if (r < 0) {
                        log_warning_errno(r, "Failed to load task '%s', ignoring: %m", de->d_name);
                        continue;
                }
                r = factory_add_task(&m->factory, t);
                if (r == -EEXIST) {
                        log_warning("Task '%s' is there twice, ignoring the second.", de->d_name);
                        task_free(t);
                        continue;
                }
                if (r < 0) {
                        task_free(t);
                        closedir(d);
                        return log_oom();
                }
                if (t->broken) {
                        log_error("Task '%s': %s", t->id, t->reason);
                        audit_task_broken(t);
                }
        }
        closedir(d);

        log_info("Loaded %zu tasks from '%s'.", m->factory.n_tasks, m->factory.state_dir);
        return 0;
}

/* Whether t may be started now: one being cancelled is not started meanwhile. */
static bool task_may_start(Task *t) {
        return !t->run && !t->broken && !t->pending_save;
}

static Task *manager_next_to_start(Manager *m, QuotaRound *q) {
        Task *best = NULL;

        /* Tasks that were at work when the daemon stopped come first, then
         * the queue, oldest first. Only those states are walked: this runs
         * at every change of state, among thousands of finished tasks. */
        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (task_state_is_active(s))
                        TASK_INDEX_FOREACH(t, &m->factory.by_state, s)
                                if (task_may_start(t))
                                        return t;
        TASK_INDEX_FOREACH(t, &m->factory.by_state, TASK_QUEUED)
                if (task_may_start(t) && !quota_round_holds(q, t) && (!best || t->created_usec < best->created_usec))
                        best = t;
        return best;
}

static int on_quota_day(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        manager_schedule(userdata);
        return 0;
}

/* An owner's queued tasks are held by a daily quota: at the next UTC day
 * the scheduler looks again. */
static void manager_arm_quota_timer(Manager *m) {
        uint64_t when = quota_next_day_realtime_usec();
        int r;

        if (m->quota_timer) {
                r = sd_event_source_set_time(m->quota_timer, when);
                if (r >= 0)
                        r = sd_event_source_set_enabled(m->quota_timer, SD_EVENT_ONESHOT);
        } else {
                r = sd_event_add_time(m->factory.event, &m->quota_timer, CLOCK_REALTIME, when, USEC_PER_SEC,
                                      on_quota_day, m);
                if (r >= 0)
                        (void) sd_event_source_set_description(m->quota_timer, "quota-day");
        }
        if (r < 0)
                log_warning_errno(r, "Cannot wake at the next day for tasks held by a daily quota, ignoring: %m");
}

static int on_schedule(sd_event_source *s, void *userdata) {
        _cleanup_(quota_round_done) QuotaRound quota = {};
        Manager *m = userdata;
        unsigned running = 0;

        (void) s;
        /* On the way out after idling: the next instance starts them. */
        if (m->exiting)
                return 0;
        /* A fenced host of a fleet works on nothing (fleet.h). */
        if (fleet_is_fenced(m->fleet))
                return 0;
        /* A finished task has no agent (agent_stop() at the change). */
        for (TaskState st = 0; st < _TASK_STATE_MAX; st++)
                if (!task_state_is_final(st))
                        TASK_INDEX_FOREACH(t, &m->factory.by_state, st)
                                if (t->run)
                                        running++;

        /* Daily quotas (quota.h): today's sums once per round. */
        if (quota_round_begin(&m->factory, &quota) < 0)
                log_oom();
        while (running < m->factory.config.max_active_tasks) {
                Task *t = manager_next_to_start(m, &quota);
                int r;

                if (!t)
                        break;
                r = agent_start(t);
                if (r < 0) {
                        log_error_errno(r, "Failed to start the agent of task '%s': %m", t->id);
                        break;
                }
                if (!t->run)
                        break;   /* it failed at once; the next round picks the next one */
                running++;
        }
        if (quota.held)
                manager_arm_quota_timer(m);
        return 0;
}

void manager_schedule(Manager *m) {
        if (m->schedule)
                (void) sd_event_source_set_enabled(m->schedule, SD_EVENT_ONESHOT);
}

/* Stopping the scopes a crashed daemon left takes the launcher a while
 * (systemd's jobs): a worker thread does it while the agents start. */
typedef struct ReapJob {
        char *launcher;
        char **keep;
} ReapJob;

static void reap_job_free(void *p) {
        ReapJob *j = p;

        if (!j)
                return;
        free(j->launcher);
        strv_free(j->keep);
        free(j);
}

static int reap_job_run(void *p) {
        ReapJob *j = p;
        return sandbox_session_reap(j->launcher, j->keep);
}

static void on_reap_done(Worker *w, int r, void *job, void *userdata) {
        (void) w, (void) job, (void) userdata;
        if (r < 0)
                log_warning_errno(r, "Failed to stop leftover sandbox scopes, ignoring: %m");
        else if (r > 0)
                log_info("Stopped %i leftover sandbox scope(s).", r);
}

/* ---- What the fleet room tells the manager (FleetHooks) ---- */

static int on_fleet_task_claimed(Fleet *fl, Task *t, void *userdata) {
        Manager *m = userdata;
        int r;

        (void) fl;
        r = manager_add_submitted(m, t);
        manager_schedule(m);
        return r;
}

/* As a task found on disk at the start: no submission to report. */
static int on_fleet_task_taken_over(Fleet *fl, Task *t, void *userdata) {
        Manager *m = userdata;
        int r;

        (void) fl;
        r = factory_add_task(&m->factory, t);
        if (r < 0) {
                task_free(t);
                return r;
        }
        manager_update_status(m);
        manager_schedule(m);
        return 0;
}

static void on_fleet_unfenced(Fleet *fl, void *userdata) {
        (void) fl;
        manager_schedule(userdata);
}

static const FleetHooks fleet_hooks = {
        .task_claimed = on_fleet_task_claimed,
        .task_taken_over = on_fleet_task_taken_over,
        .unfenced = on_fleet_unfenced,
};

int manager_start_agents(Manager *m) {
        int r;

        /* A sandbox scope that outlived a crashed daemon belongs to no
         * agent now. Those of tasks that will work again are left to the
         * launcher, which stops a task's stale scope before it makes its
         * new one; all others are stopped here, in a worker thread, while
         * the agents start: a restart with many tasks at work does not
         * wait for them one after another. */
        if (m->factory.config.max_active_tasks > 0) {
                const char *launcher = m->factory.config.launcher_socket ?: SANDBOX_LAUNCHER_SOCKET;
                _cleanup_strv_free_ char **keep = NULL;
                /* Except the frozen sandboxes that came back from the fd store. */
                for (size_t i = 0; i < m->factory.n_tasks; i++)
                        if (m->factory.tasks[i]->sandbox && strv_extend(&keep, m->factory.tasks[i]->id) < 0)
                                return log_oom();
                if (access(launcher, F_OK) >= 0) {
                        ReapJob *j = calloc(1, sizeof(ReapJob));
                        if (!j)
                                return -ENOMEM;
                        j->launcher = strdup(launcher);
                        j->keep = TAKE_PTR(keep);
                        r = j->launcher ? 0 : -ENOMEM;
                        for (size_t i = 0; r >= 0 && i < m->factory.n_tasks; i++) {
                                Task *t = m->factory.tasks[i];
                                if (!t->broken && !t->sandbox &&
                                    IN_SET(t->state, TASK_QUEUED, TASK_PREPARING, TASK_RUNNING, TASK_DELIVERING))
                                        r = strv_extend(&j->keep, t->id);
                        }
                        if (r >= 0)
                                r = worker_start(m->factory.event, reap_job_run, on_reap_done, reap_job_free, j, NULL, NULL);
                        if (r < 0) {
                                reap_job_free(j);
                                log_warning_errno(r, "Failed to stop leftover sandbox scopes, ignoring: %m");
                        }
                }
        }

        if (fleet_config_enabled(&m->factory.config.fleet)) {
                r = fleet_new(&m->factory, &fleet_hooks, m, &m->fleet);
                if (r < 0)
                        return log_error_errno(r, "Failed to join the fleet: %m");
        }

        r = sd_event_add_defer(m->factory.event, &m->schedule, on_schedule, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(m->schedule, "schedule");
        return 0;
}

void manager_adopt_stored(Manager *m, int *fds, char **names, size_t n) {
        freezer_adopt_stored(&m->factory, fds, names, n);
}

static bool manager_bus_busy(Manager *m) {
        return m->hooks && m->hooks->busy && m->hooks->busy(m);
}

static bool manager_holds_sandboxes(Manager *m) {
        for (size_t i = 0; i < m->factory.n_tasks; i++)
                if (freezer_task_holds_sandbox(m->factory.tasks[i]))
                        return true;
        return false;
}

static bool manager_is_idle(Manager *m) {
        /* A frozen sandbox waits for us: until MaxPausedSec= ends it, an
         * exit would leave it to systemd's fd store, which a stopped
         * service loses. Work in a worker thread would be lost too. */
        /* A host of a fleet stays: it renews its lease and takes from the queue. */
        return !m->fleet && factory_active_tasks(&m->factory) == 0 && m->factory.n_jobs == 0 &&
                !manager_holds_sandboxes(m) && !manager_bus_busy(m) &&
                !(m->hooks && m->hooks->followed && m->hooks->followed(m));
}

static int on_idle_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t deadline;
        int r;

        (void) usec;

        if (!m->exiting) {
                if (!manager_is_idle(m))
                        manager_touch(m);

                deadline = m->factory.last_activity_usec + m->factory.config.idle_timeout_usec;
                if (clock_now_usec(CLOCK_MONOTONIC) < deadline) {
                        r = sd_event_source_set_time(s, deadline);
                        if (r < 0)
                                return r;
                        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                }

                log_info("Idle for %llus, exiting.", (unsigned long long) (m->factory.config.idle_timeout_usec / USEC_PER_SEC));
                audit_daemon_idle();
                (void) sd_notify(false, "STOPPING=1\nSTATUS=Idle, exiting.");

                /* Give the name back first, so that new calls queue up for D-Bus
                 * activation of the next instance, then answer whatever reached us
                 * before that. The stream socket belongs to systemd: connections
                 * waiting in its backlog start the next instance. */
                m->exiting = true;
                if (m->hooks && m->hooks->going_idle)
                        m->hooks->going_idle(m);
        }

        /* A call answered just now may have started importing its
         * repository, an export or a reset in a worker thread (task-job.h),
         * or be waiting for polkit: its caller waits for the
         * answer, which would go with us (and the import's task with it).
         * Looked at again shortly; the loop serves them meanwhile, and
         * starts no agent (on_schedule()). */
        if (m->exiting && (m->factory.n_jobs > 0 || manager_bus_busy(m))) {
                r = sd_event_source_set_time(s, clock_now_usec(CLOCK_MONOTONIC) + USEC_PER_SEC / 10);
                if (r < 0)
                        return r;
                return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        }
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        (void) userdata;
        (void) si;
        (void) sd_notify(false, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

int manager_run(Manager *m) {
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        r = sd_event_add_signal(m->factory.event, NULL, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->factory.event, NULL, SIGINT, on_signal, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handling: %m");

        if (m->factory.config.idle_timeout_usec != UINT64_MAX) {
                r = sd_event_add_time(m->factory.event, &m->idle_timer, CLOCK_MONOTONIC,
                                      m->factory.last_activity_usec + m->factory.config.idle_timeout_usec,
                                      USEC_PER_SEC / 10, on_idle_timer, m);
                if (r < 0)
                        return r;
        }

        audit_daemon_started((unsigned) m->factory.n_tasks);
        (void) sd_notify(false, "READY=1");
        manager_update_status(m);

        return sd_event_loop(m->factory.event);
}
