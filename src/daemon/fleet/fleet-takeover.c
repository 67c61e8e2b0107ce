/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The takeover: a live host claims the tasks of a host whose lease ran out
 * (fleet_db_reap(): epoch + 1), and goes on with each from its last
 * acknowledged step. What the database acknowledged is all there is: the
 * task's record as its last ack wrote it, exactly the conversation lines
 * acknowledged with it, and its checkpoint, whose objects the dead host
 * pushed to Remote= before that ack (fleet-ack.h). From them this host
 * makes the task's directory as a daemon would have left it after that
 * step (a ledger at the checkpoint, the conversation file, the state
 * file) and hands the task to the manager: the ordinary resume path
 * (agent-loop.c) resets the workspace to the checkpoint and goes on. A
 * step the dead host had not acknowledged is done again; none is twice on
 * the branch, since the branch is the acknowledged checkpoint's. */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "conversation-file.h"
#include "fleet-internal.h"
#include "fs-util.h"
#include "io-util.h"
#include "json-util.h"
#include "ledger.h"
#include "log.h"
#include "string-util.h"
#include "task-store.h"
#include "worker.h"

/* One task being taken over: its parts are copies, read in a worker
 * thread while the loop goes on. */
typedef struct Takeover {
        Fleet *fleet;
        Task *task;                     /* built from the acknowledged record */
        uint64_t epoch;                 /* ours now */
        char *from_host;                /* who acknowledged the record, from its stamp; NULL if not said */
        uint64_t from_epoch;
        char *checkpoint;               /* NULL: no step committed anything yet */
        char *remote;
        char *prefix;                   /* refs/agentfab/<task> */
        char **lines;                   /* the acknowledged conversation */
        size_t n_lines;
        uint64_t max_bytes;
        /* Secrets, wiped with the takeover: for an ssh:// source, the
         * [Git] key; for an ssh:// Remote=, this host's own. */
        SshCredentials source_ssh;
        SshCredentials remote_ssh;
        char *error;
} Takeover;

static Takeover *takeover_free(Takeover *o) {
        if (!o)
                return NULL;
        task_free(o->task);
        free(o->from_host);
        free(o->checkpoint);
        free(o->remote);
        free(o->prefix);
        strv_free(o->lines);
        ssh_credentials_done(&o->source_ssh);
        ssh_credentials_done(&o->remote_ssh);
        free(o->error);
        free(o);
        return NULL;
}

static void takeover_free_job(void *p) {
        takeover_free(p);
}

/* The conversation file as the state file will count it: each
 * acknowledged line, checked to be one JSON object on one line (the
 * database is shared by every host: what it says is not trusted). */
