/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "agent-loop.h"
#include "agent-run.h"
#include "audit.h"
#include "exec-session.h"
#include "freezer.h"
#include "log.h"
#include "manager.h"
#include "review-stage.h"
#include "run-ledger.h"
#include "string-util.h"

#define FDSTORE_PREFIX "sandbox-"

static const char *launcher_socket(Task *t) {
        return t->manager->config.launcher_socket ?: SANDBOX_LAUNCHER_SOCKET;
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
}

static void fdstore_add(Task *t, SandboxSession *s) {
        _cleanup_free_ char *name = NULL, *msg = NULL;
        int fd = sandbox_session_get_fd(s);
        int r;

        fdstore_remove(t);
        if (fd < 0)
                return;
        if (asprintf(&name, FDSTORE_PREFIX "%s-%i-%u-%i", t->id, (int) sandbox_session_get_pid(s),
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
        if (t->run && (t->run->held || t->run->held_review)) {
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
        task_bus_send_changed(t);
        return 0;
}

/* The timer counts from the state change (UpdatedUSec, wall-clock), so a
 * restarted daemon keeps the deadline. */
static void freezer_arm(Task *t) {
        uint64_t max = t->manager->config.max_paused_usec;
        int r;

        t->release_timer = sd_event_source_disable_unref(t->release_timer);
        if (max == UINT64_MAX || !t->manager->event)
                return;
        r = sd_event_add_time(t->manager->event, &t->release_timer, CLOCK_REALTIME,
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
        fdstore_add(t, s);
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
        if (run_ledger_take_held(t->run) || review_stage_take_held(t->run))
                return;
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
                *s = sandbox_session_free(*s);
                return;
        }
        r = freeze(t, *s, "approval", &why);
        if (r < 0) {
                /* Then it ends, as it did before freezing existed. */
                log_warning("Cannot freeze the sandbox of task '%s' while it waits for approval (%s): ending it.",
                            t->id, why ?: strerror(-r));
                *s = sandbox_session_free(*s);
                return;
        }
        t->sandbox = TAKE_PTR(*s);
        t->sandbox_stale = false;
        freezer_arm(t);
        task_bus_send_changed(t);
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
                        task_bus_send_changed(t);
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

void freezer_adopt_stored(Manager *m, int *fds, char **names, size_t n) {
        for (size_t i = 0; i < n; i++) {
                char id[AGENTFAB_TASK_ID_LEN + 1];
                int pid = 0, busy = 0;
                unsigned uid = 0;
                Task *t = NULL;
                int r;

                if (strneq(names[i], FDSTORE_PREFIX, strlen(FDSTORE_PREFIX)) &&
                    sscanf(names[i] + strlen(FDSTORE_PREFIX), "%12[0-9a-f]-%i-%u-%i", id, &pid, &uid, &busy) == 4)
                        t = manager_find_task(m, id);
                if (!t || t->broken || t->sandbox || !IN_SET(t->state, TASK_PAUSED, TASK_AWAITING_APPROVAL) || pid <= 1) {
                        log_info("Dropping stored sandbox connection '%s': its task no longer waits for it.", names[i]);
                        (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
                        safe_close(fds[i]);
                        continue;
                }
                r = sandbox_session_adopt(m->event, fds[i], t->id, (pid_t) pid, (uid_t) uid, true, &t->sandbox);
                if (r < 0) {
                        log_warning_errno(r, "Cannot take up the frozen sandbox of task '%s', dropping it: %m", t->id);
                        (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
                        safe_close(fds[i]);
                        continue;
                }
                t->sandbox_stale = busy != 0;
                t->fdstore_name = strdup(names[i]);
                if (!t->fdstore_name)
                        log_oom();
                freezer_arm(t);
                log_info("Task '%s' is %s; its frozen sandbox (pid %i) is back.", t->id, task_state_to_string(t->state), pid);
        }
}
