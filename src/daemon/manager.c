/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "agent-loop.h"
#include "agentfab-bus.h"
#include "audit.h"
#include "cache.h"
#include "exec-session.h"
#include "ledger.h"
#include "freezer.h"
#include "fs-util.h"
#include "log.h"
#include "egress.h"
#include "manager.h"
#include "submission.h"
#include "stream.h"
#include "string-util.h"
#include "task-store.h"
#include "time-util.h"
#include "worker.h"

int manager_new(Manager **ret, const char *state_dir, const char *config_path) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->state_fd = m->tasks_fd = -EBADF;
        config_init(&m->config);

        m->state_dir = strdup(state_dir);
        m->config_path = strdup(config_path);
        if (!m->state_dir || !m->config_path)
                return -ENOMEM;

        r = config_load(&m->config, m->config_path);
        if (r < 0)
                return r;
        /* Once, here: worker threads use libgit2 later. */
        ledger_library_init();

        r = model_profiles_init(&m->profiles);
        if (r >= 0)
                r = model_profiles_load(&m->profiles, m->config_path);
        if (r < 0)
                return log_error_errno(r, "Failed to load model profiles: %m");
        r = environments_load(&m->environments, m->config_path, true);
        if (r < 0)
                return log_error_errno(r, "Failed to load the environments: %m");

        r = sd_event_default(&m->event);
        if (r < 0)
                return r;
        (void) sd_event_set_watchdog(m->event, true);

        r = model_client_new(m->event, &m->model);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the model client: %m");
        r = egress_new(m, &m->egress);
        if (r < 0)
                return log_oom();

        m->last_activity_usec = clock_now_usec(CLOCK_MONOTONIC);
        *ret = TAKE_PTR(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;

        m->stream = stream_server_free(m->stream);
        m->polkit = polkit_registry_free(m->polkit);
        m->viewers = sd_bus_track_unref(m->viewers);
        sd_event_source_unref(m->idle_timer);

        submissions_abandon(m);
        for (size_t i = 0; i < m->n_tasks; i++) {
                agent_destroy(m->tasks[i]);
                task_free(m->tasks[i]);
        }
        free(m->tasks);
        free(m->tasks_by_id);
        sd_event_source_disable_unref(m->schedule);
        m->model = model_client_free(m->model);
        m->egress = egress_free(m->egress);
        model_profiles_done(&m->profiles);
        environments_done(&m->environments);

        sd_bus_flush_close_unref(m->bus);
        sd_event_unref(m->event);
        safe_close(m->tasks_fd);
        safe_close(m->state_fd);
        config_done(&m->config);
        free(m->state_dir);
        free(m->config_path);
        free(m);
        return NULL;
}

void manager_touch(Manager *m) {
        m->last_activity_usec = clock_now_usec(CLOCK_MONOTONIC);
}