static int takeover_write_conversation(Takeover *o, int dir_fd) {
        _cleanup_close_ int fd = -EBADF;
        TaskProgress *p = &o->task->progress;
        uint64_t size = 0;
        int r;

        if (o->n_lines < p->messages)
                return asprintf(&o->error, "The fleet's database holds %zu conversation lines, its record counts %u.",
                                o->n_lines, p->messages) < 0 ? -ENOMEM : -EBADMSG;
        fd = openat(dir_fd, TASK_CONVERSATION_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        for (size_t i = 0; i < p->messages; i++) {
                _cleanup_(json_object_putp) json_object *m = NULL;
                const char *l = o->lines[i];
                size_t n = strlen(l);

                if (n == 0 || memchr(l, '\n', n) || json_parse_strict(l, n, &m) < 0 ||
                    !json_object_is_type(m, json_type_object))
                        return asprintf(&o->error, "Conversation line %zu in the fleet's database is not a message.", i) < 0 ?
                                -ENOMEM : -EBADMSG;
                size += n + 1;
                if (size > CONVERSATION_MAX)
                        return -EFBIG;
                r = loop_write(fd, l, n);
                if (r >= 0)
                        r = loop_write(fd, "\n", 1);
                if (r < 0)
                        return r;
        }
        if (fsync(fd) < 0)
                return -errno;
        p->conversation_size = size;
        return 0;
}

/* In a worker thread: the task's directory, made aside and renamed into
 * place with its state file last (task_create_commit()), so that a crash
 * meanwhile leaves nothing a restart would take for a task. */
static int takeover_run(void *p) {
        Takeover *o = p;
        Task *t = o->task;
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        LedgerOptions options = {
                .max_bytes = o->max_bytes,
                .submodules = t->spec.submodules,
                .ssh_key = o->source_ssh.key,
                .ssh_known_hosts = o->source_ssh.known_hosts,
        };
        LedgerOptions remote_options = fleet_remote_options(&o->remote_ssh);
        int r;

        r = task_create_begin(t, &dir_fd);
        if (r < 0)
                return r;
        /* The repository as submitted; then the checkpoint and its base,
         * as the fleet published them, are made the branch. */
        r = ledger_create(dir_fd, t->spec.repository, -EBADF, t->spec.base ?: "HEAD", t->branch, &options, &o->error, &l);
        if (r >= 0 && o->checkpoint) {
                o->error = mfree_ptr(o->error);
                r = ledger_adopt(l, o->remote, &remote_options, o->prefix, o->checkpoint, &o->error);
        }
        if (r >= 0)
                r = takeover_write_conversation(o, dir_fd);
        if (r >= 0)
                return task_create_commit(t, dir_fd);
        task_create_abort(t);
        return r;
}

static void on_taken_over(Worker *w, int r, void *p, void *userdata) {
        Takeover *o = p;
        Fleet *fl = userdata;
        Task *t = TAKE_PTR(o->task);
        FleetHeld *h;

        (void) w;
        assert(fl->creating > 0);
        fl->creating--;
        h = fleet_held_find(fl, t->id);
        if (r < 0) {
                /* What cannot be rebuilt here would not be elsewhere
                 * either: it fails, in the database, where its owner
                 * sees it. */
                log_error("Cannot take task '%s' over from %s (epoch %llu): %s. Failing it in the fleet.", t->id,
                          o->from_host ?: "its dead host", (unsigned long long) o->epoch, o->error ?: strerror(-r));
                if (h)
                        fleet_write_end(fl, h, TASK_FAILED);
                task_free(t);
                return;
        }
        if (!h || h->epoch != o->epoch) {
                /* Lost again while it was being made (our fence's end
                 * found another host holding it). */
                log_warning("Task '%s' was taken over here, but another host holds it now: not working on it.", t->id);
                task_free(t);
                return;
        }
        log_info("Took task '%s' over from %s at epoch %llu: it goes on from step %u.", t->id,
                 o->from_host ?: "a host whose lease ran out", (unsigned long long) o->epoch, t->progress.step);
        t->tasks_fd = fleet_factory(fl)->tasks_fd;
        audit_takeover(t, o->from_host, o->from_epoch, o->epoch, t->progress.step, o->checkpoint);
        if (!fl->hooks || !fl->hooks->task_taken_over) {
                task_free(t);
                return;
        }
        r = fl->hooks->task_taken_over(fl, t, fl->userdata);
        if (r < 0)
                log_error_errno(r, "Failed to add task '%s' taken over from the fleet: %m", h->id);
}

/* The record's stamp (fleet-ack.h) names the host and epoch that wrote it;
 * it goes before the record is read as a task's. */
static int takeover_take_stamp(Takeover *o, json_object *record) {
        json_object *stamp, *v;

        if (!json_object_object_get_ex(record, FLEET_ACK_STAMP, &stamp))
                return 0;
        if (json_object_is_type(stamp, json_type_object)) {
                if (json_object_object_get_ex(stamp, "host", &v) && json_object_is_type(v, json_type_string) &&
                    !(o->from_host = strdup(json_object_get_string(v))))
                        return -ENOMEM;
                if (json_object_object_get_ex(stamp, "epoch", &v) && json_object_is_type(v, json_type_int))
                        o->from_epoch = json_object_get_uint64(v);
        }
        json_object_object_del(record, FLEET_ACK_STAMP);
        return 0;
}

static int takeover_start(Fleet *fl, const FleetClaim *c, const FleetTaskRecord *rec) {
        _cleanup_(json_object_putp) json_object *j = NULL;
        _cleanup_free_ char *error = NULL;
        Factory *f = fleet_factory(fl);
        Takeover *o;
        uid_t uid;
        int r;

        o = calloc(1, sizeof(Takeover));
        if (!o)
                return -ENOMEM;
        o->fleet = fl;
        o->epoch = c->epoch;
        o->max_bytes = f->config.max_repository_size;
        r = task_new(&o->task, c->id);
        if (r >= 0)
                r = json_parse_strict(rec->progress, strlen(rec->progress), &j);
        if (r >= 0)
                r = takeover_take_stamp(o, j);
        if (r >= 0)
                r = task_from_json(o->task, j, &error);
        if (r < 0) {
                log_error("Task '%s' of the fleet has an acknowledged record that cannot be read (%s).", c->id,
                          error ?: strerror(-r));
                goto fail;
        }
        r = -EBADMSG;
        if (!streq(o->task->id, c->id)) {
                log_error("Task '%s' of the fleet has the record of '%s'.", c->id, o->task->id);
                goto fail;
        }
        if (!task_state_is_active(o->task->state) && o->task->state != TASK_PAUSED) {
                log_error("Task '%s' of the fleet is %s in its record, but running in the database.", c->id,
                          task_state_to_string(o->task->state));
                goto fail;
        }
        /* The record's checkpoint is where the step it acknowledged left
         * the branch (a rejected step moves it back, and the database's
         * column keeps the last commit sent); ledger_adopt() checks that
         * it was published and grew from the task's base. */
        if (!streq_ptr(rec->checkpoint, o->task->progress.checkpoint))
                log_debug("Task '%s': the record's checkpoint %s, the database's last %s.", c->id,
                          strna(o->task->progress.checkpoint), strna(rec->checkpoint));
        r = fleet_owner_uid(c->owner, &uid);
        if (r < 0) {
                log_error("Task '%s' of the fleet belongs to '%s', who is no user here.", c->id, c->owner);
                goto fail;
        }
        o->task->owner = uid;
        o->task->tasks_fd = f->tasks_fd;
        if (o->task->progress.checkpoint && !f->config.fleet.remote) {
                log_error("Task '%s' has a checkpoint, and this host has no Remote= to fetch it from.", c->id);
                r = -ENOENT;
                goto fail;
        }
        if ((o->task->progress.checkpoint && !(o->checkpoint = strdup(o->task->progress.checkpoint))) ||
            (f->config.fleet.remote && !(o->remote = strdup(f->config.fleet.remote))) ||
            asprintf(&o->prefix, "refs/agentfab/%s", c->id) < 0) {
                o->prefix = NULL;
                r = -ENOMEM;
                goto fail;
        }
        /* The credentials are read now, as a preparation here reads them
         * (agent-prepare.c): both the source and Remote= may be ssh://. */
        r = config_read_ssh_credentials(&f->config, o->task->spec.repository, f->config.ssh_key_credential,
                                        "[Git] SSHKeyCredential=", &o->source_ssh, &error);
        if (r >= 0 && o->checkpoint)
                r = fleet_remote_read_ssh(&f->config, &o->remote_ssh, &error);
        if (r < 0) {
                if (r != -ENOMEM)
                        log_error("Cannot take task '%s' over: %s", c->id, error ?: strerror(-r));
                goto fail;
        }
        o->lines = calloc(rec->n_lines + 1, sizeof(char *));
        if (!o->lines) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < rec->n_lines; i++, o->n_lines++)
                if (!(o->lines[i] = strdup(rec->lines[i]))) {
                        r = -ENOMEM;
                        goto fail;
                }

        r = worker_start(f->event, takeover_run, on_taken_over, takeover_free_job, o, fl, NULL);
        if (r < 0)
                goto fail;
        fl->creating++;
        return 0;
fail:
        takeover_free(o);
        return r;
}

