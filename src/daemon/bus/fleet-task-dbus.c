/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access.h"
#include "agentfab-bus.h"
#include "amend-dbus.h"
#include "audit.h"
#include "bus-polkit.h"
#include "fleet-people.h"
#include "fleet-requests.h"
#include "fleet-task-dbus.h"
#include "fleet.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "string-util.h"
#include "task-id.h"

/* People on this host, for a task another host of the fleet holds:
 * GetFleetTask(), GetFleetOutput() and PostFleetRequest() on Factory1.
 * Each reads the task's row first (whose it is, and what its holder last
 * wrote of it), then asks polkit here, as the task's own methods do on
 * its holder: the same actions, the owner being the user of the row's
 * "user@host" (the hosts share their users, agentfabd(8)). The database
 * answers later, so the call waits; polkit's answer runs the handler
 * again from the start (bus-polkit.h), which reads the row again. */

#define FLEET_COMMENT_MAX 4096U
#define FLEET_TEXT_MAX 65536U           /* an amended goal or acceptance */
#define FLEET_RESOURCES_MAX 64U

typedef enum FleetCallKind {
        FLEET_CALL_STATUS,
        FLEET_CALL_OUTPUT,
        FLEET_CALL_REQUEST,
} FleetCallKind;

typedef struct FleetTaskCall {
        BusServer *server;
        sd_bus_message *message;
        FleetCallKind what;
        char *id;
        FleetOutput output;
        FleetRequestKind kind;
        FleetRequestArgument argument;
        uint64_t stop;                  /* the stop the caller saw; 0: the one the status shows */
} FleetTaskCall;

static void fleet_task_call_free(FleetTaskCall *c) {
        if (!c)
                return;
        sd_bus_message_unref(c->message);
        free(c->id);
        fleet_request_argument_done(&c->argument);
        free(c);
}

/* ---- The holder's status (JSON text another host wrote) as a{sv} ---- */

typedef struct StatusField {
        const char *name;
        char type;
} StatusField;

/* The Task1 properties status shows, by their names and types there. */
static const StatusField status_fields[] = {
        { "Repository", 's' }, { "Goal", 's' }, { "AcceptanceCriteria", 's' }, { "TestCommand", 's' },
        { "Base", 's' }, { "Model", 's' }, { "Reference", 's' }, { "PushURL", 's' }, { "Forge", 's' },
        { "ForgeRepository", 's' }, { "PullRequestBase", 's' }, { "Environment", 's' },
        { "EnvironmentIdentity", 's' }, { "Reason", 's' }, { "Branch", 's' }, { "Plan", 's' },
        { "HeadCommit", 's' }, { "Breaker", 's' }, { "PullRequest", 's' }, { "FreezerState", 's' },
        { "RequirementVersion", 'u' }, { "Step", 'u' },
        { "CreatedUSec", 't' }, { "UpdatedUSec", 't' }, { "TokensUsed", 't' }, { "CommandsRun", 't' },
        { "BreakerStop", 't' },
};

/* SECURITY: another host wrote it. Only the names above, of their types;
 * strings bounded, made valid UTF-8, their control characters escaped
 * (they reach a person's terminal). */
static char *status_string(const char *s) {
        _cleanup_free_ char *copy = strndup(strempty(s), FLEET_PEOPLE_STRING_MAX);

        if (!copy)
                return NULL;
        utf8_sanitize(copy, strlen(copy));
        return text_escape_controls(copy);
}

static int append_string(sd_bus_message *reply, const char *name, const char *value) {
        _cleanup_free_ char *s = status_string(value);

        if (!s)
                return -ENOMEM;
        return sd_bus_message_append(reply, "{sv}", name, "s", s);
}

static int append_resources(sd_bus_message *reply, json_object *res) {
        unsigned n = 0;
        int r;

        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_DICT_ENTRY, "sv");
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", "Resources");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, SD_BUS_TYPE_VARIANT, "a{sv}");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        json_object_object_foreach(res, key, v) {
                if (++n > FLEET_RESOURCES_MAX || strlen(key) > 64 || !string_is_safe(key, false))
                        break;
                if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0)
                        r = sd_bus_message_append(reply, "{sv}", key, "t", json_object_get_uint64(v));
                else if (json_object_is_type(v, json_type_string) && strlen(json_object_get_string(v)) <= 16 &&
                         string_is_safe(json_object_get_string(v), false))
                        r = sd_bus_message_append(reply, "{sv}", key, "s", json_object_get_string(v));
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

