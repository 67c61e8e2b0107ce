/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "audit.h"
#include "json-util.h"
#include "log.h"
#include "manager.h"
#include "messages.h"
#include "stream.h"
#include "task-store.h"

/* Appends the event to the task's history and hands it to its watchers. */
static void task_event(Task *t, const char *type, uid_t caller, const char *k1, const char *v1,
                       const char *k2, const char *v2, const char *k3, const char *v3) {
        _cleanup_json_ json_object *e = json_object_new_object();
        int r;

        if (!e ||
            json_add_string(e, "type", type) < 0 ||
            json_add_string(e, "task", t->id) < 0 ||
            json_add_uint64(e, "usec", now_usec()) < 0 ||
            (caller != UID_INVALID && json_add_uint64(e, "uid", caller) < 0) ||
            (k1 && json_add_string(e, k1, v1) < 0) ||
            (k2 && json_add_string(e, k2, v2) < 0) ||
            (k3 && json_add_string(e, k3, v3) < 0)) {
                log_oom();
                return;
        }

        r = task_append_event(t, e);
        if (r < 0 && r != -EROFS)
                log_warning_errno(r, "Failed to append event to history of task '%s', ignoring: %m", t->id);

        if (t->manager && t->manager->stream)
                stream_server_task_event(t->manager->stream, t, e);
}


void audit_task_submitted(Task *t, uid_t caller) {
        (void) sd_journal_send("MESSAGE=Task %s submitted by uid %u for '%s'.", t->id, (unsigned) caller, t->spec.repository,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_SUBMITTED_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=submitted",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_OWNER=%u", (unsigned) t->owner,
                               "AGENTFAB_REPOSITORY=%s", t->spec.repository,
                               "AGENTFAB_BASE=%s", t->spec.base ?: "HEAD",
                               "AGENTFAB_GOAL=%s", t->spec.goal,
                               "AGENTFAB_TEST_COMMAND=%s", strempty(t->spec.test_command),
                               NULL);
        task_event(t, "submitted", caller, "state", task_state_to_string(t->state),
                   "repository", t->spec.repository, "goal", t->spec.goal);
}

void audit_task_state(Task *t, TaskState old_state, uid_t caller) {
        _cleanup_free_ char *message = NULL, *task = NULL, *state = NULL, *old = NULL, *reason = NULL, *uid = NULL;
        struct iovec iov[10];
        size_t n = 0;

        if (asprintf(&message, "MESSAGE=Task %s is now %s%s%s.", t->id, task_state_to_string(t->state),
                     isempty(t->reason) ? "" : ": ", t->reason) < 0 ||
            asprintf(&task, "AGENTFAB_TASK=%s", t->id) < 0 ||
            asprintf(&state, "AGENTFAB_STATE=%s", task_state_to_string(t->state)) < 0 ||
            asprintf(&old, "AGENTFAB_OLD_STATE=%s", task_state_to_string(old_state)) < 0 ||
            asprintf(&reason, "AGENTFAB_REASON=%s", t->reason) < 0 ||
            (caller != UID_INVALID && asprintf(&uid, "AGENTFAB_UID=%u", (unsigned) caller) < 0)) {
                log_oom();
                return;
        }

#define IOV(s) iov[n++] = (struct iovec) { .iov_base = (char *) (s), .iov_len = strlen(s) }
        IOV(message);
        IOV("MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_STATE_STR);
        IOV(t->state == TASK_FAILED ? "PRIORITY=4" : "PRIORITY=6");
        IOV("AGENTFAB_EVENT=state");
        IOV(task);
        IOV(state);
        IOV(old);
        IOV(reason);
        /* No AGENTFAB_UID= when the daemon changed the state on its own. */
        if (uid)
                IOV(uid);
#undef IOV
        (void) sd_journal_sendv(iov, (int) n);

        task_event(t, "state", caller, "state", task_state_to_string(t->state),
                   "old_state", task_state_to_string(old_state), "reason", t->reason);
}

void audit_task_request(Task *t, const char *event, uid_t caller, const char *comment) {
        (void) sd_journal_send("MESSAGE=Task %s: %s requested by uid %u.", t->id, event, (unsigned) caller,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_REQUEST_STR,
                               "PRIORITY=%i", LOG_NOTICE,
                               "AGENTFAB_EVENT=%s", event,
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_COMMENT=%s", strempty(comment),
                               NULL);
        task_event(t, "request", caller, "request", event, comment ? "comment" : NULL, comment, NULL, NULL);
}

void audit_denied(const char *task_id, const char *action, uid_t caller) {
        (void) sd_journal_send("MESSAGE=Denied %s to uid %u on task %s.", action, (unsigned) caller, strempty(task_id),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DENIED_STR,
                               "PRIORITY=%i", LOG_WARNING,
                               "AGENTFAB_EVENT=denied",
                               "AGENTFAB_TASK=%s", strempty(task_id),
                               "AGENTFAB_UID=%u", (unsigned) caller,
                               "AGENTFAB_ACTION=%s", action,
                               NULL);
}

void audit_task_broken(Task *t) {
        (void) sd_journal_send("MESSAGE=Task %s: %s", t->id, t->reason,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_TASK_BROKEN_STR,
                               "PRIORITY=%i", LOG_ERR,
                               "AGENTFAB_EVENT=broken",
                               "AGENTFAB_TASK=%s", t->id,
                               "AGENTFAB_REASON=%s", t->reason,
                               NULL);
}

void audit_daemon_started(unsigned n_tasks) {
        (void) sd_journal_send("MESSAGE=agentfabd started with %u task records.", n_tasks,
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DAEMON_STARTED_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=started",
                               "AGENTFAB_TASKS=%u", n_tasks,
                               NULL);
}

void audit_daemon_idle(void) {
        (void) sd_journal_send("MESSAGE=agentfabd idle, exiting.",
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_DAEMON_IDLE_STR,
                               "PRIORITY=%i", LOG_INFO,
                               "AGENTFAB_EVENT=idle-exit",
                               NULL);
}