/* ---- Reaping ---- */

typedef struct ReapRead {
        Fleet *fleet;
        FleetClaim claim;
} ReapRead;

static void reap_read_free(ReapRead *rr) {
        if (!rr)
                return;
        free(rr->claim.id);
        free(rr->claim.owner);
        free(rr->claim.spec);
        free(rr->claim.environment);
        free(rr->claim.checkpoint);
        free(rr);
}

static void on_record_read(FleetDb *db, int error, const char *message, const FleetTaskRecord *rec, void *userdata) {
        ReapRead *rr = userdata;
        Fleet *fl = rr->fleet;
        const FleetClaim *c = &rr->claim;
        int r;

        (void) db;
        assert(fl->creating > 0);
        fl->creating--;
        if (error < 0) {
                /* Still ours in the database: the next renewal's reap does
                 * not return it again, but held() after a restart would.
                 * Give it back for any host to take. */
                log_warning("Cannot read what the fleet acknowledged of task '%s': %s. Giving it back.", c->id,
                            message ?: strerror(-error));
                fleet_held_remove(fl, c->id);
                (void) fleet_db_release(fleet_database(fl), c->id, c->epoch, NULL, NULL);
                reap_read_free(rr);
                return;
        }
        if (!rec || !rec->progress) {
                /* Claimed and never acknowledged: as fresh as a queued one. */
                log_info("Took task '%s' over at epoch %llu before its first step: starting it anew.", c->id,
                         (unsigned long long) c->epoch);
                r = fleet_take_claim(fl, c);
        } else
                r = takeover_start(fl, c, rec);
        if (r < 0) {
                FleetHeld *h = fleet_held_find(fl, c->id);
                log_error_errno(r, "Cannot take task '%s' over here: failing it in the fleet: %m", c->id);
                if (h)
                        fleet_write_end(fl, h, TASK_FAILED);
        }
        reap_read_free(rr);
}

