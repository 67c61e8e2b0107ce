/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-journal.h>

#include "fleet-requests.h"
#include "fleet.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "messages.h"
#include "string-util.h"

/* Request ids applied here whose "done" may not have reached the
 * database: one taken again is only marked done, not applied twice. A
 * restart forgets them (at least once, fleet-db.h). */
#define APPLIED_MAX 256U

struct FleetInbox {
        Fleet *fleet;
        bool taking;
        bool again;
        uint64_t applied[APPLIED_MAX];
        unsigned n_applied;     /* a ring: the latest APPLIED_MAX */
};

static fleet_people_apply_t applier = NULL;

void fleet_people_set_applier(fleet_people_apply_t apply) {
        applier = apply;
}

/* ---- The argument: JSON text, from another host ---- */

void fleet_request_argument_done(FleetRequestArgument *a) {
        free(a->user);
        free(a->comment);
        free(a->goal);
        free(a->acceptance);
        free(a->breaker);
        *a = (FleetRequestArgument) {};
}

int fleet_request_argument_format(const FleetRequestArgument *a, char **ret) {
        _cleanup_json_ json_object *j = json_object_new_object();
        const char *s;

        if (!j || json_add_string(j, "user", a->user) < 0 ||
            (a->comment && json_add_string(j, "comment", a->comment) < 0) ||
            (a->goal && json_add_string(j, "goal", a->goal) < 0) ||
            (a->acceptance && json_add_string(j, "acceptance", a->acceptance) < 0) ||
            (a->breaker && json_add_string(j, "breaker", a->breaker) < 0))
                return -ENOMEM;
        s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
        *ret = s ? strdup(s) : NULL;
        return *ret ? 0 : -ENOMEM;
}

