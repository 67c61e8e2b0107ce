/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The fleet's queue: claiming queued tasks up to Slots=, recording each
 * claimed one as a task here, and queueing and listing submissions. */
#include <assert.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "task-store.h"
#include "worker.h"

typedef struct ClaimJob {
        Task *task;
        uint64_t epoch;
} ClaimJob;

static void claim_job_free(void *p) {
        ClaimJob *j = p;

        if (!j)
                return;
        task_free(j->task);
        free(j);
}

static int claim_job_run(void *p) {
        ClaimJob *j = p;
        return task_create(j->task);
}

static void on_claim_recorded(Worker *w, int r, void *p, void *userdata) {
        Fleet *fl = userdata;
        ClaimJob *j = p;
        Task *t = TAKE_PTR(j->task);

        (void) w;
        fl->creating--;
        if (r < 0) {
                /* Nobody works on it: it fails, in the database, where
                 * its submitter sees it. */
                FleetHeld *h = fleet_held_find(fl, t->id);
                log_error_errno(r, "Failed to record task '%s' claimed from the fleet, failing it: %m", t->id);
                if (h)
                        fleet_write_end(fl, h, TASK_FAILED);
                task_free(t);
                return;
        }
        t->tasks_fd = fl->factory->tasks_fd;
        if (fl->hooks && fl->hooks->task_claimed)
                r = fl->hooks->task_claimed(fl, t, fl->userdata);
        else
                r = -EOPNOTSUPP, task_free(t);
        if (r < 0)
                log_error_errno(r, "Failed to add task claimed from the fleet: %m");
}

int fleet_owner_uid(const char *owner, uid_t *ret) {
        _cleanup_free_ char *user = NULL;
        const char *at = owner ? strrchr(owner, '@') : NULL;
        struct passwd *pw;

        if (!at || at == owner)
                return -EINVAL;
        user = strndup(owner, (size_t) (at - owner));
        if (!user)
                return -ENOMEM;
        pw = getpwnam(user);
        if (!pw)
                return -ESRCH;
        *ret = pw->pw_uid;
        return 0;
}

bool fleet_owner_is(const char *owner, const char *user) {
        size_t l = strlen(user);
        return owner && strneq(owner, user, l) && owner[l] == '@';
}

int fleet_take_claim(Fleet *fl, const FleetClaim *c) {
        _cleanup_(json_object_putp) json_object *j = NULL;
        _cleanup_(task_freep) Task *t = NULL;
        _cleanup_free_ char *error = NULL;
        ClaimJob *job;
        uid_t uid;
        int r;

        r = task_new(&t, c->id);
        if (r < 0)
                return r;
        r = json_parse_strict(c->spec, strlen(c->spec), &j);
        if (r >= 0)
                r = task_from_json(t, j, &error);
        if (r < 0)
                return log_error_errno(r, "Task '%s' of the fleet has a record that cannot be read (%s): skipping it.",
                                       c->id, error ?: strerror(-r));
        if (!streq(t->id, c->id))
                return log_error_errno(-EBADMSG, "Task '%s' of the fleet has the record of '%s': skipping it.", c->id, t->id);
        r = fleet_owner_uid(c->owner, &uid);
        if (r < 0)
                return log_error_errno(r, "Task '%s' of the fleet belongs to '%s', who is no user here: skipping it.",
                                       c->id, c->owner);
        t->owner = uid;
        t->state = TASK_QUEUED;
        t->tasks_fd = fl->factory->tasks_fd;

        r = fleet_held_add(fl, t->id, c->epoch);
        if (r < 0)
                return r;
        job = calloc(1, sizeof(ClaimJob));
        if (!job)
                return -ENOMEM;
        job->task = TAKE_PTR(t);
        job->epoch = c->epoch;
        r = worker_start(fl->factory->event, claim_job_run, on_claim_recorded, claim_job_free, job, fl, NULL);
        if (r < 0) {
                fleet_held_remove(fl, job->task->id);
                claim_job_free(job);
                return r;
        }
        fl->creating++;
        return 0;
}

static void on_held(FleetDb *db, int error, const char *message, const FleetClaim *claims, size_t n, void *userdata);

static void on_claimed(FleetDb *db, int error, const char *message, const FleetClaim *claims, size_t n, void *userdata) {
        FleetCall *c = userdata;
        Fleet *fl = c->fleet;
        bool more = n > 0;

        (void) db;
        fl->claiming = false;
        if (error < 0) {
                if (error != -ESTALE)
                        log_warning("Failed to claim tasks from the fleet's queue: %s", message ?: strerror(-error));
                /* The claim may have been made, its answer lost with the
                 * connection: what this host holds in the database and
                 * does not know of is such a claim (fleet_db_claim()).
                 * No other claim goes until that answer is read. */
                if (IN_SET(error, -ECONNRESET, -ETIMEDOUT) && fleet_db_held(fl->db, on_held, c) >= 0) {
                        fl->claiming = true;
                        fl->find_lost = false;
                        return;
                }
                fleet_call_free(c);
                if (fl->find_lost)
                        fleet_find_lost_claims(fl);
                return;
        }
        fleet_call_free(c);
        if (fl->find_lost)
                fleet_find_lost_claims(fl);
        for (size_t i = 0; i < n; i++) {
                if (factory_find_task(fl->factory, claims[i].id) || fleet_held_find(fl, claims[i].id)) {
                        /* Ours from before a restart: it is ours again. */
                        if (fleet_held_add(fl, claims[i].id, claims[i].epoch) < 0)
                                log_oom();
                        continue;
                }
                log_info("Claimed task '%s' (epoch %llu) from the fleet's queue.", claims[i].id,
                         (unsigned long long) claims[i].epoch);
                if (claims[i].takeover) {
                        /* Given back with what was acknowledged of it: it
                         * goes on from there, as a takeover does. */
                        fleet_take_over(fl, claims + i);
                        continue;
                }
                if (fleet_take_claim(fl, claims + i) < 0 && fleet_held_add(fl, claims[i].id, claims[i].epoch) >= 0) {
                        /* What no host can work on fails where its submitter sees it. */
                        log_warning("Task '%s' cannot be worked on here: failing it in the fleet.", claims[i].id);
                        fleet_write_end(fl, fleet_held_find(fl, claims[i].id), TASK_FAILED);
                }
        }
        /* The queue may hold more than one answer gave. */
        if (more)
                fleet_claim_more(fl);
}

