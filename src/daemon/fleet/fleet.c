/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "audit.h"
#include "credential.h"
#include "fleet-internal.h"
#include "fleet-people.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "task-store.h"
#include "time-util.h"
#include "worker.h"


static void fleet_renew(Fleet *fl);
static int fleet_arm_fence(Fleet *fl);

/* ---- Calls in flight ---- */

FleetCall *fleet_call_new(Fleet *fl) {
        FleetCall *c = calloc(1, sizeof(FleetCall));

        if (!c)
                return NULL;
        c->fleet = fl;
        c->next = fl->calls;
        if (fl->calls)
                fl->calls->prev = c;
        fl->calls = c;
        return c;
}

void fleet_call_free(FleetCall *c) {
        if (!c)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                c->fleet->calls = c->next;
        if (c->next)
                c->next->prev = c->prev;
        free(c->task_id);
        free(c);
}

/* ---- The tasks this host holds ---- */

FleetHeld *fleet_held_find(const Fleet *fl, const char *id) {
        for (size_t i = 0; i < fl->n_held; i++)
                if (streq(fl->held[i].id, id))
                        return fl->held + i;
        return NULL;
}

int fleet_held_add(Fleet *fl, const char *id, uint64_t epoch) {
        FleetHeld *h = fleet_held_find(fl, id), *n;

        if (h) {
                h->epoch = epoch;
                return 0;
        }
        n = reallocarray(fl->held, fl->n_held + 1, sizeof(FleetHeld));
        if (!n)
                return -ENOMEM;
        fl->held = n;
        fl->held[fl->n_held] = (FleetHeld) { .id = strdup(id), .epoch = epoch };
        if (!fl->held[fl->n_held].id)
                return -ENOMEM;
        fl->n_held++;
        return 0;
}

void fleet_held_remove(Fleet *fl, const char *id) {
        FleetHeld *h = fleet_held_find(fl, id);

        if (!h)
                return;
        free(h->id);
        *h = fl->held[--fl->n_held];
}

/* Tasks held and not ended, plus those being recorded: what counts
 * against Slots=. */
unsigned fleet_busy_slots(const Fleet *fl) {
        unsigned n = fl->creating;

        for (size_t i = 0; i < fl->n_held; i++)
                if (!fl->held[i].finished)
                        n++;
        return n;
}

uint64_t fleet_task_epoch(const Fleet *fl, const char *id) {
        const FleetHeld *h = fl && id ? fleet_held_find(fl, id) : NULL;
        return h ? h->epoch : 0;
}

bool fleet_is_fenced(const Fleet *fl) {
        return fl && fl->lease.fenced;
}

const char *fleet_host(const Fleet *fl) {
        return fl ? fl->host : NULL;
}

int fleet_remote_read_ssh(const Config *c, SshCredentials *ret, char **ret_error) {
        assert(c);

        return config_read_ssh_credentials(c, c->fleet.remote, c->fleet.remote_ssh_key_credential,
                                           "[Fleet] RemoteSSHKeyCredential=", ret, ret_error);
}

LedgerOptions fleet_remote_options(const SshCredentials *s) {
        assert(s);

        return (LedgerOptions) {
                .ssh_key = s->key,
                .ssh_known_hosts = s->known_hosts,
                .ssh_key_setting = "[Fleet] RemoteSSHKeyCredential=",
        };
}

Factory *fleet_factory(const Fleet *fl) {
        return fl->factory;
}

FleetDb *fleet_database(const Fleet *fl) {
        return fl->db;
}

FleetAcks *fleet_acks(const Fleet *fl) {
        return fl->acks;
}

FleetPeople *fleet_people(const Fleet *fl) {
        return fl->people;
}

/* ---- Ends written back ---- */

static FleetTaskState fleet_state_of(TaskState s) {
        switch (s) {
        case TASK_SUCCEEDED:
                return FLEET_TASK_SUCCEEDED;
        case TASK_CANCELLED:
                return FLEET_TASK_CANCELLED;
        default:
                return FLEET_TASK_FAILED;
        }
}

