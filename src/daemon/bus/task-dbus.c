/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>

#include "access.h"
#include "agent.h"
#include "agentfab-bus.h"
#include "amend-dbus.h"
#include "approve-options.h"
#include "audit.h"
#include "bus-server.h"
#include "egress.h"
#include "fleet.h"
#include "json-util.h"
#include "log.h"
#include "string-util.h"
#include "task-branch.h"
#include "task-save.h"
#include "task-store.h"

#define COMMENT_MAX 4096

static int property_get_state(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Task *t = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", task_state_to_string(t->state));
}

/* For string fields that may be NULL (not given in the spec). */
static int property_get_string_ptr(sd_bus *bus, const char *path, const char *interface, const char *property,
                                   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        char **s = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", strempty(*s));
}

static int property_get_bool(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        bool *b = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "b", (int) *b);
}

static int property_get_base(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Task *t = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", t->spec.base ?: "HEAD");
}

static int property_get_pull_request_base(sd_bus *bus, const char *path, const char *interface, const char *property,
                                          sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Task *t = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        /* Only a task with a forge opens a pull request, and only then is there a base for it. */
        return sd_bus_message_append(reply, "s", t->spec.forge ? t->spec.pull_request_base ?: TASK_PULL_REQUEST_BASE_DEFAULT : "");
}