/* After a claim or a reap whose answer was lost: a running task this host
 * holds in the database that it neither holds nor has here is one it never
 * heard of. At epoch 1 nothing of it was acknowledged (only its claimer
 * could): it starts anew; later, it goes on from what was acknowledged, as
 * a takeover does. */
static void on_held(FleetDb *db, int error, const char *message, const FleetClaim *claims, size_t n, void *userdata) {
        FleetCall *c = userdata;
        Fleet *fl = c->fleet;

        (void) db;
        /* Lost again with the connection: asked again on the next one. */
        if (IN_SET(error, -ECONNRESET, -ETIMEDOUT) && fleet_db_held(fl->db, on_held, c) >= 0)
                return;
        fleet_call_free(c);
        fl->claiming = false;
        if (error < 0)
                log_warning("Cannot read which tasks this host holds in the fleet after a lost claim: %s",
                            message ?: strerror(-error));
        for (size_t i = 0; i < n; i++) {
                if (factory_find_task(fl->factory, claims[i].id) || fleet_held_find(fl, claims[i].id))
                        continue;
                log_info("Claimed task '%s' (epoch %llu) from the fleet (the claim's answer was lost).",
                         claims[i].id, (unsigned long long) claims[i].epoch);
                if (claims[i].epoch != 1) {
                        fleet_take_over(fl, claims + i);
                        continue;
                }
                if (fleet_take_claim(fl, claims + i) < 0 && fleet_held_add(fl, claims[i].id, claims[i].epoch) >= 0) {
                        log_warning("Task '%s' cannot be worked on here: failing it in the fleet.", claims[i].id);
                        fleet_write_end(fl, fleet_held_find(fl, claims[i].id), TASK_FAILED);
                }
        }
        fleet_claim_more(fl);
}

void fleet_find_lost_claims(Fleet *fl) {
        FleetCall *c;

        /* One claim or read at a time: after the one in flight. */
        if (fl->claiming) {
                fl->find_lost = true;
                return;
        }
        fl->find_lost = false;
        c = fleet_call_new(fl);
        if (!c) {
                log_oom();
                return;
        }
        if (fleet_db_held(fl->db, on_held, c) < 0) {
                fleet_call_free(c);
                return;
        }
        fl->claiming = true;
}

void fleet_claim_more(Fleet *fl) {
        unsigned busy, free_slots;
        FleetCall *c;

        if (!fl->migrated || fl->lease.fenced || fl->claiming || !fleet_db_is_connected(fl->db))
                return;
        busy = fleet_busy_slots(fl);
        if (busy >= fl->slots)
                return;
        free_slots = MIN(fl->slots - busy, FLEET_DB_CLAIM_MAX);
        c = fleet_call_new(fl);
        if (!c) {
                log_oom();
                return;
        }
        if (fleet_db_claim(fl->db, free_slots, on_claimed, c) < 0) {
                fleet_call_free(c);
                return;
        }
        fl->claiming = true;
}

static void on_enqueued(FleetDb *db, int error, const char *message, void *userdata) {
        FleetCall *c = userdata;
        Fleet *fl = c->fleet;
        fleet_done_t done = c->done;
        void *u = c->userdata;

        (void) db;
        fleet_call_free(c);
        done(fl, error, message, u);
}

int fleet_enqueue(Fleet *fl, const Task *t, fleet_done_t done, void *userdata) {
        _cleanup_(json_object_putp) json_object *j = NULL;
        _cleanup_free_ char *owner = NULL;
        struct passwd *pw;
        FleetCall *c;
        int r;

        assert(fl);
        assert(t);
        assert(done);

        pw = getpwuid(t->owner);
        if (!pw)
                return -ESRCH;
        if (asprintf(&owner, "%s@%s", pw->pw_name, fl->host) < 0)
                return -ENOMEM;
        j = task_to_json(t);
        if (!j)
                return -ENOMEM;
        c = fleet_call_new(fl);
        if (!c)
                return -ENOMEM;
        c->done = done;
        c->userdata = userdata;
        r = fleet_db_enqueue(fl->db, t->id, owner, json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                             t->spec.environment, on_enqueued, c);
        if (r < 0)
                fleet_call_free(c);
        return r;
}

static void on_listed(FleetDb *db, int error, const char *message, const FleetTaskInfo *tasks, size_t n, void *userdata) {
        FleetCall *c = userdata;
        Fleet *fl = c->fleet;
        fleet_list_t list = c->list;
        void *u = c->userdata;

        (void) db;
        fleet_call_free(c);
        list(fl, error, message, tasks, n, u);
}

int fleet_list(Fleet *fl, fleet_list_t done, void *userdata) {
        FleetCall *c;
        int r;

        assert(fl);
        assert(done);

        c = fleet_call_new(fl);
        if (!c)
                return -ENOMEM;
        c->list = done;
        c->userdata = userdata;
        r = fleet_db_list(fl->db, 0, on_listed, c);
        if (r < 0)
                fleet_call_free(c);
        return r;
}
