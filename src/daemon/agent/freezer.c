/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "audit.h"
#include "environments.h"
#include "exec-session.h"
#include "factory.h"
#include "freezer.h"
#include "log.h"
#include "review-stage.h"
#include "step-commit.h"
#include "string-util.h"

#define FDSTORE_PREFIX "sandbox-"
/* A running sandbox between commands of a task at work (see below). */
#define FDSTORE_RUNNING_PREFIX "running-"

static const char *launcher_socket(Task *t) {
        return t->factory->config.launcher_socket ?: SANDBOX_LAUNCHER_SOCKET;
}

/* ---- systemd's fd store ----
 *
 * A frozen sandbox's PID 1 cannot see its connection close: if the daemon
 * went away, the sandbox would stay frozen and orphaned. So the connection
 * goes to systemd's fd store while frozen (FileDescriptorStoreMax= in
 * agentfab.service); systemd hands it to the next instance after a restart
 * or crash. The name carries what the next instance needs to know of it;
 * the task id is checked again when it comes back. */

static void fdstore_remove(Task *t) {
        if (!t->fdstore_name)
                return;
        (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", t->fdstore_name);
        t->fdstore_name = mfree_ptr(t->fdstore_name);
        t->fdstore_session = NULL;
}

static void fdstore_add(Task *t, SandboxSession *s, const char *prefix) {
        _cleanup_free_ char *name = NULL, *msg = NULL;
        int fd = sandbox_session_get_fd(s);
        int r;

        /* One entry per connection: systemd ignores a second FDSTORE=1 of
         * a file it holds, so a new name goes only after the old. */
        fdstore_remove(t);
        if (fd < 0)
                return;
        if (asprintf(&name, "%s%s-%i-%u-%i", prefix, t->id, (int) sandbox_session_get_pid(s),
                     (unsigned) sandbox_session_get_uid(s), sandbox_session_is_busy(s) ? 1 : 0) < 0 ||
            asprintf(&msg, "FDSTORE=1\nFDNAME=%s", name) < 0)
                return (void) log_oom();
        r = sd_pid_notify_with_fds(0, false, msg, &fd, 1);
        if (r <= 0) {
                /* Not under systemd: the sandbox lives as long as we do. */
                log_debug("Cannot keep the sandbox of task '%s' in the fd store (%s); it ends with the daemon.",
                          t->id, r < 0 ? strerror(-r) : "no service manager");
                return;
        }
        t->fdstore_name = TAKE_PTR(name);
        t->fdstore_session = s;
}

/* ---- Reattaching running sandboxes ----
 *
 * A task at work keeps its sandbox's connection in the fd store too, while
 * no command runs in it: after a crash (SIGKILL, say) the next instance
 * takes the sandbox up again instead of asking the launcher and systemd
 * for a new one, which is most of a resume's time (about 0.4 s a sandbox
 * under load). While a command runs, the entry is not there (the exec
 * hook takes it out before the request goes): a daemon that dies then
 * leaves the sandbox to see its connection close and end, and the step is
 * done again in a new one. Nothing of the task's progress is in the
 * sandbox: the state file and the ledger say where the task stands, and
 * the workspace is reset to the acknowledged checkpoint before the next
 * step, whichever sandbox runs it.
 *
 * AGENTFAB_NO_REATTACH=1 in the daemon's environment turns this off (the
 * benchmark's baseline): then the sandboxes are made anew. */

static bool reattach_enabled(void) {
        const char *e = getenv("AGENTFAB_NO_REATTACH");
        return !e || !streq(e, "1");
}

static bool task_has_network(Task *t) {
        const Environment *e;

        if (!t->factory)
                return true;
        e = environments_find(&t->factory->environments, t->spec.environment ?: ENVIRONMENT_DEFAULT);
        return !e || e->network != NETWORK_OFF;
}

static void on_session_exec(SandboxSession *s, void *userdata) {
        Task *t = userdata;

        if (t->fdstore_session == s)
                fdstore_remove(t);
}

void freezer_store_running(Task *t, SandboxSession *s) {
        /* SECURITY: a sandbox with a network is registered at the egress
         * proxy by this instance's connection, which ends with it: it is
         * never taken up again (nor kept frozen for approval). */
        if (!reattach_enabled() || !sandbox_session_is_ready(s) || sandbox_session_is_busy(s) ||
            sandbox_session_is_frozen(s) || task_has_network(t))
                return;
        sandbox_session_set_exec_hook(s, on_session_exec, t);
        if (t->fdstore_session == s && t->fdstore_name && strneq(t->fdstore_name, FDSTORE_RUNNING_PREFIX, strlen(FDSTORE_RUNNING_PREFIX)))
                return;
        fdstore_add(t, s, FDSTORE_RUNNING_PREFIX);
}

void freezer_forget_session(Task *t, SandboxSession *s) {
        if (s && t->fdstore_session == s)
                fdstore_remove(t);
}

/* ---- MaxPausedSec= ---- */

static int on_release(sd_event_source *s, uint64_t usec, void *userdata) {
        Task *t = userdata;
        uint64_t paused = now_usec() > t->updated_usec ? now_usec() - t->updated_usec : 0;

        (void) s, (void) usec;
        t->release_timer = sd_event_source_disable_unref(t->release_timer);

        /* A command in flight is kept: it carries on when resumed. So is a
         * step whose end came back while paused: a new agent would do the
         * step again. */
        if (t->run && t->run->session && sandbox_session_is_busy(t->run->session)) {
                log_info("Task '%s' is paused in the middle of a command: its sandbox stays frozen.", t->id);
                return 0;
        }
        if (t->run && (t->run->held || t->run->held_review || t->run->tools_held || t->run->phase == PHASE_SAVE)) {
                log_info("Task '%s' is paused at the end of a step: its sandbox stays frozen.", t->id);
                return 0;
        }
        if (!t->run && !t->sandbox)
                return 0;

        log_info("Task '%s' was paused for longer than MaxPausedSec=: tearing its sandbox down.", t->id);
        /* The agent goes too: a resume starts a new one from the checkpoint. */
        if (t->run)
                agent_stop(t);
        if (t->sandbox) {
                freezer_thaw_for_end(t, t->sandbox);
                t->sandbox = sandbox_session_free(t->sandbox);
        }
        audit_sandbox_released(t, paused);
        task_changed(t, TASK_CHANGE_STATE);
        return 0;
}

/* The timer counts from the state change (UpdatedUSec, wall-clock), so a
 * restarted daemon keeps the deadline. */
static void freezer_arm(Task *t) {
        uint64_t max = t->factory->config.max_paused_usec;
        int r;

        t->release_timer = sd_event_source_disable_unref(t->release_timer);
        if (max == UINT64_MAX || !t->factory->event)
                return;
        r = sd_event_add_time(t->factory->event, &t->release_timer, CLOCK_REALTIME,
                              t->updated_usec > UINT64_MAX - max ? UINT64_MAX : t->updated_usec + max, USEC_PER_SEC,
                              on_release, t);
        if (r < 0)
                log_warning_errno(r, "Cannot arm MaxPausedSec= of task '%s', ignoring: %m", t->id);
}

/* ---- The states ---- */

const char *task_freezer_state(Task *t) {
        SandboxSession *s = t->run && t->run->session ? t->run->session : t->sandbox;

        if (!s)
                return "none";
        return sandbox_session_is_frozen(s) ? "frozen" : "running";
}

bool freezer_task_holds_sandbox(Task *t) {
        return t->sandbox || (t->run && t->state == TASK_PAUSED);
}

static int freeze(Task *t, SandboxSession *s, const char *why, char **ret_error) {
        const char *method = NULL;
        uint64_t usec = 0;
        int r;

        r = sandbox_session_freeze(s, launcher_socket(t), &method, &usec, ret_error);
        if (r < 0)
                return r;
        fdstore_add(t, s, FDSTORE_PREFIX);
        audit_sandbox_frozen(t, why, method, usec);
        return 0;
}

static int thaw(Task *t, SandboxSession *s, char **ret_error) {
        uint64_t frozen = sandbox_session_frozen_usec(s);
        int r;

        if (!sandbox_session_is_frozen(s))
                return 0;
        r = sandbox_session_thaw(s, launcher_socket(t), ret_error);
        if (r < 0)
                return r;
        fdstore_remove(t);
        audit_sandbox_thawed(t, frozen);
        return 0;
}

int task_pause(Task *t, sd_bus_error *error) {
        _cleanup_free_ char *why = NULL;
        AgentRun *run = t->run;
        int r;

        /* A sandbox being made has nothing to freeze yet, and would come up
         * running while the task says paused. */
        if (run && run->phase == PHASE_SANDBOX)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is getting its sandbox; pause it "
                                         "again in a moment.", t->id);
        if (run && run->session) {
                r = freeze(t, run->session, "pause", &why);
                if (r < 0)
                        /* Nothing is left running while we say "paused". */
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_CANNOT_FREEZE, "Cannot pause task '%s': %s",
                                                 t->id, why ?: strerror(-r));
        }
        if (run) {
                /* A model call in flight is made again on resume: it has
                 * changed nothing yet, and its answer would come while paused. */
                if (run->call) {
                        model_call_cancel(run->call);
                        run->call = NULL;
                        run->phase = PHASE_IDLE;
                }
                agent_count_clock(run);
                run->clock_usec = 0;
                /* What the sandbox used up to the freeze, in the state file
                 * the pause writes: a restart takes the frozen sandbox up
                 * again and counts from then. */
                agent_resources_sample(run);
        }
        t->progress.paused_from = t->state;
        return 0;
}