static int reap_one(Fleet *fl, const FleetClaim *c) {
        ReapRead *rr;
        int r;

        if (fleet_held_find(fl, c->id))
                return 0;       /* being taken over already */

        r = fleet_held_add(fl, c->id, c->epoch);
        if (r < 0)
                return r;
        rr = calloc(1, sizeof(ReapRead));
        if (!rr)
                return -ENOMEM;
        rr->fleet = fl;
        rr->claim = (FleetClaim) {
                .id = strdup(c->id),
                .owner = strdup(c->owner),
                .spec = strdup(c->spec),
                .environment = c->environment ? strdup(c->environment) : NULL,
                .epoch = c->epoch,
                .checkpoint = c->checkpoint ? strdup(c->checkpoint) : NULL,
                .takeover = true,
        };
        if (!rr->claim.id || !rr->claim.owner || !rr->claim.spec || (c->environment && !rr->claim.environment) ||
            (c->checkpoint && !rr->claim.checkpoint)) {
                reap_read_free(rr);
                return -ENOMEM;
        }
        r = fleet_db_read_task(fleet_database(fl), c->id, on_record_read, rr);
        if (r < 0) {
                reap_read_free(rr);
                return r;
        }
        fl->creating++;
        return 0;
}

static void on_reaped(FleetDb *db, int error, const char *message, const FleetClaim *claims, size_t n, void *userdata) {
        FleetCall *call = userdata;
        Fleet *fl = call->fleet;

        (void) db;
        fleet_call_free(call);
        fl->reaping = false;
        if (error < 0) {
                if (error != -ESTALE)
                        log_warning("Failed to take over tasks of dead hosts: %s", message ?: strerror(-error));
                /* The reap may have been made, its answer lost with the
                 * connection: the database says what this host holds. */
                if (IN_SET(error, -ECONNRESET, -ETIMEDOUT))
                        fleet_find_lost_claims(fl);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                log_info("Taking over task '%s' (epoch %llu) from a host whose lease ran out.", claims[i].id,
                         (unsigned long long) claims[i].epoch);
                fleet_take_over(fl, claims + i);
        }
}

void fleet_take_over(Fleet *fl, const FleetClaim *c) {
        int r;

        if (factory_find_task(fleet_factory(fl), c->id)) {
                /* Ours from before (a host that lost its lease and its
                 * tasks' rows, then reaped them back). */
                if (fleet_held_add(fl, c->id, c->epoch) < 0)
                        log_oom();
                return;
        }
        r = reap_one(fl, c);
        if (r < 0) {
                log_error_errno(r, "Cannot take task '%s' over: %m", c->id);
                fleet_held_remove(fl, c->id);
                (void) fleet_db_release(fleet_database(fl), c->id, c->epoch, NULL, NULL);
        }
}

void fleet_reap_more(Fleet *fl) {
        unsigned busy;
        FleetCall *c;

        if (!fl->migrated || fl->lease.fenced || fl->reaping || !fleet_db_is_connected(fleet_database(fl)))
                return;
        busy = fleet_busy_slots(fl);
        if (busy >= fl->slots)
                return;
        c = fleet_call_new(fl);
        if (!c) {
                log_oom();
                return;
        }
        if (fleet_db_reap(fleet_database(fl), MIN(fl->slots - busy, FLEET_DB_CLAIM_MAX), on_reaped, c) < 0) {
                fleet_call_free(c);
                return;
        }
        fl->reaping = true;
}
