/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "access.h"
#include "agentfab-bus.h"
#include "amend-dbus.h"
#include "audit.h"
#include "bus-server.h"
#include "conversation-file.h"
#include "string-util.h"
#include "task-store.h"

/* Amend(a{sv} changes): a new goal and/or new acceptance criteria for a task
 * that is not at work (task_state_may_amend()). The requirement's version
 * goes up, the model is told what changed (a user message of its
 * conversation, before its next call), the journal says who changed what,
 * and every later commit carries Agentfab-Requirement: vN. A task that had
 * finished must finish again against the new requirement. */
typedef struct Amendment {
        char *goal;            /* NULL: unchanged */
        char *acceptance;      /* NULL: unchanged; "" clears */
        bool has_goal, has_acceptance;
} Amendment;

static void amendment_done(Amendment *a) {
        free(a->goal);
        free(a->acceptance);
}

/* The same rules as at submission (length, control characters). */
static int amendment_check_value(const char *key, const char *value, sd_bus_error *error) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec check;
        int r;

        task_spec_init(&check);
        r = task_spec_set_string(&check, key, value, &e);
        task_spec_done(&check);
        if (r < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, e.message ?: "Invalid value.");
        return 0;
}

static int read_amendment(sd_bus_message *message, Amendment *a, sd_bus_error *error) {
        unsigned n = 0;
        int r;

        r = sd_bus_message_enter_container(message, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(message, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key, *value;

                if (++n > 2)
                        return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Too many changes: only 'goal' and 'acceptance'.");
                r = sd_bus_message_read(message, "s", &key);
                if (r < 0)
                        return r;
                if (!streq(key, "goal") && !streq(key, "acceptance"))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Unknown key '%s': only 'goal' and 'acceptance' can be amended.", key);
                r = sd_bus_message_read(message, "v", "s", &value);
                if (r < 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Key '%s' must be of type s.", key);
                r = amendment_check_value(key, value, error);
                if (r < 0)
                        return r;
                char **field = streq(key, "goal") ? &a->goal : &a->acceptance;
                bool *has = streq(key, "goal") ? &a->has_goal : &a->has_acceptance;
                if (*has)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Key '%s' given more than once.", key);
                *has = true;
                *field = strdup(value);
                if (!*field)
                        return -ENOMEM;
                r = sd_bus_message_exit_container(message);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(message);
        if (r < 0)
                return r;

        if (a->has_goal && a->goal[strspn(a->goal, " \t\n")] == '\0')
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "The goal cannot be empty.");
        if (!a->has_goal && !a->has_acceptance)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Nothing to amend: give 'goal', 'acceptance' or both.");
        return 0;
}

static int require_amendable(Task *t, sd_bus_error *error) {
        if (t->broken)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_STATE_BROKEN,
                                         "Task '%s' has an unreadable state file and is read-only.", t->id);
        if (!task_state_may_amend(t->state))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE,
                                         "Task '%s' is %s: only a task that is paused, waits for approval or has failed "
                                         "can be amended.", t->id, task_state_to_string(t->state));
        return 0;
}

/* The amendment once the caller (uid) may make it: a->has_* say what it
 * changes; *ret_version is the requirement's new version. */