int task_unpause(Task *t, sd_bus_error *error) {
        _cleanup_free_ char *why = NULL;
        int r;

        if (t->run && t->run->session) {
                r = thaw(t, t->run->session, &why);
                if (r < 0 && !sandbox_session_is_alive(t->run->session)) {
                        /* It ended while frozen (stopped by systemd, say): what
                         * ran in it is lost, so the task goes on from its
                         * last checkpoint with a new agent and sandbox. */
                        log_warning("The sandbox of task '%s' ended while it was paused: going on from the last "
                                    "checkpoint.", t->id);
                        agent_stop(t);
                        return 0;
                }
                if (r < 0)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_CANNOT_FREEZE, "Cannot resume task '%s': %s",
                                                 t->id, why ?: strerror(-r));
        }
        return 0;
}

void task_unpaused(Task *t) {
        if (!t->run)
                return;   /* torn down, or a restarted daemon: the scheduler starts an agent */
        t->run->clock_usec = agent_now_usec();
        /* A step's end that was done while paused is acknowledged now. */
        if (step_commit_take_held(t->run) || review_stage_take_held(t->run))
                return;
        if (t->run->tools_held)
                return agent_take_held_tools(t->run);
        /* A command in flight finishes by itself; anything else goes on now. */
        if (t->run->phase == PHASE_IDLE)
                agent_schedule(t->run);
}