static int property_get_limits(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Task *t = userdata;
        int r;

        (void) bus, (void) path, (void) interface, (void) property, (void) error;

        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "{st}");
        if (r < 0)
                return r;
        for (int i = 0; i < _TASK_LIMIT_MAX; i++)
                if (t->spec.limits[i] != TASK_LIMIT_UNSET) {
                        r = sd_bus_message_append(reply, "{st}", task_limit_to_string(i), t->spec.limits[i]);
                        if (r < 0)
                                return r;
                }
        for (size_t i = 0; i < t->spec.n_extra_limits; i++) {
                r = sd_bus_message_append(reply, "{st}", t->spec.extra_limit_names[i], t->spec.extra_limit_values[i]);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

/* What the task used, by the names of status --json's "resources": a
 * counter nobody could read is left out, the currency is there with a
 * price. */
static int property_get_resources(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        _cleanup_json_ json_object *j = NULL;
        Task *t = userdata;
        TaskResources res;
        int r;

        (void) bus, (void) path, (void) interface, (void) property, (void) error;

        res = t->progress.resources;
        res.wall_usec = t->progress.wall_usec;
        r = task_resources_to_json(&res, &j);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        json_object_object_foreach(j, key, v) {
                if (json_object_is_type(v, json_type_int))
                        r = sd_bus_message_append(reply, "{sv}", key, "t", json_object_get_uint64(v));
                else if (json_object_is_type(v, json_type_string))
                        r = sd_bus_message_append(reply, "{sv}", key, "s", json_object_get_string(v));
                else
                        continue;
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

static int read_comment(sd_bus_message *message, const char **ret, sd_bus_error *error) {
        const char *comment;
        int r;

        r = sd_bus_message_read(message, "s", &comment);
        if (r < 0)
                return r;
        if (strlen(comment) > COMMENT_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Comment is longer than %i bytes.", COMMENT_MAX);
        if (!string_is_safe(comment, true))
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Comment contains control characters.");
        *ret = comment;
        return 0;
}

static int require_state(Task *t, TaskState state, sd_bus_error *error) {
        if (t->broken)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_STATE_BROKEN,
                                         "Task '%s' has an unreadable state file and is read-only.", t->id);
        if (t->state != state)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is %s, not %s.",
                                         t->id, task_state_to_string(t->state), task_state_to_string(state));
        return 0;
}

/* Every task method: arguments → state precondition → polkit → change →
 * audit → reply. The polkit check may re-run the handler, so nothing before
 * it changes anything. */
typedef enum TaskDecision {
        DECISION_NONE,
        DECISION_APPROVE,
        DECISION_REJECT,
        DECISION_RESUME,
        DECISION_PAUSE,
        DECISION_UNPAUSE,
} TaskDecision;

static void bus_message_unref(void *message) {
        sd_bus_message_unref(message);
}

/* A Cancel() or Resume() whose state file was written in a thread. */
static void on_state_saved(Task *t, int r, sd_bus_error *error, void *userdata) {
        sd_bus_message *message = userdata;

        if (!t)
                (void) sd_bus_reply_method_errorf(message, SD_BUS_ERROR_FAILED,
                                                  "The task went away while its state was being saved.");
        else if (r >= 0)
                (void) sd_bus_reply_method_return(message, NULL);
        else if (sd_bus_error_is_set(error))
                (void) sd_bus_reply_method_error(message, error);
        else
                (void) sd_bus_reply_method_errnof(message, r, "Failed to save task '%s': %m", t->id);
}

/* What one of the task methods does: which polkit action it needs, the
 * state it requires, the one it leads to. */
typedef struct TaskAction {
        const char *event;              /* the audit entry's AGENTFAB_EVENT= */
        const char *action;             /* polkit */
        bool owner_ok;
        bool has_comment;
        TaskState required;             /* _TASK_STATE_INVALID: any */
        TaskState target;
        TaskDecision decision;
} TaskAction;

/* The action a method (by its request's name: "cancel", "approve",
 * "reject", "pause", "resume") stands for on t as it is now, or the error
 * that method answers before anything else. One table for the bus's
 * methods and for the requests other hosts of a fleet send, so that both
 * are the same decisions under the same rules. */
static int task_action_select(Task *t, const char *kind, TaskAction *ret, sd_bus_error *error) {
        if (streq(kind, "cancel")) {
                if (task_state_is_final(t->state) && !t->broken)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is already %s.",
                                                 t->id, task_state_to_string(t->state));
                *ret = (TaskAction) { "cancel", "org.agentfab.manage", true, false, _TASK_STATE_INVALID,
                                      TASK_CANCELLED, DECISION_NONE };
        } else if (streq(kind, "approve"))
                *ret = (TaskAction) { "approve", "org.agentfab.approve", false, true, TASK_AWAITING_APPROVAL,
                                      TASK_RUNNING, DECISION_APPROVE };
        else if (streq(kind, "reject"))
                *ret = (TaskAction) { "reject", "org.agentfab.approve", false, true, TASK_AWAITING_APPROVAL,
                                      TASK_RUNNING, DECISION_REJECT };
        else if (streq(kind, "resume")) {
                if (t->state == TASK_AWAITING_APPROVAL && !t->broken)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE,
                                                 "Task '%s' waits for approval: use Approve() or Reject().", t->id);
                /* A paused task is thawed and carries on where it stood. */
                if (t->state == TASK_PAUSED && !t->broken)
                        *ret = (TaskAction) { "resume", "org.agentfab.manage", true, false, TASK_PAUSED,
                                              t->progress.paused_from, DECISION_UNPAUSE };
                else
                        *ret = (TaskAction) { "resume", "org.agentfab.manage", true, false, TASK_FAILED,
                                              TASK_QUEUED, DECISION_RESUME };
        } else if (streq(kind, "pause")) {
                if (!t->broken && !IN_SET(t->state, TASK_RUNNING, TASK_PREPARING))
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is %s: only a running or "
                                                 "preparing task can be paused.", t->id, task_state_to_string(t->state));
                *ret = (TaskAction) { "pause", "org.agentfab.manage", true, false, _TASK_STATE_INVALID,
                                      TASK_PAUSED, DECISION_PAUSE };
        } else
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "No request '%s' on a task.", kind);
        return 0;
}

/* The decision itself, once the caller (uid) may make it: state change,
 * audit entry, and, with message, the reply. Without message (a request
 * another host of a fleet took, fleet-people.h) the state file is written
 * here and now and 0 is returned. */