static int amendment_apply(Task *t, Amendment *a, uid_t uid, uint32_t *ret_version, sd_bus_error *error) {
        _cleanup_free_ char *text = NULL, *old_goal = NULL, *old_acceptance = NULL;
        TaskProgress *p = &t->progress;
        int r;

        /* The answer may have taken a while: look again. */
        r = require_amendable(t, error);
        if (r < 0)
                return r;
        bool goal_changed = a->has_goal && !streq(a->goal, t->spec.goal);
        bool acceptance_changed = a->has_acceptance && !streq(a->acceptance, strempty(t->spec.acceptance));
        if (!goal_changed && !acceptance_changed)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "The amendment changes nothing: task '%s' has this requirement already.", t->id);
        r = task_settle_progress(t);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot read back the state file of task '%s': %m", t->id);

        unsigned version = task_requirement_version(t) + 1;
        const char *goal = goal_changed ? a->goal : t->spec.goal;
        const char *acceptance = acceptance_changed ? a->acceptance : strempty(t->spec.acceptance);
        if (asprintf(&text, "A person (uid %u) amended the requirement of this task: it is now version v%u.\n\n"
                     "# Goal%s\n%s\n\n# Acceptance criteria%s\n%s\n\n"
                     "What you did so far stays. Check it against this requirement, change what it needs, and call "
                     "finish when it is met (finish runs the tests again).",
                     (unsigned) uid, version, goal_changed ? " (changed)" : " (unchanged)", goal,
                     acceptance_changed ? " (changed)" : " (unchanged)",
                     isempty(acceptance) ? "(none: the goal and the tests decide)" : acceptance) < 0)
                return -ENOMEM;

        /* Changed in memory, then persisted; put back if that fails. The
         * message is appended first: unacknowledged, it is cut off later. */
        unsigned old_messages = p->messages, old_requirement = p->requirement;
        uint64_t old_conversation_size = p->conversation_size;
        bool old_finished = p->finished;
        old_goal = TAKE_PTR(t->spec.goal);
        old_acceptance = TAKE_PTR(t->spec.acceptance);
        t->spec.goal = strdup(goal);
        t->spec.acceptance = isempty(acceptance) ? NULL : strdup(acceptance);
        if (!t->spec.goal || (!isempty(acceptance) && !t->spec.acceptance))
                r = -ENOMEM;
        /* Without a conversation yet, the system prompt is made from the new
         * requirement: nothing to tell. */
        if (r >= 0 && p->messages > 0)
                r = conversation_append_user(t, text);
        bool old_verified = p->verified, old_reviewed = p->reviewed;
        unsigned old_rounds = p->review_rounds;
        if (r >= 0) {
                p->requirement = version;
                p->finished = false;
                p->verified = false;
                /* The next finish is reviewed again, against the new requirement. */
                p->reviewed = false;
                p->review_rounds = 0;
                r = task_save(t);
        }
        if (r < 0) {
                free(t->spec.goal);
                free(t->spec.acceptance);
                t->spec.goal = TAKE_PTR(old_goal);
                t->spec.acceptance = TAKE_PTR(old_acceptance);
                p->messages = old_messages;
                p->conversation_size = old_conversation_size;
                p->requirement = old_requirement;
                p->finished = old_finished;
                p->verified = old_verified;
                p->reviewed = old_reviewed;
                p->review_rounds = old_rounds;
                return sd_bus_error_set_errnof(error, r, "Cannot amend task '%s': %m", t->id);
        }

        audit_task_amended(t, uid, version, goal_changed ? old_goal : NULL, acceptance_changed ? strempty(old_acceptance) : NULL);
        task_changed(t, TASK_CHANGE_REQUIREMENT);
        *ret_version = version;
        return 0;
}

int method_amend(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_(amendment_done) Amendment a = {};
        Task *t = userdata;
        uint32_t version;
        uid_t uid;
        int r;

        r = read_amendment(message, &a, error);
        if (r < 0)
                return r;
        r = require_amendable(t, error);
        if (r < 0)
                return r;
        if ((!a.has_goal || streq(a.goal, t->spec.goal)) &&
            (!a.has_acceptance || streq(a.acceptance, strempty(t->spec.acceptance))))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "The amendment changes nothing: task '%s' has this requirement already.", t->id);

        r = access_verify(task_bus_server(t), message, t, "org.agentfab.manage", true, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        r = amendment_apply(t, &a, uid, &version, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(message, "u", version);
}

int amend_bus_apply(Task *t, const char *goal, const char *acceptance, uid_t uid, sd_bus_error *error) {
        _cleanup_(amendment_done) Amendment a = {};
        uint32_t version;
        int r;

        assert(t);

        if (goal) {
                r = amendment_check_value("goal", goal, error);
                if (r < 0)
                        return r;
                if (goal[strspn(goal, " \t\n")] == '\0')
                        return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "The goal cannot be empty.");
                a.has_goal = true;
                a.goal = strdup(goal);
                if (!a.goal)
                        return -ENOMEM;
        }
        if (acceptance) {
                r = amendment_check_value("acceptance", acceptance, error);
                if (r < 0)
                        return r;
                a.has_acceptance = true;
                a.acceptance = strdup(acceptance);
                if (!a.acceptance)
                        return -ENOMEM;
        }
        if (!a.has_goal && !a.has_acceptance)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Nothing to amend: give 'goal', 'acceptance' or both.");
        return amendment_apply(t, &a, uid, &version, error);
}