void freezer_park(Task *t, SandboxSession **s) {
        _cleanup_free_ char *why = NULL;
        int r;

        if (!*s)
                return;
        if (sandbox_session_is_busy(*s) || t->sandbox) {
                freezer_forget_session(t, *s);
                *s = sandbox_session_free(*s);
                return;
        }
        r = freeze(t, *s, "approval", &why);
        if (r < 0) {
                /* Then it ends; the agent that takes the task up makes a new one. */
                log_warning("Cannot freeze the sandbox of task '%s' while it waits for approval (%s): ending it.",
                            t->id, why ?: strerror(-r));
                *s = sandbox_session_free(*s);
                return;
        }
        t->sandbox = TAKE_PTR(*s);
        t->sandbox_stale = false;
        freezer_arm(t);
        task_changed(t, TASK_CHANGE_STATE);
}

SandboxSession *freezer_take_parked(Task *t) {
        _cleanup_free_ char *why = NULL;
        int r;

        if (!t->sandbox)
                return NULL;
        if (!t->sandbox_stale) {
                r = thaw(t, t->sandbox, &why);
                if (r >= 0) {
                        SandboxSession *s = TAKE_PTR(t->sandbox);
                        task_changed(t, TASK_CHANGE_STATE);
                        return s;
                }
                log_warning("Cannot thaw the sandbox of task '%s' (%s): making a new one.", t->id, why ?: strerror(-r));
        }
        /* What ran in it is lost with the agent that ran it: start afresh. */
        freezer_thaw_for_end(t, t->sandbox);
        t->sandbox = sandbox_session_free(t->sandbox);
        return NULL;
}

void freezer_thaw_for_end(Task *t, SandboxSession *s) {
        _cleanup_free_ char *why = NULL;
        int r;

        if (!s)
                return;
        if (sandbox_session_is_frozen(s) && sandbox_session_is_alive(s)) {
                r = thaw(t, s, &why);
                if (r < 0)
                        log_error("Cannot thaw the sandbox of task '%s' to end it (%s); the next start of the "
                                  "daemon stops its scope.", t->id, why ?: strerror(-r));
        }
        fdstore_remove(t);
}

void freezer_task_state_changed(Task *t) {
        if (t->state == TASK_PAUSED) {
                freezer_arm(t);
                return;
        }
        if (t->state == TASK_AWAITING_APPROVAL)
                return;   /* armed by freezer_park() */
        t->release_timer = sd_event_source_disable_unref(t->release_timer);
        /* Approved or rejected: the next agent takes the parked sandbox. */
        if (task_state_is_active(t->state))
                return;
        if (t->sandbox) {
                freezer_thaw_for_end(t, t->sandbox);
                t->sandbox = sandbox_session_free(t->sandbox);
        }
}

