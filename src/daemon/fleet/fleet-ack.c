/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent.h"
#include "fleet-ack.h"
#include "fs-util.h"
#include "json-util.h"
#include "ledger.h"
#include "log.h"
#include "string-util.h"
#include "task-job.h"
#include "task-store.h"
#include "time-util.h"

/* How long a failed push or a failed ack waits before it is tried again. */
#define FLEET_ACK_RETRY_USEC (1 * USEC_PER_SEC)

typedef struct FleetPublish FleetPublish;

struct FleetAcks {
        Fleet *fleet;
        FleetPublish *list;
};

/* One step on its way to the database. */
struct FleetPublish {
        FleetAcks *acks;
        FleetPublish *next, *prev;

        char *task_id;
        uint64_t epoch;
        uint64_t cookie;
        unsigned step;
        char *commit;                   /* NULL: the step made none */
        uint64_t first_line;
        char **lines;
        size_t n_lines;
        char *progress;                 /* the task's record, JSON text */

        bool pushed;
        unsigned attempts;
        TaskJob *job;                   /* the push, in the task's ledger job queue */
        bool acking;                    /* fleet_db_ack() in flight */
        sd_event_source *retry;
};

/* What the push needs in its thread: copies of its own. */
typedef struct PushJob {
        FleetPublish *pub;
        int dir_fd;
        char *branch;
        char *url;
        char *commit;
        char *ref;
        char *base_ref;
        SshCredentials ssh;             /* for an ssh:// Remote=; secret, wiped when the job is freed */
        char *error;
} PushJob;

static void publish_start(FleetPublish *p);
static Task *publish_task(FleetPublish *p);

static FleetPublish *publish_free(FleetPublish *p) {
        if (!p)
                return NULL;
        if (p->prev)
                p->prev->next = p->next;
        else
                p->acks->list = p->next;
        if (p->next)
                p->next->prev = p->prev;
        /* A push not yet done is cancelled (its free_job sees it gone);
         * with its task gone, the task's queue has let go of it already. */
        if (p->job && publish_task(p))
                task_job_cancel(p->job);
        sd_event_source_disable_unref(p->retry);
        free(p->task_id);
        free(p->commit);
        strv_free(p->lines);
        free(p->progress);
        free(p);
        return NULL;
}

static Task *publish_task(FleetPublish *p) {
        return factory_find_task(fleet_factory(p->acks->fleet), p->task_id);
}

/* The step counts (r == 0), or it never will here (r < 0). */
static void publish_end(FleetPublish *p, int r) {
        Task *t = publish_task(p);
        uint64_t cookie = p->cookie;

        publish_free(p);
        if (t)
                agent_published(t, cookie, r);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        FleetPublish *p = userdata;

        (void) s, (void) usec;
        publish_start(p);
        return 0;
}

static void publish_retry(FleetPublish *p) {
        sd_event *e = fleet_factory(p->acks->fleet)->event;
        uint64_t at = clock_now_usec(CLOCK_MONOTONIC) + FLEET_ACK_RETRY_USEC;
        int r;

        p->attempts++;
        if (p->retry)
                r = sd_event_source_set_time(p->retry, at) < 0 ? -EIO :
                        sd_event_source_set_enabled(p->retry, SD_EVENT_ONESHOT);
        else
                r = sd_event_add_time(e, &p->retry, CLOCK_MONOTONIC, at, USEC_PER_SEC / 10, on_retry, p);
        if (r < 0) {
                log_error_errno(r, "Task '%s': cannot wait to publish step %u again: %m", p->task_id, p->step);
                publish_end(p, r);
        }
}

/* ---- The database ---- */