static int task_decide(sd_bus_message *message, Task *t, const TaskAction *a, const char *comment, uid_t uid,
                       char **allow_hosts, const ApproveOptions *options, const char *limits, sd_bus_error *error) {
        TaskState target = a->target;
        int r;

        /* SECURITY: a fenced host of a fleet works on nothing (fleet.h):
         * no person sets an agent going there until it has checked that it
         * still holds the task. */
        if (IN_SET(a->decision, DECISION_UNPAUSE, DECISION_RESUME, DECISION_APPROVE, DECISION_REJECT) &&
            fleet_is_fenced(task_bus_server(t)->manager->fleet))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE,
                                         "This host lost contact with the fleet's database: task '%s' waits until it "
                                         "is back and the host has checked that it still holds the task.", t->id);

        /* The answer may have taken a while: look again. */
        if (a->required != _TASK_STATE_INVALID) {
                r = require_state(t, a->required, error);
                if (r < 0)
                        return r;
        }
        if (a->decision == DECISION_PAUSE && !IN_SET(t->state, TASK_RUNNING, TASK_PREPARING))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is %s: only a running or preparing "
                                         "task can be paused.", t->id, task_state_to_string(t->state));
        if (a->decision == DECISION_PAUSE)
                target = TASK_PAUSED;
        if (a->decision == DECISION_UNPAUSE)
                target = t->progress.paused_from;

        if (!task_state_transition_allowed(t->state, target))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is %s; it cannot become %s.",
                                         t->id, task_state_to_string(t->state), task_state_to_string(target));

        _cleanup_free_ char *reason = NULL;
        if (target == TASK_CANCELLED && asprintf(&reason, "Cancelled by uid %u", (unsigned) uid) < 0)
                return -ENOMEM;

        audit_task_request(t, a->event, uid, comment);

        /* What the agent makes of the decision goes into the task's progress,
         * which the state change below persists with the new state. */
        if (a->decision == DECISION_APPROVE || a->decision == DECISION_REJECT) {
                if (allow_hosts) {
                        Environment const *env = environments_find(&t->factory->environments,
                                                                    t->spec.environment ?: ENVIRONMENT_DEFAULT);
                        if (!env || env->network == NETWORK_OFF)
                                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                         "Task '%s' has no network (its environment's Network=off): "
                                                         "no host can be allowed.", t->id);
                        r = egress_task_allow(t->factory->egress, t, allow_hosts, uid, error);
                        if (r < 0)
                                return sd_bus_error_is_set(error) ? r :
                                       sd_bus_error_set_errnof(error, r, "Failed to allow hosts for task '%s': %m", t->id);
                }
                r = agent_decide(t, a->decision == DECISION_APPROVE, comment, uid, limits, &reason);
                if (r < 0)
                        return sd_bus_error_set_errnof(error, r, "Failed to record the decision on task '%s': %m", t->id);
                /* After the decision's own extension: the limit set is the budget. */
                if (limits)
                        agent_limits_apply(t, options->limit_names, options->limit_values, uid);
                if (r > 0)
                        target = TASK_FAILED;
        } else if (a->decision == DECISION_RESUME)
                agent_prepare_resume(t);
        else if (a->decision == DECISION_PAUSE) {
                /* The sandbox is frozen before anybody hears "paused"; if it
                 * cannot be, the task goes on and the caller learns why. */
                r = task_pause(t, error);
                if (r < 0)
                        return r;
        } else if (a->decision == DECISION_UNPAUSE) {
                r = task_unpause(t, error);
                if (r < 0)
                        return r;
        }
        /* A cancel, the one of these a busy client sends often, and a
         * resume, after which the agent resets a workspace that may be big,
         * have their state file written in a thread; the answer follows
         * (task-save.h). */
        if (message && ((a->decision == DECISION_NONE && target == TASK_CANCELLED) || a->decision == DECISION_RESUME)) {
                r = task_set_state_async(t, t->factory ? t->factory->event : NULL, target, reason, uid,
                                         on_state_saved, sd_bus_message_ref(message), bus_message_unref, error);
                if (r > 0)
                        return 1;
                sd_bus_message_unref(message);
        } else
                r = task_set_state(t, target, reason, uid, error);
        if (r < 0) {
                /* Not paused after all: nothing may stay frozen. */
                if (a->decision == DECISION_PAUSE && task_unpause(t, NULL) >= 0)
                        task_unpaused(t);
                return r;
        }
        if (a->decision == DECISION_UNPAUSE)
                task_unpaused(t);

        return message ? sd_bus_reply_method_return(message, NULL) : 0;
}