/* A running sandbox's connection back from the fd store: taken up if its
 * task is still at work (the state file says so) and it checks out;
 * otherwise it is closed, which ends it (the launcher's instance then
 * releases the task's uid, and the scope empties and goes; a new sandbox
 * of the task stops a scope that is still there first). */
static void adopt_running(Factory *f, int fd, const char *name) {
        char id[AGENTFAB_TASK_ID_LEN + 1];
        int pid = 0, busy = 0;
        unsigned uid = 0;
        const char *why = NULL;
        uint64_t t0 = now_usec();
        Task *t = NULL;
        int r;

        if (sscanf(name + strlen(FDSTORE_RUNNING_PREFIX), "%12[0-9a-f]-%i-%u-%i", id, &pid, &uid, &busy) == 4)
                t = factory_find_task(f, id);
        if (!t)
                why = "no such task";
        else if (!reattach_enabled())
                why = "reattaching is off (AGENTFAB_NO_REATTACH=1)";
        else if (t->broken || !IN_SET(t->state, TASK_PREPARING, TASK_RUNNING, TASK_DELIVERING))
                why = "its task is no longer at work";
        else if (t->state == TASK_PREPARING)
                /* Its workspace may be made again (a half-made one is
                 * removed first), which a sandbox made before would not see. */
                why = "its task was still being prepared";
        else if (t->sandbox)
                why = "its task has a sandbox already";
        else if (busy != 0 || pid <= 1)
                why = "it ran a command";
        else if (task_has_network(t))
                why = "its task has a network";
        if (!why) {
                r = sandbox_session_adopt(f->event, fd, t->id, (pid_t) pid, (uid_t) uid, false, &why, &t->sandbox);
                if (r < 0 && !why)
                        why = strerror(-r);
        }
        if (why) {
                log_info("Not taking up the sandbox connection '%s' again: %s; a new sandbox is made if needed.", name, why);
                (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", name);
                safe_close(fd);
                return;
        }
        t->sandbox_stale = false;
        t->fdstore_name = strdup(name);
        if (t->fdstore_name)
                t->fdstore_session = t->sandbox;
        else
                log_oom();
        sandbox_session_set_exec_hook(t->sandbox, on_session_exec, t);
        audit_sandbox_reattached(t, sandbox_session_get_unit(t->sandbox), (pid_t) pid, (uid_t) uid, now_usec() - t0);
}

void freezer_adopt_stored(Factory *f, int *fds, char **names, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (strneq(names[i], FDSTORE_RUNNING_PREFIX, strlen(FDSTORE_RUNNING_PREFIX))) {
                        adopt_running(f, fds[i], names[i]);
                        continue;
                }
                char id[AGENTFAB_TASK_ID_LEN + 1];
                int pid = 0, busy = 0;
                unsigned uid = 0;
                Task *t = NULL;
                int r;

                if (strneq(names[i], FDSTORE_PREFIX, strlen(FDSTORE_PREFIX)) &&
                    sscanf(names[i] + strlen(FDSTORE_PREFIX), "%12[0-9a-f]-%i-%u-%i", id, &pid, &uid, &busy) == 4)
                        t = factory_find_task(f, id);
                if (!t || t->broken || t->sandbox || !IN_SET(t->state, TASK_PAUSED, TASK_AWAITING_APPROVAL) || pid <= 1) {
                        log_info("Dropping stored sandbox connection '%s': its task no longer waits for it.", names[i]);
                        (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
                        safe_close(fds[i]);
                        continue;
                }
                const char *why = NULL;
                r = sandbox_session_adopt(f->event, fds[i], t->id, (pid_t) pid, (uid_t) uid, true, &why, &t->sandbox);
                if (r < 0) {
                        log_warning_errno(r, "Cannot take up the frozen sandbox of task '%s', dropping it: %s", t->id,
                                          why ?: strerror(-r));
                        (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
                        safe_close(fds[i]);
                        continue;
                }
                t->sandbox_stale = busy != 0;
                t->fdstore_name = strdup(names[i]);
                if (!t->fdstore_name)
                        log_oom();
                else
                        t->fdstore_session = t->sandbox;
                freezer_arm(t);
                log_info("Task '%s' is %s; its frozen sandbox (pid %i) is back.", t->id, task_state_to_string(t->state), pid);
        }
}