/* UID_INVALID: no such user here. */
static uid_t owner_uid(const char *owner) {
        uid_t uid;
        return fleet_owner_uid(owner, &uid) < 0 ? UID_INVALID : uid;
}

/* The state people see: the holder's word while the row says the task is
 * at work (it may wait for approval, be paused...), the row's once it has
 * ended (a holder that died writes no last status). */
static const char *shown_state(const FleetTaskInfo *info, json_object *status) {
        const char *s = NULL;

        if (info->state != FLEET_TASK_RUNNING || json_get_string(status, "State", &s) < 0 || !s ||
            task_state_from_string(s) < 0)
                return fleet_task_state_to_string(info->state);
        return s;
}

static int reply_status(FleetTaskCall *c, const FleetTaskInfo *info, json_object *status) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(c->message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        /* What the database says of the task, whoever holds it. */
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}{sv}{sv}",
                                          "Id", "s", info->id,
                                          "State", "s", shown_state(info, status),
                                          "FleetState", "s", fleet_task_state_to_string(info->state),
                                          "Host", "s", strempty(info->host),
                                          "Epoch", "t", info->epoch,
                                          "FleetOwner", "s", info->owner,
                                          "Owner", "u", (uint32_t) owner_uid(info->owner));
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}", "FleetUpdatedUSec", "t", info->updated_usec);
        for (size_t i = 0; r >= 0 && status && i < ELEMENTSOF(status_fields); i++) {
                const StatusField *f = status_fields + i;
                json_object *v;

                if (!json_object_object_get_ex(status, f->name, &v))
                        continue;
                if (f->type == 's' && json_object_is_type(v, json_type_string))
                        r = append_string(reply, f->name, json_object_get_string(v));
                else if (f->type == 'u' && json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0)
                        r = sd_bus_message_append(reply, "{sv}", f->name, "u",
                                                  (uint32_t) MIN(json_object_get_uint64(v), (uint64_t) UINT32_MAX));
                else if (f->type == 't' && json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0)
                        r = sd_bus_message_append(reply, "{sv}", f->name, "t", json_object_get_uint64(v));
        }
        json_object *res;
        if (r >= 0 && status && json_object_object_get_ex(status, "Resources", &res) &&
            json_object_is_type(res, json_type_object))
                r = append_resources(reply, res);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_send(reply);
        return r;
}

/* ---- Who may ---- */

/* 1 allowed, 0 polkit is asked (the handler runs again), or a negative
 * errno with error set. The same answers as access_verify() gives for the
 * task on its holder. */
static int fleet_verify(FleetTaskCall *c, const FleetTaskInfo *info, json_object *status, sd_bus_error *error) {
        BusServer *bs = c->server;
        bool approve = c->what == FLEET_CALL_REQUEST && IN_SET(c->kind, FLEET_REQUEST_APPROVE, FLEET_REQUEST_REJECT);
        const char *action = approve ? "org.agentfab.approve" : "org.agentfab.manage";
        _cleanup_free_ char *owner = NULL, *owner_name = NULL, *goal = NULL;
        const char *g = NULL, *breaker = NULL, *reason = NULL;
        uid_t uid, ouid = owner_uid(info->owner);
        int r;

        r = bus_message_get_caller(c->message, &uid);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot tell who is asking: %m");
        if (uid == 0 || (bs->kind == BUS_SESSION && uid == getuid()))
                return 1;
        /* The owner sees, cancels, pauses, resumes and amends their own
         * task; an approval is an administrator's, as on the holder. */
        if (!approve && ouid != UID_INVALID && uid == ouid)
                return 1;
        if (c->what != FLEET_CALL_REQUEST && access_uid_sees_all(bs, uid, sd_bus_message_get_sender(c->message)))
                return 1;
        if (bs->kind != BUS_SYSTEM)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Access denied.");

        /* The prompt says what is asked, as for the holder's own task. */
        (void) json_get_string(status, "Goal", &g);
        (void) json_get_string(status, "Breaker", &breaker);
        (void) json_get_string(status, "Reason", &reason);
        _cleanup_free_ char *safe_reason = status_string(reason), *safe_breaker = status_string(breaker);
        goal = strshorten_line(strempty(g), 200);
        if (asprintf(&owner, "%u", (unsigned) ouid) < 0)
                owner = NULL;
        const char *at = strrchr(info->owner, '@');
        owner_name = strndup(info->owner, at ? (size_t) (at - info->owner) : strlen(info->owner));
        if (!goal || !owner || !owner_name || !safe_reason || !safe_breaker)
                return -ENOMEM;
        if (!string_is_safe(owner_name, false))
                owner_name = mfree_ptr(owner_name);
        const char *details[] = {
                "task", info->id,
                "owner", owner,
                "owner_name", owner_name ?: owner,
                "goal", goal,
                "reason", safe_reason,
                "breaker", isempty(safe_breaker) ? "none" : safe_breaker,
                "method", strempty(sd_bus_message_get_member(c->message)),
                "state", shown_state(info, status),
                "host", strempty(info->host),
                NULL
        };
        r = bus_verify_polkit_async_full(c->message, uid, action, details, 0, &bs->polkit, error);
        if (r < 0 && (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED) ||
                      sd_bus_error_has_name(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED)))
                audit_denied(info->id, action, uid);
        return r;
}