static void on_finished(FleetDb *db, int error, const char *message, void *userdata) {
        FleetCall *c = userdata;
        Fleet *fl = c->fleet;

        (void) db;
        if (error == -ESTALE)
                log_warning("Task '%s' ended here, but another host holds it now: its end is not recorded.", c->task_id);
        else if (error == -ECONNRESET) {
                /* It may or may not have committed; finishing again is
                 * safe, and done after the next renewal. */
                FleetHeld *h = fleet_held_find(fl, c->task_id);
                if (h)
                        h->ending = false;
                fleet_call_free(c);
                return;
        } else if (error < 0)
                log_warning("Failed to record the end of task '%s' in the fleet's database: %s", c->task_id,
                            message ?: strerror(-error));
        fleet_held_remove(fl, c->task_id);
        fleet_call_free(c);
        fleet_claim_more(fl);
}

void fleet_write_end(Fleet *fl, FleetHeld *h, TaskState state) {
        FleetCall *c;
        int r;

        h->finished = true;
        /* SECURITY: a fenced host publishes nothing; the end is written
         * once it knows it still holds the task. */
        if (fl->lease.fenced || h->ending)
                return;
        c = fleet_call_new(fl);
        if (!c || !(c->task_id = strdup(h->id))) {
                fleet_call_free(c);
                log_oom();
                return;
        }
        r = fleet_db_finish(fl->db, h->id, h->epoch, fleet_state_of(state), on_finished, c);
        if (r >= 0)
                h->ending = true;
        if (r < 0) {
                fleet_call_free(c);
                log_warning_errno(r, "Failed to record the end of task '%s' in the fleet's database: %m", h->id);
        }
}

/* Ends not written yet: the connection broke, or the host was fenced. */
static void fleet_write_pending_ends(Fleet *fl) {
        for (size_t i = 0; i < fl->n_held; i++) {
                FleetHeld *h = fl->held + i;
                Task *t;

                if (!h->finished || h->ending)
                        continue;
                t = factory_find_task(fl->factory, h->id);
                if (t)
                        fleet_write_end(fl, h, t->state);
        }
}

static void on_tip_published(Fleet *fl, const char *id) {
        FleetHeld *h = fleet_held_find(fl, id);
        Task *t = factory_find_task(fl->factory, id);

        if (!h || !h->publishing)
                return;
        h->publishing = false;
        fleet_write_end(fl, h, t ? t->state : TASK_FAILED);
}

void fleet_task_state_changed(Fleet *fl, Task *t) {
        FleetHeld *h;
        int r;

        fleet_people_task_changed(fl ? fl->people : NULL, t);
        if (!fl || !task_state_is_final(t->state))
                return;
        h = fleet_held_find(fl, t->id);
        if (!h || h->finished || h->publishing)
                return;
        /* SECURITY: a fenced host pushes nothing: its end waits, and its
         * tip stays unpublished (other hosts show its last checkpoint). */
        if (!fl->lease.fenced) {
                r = fleet_ack_publish_tip(fl, t, h->epoch, on_tip_published);
                if (r > 0) {
                        h->publishing = true;
                        return;
                }
                if (r < 0)
                        log_warning_errno(r, "Task '%s': cannot publish its last tip to Remote=: %m", t->id);
        }
        fleet_write_end(fl, h, t->state);
}

/* ---- The fence ---- */

static void fleet_fence(Fleet *fl) {
        Factory *f = fl->factory;

        log_warning("No renewal of this host's lease for %llu s: fencing itself (its tasks paused, nothing published).",
                    (unsigned long long) (fl->lease.lease_usec / 3 * 2 / USEC_PER_SEC));
        for (size_t i = 0; i < f->n_tasks; i++) {
                Task *t = f->tasks[i];
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                FleetHeld *h = fleet_held_find(fl, t->id);

                if (!t->run || !IN_SET(t->state, TASK_PREPARING, TASK_RUNNING))
                        continue;
                if (task_pause(t, &error) >= 0 &&
                    task_set_state(t, TASK_PAUSED, "This host lost contact with the fleet's database.", 0, &error) >= 0) {
                        if (h)
                                h->paused_by_fence = true;
                        continue;
                }
                /* What cannot be frozen is stopped: its agent starts again
                 * from the last checkpoint if the host still holds it. */
                log_warning("Cannot freeze task '%s' for the fence (%s): stopping its agent.", t->id,
                            error.message ?: "unknown error");
                agent_stop(t);
        }
}