static int task_method(sd_bus_message *message, Task *t, const char *kind, sd_bus_error *error) {
        _cleanup_(approve_options_done) ApproveOptions options = {};
        _cleanup_free_ char *limits = NULL;
        const char *comment = NULL;
        TaskAction a;
        uid_t uid;
        int r;

        r = task_action_select(t, kind, &a, error);
        if (r < 0)
                return r;
        if (a.has_comment) {
                r = read_comment(message, &comment, error);
                if (r < 0)
                        return r;
        }
        /* ApproveWithOptions(): Approve() with options after the comment. */
        if (a.decision == DECISION_APPROVE && streq_ptr(sd_bus_message_get_signature(message, true), "sa{sv}")) {
                r = approve_options_read(message, &options, error);
                if (r < 0)
                        return r;
        }

        if (a.required != _TASK_STATE_INVALID) {
                r = require_state(t, a.required, error);
                if (r < 0)
                        return r;
        } else if (t->broken)
                return require_state(t, t->state, error);

        /* What an approval sets is checked before anybody is asked. */
        if (options.limit_names) {
                r = agent_limits_check(t, options.limit_names, options.limit_values, error);
                if (r < 0)
                        return r;
                r = agent_limits_format(options.limit_names, options.limit_values, &limits);
                if (r < 0)
                        return r;
        }

        r = access_verify(task_bus_server(t), message, t, a.action, a.owner_ok, error);
        if (r < 0)
                return r;
        if (r == 0)
                return 1;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;

        return task_decide(message, t, &a, comment, uid, options.hosts, &options, limits, error);
}

int task_bus_apply(Task *t, const char *kind, const char *comment, uid_t uid, sd_bus_error *error) {
        TaskAction a;
        int r;

        assert(t);
        assert(kind);

        r = task_action_select(t, kind, &a, error);
        if (r < 0)
                return r;
        if (a.required == _TASK_STATE_INVALID && t->broken)
                return require_state(t, t->state, error);
        if (comment && (strlen(comment) > COMMENT_MAX || !string_is_safe(comment, true)))
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                        "The comment is too long or contains control characters.");
        return task_decide(NULL, t, &a, a.has_comment ? comment : NULL, uid, NULL, NULL, NULL, error);
}

static int method_cancel(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return task_method(message, userdata, "cancel", error);
}

static int method_approve(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return task_method(message, userdata, "approve", error);
}

static int method_reject(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return task_method(message, userdata, "reject", error);
}


static int method_resume(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return task_method(message, userdata, "resume", error);
}

static int method_pause(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return task_method(message, userdata, "pause", error);
}

static int property_get_freezer_state(sd_bus *bus, const char *path, const char *interface, const char *property,
                                      sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", task_freezer_state(userdata));
}

/* ---- Jobs on the task's branch (task-branch.h), answered when done ---- */

static TaskBranchCaller branch_caller(sd_bus_message *message, task_branch_done_t done) {
        return (TaskBranchCaller) {
                .done = done,
                .userdata = sd_bus_message_ref(message),
                .free_userdata = bus_message_unref,
        };
}

static void on_exported(Task *t, int r, sd_bus_error *error, const TaskBranchResult *result, void *userdata) {
        (void) t;
        if (r < 0)
                (void) sd_bus_reply_method_error(userdata, error);
        else
                (void) sd_bus_reply_method_return(userdata, "h", result->fd);
}

static int commits_reply(sd_bus_message *message, json_object *list) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(sus)");
        if (r < 0)
                return r;
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                json_object *c = json_object_array_get_idx(list, i);
                const char *commit = NULL, *subject = NULL;
                uint64_t step = 0;

                if (json_get_string(c, "commit", &commit) < 0)
                        continue;
                (void) json_get_uint64(c, "step", &step);
                (void) json_get_string(c, "subject", &subject);
                r = sd_bus_message_append(reply, "(sus)", commit, (uint32_t) MIN(step, (uint64_t) UINT32_MAX),
                                          strempty(subject));
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static void on_commits_listed(Task *t, int r, sd_bus_error *error, const TaskBranchResult *result, void *userdata) {
        if (r >= 0) {
                r = commits_reply(userdata, result->commits);
                if (r < 0)
                        (void) sd_bus_reply_method_errnof(userdata, r, "Cannot list the commits of task '%s': %m", t->id);
                return;
        }
        (void) sd_bus_reply_method_error(userdata, error);
}