/* ---- After the row was read and polkit said yes ---- */

static void on_output(FleetDb *db, int error, const char *message, uint64_t epoch, const char *content,
                      void *userdata) {
        FleetTaskCall *c = userdata;
        _cleanup_free_ char *shown = NULL;

        (void) db, (void) epoch;
        if (error == -ENOENT)
                (void) sd_bus_reply_method_errorf(c->message, AGENTFAB_ERROR_BAD_STATE,
                                                  "Task '%s' has no %s in the fleet's database (yet): %s", c->id,
                                                  fleet_output_to_string(c->output),
                                                  c->output == FLEET_OUTPUT_SUMMARY ? "only a delivered task has one" :
                                                  "its host writes it while the task works and at its end");
        else if (error < 0)
                (void) sd_bus_reply_method_errorf(c->message, SD_BUS_ERROR_FAILED,
                                                  "Cannot read the %s of task '%s' from the fleet's database: %s",
                                                  fleet_output_to_string(c->output), c->id, message ?: strerror(-error));
        else {
                /* SECURITY: another host wrote it, escaped; escaped again
                 * here it shows the same, and nothing that was not. */
                shown = strdup(content);
                if (shown)
                        utf8_sanitize(shown, strlen(shown));
                _cleanup_free_ char *escaped = shown ? text_escape_controls(shown) : NULL;
                if (!escaped)
                        (void) sd_bus_reply_method_errnof(c->message, -ENOMEM, "Out of memory.");
                else
                        (void) sd_bus_reply_method_return(c->message, "s", escaped);
        }
        fleet_task_call_free(c);
}

static void on_posted(FleetDb *db, int error, const char *message, uint64_t id, void *userdata) {
        FleetTaskCall *c = userdata;

        (void) db;
        if (error == -ENOENT)
                (void) sd_bus_reply_method_errorf(c->message, AGENTFAB_ERROR_NO_SUCH_TASK, "No task '%s' in the fleet.",
                                                  c->id);
        else if (error == -ESRCH)
                (void) sd_bus_reply_method_errorf(c->message, AGENTFAB_ERROR_BAD_STATE, "Task '%s' has ended.", c->id);
        else if (error < 0)
                (void) sd_bus_reply_method_errorf(c->message, SD_BUS_ERROR_FAILED,
                                                  "The fleet's database did not take the request: %s",
                                                  message ?: strerror(-error));
        else {
                log_info("Request %" PRIu64 " (%s) for task '%s' of the fleet posted for %s.", id,
                         fleet_request_kind_to_string(c->kind), c->id, c->argument.user);
                (void) sd_bus_reply_method_return(c->message, "t", id);
        }
        fleet_task_call_free(c);
}

/* A request is checked against what the holder last wrote, so that the
 * person learns at once what the holder would refuse: an approval for a
 * stop the task has left, or for a task at no stop. */