static void fleet_lose(Fleet *fl, Task *t) {
        log_warning("Task '%s' is held by another host of the fleet now: cancelling it here.", t->id);
        fleet_held_remove(fl, t->id);
        if (task_state_is_final(t->state))
                return;
        if (t->state == TASK_PAUSED)
                (void) task_unpause(t, NULL);
        (void) task_set_state(t, TASK_CANCELLED, "Another host of the fleet took this task over.", 0, NULL);
        agent_stop(t);
}

void fleet_task_lost(Fleet *fl, Task *t) {
        fleet_lose(fl, t);
        fleet_claim_more(fl);
}

static void fleet_unfence(Fleet *fl) {
        Factory *f = fl->factory;

        if (!fleet_lease_confirmed(&fl->lease, clock_now_usec(CLOCK_MONOTONIC))) {
                /* The lease ran out again while we asked: next renewal. */
                (void) fleet_arm_fence(fl);
                return;
        }
        log_info("This host holds its lease in the fleet: working (%zu tasks held).", fl->n_held);
        for (size_t i = 0; i < f->n_tasks; i++) {
                Task *t = f->tasks[i];
                FleetHeld *h = fleet_held_find(fl, t->id);

                if (!h || h->finished)
                        continue;
                if (h->paused_by_fence && t->state == TASK_PAUSED) {
                        h->paused_by_fence = false;
                        if (task_unpause(t, NULL) >= 0 &&
                            task_set_state(t, t->progress.paused_from, NULL, 0, NULL) >= 0)
                                task_unpaused(t);
                }
        }
        fleet_write_pending_ends(fl);
        (void) fleet_arm_fence(fl);
        if (fl->hooks && fl->hooks->unfenced)
                fl->hooks->unfenced(fl, fl->userdata);
        fleet_claim_more(fl);
}

static void on_task_read(FleetDb *db, int error, const char *message, const FleetTaskRecord *record, void *userdata) {
        FleetCall *c = userdata;
        Fleet *fl = c->fleet;
        Task *t = factory_find_task(fl->factory, c->task_id);

        (void) db;
        if (t && error == -ENOENT)
                fleet_lose(fl, t);
        else if (t && error >= 0 && record) {
                if (fleet_held_add(fl, t->id, record->epoch) < 0)
                        log_oom();
        } else if (error < 0) {
                /* Not known either way: ask again at the next renewal. */
                log_warning("Cannot check task '%s' in the fleet's database: %s", c->task_id, message ?: strerror(-error));
                fl->lease.confirming = false;
        }
        fleet_call_free(c);
        assert(fl->confirming > 0);
        if (--fl->confirming == 0 && fl->lease.confirming)
                fleet_unfence(fl);
}

/* After a renewal while fenced: which of the unfinished tasks on disk does
 * this host still hold? */
static void fleet_confirm(Fleet *fl) {
        Factory *f = fl->factory;

        fl->confirming = 1;     /* held while asking, so that no answer ends it early */
        for (size_t i = 0; i < f->n_tasks; i++) {
                Task *t = f->tasks[i];
                FleetCall *c;

                if (task_state_is_final(t->state) && !fleet_held_find(fl, t->id))
                        continue;
                c = fleet_call_new(fl);
                if (!c || !(c->task_id = strdup(t->id))) {
                        fleet_call_free(c);
                        log_oom();
                        fl->lease.confirming = false;
                        break;
                }
                if (fleet_db_read_task(fl->db, t->id, on_task_read, c) < 0) {
                        fleet_call_free(c);
                        fl->lease.confirming = false;
                        break;
                }
                fl->confirming++;
        }
        if (--fl->confirming == 0 && fl->lease.confirming)
                fleet_unfence(fl);
}

/* ---- The lease ---- */