/* Where id is in tasks_by_id, or would go. */
static size_t manager_task_index(Manager *m, const char *id, bool *ret_found) {
        size_t lo = 0, hi = m->n_tasks;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(m->tasks_by_id[mid]->id, id);

                if (c == 0) {
                        *ret_found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = false;
        return lo;
}

/* A binary search: thousands of tasks are looked up hundreds of times a
 * second by a busy client, each look-up a walk of them all before. */
Task *manager_find_task(Manager *m, const char *id) {
        bool found;
        size_t i;

        if (!task_id_is_valid(id))
                return NULL;
        i = manager_task_index(m, id, &found);
        return found ? m->tasks_by_id[i] : NULL;
}

int manager_add_task(Manager *m, Task *t) {
        bool found;
        size_t i;
        Task **a;

        i = manager_task_index(m, t->id, &found);
        if (found)
                return -EEXIST;
        a = realloc(m->tasks_by_id, sizeof(Task *) * (m->n_tasks + 1));
        if (!a)
                return -ENOMEM;
        m->tasks_by_id = a;
        a = realloc(m->tasks, sizeof(Task *) * (m->n_tasks + 1));
        if (!a)
                return -ENOMEM;
        m->tasks = a;
        memmove(m->tasks_by_id + i + 1, m->tasks_by_id + i, sizeof(Task *) * (m->n_tasks - i));
        m->tasks_by_id[i] = t;
        t->position = m->n_tasks;
        m->tasks[m->n_tasks++] = t;
        task_index_add(&m->by_state, t);
        t->manager = m;
        t->tasks_fd = m->tasks_fd;
        manager_schedule(m);
        return 0;
}

/* These are asked at every submission and change of state: they count
 * (or walk) the tasks that are not finished, never all of them. */
unsigned manager_active_tasks(Manager *m) {
        return (unsigned) task_index_count(&m->by_state, task_state_mask_active());
}

unsigned manager_unfinished_tasks_of(Manager *m, uid_t uid) {
        unsigned n = submissions_of(m, uid);

        if (uid == UID_INVALID)
                return n + (unsigned) task_index_count(&m->by_state, task_state_mask_unfinished());
        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (!task_state_is_final(s))
                        TASK_INDEX_FOREACH(t, &m->by_state, s)
                                if (t->owner == uid)
                                        n++;
        return n;
}

int manager_tasks_in_states(Manager *m, TaskStateMask states, Task ***ret, size_t *ret_n) {
        return task_index_collect(&m->by_state, states, ret, ret_n);
}

void manager_update_status(Manager *m) {
        (void) sd_notifyf(false, "STATUS=%zu tasks, %u active.", m->n_tasks, manager_active_tasks(m));
}

void manager_task_state_changed(Manager *m, Task *t, TaskState old_state, uid_t caller) {
        task_index_update(&m->by_state, t);

        /* A task that stopped being worked on (cancelled, failed, waiting
         * for approval) loses its agent; one that may be worked on gets one.
         * A paused one keeps it, frozen with its sandbox (freezer.h). */
        freezer_task_state_changed(t);
        if (!task_state_is_active(t->state) && !IN_SET(t->state, TASK_QUEUED, TASK_PAUSED)) {
                /* After a task worked, its owner's cache of the environment
                 * is pruned to CacheMaxSize=, in a worker thread. Here,
                 * where every end of a task passes, however it was written. */
                if (task_state_is_active(old_state) || old_state == TASK_PAUSED)
                        cache_prune_later(m, environments_find(&m->environments,
                                                               t->spec.environment ?: ENVIRONMENT_DEFAULT), t->owner);
                agent_stop(t);
        }
        manager_schedule(m);

        audit_task_state(t, old_state, caller);
        task_bus_send_changed(t);
        (void) manager_bus_send_state_changed(m, t);
        if (task_state_is_active(old_state) != task_state_is_active(t->state))
                (void) sd_bus_emit_properties_changed(m->bus, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                                      "ActiveTasks", NULL);
        manager_update_status(m);
        manager_touch(m);
}

int manager_load_tasks(Manager *m) {
        int r;

        (void) mkdir(m->state_dir, 0700);
        m->state_fd = open(m->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (m->state_fd < 0)
                return log_error_errno(errno, "Failed to open state directory '%s': %m", m->state_dir);

        if (mkdirat(m->state_fd, "tasks", 0700) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create '%s/tasks': %m", m->state_dir);
        m->tasks_fd = openat(m->state_fd, "tasks", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (m->tasks_fd < 0)
                return log_error_errno(errno, "Failed to open '%s/tasks': %m", m->state_dir);

        task_store_clean(m->tasks_fd);

        DIR *d = xopendirat(m->tasks_fd, ".", 0);
        if (!d)
                return log_error_errno(errno, "Failed to read '%s/tasks': %m", m->state_dir);

        for (struct dirent *de; (de = readdir(d));) {
                Task *t = NULL;

                if (de->d_name[0] == '.')
                        continue;
                if (!task_id_is_valid(de->d_name)) {
                        log_warning("Ignoring '%s/tasks/%s': not a task id.", m->state_dir, de->d_name);
                        continue;
                }
                r = task_load(m->tasks_fd, de->d_name, &t);
                if (r == -ENOMEM) {
                        closedir(d);
                        return log_oom();
                }
                if (r < 0) {
                        log_warning_errno(r, "Failed to load task '%s', ignoring: %m", de->d_name);
                        continue;
                }
                r = manager_add_task(m, t);
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

        log_info("Loaded %zu tasks from '%s'.", m->n_tasks, m->state_dir);
        return 0;
}

/* Whether t may be started now: one being cancelled is not started meanwhile. */
static bool task_may_start(Task *t) {
        return !t->run && !t->broken && !t->pending_save;
}

static Task *manager_next_to_start(Manager *m) {
        Task *best = NULL;

        /* Tasks that were at work when the daemon stopped come first, then
         * the queue, oldest first. Only those states are walked: this runs
         * at every change of state, among thousands of finished tasks. */
        for (TaskState s = 0; s < _TASK_STATE_MAX; s++)
                if (task_state_is_active(s))
                        TASK_INDEX_FOREACH(t, &m->by_state, s)
                                if (task_may_start(t))
                                        return t;
        TASK_INDEX_FOREACH(t, &m->by_state, TASK_QUEUED)
                if (task_may_start(t) && (!best || t->created_usec < best->created_usec))
                        best = t;
        return best;
}

static int on_schedule(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        unsigned running = 0;

        (void) s;
        /* On the way out after idling: the next instance starts them. */
        if (m->name_released)
                return 0;
        /* A finished task has no agent (agent_stop() at the change). */
        for (TaskState st = 0; st < _TASK_STATE_MAX; st++)
                if (!task_state_is_final(st))
                        TASK_INDEX_FOREACH(t, &m->by_state, st)
                                if (t->run)
                                        running++;

        while (running < m->config.max_active_tasks) {
                Task *t = manager_next_to_start(m);
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

int manager_start_agents(Manager *m) {
        int r;

        /* A sandbox scope that outlived a crashed daemon belongs to no
         * agent now. Those of tasks that will work again are left to the
         * launcher, which stops a task's stale scope before it makes its
         * new one; all others are stopped here, in a worker thread, while
         * the agents start: a restart with many tasks at work does not
         * wait for them one after another. */
        if (m->config.max_active_tasks > 0) {
                const char *launcher = m->config.launcher_socket ?: SANDBOX_LAUNCHER_SOCKET;
                _cleanup_strv_free_ char **keep = NULL;
                /* Except the frozen sandboxes that came back from the fd store. */
                for (size_t i = 0; i < m->n_tasks; i++)
                        if (m->tasks[i]->sandbox && strv_extend(&keep, m->tasks[i]->id) < 0)
                                return log_oom();
                if (access(launcher, F_OK) >= 0) {
                        ReapJob *j = calloc(1, sizeof(ReapJob));
                        if (!j)
                                return -ENOMEM;
                        j->launcher = strdup(launcher);
                        j->keep = TAKE_PTR(keep);
                        r = j->launcher ? 0 : -ENOMEM;
                        for (size_t i = 0; r >= 0 && i < m->n_tasks; i++) {
                                Task *t = m->tasks[i];
                                if (!t->broken && !t->sandbox &&
                                    IN_SET(t->state, TASK_QUEUED, TASK_PREPARING, TASK_RUNNING, TASK_DELIVERING))
                                        r = strv_extend(&j->keep, t->id);
                        }
                        if (r >= 0)
                                r = worker_start(m->event, reap_job_run, on_reap_done, reap_job_free, j, NULL, NULL);
                        if (r < 0) {
                                reap_job_free(j);
                                log_warning_errno(r, "Failed to stop leftover sandbox scopes, ignoring: %m");
                        }
                }
        }

        r = sd_event_add_defer(m->event, &m->schedule, on_schedule, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(m->schedule, "schedule");
        return 0;
}

static int on_bus_message(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;

        (void) error;

        /* dbus-daemon went away (restarted, or the bus is gone): sd-bus does
         * not reconnect, and staying up would keep our name from ever coming
         * back, so callers would wait for D-Bus activation of a service that
         * is already running, for as long as a task keeps us busy. Exit with
         * a failure instead: systemd starts us again (Restart=on-failure) on
         * the new bus, and the tasks at work go on from their checkpoints, as
         * after any other end of the daemon. */
        if (sd_bus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected")) {
                log_error("Lost the connection to the bus, exiting to be started again.");
                (void) sd_notify(false, "STOPPING=1\nSTATUS=Lost the bus connection.");
                return sd_event_exit(m->event, -ENOTCONN);
        }

        manager_touch(m);
        return 0;
}

int manager_connect_bus(Manager *m, BusKind kind, const char *address) {
        int r;

        m->bus_kind = kind;

        if (address) {
                r = sd_bus_new(&m->bus);
                if (r >= 0)
                        r = sd_bus_set_address(m->bus, address);
                if (r >= 0)
                        r = sd_bus_set_bus_client(m->bus, true);
                if (r >= 0)
                        r = sd_bus_start(m->bus);
        } else if (kind == BUS_SYSTEM)
                r = sd_bus_open_system(&m->bus);
        else
                r = sd_bus_open_user(&m->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the %s bus: %m", kind == BUS_SYSTEM ? "system" : "session");

        (void) sd_bus_set_description(m->bus, "agentfabd");

        r = sd_bus_add_filter(m->bus, NULL, on_bus_message, m);
        if (r < 0)
                return r;

        r = manager_bus_register(m);
        if (r < 0)
                return log_error_errno(r, "Failed to register D-Bus objects: %m");
        r = task_bus_register(m);
        if (r < 0)
                return log_error_errno(r, "Failed to register task objects: %m");

        r = sd_bus_track_new(m->bus, &m->viewers, NULL, NULL);
        if (r < 0)
                return r;

        r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach bus to event loop: %m");

        /* Claim the name last, when every object is in place: D-Bus
         * activation holds callers back until the name appears. */
        r = sd_bus_request_name(m->bus, AGENTFAB_BUS_NAME, 0);
        if (r == -EEXIST)
                return log_error_errno(r, "Another agentfabd already owns '%s'.", AGENTFAB_BUS_NAME);
        if (r < 0)
                return log_error_errno(r, "Failed to acquire bus name '%s': %m", AGENTFAB_BUS_NAME);
        return 0;
}

/* What systemd passes: the stream socket (agentfab.socket), and after a
 * restart the connections of sandboxes from the fd store: frozen ones
 * ("sandbox-...") and running ones of tasks at work ("running-..."). */
int manager_listen_stream(Manager *m, const char *socket_path) {
        _cleanup_strv_free_ char **names = NULL, **stored_names = NULL;
        _cleanup_free_ int *stored = NULL;
        size_t n_stored = 0;
        int listen_fd = -EBADF, n;

        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return log_error_errno(n, "Failed to get sockets from systemd: %m");
        if (n > 0) {
                stored = calloc((size_t) n, sizeof(int));
                if (!stored)
                        return log_oom();
        }
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names && names[i] ? names[i] : "";

                if (strneq(name, "sandbox-", 8) || strneq(name, "running-", 8)) {
                        if (strv_extend(&stored_names, name) < 0)
                                return log_oom();
                        stored[n_stored++] = fd;
                } else if (listen_fd < 0 && sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) > 0)
                        listen_fd = fd;
                else {
                        /* Another version's entry in the fd store, or a
                         * second socket: not ours to guess at. Dropped, so
                         * that the start goes on (a refusal to start would
                         * make systemd restart us into the same refusal). */
                        log_warning("Dropping file descriptor '%s' that systemd passed: not one agentfabd knows.", name);
                        if (!isempty(name))
                                (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", name);
                        safe_close(fd);
                }
        }
        freezer_adopt_stored(m, stored, stored_names, n_stored);

        return stream_server_new(&m->stream, m, socket_path, listen_fd);
}

static bool manager_holds_sandboxes(Manager *m) {
        for (size_t i = 0; i < m->n_tasks; i++)
                if (freezer_task_holds_sandbox(m->tasks[i]))
                        return true;
        return false;
}

static bool manager_is_idle(Manager *m) {
        /* A frozen sandbox waits for us: until MaxPausedSec= ends it, an
         * exit would leave it to systemd's fd store, which a stopped
         * service loses. Work in a worker thread would be lost too. */
        return manager_active_tasks(m) == 0 && m->n_submissions == 0 && m->n_jobs == 0 &&
                !manager_holds_sandboxes(m) &&
                stream_server_clients(m->stream) == 0 &&
                polkit_registry_pending(m->polkit) == 0;
}

static int on_idle_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t deadline;
        int r;

        (void) usec;

        if (!m->name_released) {
                if (!manager_is_idle(m))
                        manager_touch(m);

                deadline = m->last_activity_usec + m->config.idle_timeout_usec;
                if (clock_now_usec(CLOCK_MONOTONIC) < deadline) {
                        r = sd_event_source_set_time(s, deadline);
                        if (r < 0)
                                return r;
                        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                }

                log_info("Idle for %llus, exiting.", (unsigned long long) (m->config.idle_timeout_usec / USEC_PER_SEC));
                audit_daemon_idle();
                (void) sd_notify(false, "STOPPING=1\nSTATUS=Idle, exiting.");

                /* Give the name back first, so that new calls queue up for D-Bus
                 * activation of the next instance, then answer whatever reached us
                 * before that. The stream socket belongs to systemd: connections
                 * waiting in its backlog start the next instance. */
                if (m->bus) {
                        r = sd_bus_release_name(m->bus, AGENTFAB_BUS_NAME);
                        if (r < 0)
                                log_warning_errno(r, "Failed to release bus name, ignoring: %m");
                        m->name_released = true;
                        while ((r = sd_bus_process(m->bus, NULL)) > 0)
                                ;
                        (void) sd_bus_flush(m->bus);
                }
        }

        /* A call answered just now may have started importing its
         * repository, an export or a reset in a worker thread (task-job.h),
         * or be waiting for polkit: its caller waits for the
         * answer, which would go with us (and the import's task with it).
         * Looked at again shortly; the loop serves them meanwhile, and
         * starts no agent (on_schedule()). */
        if (m->name_released && (m->n_submissions > 0 || m->n_jobs > 0 || polkit_registry_pending(m->polkit) > 0)) {
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
        r = sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handling: %m");

        if (m->config.idle_timeout_usec != UINT64_MAX) {
                r = sd_event_add_time(m->event, &m->idle_timer, CLOCK_MONOTONIC,
                                      m->last_activity_usec + m->config.idle_timeout_usec,
                                      USEC_PER_SEC / 10, on_idle_timer, m);
                if (r < 0)
                        return r;
        }

        audit_daemon_started((unsigned) m->n_tasks);
        (void) sd_notify(false, "READY=1");
        manager_update_status(m);

        return sd_event_loop(m->event);
}