static void on_acked(FleetDb *db, int error, const char *message, void *userdata) {
        FleetPublish *p = userdata;
        Fleet *fl = p->acks->fleet;
        Task *t = publish_task(p);

        (void) db;
        p->acking = false;
        if (error >= 0) {
                log_debug("Task '%s': step %u acknowledged in the fleet (epoch %llu).", p->task_id, p->step,
                          (unsigned long long) p->epoch);
                return publish_end(p, 0);
        }
        if (IN_SET(error, -ECONNRESET, -ETIMEDOUT, -ENOTCONN)) {
                /* It may have committed: an ack again rewrites the same
                 * lines at the same place. */
                if (p->attempts == 0)
                        log_warning("Task '%s': the fleet's database did not acknowledge step %u (%s), trying again.",
                                    p->task_id, p->step, message ?: strerror(-error));
                return publish_retry(p);
        }
        if (error == -ESTALE) {
                log_warning("Task '%s': the fleet's database refused step %u at epoch %llu: another host holds the task; "
                            "stopping it here.", p->task_id, p->step, (unsigned long long) p->epoch);
                publish_end(p, error);
                if (t)
                        fleet_task_lost(fl, t);
                return;
        }
        log_error("Task '%s': the fleet's database refused step %u: %s", p->task_id, p->step, message ?: strerror(-error));
        publish_end(p, error);
}

static void publish_ack(FleetPublish *p) {
        FleetAck ack = {
                .task_id = p->task_id,
                .epoch = p->epoch,
                .first_line = p->first_line,
                .lines = (const char *const *) p->lines,
                .n_lines = p->n_lines,
                .progress = p->progress,
                .checkpoint = p->commit,
        };
        int r;

        /* SECURITY: a fenced host writes nothing; its fence's end, or the
         * database's refusal, decides. */
        if (fleet_is_fenced(p->acks->fleet))
                return publish_retry(p);
        r = fleet_db_ack(fleet_database(p->acks->fleet), &ack, on_acked, p);
        if (r < 0) {
                log_error_errno(r, "Task '%s': cannot acknowledge step %u in the fleet: %m", p->task_id, p->step);
                return publish_end(p, r);
        }
        p->acking = true;
}

/* ---- The push ---- */

static void push_job_free(void *q) {
        PushJob *j = q;

        if (!j)
                return;
        safe_close(j->dir_fd);
        free(j->branch);
        free(j->url);
        free(j->commit);
        free(j->ref);
        free(j->base_ref);
        ssh_credentials_done(&j->ssh);
        free(j->error);
        free(j);
}

static int push_job_run(void *q) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        PushJob *j = q;
        LedgerOptions o = fleet_remote_options(&j->ssh);
        int r;

        r = ledger_open(j->dir_fd, j->branch, &l);
        if (r < 0)
                return r;
        return ledger_publish(l, j->url, &o, j->commit, j->ref, j->base_ref, &j->error);
}

static void on_pushed(Task *t, int r, void *q, void *userdata) {
        PushJob *j = q;
        FleetPublish *p = j->pub;

        (void) userdata;
        p->job = NULL;
        if (!t)
                /* The task is gone, and with it the run that waited. */
                return (void) publish_free(p);
        if (r < 0) {
                if (p->attempts == 0)
                        log_warning("Task '%s': cannot publish step %u's checkpoint, trying again: %s", p->task_id,
                                    p->step, j->error ?: strerror(-r));
                return publish_retry(p);
        }
        p->pushed = true;
        publish_ack(p);
}