static int on_fence_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *fl = userdata;

        (void) s;
        if (fleet_lease_check(&fl->lease, clock_now_usec(CLOCK_MONOTONIC)))
                fleet_fence(fl);
        return 0;
}

static int fleet_arm_fence(Fleet *fl) {
        uint64_t deadline = fleet_lease_deadline(&fl->lease);

        if (deadline == UINT64_MAX)
                return sd_event_source_set_enabled(fl->fence_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_time(fl->fence_timer, deadline);
        return sd_event_source_set_enabled(fl->fence_timer, SD_EVENT_ONESHOT);
}

static void on_renewed(FleetDb *db, int error, const char *message, uint64_t lease_until_usec, void *userdata) {
        FleetCall *c = userdata;
        Fleet *fl = c->fleet;
        uint64_t sent = (uint64_t) (uintptr_t) c->userdata;

        (void) db, (void) lease_until_usec;
        fleet_call_free(c);
        fl->renewing = false;
        if (error < 0) {
                log_warning("Failed to renew this host's lease in the fleet: %s", message ?: strerror(-error));
                return;
        }
        if (fleet_lease_renewed(&fl->lease, sent))
                fleet_confirm(fl);
        else if (!fl->lease.fenced)
                fleet_write_pending_ends(fl);
        (void) fleet_arm_fence(fl);
        /* The slow poll: notifications are lost while disconnected. */
        fleet_claim_more(fl);
        /* and the tasks of hosts that are gone. */
        fleet_reap_more(fl);
        fleet_people_renewed(fl->people);
}

static int environment_names(const Environments *e, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;

        if (strv_extend(&l, ENVIRONMENT_DEFAULT) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < e->n; i++)
                if (!streq(e->list[i].name, ENVIRONMENT_DEFAULT) && strv_extend(&l, e->list[i].name) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

static void fleet_renew(Fleet *fl) {
        _cleanup_strv_free_ char **envs = NULL;
        FleetCall *c;
        int r;

        if (!fl->migrated || fl->renewing)
                return;
        if (environment_names(&fl->factory->environments, &envs) < 0 || !(c = fleet_call_new(fl))) {
                log_oom();
                return;
        }
        c->userdata = (void *) (uintptr_t) clock_now_usec(CLOCK_MONOTONIC);
        r = fleet_db_renew(fl->db, fl->lease.lease_usec, envs, on_renewed, c);
        if (r < 0) {
                fleet_call_free(c);
                log_warning_errno(r, "Failed to renew this host's lease in the fleet: %m");
                return;
        }
        fl->renewing = true;
}

static int on_renew_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *fl = userdata;

        (void) sd_event_source_set_time(s, usec + fleet_lease_renew_interval(&fl->lease));
        fleet_renew(fl);
        return 0;
}

/* ---- The connection ---- */

static void on_migrated(FleetDb *db, int error, const char *message, void *userdata) {
        Fleet *fl = userdata;

        (void) db;
        fl->migrating = false;
        if (error < 0) {
                /* Tried again at the next connection: an administrator may
                 * be setting up the database now. */
                log_error("Cannot bring the fleet's database schema up to date: %s", message ?: strerror(-error));
                return;
        }
        fl->migrated = true;
        log_info("Joined the fleet as host '%s' (lease %llu s, %u slots).", fl->host,
                 (unsigned long long) (fl->lease.lease_usec / USEC_PER_SEC), fl->slots);
        fleet_renew(fl);
}

static void fleet_migrate(Fleet *fl) {
        if (fl->migrated || fl->migrating)
                return;
        if (fleet_db_migrate(fl->db, on_migrated, fl) >= 0)
                fl->migrating = true;
}

static void on_connection(FleetDb *db, bool connected, const char *message, void *userdata) {
        Fleet *fl = userdata;

        (void) db;
        if (!connected) {
                log_warning("Lost the connection to the fleet's database%s%s.", message ? ": " : "", strempty(message));
                return;
        }
        log_info("Connected to the fleet's database.");
        fleet_migrate(fl);
        fleet_renew(fl);
}

static void on_notify(FleetDb *db, const char *channel, const char *payload, void *userdata) {
        Fleet *fl = userdata;

        (void) db, (void) payload;
        if (streq(channel, FLEET_DB_CHANNEL_QUEUE))
                fleet_claim_more(fl);
        else if (streq(channel, FLEET_DB_CHANNEL_REQUESTS))
                fleet_people_notified(fl->people, payload);
}

static uint64_t audit_epoch_of(const char *id, void *userdata) {
        return fleet_task_epoch(userdata, id);
}

int fleet_new(Factory *f, const FleetHooks *hooks, void *userdata, Fleet **ret) {
        _cleanup_(fleet_freep) Fleet *fl = NULL;
        const FleetConfig *c = &f->config.fleet;
        char *conninfo = NULL;
        int r;

        assert(f);
        assert(ret);
        assert(fleet_config_enabled(c));

        fl = calloc(1, sizeof(Fleet));
        if (!fl)
                return -ENOMEM;
        fl->factory = f;
        fl->hooks = hooks;
        fl->userdata = userdata;
        fl->slots = fleet_config_slots(c, f->config.max_active_tasks);
        fleet_lease_init(&fl->lease, c->lease_usec);

        r = fleet_config_host_name(c, &fl->host);
        if (r < 0)
                return r;
        r = fleet_config_conninfo(c, &conninfo);
        if (r < 0)
                return r;
        r = fleet_db_new(f->event, conninfo, &fl->db);
        conninfo = credential_free(conninfo);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the connection to the fleet's database: %m");
        fleet_db_set_handlers(fl->db, on_connection, on_notify, fl);
        r = fleet_db_listen(fl->db, FLEET_DB_CHANNEL_QUEUE);
        if (r < 0)
                return r;

        r = sd_event_add_time(f->event, &fl->renew_timer, CLOCK_MONOTONIC,
                              clock_now_usec(CLOCK_MONOTONIC) + fleet_lease_renew_interval(&fl->lease),
                              USEC_PER_SEC / 10, on_renew_timer, fl);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(fl->renew_timer, SD_EVENT_ON);
        (void) sd_event_source_set_description(fl->renew_timer, "fleet-renew");
        /* The fence's timer is precise: it is a promise to the other hosts. */
        r = sd_event_add_time(f->event, &fl->fence_timer, CLOCK_MONOTONIC, UINT64_MAX, 0, on_fence_timer, fl);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(fl->fence_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(fl->fence_timer, "fleet-fence");
        /* A host that was stopped (SIGSTOP, a VM paused) past its lease
         * finds its fence's deadline passed and a model's answer or a
         * command's end waiting at once: the fence goes first, so that
         * nothing of that work is done or published. */
        (void) sd_event_source_set_priority(fl->fence_timer, SD_EVENT_PRIORITY_IMPORTANT);

        r = fleet_acks_new(fl, &fl->acks);
        if (r < 0)
                return r;
        r = fleet_people_new(fl, &fl->people);
        if (r < 0)
                return r;

        /* From now on the journal names this host and the epoch of each task. */
        audit_set_fleet(fl->host, audit_epoch_of, fl);
        /* and a step counts once the fleet's database holds it. */
        agent_set_publisher(fleet_ack_publish, fl);

        *ret = TAKE_PTR(fl);
        return 0;
}

Fleet *fleet_free(Fleet *fl) {
        if (!fl)
                return NULL;
        if (fl->host)
                audit_set_fleet(NULL, NULL, NULL);
        if (fl->acks)
                agent_set_publisher(NULL, NULL);
        /* Frees no handler's userdata: ours are freed below. */
        fl->db = fleet_db_free(fl->db);
        fl->people = fleet_people_free(fl->people);
        fl->acks = fleet_acks_free(fl->acks);
        while (fl->calls)
                fleet_call_free(fl->calls);
        sd_event_source_disable_unref(fl->renew_timer);
        sd_event_source_disable_unref(fl->fence_timer);
        for (size_t i = 0; i < fl->n_held; i++)
                free(fl->held[i].id);
        free(fl->held);
        free(fl->host);
        free(fl);
        return NULL;
}