static int request_post(FleetTaskCall *c, const FleetTaskInfo *info, json_object *status, sd_bus_error *error) {
        _cleanup_free_ char *argument = NULL;
        const char *state = shown_state(info, status), *breaker = NULL;
        uint64_t stop = 0;
        struct passwd *pw;
        uid_t uid;
        int r;

        if (!IN_SET(info->state, FLEET_TASK_QUEUED, FLEET_TASK_RUNNING))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is %s.", c->id, state);
        if (IN_SET(c->kind, FLEET_REQUEST_APPROVE, FLEET_REQUEST_REJECT)) {
                (void) json_get_uint64(status, "BreakerStop", &stop);
                (void) json_get_string(status, "Breaker", &breaker);
                if (!streq(state, "awaiting-approval") || stop == 0)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is %s, not awaiting-approval.",
                                                 c->id, state);
                if (c->stop != 0 && c->stop != stop)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE,
                                                 "Task '%s' has stopped again since: it waits at step %" PRIu64
                                                 " now, not %" PRIu64 ". Look at it again.", c->id, stop, c->stop);
                if (breaker && string_is_safe(breaker, false) && !(c->argument.breaker = strdup(breaker)))
                        return -ENOMEM;
        }
        r = bus_message_get_caller(c->message, &uid);
        if (r < 0)
                return r;
        pw = getpwuid(uid);
        if (!pw || !string_is_safe(pw->pw_name, false))
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "User %u has no name here: the fleet needs one.",
                                         (unsigned) uid);
        c->argument.user = strdup(pw->pw_name);
        if (!c->argument.user)
                return -ENOMEM;
        r = fleet_request_argument_format(&c->argument, &argument);
        if (r < 0)
                return r;
        r = fleet_db_post_request(fleet_database(c->server->manager->fleet), c->id, c->kind, argument, stop,
                                  on_posted, c);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot post the request: %m");
        return 1;
}

static void on_task_read(FleetDb *db, int error, const char *message, const FleetTaskInfo *info, const char *status,
                         void *userdata) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_json_ json_object *j = NULL;
        FleetTaskCall *c = userdata;
        int r;

        (void) db;
        if (error == -ENOENT) {
                (void) sd_bus_reply_method_errorf(c->message, AGENTFAB_ERROR_NO_SUCH_TASK, "No task '%s' in the fleet.",
                                                  c->id);
                fleet_task_call_free(c);
                return;
        }
        if (error < 0) {
                (void) sd_bus_reply_method_errorf(c->message, SD_BUS_ERROR_FAILED,
                                                  "Cannot read task '%s' from the fleet's database: %s", c->id,
                                                  message ?: strerror(-error));
                fleet_task_call_free(c);
                return;
        }
        /* A status that cannot be read is none: the row still says much. */
        if (status && (json_parse_strict(status, strlen(status), &j) < 0 || !json_object_is_type(j, json_type_object)))
                j = (json_object_put(j), NULL);

        r = fleet_verify(c, info, j, &e);
        if (r == 0) {
                /* polkit answers later, and the handler runs again. */
                fleet_task_call_free(c);
                return;
        }
        if (r > 0) {
                switch (c->what) {
                case FLEET_CALL_STATUS:
                        r = reply_status(c, info, j);
                        break;
                case FLEET_CALL_OUTPUT:
                        r = fleet_db_get_output(fleet_database(c->server->manager->fleet), c->id, c->output,
                                                on_output, c);
                        if (r >= 0)
                                return;         /* c goes on */
                        break;
                case FLEET_CALL_REQUEST:
                        r = request_post(c, info, j, &e);
                        if (r > 0)
                                return;         /* c goes on */
                        break;
                }
        }
        if (r < 0 && sd_bus_error_is_set(&e))
                (void) sd_bus_reply_method_error(c->message, &e);
        else if (r < 0)
                (void) sd_bus_reply_method_errnof(c->message, r, "Failed to answer for task '%s': %m", c->id);
        fleet_task_call_free(c);
}

/* ---- The methods ---- */

static int fleet_call_start(BusServer *bs, FleetTaskCall *c, sd_bus_error *error) {
        int r;

        r = fleet_db_get_task(fleet_database(bs->manager->fleet), c->id, on_task_read, c);
        if (r < 0) {
                fleet_task_call_free(c);
                return sd_bus_error_set_errnof(error, r, "Cannot read the task from the fleet's database: %m");
        }
        return 1;
}