/* Logs why it failed itself: a credential's name is part of the reason. */
static int publish_push(FleetPublish *p, Task *t, const char *remote) {
        _cleanup_free_ char *error = NULL;
        PushJob *j;
        int r;

        j = calloc(1, sizeof(PushJob));
        if (!j)
                return log_oom();
        j->pub = p;
        j->dir_fd = -EBADF;
        /* Read for each push: a renewed credential counts from the next
         * step on. */
        r = fleet_remote_read_ssh(&fleet_factory(p->acks->fleet)->config, &j->ssh, &error);
        if (r < 0) {
                push_job_free(j);
                return log_error_errno(r, "Task '%s': cannot publish step %u's checkpoint to Remote=: %s", p->task_id,
                                       p->step, error ?: strerror(-r));
        }
        j->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (j->dir_fd < 0) {
                r = -errno;
                push_job_free(j);
                return log_error_errno(r, "Task '%s': cannot publish step %u's checkpoint: %m", p->task_id, p->step);
        }
        j->branch = strdup(t->branch);
        j->url = strdup(remote);
        j->commit = strdup(p->commit);
        if (!j->branch || !j->url || !j->commit ||
            asprintf(&j->ref, "refs/agentfab/%s/%llu", p->task_id, (unsigned long long) p->epoch) < 0 ||
            asprintf(&j->base_ref, "refs/agentfab/%s/base", p->task_id) < 0) {
                push_job_free(j);
                return log_oom();
        }
        r = task_job_enqueue(t, "publish", push_job_run, on_pushed, push_job_free, j, NULL, &p->job);
        if (r < 0) {
                push_job_free(j);
                return log_error_errno(r, "Task '%s': cannot publish step %u's checkpoint: %m", p->task_id, p->step);
        }
        return 0;
}

static void publish_start(FleetPublish *p) {
        Fleet *fl = p->acks->fleet;
        const char *remote = fleet_factory(fl)->config.fleet.remote;
        Task *t = publish_task(p);
        int r;

        if (!t)
                return (void) publish_free(p);
        if (fleet_task_epoch(fl, p->task_id) != p->epoch)
                /* Lost meanwhile (the fence's end found another host
                 * holding it): that cancelled it here. */
                return publish_end(p, -ESTALE);
        /* SECURITY: a fenced host publishes nothing, to Remote= either. */
        if (fleet_is_fenced(fl))
                return publish_retry(p);
        if (p->pushed || !p->commit || !remote)
                return publish_ack(p);
        r = publish_push(p, t, remote);
        if (r < 0)
                publish_end(p, r);
}

int fleet_ack_stamp(json_object *record, const char *host, uint64_t epoch) {
        json_object *o = json_object_new_object();

        if (!o || json_object_object_add(o, "host", json_object_new_string(host)) < 0 ||
            json_object_object_add(o, "epoch", json_object_new_uint64(epoch)) < 0 ||
            json_object_object_add(record, FLEET_ACK_STAMP, o) < 0) {
                json_object_put(o);
                return -ENOMEM;
        }
        return 0;
}

int fleet_ack_publish(Task *t, const AgentPublish *a, void *userdata) {
        _cleanup_(json_object_putp) json_object *j = NULL;
        Fleet *fl = userdata;
        FleetAcks *acks;
        FleetPublish *p;
        uint64_t epoch;
        int r;

        assert(t);
        assert(a);
        assert(fl);

        epoch = fleet_task_epoch(fl, t->id);
        if (epoch == 0)
                return -ESTALE;
        j = task_to_json(t);
        if (!j)
                return -ENOMEM;
        /* Who acknowledged it, for a host that takes the task over: its
         * journal names where the task came from (fleet-takeover.c). */
        r = fleet_ack_stamp(j, fleet_host(fl), epoch);
        if (r < 0)
                return r;

        acks = fleet_acks(fl);
        p = calloc(1, sizeof(FleetPublish));
        if (!p)
                return -ENOMEM;
        p->acks = acks;
        p->next = acks->list;
        if (acks->list)
                acks->list->prev = p;
        acks->list = p;
        p->epoch = epoch;
        p->cookie = a->cookie;
        p->step = a->step;
        p->first_line = a->first_message;
        p->n_lines = a->n_lines;
        p->task_id = strdup(t->id);
        p->progress = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
        p->lines = calloc(a->n_lines + 1, sizeof(char *));
        for (size_t i = 0; p->lines && i < a->n_lines; i++)
                if (!(p->lines[i] = strdup(a->lines[i]))) {
                        publish_free(p);
                        return -ENOMEM;
                }
        if (!p->task_id || !p->progress || !p->lines || (a->commit && !(p->commit = strdup(a->commit)))) {
                publish_free(p);
                return -ENOMEM;
        }
        /* From the event loop, as agent_published() must be. */
        p->attempts = 0;
        if (sd_event_add_time(fleet_factory(fl)->event, &p->retry, CLOCK_MONOTONIC, 0, 0, on_retry, p) < 0) {
                publish_free(p);
                return -ENOMEM;
        }
        return 0;
}