static int take_string(json_object *j, const char *key, bool required, char **ret) {
        const char *s = NULL;

        if (json_get_string(j, key, &s) < 0 || !s)
                return required ? -EBADMSG : 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* SECURITY: another host wrote it; its fields are checked where they are
 * used (the user's name here, the texts by the task's own rules). */
int fleet_request_argument_parse(const char *text, FleetRequestArgument *ret) {
        _cleanup_json_ json_object *j = NULL;
        FleetRequestArgument a = {};
        int r;

        if (!text)
                return -EBADMSG;
        r = json_parse_strict(text, strlen(text), &j);
        if (r < 0)
                return r;
        if (!json_object_is_type(j, json_type_object))
                return -EBADMSG;
        r = take_string(j, "user", true, &a.user);
        if (r >= 0)
                r = take_string(j, "comment", false, &a.comment);
        if (r >= 0)
                r = take_string(j, "goal", false, &a.goal);
        if (r >= 0)
                r = take_string(j, "acceptance", false, &a.acceptance);
        if (r >= 0)
                r = take_string(j, "breaker", false, &a.breaker);
        if (r >= 0 && (isempty(a.user) || strlen(a.user) > 64 || !string_is_safe(a.user, false) || strchr(a.user, '@')))
                r = -EBADMSG;
        if (r < 0) {
                fleet_request_argument_done(&a);
                return r;
        }
        *ret = a;
        return 0;
}

/* ---- Applying ---- */

static bool applied_find(const FleetInbox *q, uint64_t id) {
        for (unsigned i = 0; i < MIN(q->n_applied, APPLIED_MAX); i++)
                if (q->applied[i] == id)
                        return true;
        return false;
}

static void applied_add(FleetInbox *q, uint64_t id) {
        q->applied[q->n_applied++ % APPLIED_MAX] = id;
}

/* One journal entry per request taken, on the holder's journal: who, from
 * which host, and what became of it (applied, stale, refused). */
static void journal_request(Fleet *fl, const FleetRequest *r, const char *user, uid_t uid, const char *result,
                            const char *why) {
        const char *kind = fleet_request_kind_to_string(r->kind);
        bool applied = streq(result, "applied");

        (void) sd_journal_send("MESSAGE=Task '%s': %s from %s on host '%s' %s%s%s.", r->task_id, kind,
                               user ?: "someone", r->from_host, result, why ? ": " : "", strempty(why),
                               "MESSAGE_ID=" AGENTFAB_MESSAGE_FLEET_REQUEST_STR,
                               "PRIORITY=%i", applied ? LOG_NOTICE : LOG_WARNING,
                               "AGENTFAB_TASK=%s", r->task_id,
                               "AGENTFAB_EVENT=fleet-request",
                               "AGENTFAB_HOST=%s", fleet_host(fl),
                               "AGENTFAB_EPOCH=%llu", (unsigned long long) r->epoch,
                               "AGENTFAB_REQUEST=%s", kind,
                               "AGENTFAB_REQUEST_ID=%llu", (unsigned long long) r->id,
                               "AGENTFAB_STOP=%llu", (unsigned long long) r->stop,
                               "AGENTFAB_FROM_HOST=%s", r->from_host,
                               "AGENTFAB_FROM_USER=%s", user ?: "",
                               "AGENTFAB_UID=%lld", uid == UID_INVALID ? -1LL : (long long) uid,
                               "AGENTFAB_RESULT=%s", result,
                               "AGENTFAB_REASON=%s", strempty(why),
                               NULL);
}

static void on_request_done(FleetDb *db, int error, const char *message, void *userdata) {
        uint64_t id = (uint64_t) (uintptr_t) userdata;

        (void) db;
        /* Taken again next time, and then only marked done (applied_find()). */
        if (error < 0)
                log_warning("Cannot mark the fleet's request %llu done: %s", (unsigned long long) id,
                            message ?: strerror(-error));
}

static void request_done(FleetInbox *q, uint64_t id) {
        int r = fleet_db_request_done(fleet_database(q->fleet), id, on_request_done, (void *) (uintptr_t) id);
        if (r < 0)
                log_warning_errno(r, "Cannot mark the fleet's request %llu done: %m", (unsigned long long) id);
}

/* Whether the request may be settled now: false leaves it for a later
 * take (the task not recorded here yet, or no longer at its epoch). */
static bool request_apply(FleetInbox *q, const FleetRequest *r) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(fleet_request_argument_done) FleetRequestArgument a = {};
        Fleet *fl = q->fleet;
        Task *t = factory_find_task(fleet_factory(fl), r->task_id);
        uint64_t epoch = fleet_task_epoch(fl, r->task_id);
        struct passwd *pw;
        int k;

        if (!t || epoch == 0 || epoch != r->epoch)
                return false;
        if (applied_find(q, r->id))
                return true;

        if (fleet_request_argument_parse(r->argument, &a) < 0) {
                journal_request(fl, r, NULL, UID_INVALID, "refused", "the request cannot be read");
                return true;
        }
        /* SECURITY: the person was authorized by polkit on the host they
         * asked on (from_host, which the database vouches for); here they
         * are the same user (the hosts share their users, agentfabd(8)). */
        pw = getpwnam(a.user);
        if (!pw) {
                journal_request(fl, r, a.user, UID_INVALID, "refused", "no such user on this host");
                return true;
        }
        /* An approval or rejection answers the stop it was given for, and
         * no later one: the task must still wait at that stop, for that
         * breaker. */
        if (IN_SET(r->kind, FLEET_REQUEST_APPROVE, FLEET_REQUEST_REJECT) &&
            (fleet_people_stop(t) != r->stop || (a.breaker && !streq_ptr(a.breaker, t->progress.breaker)))) {
                _cleanup_free_ char *why = NULL;
                uint64_t now = fleet_people_stop(t);
                if ((now > 0 ? asprintf(&why, "it answers the stop at step %llu (breaker %s), the task waits at step %llu "
                                        "(breaker %s)", (unsigned long long) r->stop, a.breaker ?: "not named",
                                        (unsigned long long) now, strempty(t->progress.breaker)) :
                               asprintf(&why, "it answers the stop at step %llu, the task is %s", (unsigned long long) r->stop,
                                        task_state_to_string(t->state))) < 0)
                        why = NULL;
                journal_request(fl, r, a.user, pw->pw_uid, "stale", why ?: "another stop");
                return true;
        }
        if (!applier)
                return false;
        k = applier(t, r->kind, a.comment, a.goal, a.acceptance, pw->pw_uid, &error);
        if (k < 0) {
                journal_request(fl, r, a.user, pw->pw_uid, "refused",
                                error.message ?: strerror(-k));
                return true;
        }
        applied_add(q, r->id);
        journal_request(fl, r, a.user, pw->pw_uid, "applied", NULL);
        return true;
}

static void on_taken(FleetDb *db, int error, const char *message, const FleetRequest *requests, size_t n,
                     void *userdata) {
        FleetInbox *q = userdata;

        (void) db;
        q->taking = false;
        if (error < 0) {
                log_warning("Cannot take the requests for this host's tasks: %s", message ?: strerror(-error));
                return;
        }
        for (size_t i = 0; i < n; i++) {
                /* SECURITY: a fenced host applies nothing; the requests
                 * wait in the database for the renewal, or for the host
                 * that takes the task over. */
                if (fleet_is_fenced(q->fleet))
                        return;
                if (request_apply(q, requests + i))
                        request_done(q, requests[i].id);
        }
        if (q->again) {
                q->again = false;
                fleet_inbox_take(q);
        }
}

void fleet_inbox_take(FleetInbox *q) {
        if (!q)
                return;
        if (q->taking) {
                q->again = true;
                return;
        }
        if (fleet_is_fenced(q->fleet) || !fleet_db_is_connected(fleet_database(q->fleet)))
                return;
        if (fleet_db_take_requests(fleet_database(q->fleet), on_taken, q) >= 0)
                q->taking = true;
}

int fleet_inbox_new(Fleet *fl, FleetInbox **ret) {
        FleetInbox *q;

        assert(fl);
        assert(ret);

        q = calloc(1, sizeof(FleetInbox));
        if (!q)
                return -ENOMEM;
        q->fleet = fl;
        *ret = q;
        return 0;
}

FleetInbox *fleet_inbox_free(FleetInbox *q) {
        free(q);
        return NULL;
}