static int fleet_call_new(BusServer *bs, sd_bus_message *message, FleetCallKind what, const char *id,
                          FleetTaskCall **ret, sd_bus_error *error) {
        FleetTaskCall *c;

        if (!bs->manager->fleet)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                        "This host is not in a fleet (see [Fleet] in agentfab.conf(5)).");
        if (!task_id_is_valid(id))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "'%s' is not a task id.", id);
        c = calloc(1, sizeof(FleetTaskCall));
        if (!c)
                return -ENOMEM;
        c->server = bs;
        c->message = sd_bus_message_ref(message);
        c->what = what;
        c->id = strdup(id);
        if (!c->id) {
                fleet_task_call_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

int method_get_fleet_task(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        FleetTaskCall *c;
        const char *id;
        int r;

        r = sd_bus_message_read(message, "s", &id);
        if (r < 0)
                return r;
        r = fleet_call_new(userdata, message, FLEET_CALL_STATUS, id, &c, error);
        if (r < 0)
                return r;
        return fleet_call_start(userdata, c, error);
}

int method_get_fleet_output(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        const char *id, *name;
        FleetTaskCall *c;
        FleetOutput o;
        int r;

        r = sd_bus_message_read(message, "ss", &id, &name);
        if (r < 0)
                return r;
        o = fleet_output_from_string(name);
        if (!IN_SET(o, FLEET_OUTPUT_SUMMARY, FLEET_OUTPUT_LOG))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "No output '%s': \"summary\" or \"log\".", name);
        r = fleet_call_new(userdata, message, FLEET_CALL_OUTPUT, id, &c, error);
        if (r < 0)
                return r;
        c->output = o;
        return fleet_call_start(userdata, c, error);
}

static int read_text(sd_bus_message *message, const char *key, size_t max, char **ret, sd_bus_error *error) {
        const char *s;
        int r;

        r = sd_bus_message_read(message, "v", "s", &s);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Option '%s' must be of type s.", key);
        if (strlen(s) > max || !string_is_safe(s, true))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Option '%s' is longer than %zu bytes or contains control characters.", key, max);
        free(*ret);
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int read_request_options(sd_bus_message *message, FleetTaskCall *c, sd_bus_error *error) {
        FleetRequestArgument *a = &c->argument;
        unsigned n = 0;
        int r;

        r = sd_bus_message_enter_container(message, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(message, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key;

                if (++n > 8)
                        return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Too many options.");
                r = sd_bus_message_read(message, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "comment"))
                        r = read_text(message, key, FLEET_COMMENT_MAX, &a->comment, error);
                else if (streq(key, "goal") && c->kind == FLEET_REQUEST_AMEND)
                        r = read_text(message, key, FLEET_TEXT_MAX, &a->goal, error);
                else if (streq(key, "acceptance") && c->kind == FLEET_REQUEST_AMEND)
                        r = read_text(message, key, FLEET_TEXT_MAX, &a->acceptance, error);
                else if (streq(key, "stop")) {
                        r = sd_bus_message_read(message, "v", "t", &c->stop);
                        if (r < 0)
                                r = sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Option 'stop' must be of type t.");
                } else
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown option '%s' for a %s request.",
                                                 key, fleet_request_kind_to_string(c->kind));
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(message);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(message);
        if (r < 0)
                return r;
        if (c->kind == FLEET_REQUEST_AMEND && !a->goal && !a->acceptance)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Nothing to amend: give 'goal', 'acceptance' or both.");
        if (c->kind != FLEET_REQUEST_APPROVE && c->kind != FLEET_REQUEST_REJECT && c->stop != 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Only an approve or reject names a stop.");
        return 0;
}

int method_post_fleet_request(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        const char *id, *kind;
        FleetTaskCall *c;
        FleetRequestKind k;
        int r;

        r = sd_bus_message_read(message, "ss", &id, &kind);
        if (r < 0)
                return r;
        k = fleet_request_kind_from_string(kind);
        if (k < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "No request '%s': approve, reject, cancel, pause, resume or amend.", kind);
        r = fleet_call_new(userdata, message, FLEET_CALL_REQUEST, id, &c, error);
        if (r < 0)
                return r;
        c->kind = k;
        r = read_request_options(message, c, error);
        if (r < 0) {
                fleet_task_call_free(c);
                return r;
        }
        return fleet_call_start(userdata, c, error);
}

/* ---- The holder's side: a request another host posted ---- */

static int fleet_task_apply(Task *t, FleetRequestKind kind, const char *comment, const char *goal,
                            const char *acceptance, uid_t uid, sd_bus_error *error) {
        if (kind == FLEET_REQUEST_AMEND)
                return amend_bus_apply(t, goal, acceptance, uid, error);
        return task_bus_apply(t, fleet_request_kind_to_string(kind), comment, uid, error);
}

void fleet_task_bus_register(BusServer *bs) {
        (void) bs;
        fleet_people_set_applier(fleet_task_apply);
}