/* ---- The delivered tip ---- */

typedef struct TipJob {
        Fleet *fleet;
        char *task_id;
        int dir_fd;
        char *branch;
        char *url;
        char *ref;
        SshCredentials ssh;             /* for an ssh:// Remote=; secret, wiped when the job is freed */
        char *error;
        fleet_tip_done_t done;
} TipJob;

static void tip_job_free(void *q) {
        TipJob *j = q;

        if (!j)
                return;
        safe_close(j->dir_fd);
        free(j->task_id);
        free(j->branch);
        free(j->url);
        free(j->ref);
        ssh_credentials_done(&j->ssh);
        free(j->error);
        free(j);
}

static int tip_job_run(void *q) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        TipJob *j = q;
        LedgerOptions o = fleet_remote_options(&j->ssh);
        char head[41];
        int r;

        r = ledger_open(j->dir_fd, j->branch, &l);
        if (r >= 0)
                r = ledger_head(l, head);
        if (r < 0)
                return r;
        return ledger_publish(l, j->url, &o, head, j->ref, NULL, &j->error);
}

static void on_tip_pushed(Task *t, int r, void *q, void *userdata) {
        TipJob *j = q;

        (void) t, (void) userdata;
        if (r < 0)
                log_warning("Task '%s': cannot publish its last tip to Remote=, other hosts show its last checkpoint: %s",
                            j->task_id, j->error ?: strerror(-r));
        j->done(j->fleet, j->task_id);
}

int fleet_ack_publish_tip(Fleet *fl, Task *t, uint64_t epoch, fleet_tip_done_t done) {
        const char *remote = fleet_factory(fl)->config.fleet.remote;
        _cleanup_free_ char *error = NULL;
        TipJob *j;
        int r;

        assert(fl);
        assert(t);
        assert(done);

        if (!remote || (!t->progress.checkpoint && !t->progress.head))
                return 0;
        j = calloc(1, sizeof(TipJob));
        if (!j)
                return -ENOMEM;
        j->fleet = fl;
        j->done = done;
        j->dir_fd = -EBADF;
        r = fleet_remote_read_ssh(&fleet_factory(fl)->config, &j->ssh, &error);
        if (r < 0) {
                /* The task's end goes on: other hosts show its last checkpoint. */
                log_warning("Task '%s': cannot publish its last tip to Remote=, other hosts show its last checkpoint: %s",
                            t->id, error ?: strerror(-r));
                tip_job_free(j);
                return 0;
        }
        j->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (j->dir_fd < 0) {
                r = -errno;
                tip_job_free(j);
                return r;
        }
        j->task_id = strdup(t->id);
        j->branch = strdup(t->branch);
        j->url = strdup(remote);
        if (!j->task_id || !j->branch || !j->url ||
            asprintf(&j->ref, "refs/agentfab/%s/%llu", t->id, (unsigned long long) epoch) < 0) {
                j->ref = NULL;
                tip_job_free(j);
                return -ENOMEM;
        }
        r = task_job_enqueue(t, "publish", tip_job_run, on_tip_pushed, tip_job_free, j, NULL, NULL);
        if (r < 0) {
                tip_job_free(j);
                return r;
        }
        return 1;
}

int fleet_acks_new(Fleet *fl, FleetAcks **ret) {
        FleetAcks *a = calloc(1, sizeof(FleetAcks));

        if (!a)
                return -ENOMEM;
        a->fleet = fl;
        *ret = a;
        return 0;
}

FleetAcks *fleet_acks_free(FleetAcks *a) {
        if (!a)
                return NULL;
        while (a->list)
                publish_free(a->list);
        free(a);
        return NULL;
}