static void on_reset(Task *t, int r, sd_bus_error *error, const TaskBranchResult *result, void *userdata) {
        (void) t;
        if (r < 0)
                (void) sd_bus_reply_method_error(userdata, error);
        else
                (void) sd_bus_reply_method_return(userdata, "us", (uint32_t) result->step, result->commit);
}

/* Queues the job, or answers at once when it is not queued (0). */
static int branch_call(TaskBranchCaller caller, int r) {
        if (r <= 0)
                caller.free_userdata(caller.userdata);
        return r;
}

static int method_reset_to(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        const char *rev;
        Task *t = userdata;
        uid_t uid;
        int r;

        r = sd_bus_message_read(message, "s", &rev);
        if (r < 0)
                return r;
        /* A running task's workspace is the sandbox's: stop it first. */
        r = require_state(t, TASK_FAILED, error);
        if (r < 0)
                return r;
        r = access_verify(task_bus_server(t), message, t, "org.agentfab.manage", true, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = require_state(t, TASK_FAILED, error);
        if (r < 0)
                return r;
        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        r = task_settle_progress(t);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot read back the state file of task '%s': %m", t->id);

        audit_task_request(t, "reset", uid, rev);
        /* Answered when the reset is done, in a worker thread. */
        TaskBranchCaller c = branch_caller(message, on_reset);
        return branch_call(c, task_branch_reset_to(t, rev, uid, &c, error));
}

static int method_list_commits(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Task *t = userdata;
        int r;

        /* Reading needs no more than seeing the task. */
        if (t->broken)
                return require_state(t, t->state, error);
        /* Answered when the branch is read, in a worker thread. */
        TaskBranchCaller c = branch_caller(message, on_commits_listed);
        r = branch_call(c, task_branch_list_commits(t, &c, error));
        return r == 0 ? commits_reply(message, NULL) : r;
}

static int property_get_requirement(sd_bus *bus, const char *path, const char *interface, const char *property,
                                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Task *t = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "u", (uint32_t) task_requirement_version(t));
}

static int method_get_summary(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        (void) error;
        /* Reading needs no more than seeing the task: the object lookup has
         * checked that already. */
        return task_bus_reply_summary(userdata, message);
}

static int method_export(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        const char *format;
        Task *t = userdata;
        int r;

        r = sd_bus_message_read(message, "s", &format);
        if (r < 0)
                return r;
        if (t->broken)
                return require_state(t, t->state, error);
        /* Answered when the export is made, in a worker thread. */
        TaskBranchCaller c = branch_caller(message, on_exported);
        return branch_call(c, task_branch_export(t, format, &c, error));
}

static int property_get_checkpoints(sd_bus *bus, const char *path, const char *interface, const char *property,
                                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        _cleanup_json_ json_object *list = NULL;
        Task *t = userdata;
        int r;

        (void) bus, (void) path, (void) interface, (void) property, (void) error;

        if (!t->broken && (t->progress.checkpoint || t->progress.head))
                (void) task_branch_checkpoints(t, &list);

        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(uss)");
        if (r < 0)
                return r;
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                json_object *c = json_object_array_get_idx(list, i);
                const char *commit = NULL, *subject = NULL;
                uint64_t step = 0;

                if (json_get_uint64(c, "step", &step) < 0 || json_get_string(c, "commit", &commit) < 0)
                        continue;
                (void) json_get_string(c, "subject", &subject);
                r = sd_bus_message_append(reply, "(uss)", (uint32_t) MIN(step, (uint64_t) UINT32_MAX), commit,
                                          strempty(subject));
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

/* The review stage's findings, from the task directory (review.json): kind,
 * severity, file ("" none), line (0 none), message. Every string was
 * escaped and bounded by the review engine; no secret's value is kept. */
static int property_get_findings(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        _cleanup_(finding_list_done) FindingList l = {};
        Task *t = userdata;
        int r;

        (void) bus, (void) path, (void) interface, (void) property, (void) error;

        if (!t->broken && review_stage_load(t, &l) < 0)
                log_warning("Task '%s': its review.json cannot be read; no findings shown.", t->id);
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(sssus)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++) {
                r = sd_bus_message_append(reply, "(sssus)", finding_kind_to_string(l.items[i].kind),
                                          finding_severity_to_string(l.items[i].severity), strempty(l.items[i].file),
                                          (uint32_t) l.items[i].line, l.items[i].message);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

static const sd_bus_vtable task_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", NULL, offsetof(Task, id), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Owner", "u", NULL, offsetof(Task, owner), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Repository", "s", property_get_string_ptr, offsetof(Task, spec.repository), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Goal", "s", property_get_string_ptr, offsetof(Task, spec.goal), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("AcceptanceCriteria", "s", property_get_string_ptr, offsetof(Task, spec.acceptance), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("RequirementVersion", "u", property_get_requirement, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("TestCommand", "s", property_get_string_ptr, offsetof(Task, spec.test_command), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Base", "s", property_get_base, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Model", "s", property_get_string_ptr, offsetof(Task, spec.model), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Reference", "s", property_get_string_ptr, offsetof(Task, spec.reference), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("PushURL", "s", property_get_string_ptr, offsetof(Task, spec.push_url), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Forge", "s", property_get_string_ptr, offsetof(Task, spec.forge), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ForgeRepository", "s", property_get_string_ptr, offsetof(Task, spec.forge_repository), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("PullRequestBase", "s", property_get_pull_request_base, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Submodules", "b", property_get_bool, offsetof(Task, spec.submodules), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Environment", "s", property_get_string_ptr, offsetof(Task, spec.environment), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("EnvironmentIdentity", "s", property_get_string_ptr, offsetof(Task, progress.environment_identity), 0),
        SD_BUS_PROPERTY("Limits", "a{st}", property_get_limits, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", property_get_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Reason", "s", property_get_string_ptr, offsetof(Task, reason), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("CreatedUSec", "t", NULL, offsetof(Task, created_usec), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("UpdatedUSec", "t", NULL, offsetof(Task, updated_usec), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Branch", "s", property_get_string_ptr, offsetof(Task, branch), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Plan", "s", property_get_string_ptr, offsetof(Task, progress.plan), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Step", "u", NULL, offsetof(Task, progress.step), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("HeadCommit", "s", property_get_string_ptr, offsetof(Task, progress.head), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Checkpoints", "a(uss)", property_get_checkpoints, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION),
        SD_BUS_PROPERTY("TokensUsed", "t", NULL, offsetof(Task, progress.tokens), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("CommandsRun", "t", NULL, offsetof(Task, progress.commands), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Resources", "a{sv}", property_get_resources, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Breaker", "s", property_get_string_ptr, offsetof(Task, progress.breaker), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("PullRequest", "s", property_get_string_ptr, offsetof(Task, progress.pull_request), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FreezerState", "s", property_get_freezer_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Findings", "a(sssus)", property_get_findings, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION),
        SD_BUS_METHOD_WITH_ARGS("Cancel", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_cancel, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Approve", SD_BUS_ARGS("s", comment), SD_BUS_NO_RESULT, method_approve, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ApproveWithOptions", SD_BUS_ARGS("s", comment, "a{sv}", options), SD_BUS_NO_RESULT,
                                method_approve, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reject", SD_BUS_ARGS("s", comment), SD_BUS_NO_RESULT, method_reject, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Resume", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_resume, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Pause", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_pause, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResetTo", SD_BUS_ARGS("s", commit), SD_BUS_RESULT("u", step, "s", commit),
                                method_reset_to, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Amend", SD_BUS_ARGS("a{sv}", changes), SD_BUS_RESULT("u", requirement_version),
                                method_amend, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListCommits", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sus)", commits),
                                method_list_commits, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetSummary", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", summary), method_get_summary, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Export", SD_BUS_ARGS("s", format), SD_BUS_RESULT("h", fd), method_export, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};

/* Task objects are looked up, not registered one by one. A task the caller
 * may not see does not exist for them: "unknown object", like a wrong id. */
static int task_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                            void **ret_found, sd_bus_error *error) {
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        sd_bus_message *message;
        const char *id;
        Task *t;
        int r;

        (void) interface, (void) error;

        if (strncmp(path, AGENTFAB_TASK_PATH_PREFIX "/", strlen(AGENTFAB_TASK_PATH_PREFIX "/")) != 0)
                return 0;
        id = path + strlen(AGENTFAB_TASK_PATH_PREFIX "/");

        t = manager_find_task(m, id);
        if (!t)
                return 0;

        /* Our own PropertiesChanged emission looks the object up too: then
         * there is no caller to check. */
        message = sd_bus_get_current_message(bus);
        if (!message || bs->emitting) {
                *ret_found = t;
                return 1;
        }
        r = access_caller_may_view(bs, message, t);
        if (r <= 0)
                return 0;

        *ret_found = t;
        return 1;
}

static int task_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***ret_nodes, sd_bus_error *error) {
        _cleanup_strv_free_ char **nodes = NULL;
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        sd_bus_message *message = sd_bus_get_current_message(bus);
        uid_t uid = UID_INVALID;

        (void) path, (void) error;

        /* Who asks is looked up once: each look-up may be a call to the bus. */
        if (message && bus_message_get_caller(message, &uid) < 0)
                uid = UID_INVALID;

        for (size_t i = 0; i < m->factory.n_tasks; i++) {
                _cleanup_free_ char *p = NULL;

                if (uid == UID_INVALID || !access_uid_may_view(bs, uid, sd_bus_message_get_sender(message), m->factory.tasks[i]))
                        continue;
                p = task_object_path(m->factory.tasks[i]);
                if (!p || strv_extend(&nodes, p) < 0)
                        return -ENOMEM;
        }
        if (!nodes) {
                nodes = calloc(1, sizeof(char *));
                if (!nodes)
                        return -ENOMEM;
        }

        *ret_nodes = TAKE_PTR(nodes);
        return 1;
}

int task_bus_register(BusServer *bs) {
        int r;

        r = sd_bus_add_fallback_vtable(bs->bus, NULL, AGENTFAB_TASK_PATH_PREFIX, AGENTFAB_TASK_INTERFACE,
                                       task_vtable, task_object_find, bs);
        if (r < 0)
                return r;
        return sd_bus_add_node_enumerator(bs->bus, NULL, AGENTFAB_TASK_PATH_PREFIX, task_node_enumerator, bs);
}

static void task_bus_emit(BusServer *bs, Task *t, char **properties) {
        _cleanup_free_ char *path = NULL;

        if (!bs || !bs->bus)
                return;
        path = task_object_path(t);
        if (!path)
                return;
        /* Our own emission looks the object up: no caller to check then. */
        bs->emitting = true;
        (void) sd_bus_emit_properties_changed_strv(bs->bus, path, AGENTFAB_TASK_INTERFACE, properties);
        bs->emitting = false;
}

void task_bus_emit_changes(BusServer *bs, Task *t, unsigned what) {
        if (what & TASK_CHANGE_STATE)
                task_bus_emit(bs, t, STRV_MAKE("State", "Reason", "UpdatedUSec", "Breaker", "PullRequest", "FreezerState"));
        if (what & TASK_CHANGE_REQUIREMENT)
                task_bus_emit(bs, t, STRV_MAKE("Goal", "AcceptanceCriteria", "RequirementVersion"));
        if (what & TASK_CHANGE_FINDINGS)
                task_bus_emit(bs, t, STRV_MAKE("Findings"));
        if (what & TASK_CHANGE_PROGRESS)
                task_bus_emit(bs, t, STRV_MAKE("Plan", "Step", "HeadCommit", "Checkpoints", "TokensUsed", "CommandsRun"));
        /* After a command, a model call, a step: never per byte. */
        if (what & (TASK_CHANGE_RESOURCES | TASK_CHANGE_PROGRESS))
                task_bus_emit(bs, t, STRV_MAKE("Resources"));
}
