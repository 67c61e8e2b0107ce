/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "exec-client.h"
#include "fleet-people.h"
#include "fleet-requests.h"
#include "fleet.h"
#include "fs-util.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "task-store.h"
#include "time-util.h"
#include "worker.h"

/* A task whose status waits to be written: its epoch as it was when it
 * changed (a final change is written after the end, when the task is no
 * longer among those held). */
typedef struct Pending {
        char *id;
        uint64_t epoch;
        bool dirty;
        bool final;
        uint64_t log_usec;      /* CLOCK_MONOTONIC of the last log tail sent; 0 never */
} Pending;

struct FleetPeople {
        Fleet *fleet;
        sd_event_source *timer;
        Pending *pending;
        size_t n_pending;
        Worker **workers;       /* reads of outputs under way: detached if we go first */
        size_t n_workers;
        FleetInbox *requests;
};

uint64_t fleet_people_stop(const Task *t) {
        return t && t->state == TASK_AWAITING_APPROVAL ? (uint64_t) t->progress.step + 1 : 0;
}

/* ---- What status shows, as JSON ---- */

static int add_string(json_object *j, const char *key, const char *value) {
        _cleanup_free_ char *s = NULL;
        size_t n;

        /* Bounded, and valid UTF-8 once cut: the database takes text only. */
        n = strnlen(strempty(value), FLEET_PEOPLE_STRING_MAX);
        s = strndup(strempty(value), n);
        if (!s)
                return -ENOMEM;
        utf8_sanitize(s, n);
        return json_add_string(j, key, s);
}

static int status_to_json(Task *t, const char *host, uint64_t epoch, char **ret) {
        _cleanup_json_ json_object *j = json_object_new_object(), *res = NULL;
        TaskResources used;
        const char *prb = t->spec.forge ? t->spec.pull_request_base ?: TASK_PULL_REQUEST_BASE_DEFAULT : "";
        const char *s;
        int r = 0;

        if (!j)
                return -ENOMEM;
        struct {
                const char *key, *value;
        } strings[] = {
                { "Id", t->id },
                { "Repository", t->spec.repository },
                { "Goal", t->spec.goal },
                { "AcceptanceCriteria", t->spec.acceptance },
                { "TestCommand", t->spec.test_command },
                { "Base", t->spec.base ?: "HEAD" },
                { "Model", t->spec.model },
                { "Reference", t->spec.reference },
                { "PushURL", t->spec.push_url },
                { "Forge", t->spec.forge },
                { "ForgeRepository", t->spec.forge_repository },
                { "PullRequestBase", prb },
                { "Environment", t->spec.environment },
                { "EnvironmentIdentity", t->progress.environment_identity },
                { "State", task_state_to_string(t->state) },
                { "Reason", t->reason },
                { "Branch", t->branch },
                { "Plan", t->progress.plan },
                { "HeadCommit", t->progress.head },
                { "Breaker", t->progress.breaker },
                { "PullRequest", t->progress.pull_request },
                { "FreezerState", task_freezer_state(t) },
                { "Host", host },
        };
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(strings); i++)
                r = add_string(j, strings[i].key, strings[i].value);
        if (r >= 0)
                r = json_add_uint64(j, "Owner", t->owner);
        if (r >= 0)
                r = json_add_uint64(j, "RequirementVersion", task_requirement_version(t));
        if (r >= 0)
                r = json_add_uint64(j, "CreatedUSec", t->created_usec);
        if (r >= 0)
                r = json_add_uint64(j, "UpdatedUSec", t->updated_usec);
        if (r >= 0)
                r = json_add_uint64(j, "Step", t->progress.step);
        if (r >= 0)
                r = json_add_uint64(j, "TokensUsed", t->progress.tokens);
        if (r >= 0)
                r = json_add_uint64(j, "CommandsRun", t->progress.commands);
        if (r >= 0)
                r = json_add_uint64(j, "BreakerStop", fleet_people_stop(t));
        if (r >= 0)
                r = json_add_uint64(j, "Epoch", epoch);
        if (r < 0)
                return r;
        used = t->progress.resources;
        used.wall_usec = t->progress.wall_usec;
        r = task_resources_to_json(&used, &res);
        if (r < 0)
                return r;
        r = json_object_object_add(j, "Resources", res);
        if (r < 0)
                return -ENOMEM;
        TAKE_PTR(res);

        s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
        if (!s)
                return -ENOMEM;
        if (strlen(s) > FLEET_DB_OUTPUT_MAX)
                return -EMSGSIZE;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* ---- Writes, answered later ---- */

typedef struct PutCall {
        char *id;
        FleetOutput output;
} PutCall;

static void on_put(FleetDb *db, int error, const char *message, void *userdata) {
        PutCall *c = userdata;

        (void) db;
        /* Not retried: the next change writes the status again, and an
         * output lost with the connection is written at the next end. */
        if (error == -ESTALE)
                log_debug("Task '%s' is no longer this host's: its %s is not written.", c->id,
                          fleet_output_to_string(c->output));
        else if (error < 0)
                log_warning("Failed to write the %s of task '%s' to the fleet's database: %s",
                            fleet_output_to_string(c->output), c->id, message ?: strerror(-error));
        free(c->id);
        free(c);
}

static int put_output(FleetPeople *p, const char *id, uint64_t epoch, FleetOutput output, const char *content) {
        PutCall *c;
        int r;

        c = calloc(1, sizeof(PutCall));
        if (!c)
                return -ENOMEM;
        c->output = output;
        c->id = strdup(id);
        if (!c->id) {
                free(c);
                return -ENOMEM;
        }
        /* When the daemon stops first, fleet_db_free() calls no handler:
         * c goes with the process. */
        r = fleet_db_put_output(fleet_database(p->fleet), id, epoch, output, content, on_put, c);
        if (r < 0) {
                free(c->id);
                free(c);
        }
        return r;
}

/* ---- The summary and the log's tail, read in a thread ---- */

typedef struct OutputJob {
        int dir_fd;
        char *id;
        uint64_t epoch;
        bool summary;           /* read the summary too (at the end) */
        char *summary_text;
        char *log_text;
} OutputJob;

static void output_job_free(void *j_);
static void output_job_free_p(OutputJob **j) {
        output_job_free(*j);
}

static void output_job_free(void *j_) {
        OutputJob *j = j_;

        if (!j)
                return;
        safe_close(j->dir_fd);
        free(j->id);
        free(j->summary_text);
        free(j->log_text);
        free(j);
}

/* The last FLEET_PEOPLE_LOG_TAIL bytes of the output log from a line's
 * start, each line escaped as `logs` shows it, with the line `logs` puts
 * first when it leaves the beginning out: the same text on every host. */
static int read_log_escaped(int dir_fd, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL, *out = NULL;
        size_t size = 0, n_out = 0, skip = 0;
        struct stat st;
        ssize_t n;
        int k = 0;

        fd = openat(dir_fd, TASK_LOG_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADF;
        size = (uint64_t) st.st_size > FLEET_PEOPLE_LOG_TAIL ? FLEET_PEOPLE_LOG_TAIL : (size_t) st.st_size;
        buf = malloc(size + 1);
        if (!buf)
                return -ENOMEM;
        n = pread(fd, buf, size, st.st_size - (off_t) size);
        if (n < 0)
                return -errno;
        size = (size_t) n;
        buf[size] = '\0';
        if ((uint64_t) st.st_size > FLEET_PEOPLE_LOG_TAIL) {
                char *nl = memchr(buf, '\n', size);
                skip = nl ? (size_t) (nl + 1 - buf) : 0;
        }

        /* Escaping grows a byte to at most 6 ("\u009b"); the whole is
         * bounded by the database's limit below. */
        out = malloc(128 + (size - skip) * 6 + 2);
        if (!out)
                return -ENOMEM;
        if ((uint64_t) st.st_size > FLEET_PEOPLE_LOG_TAIL)
                k = snprintf(out, 128, "[... %llu bytes of earlier output left out ...]\n",
                             (unsigned long long) ((uint64_t) st.st_size - FLEET_PEOPLE_LOG_TAIL));
        n_out = (size_t) k;
        for (char *p = buf + skip, *nl; p < buf + size; p = nl + 1) {
                nl = memchr(p, '\n', (size_t) (buf + size - p));
                if (!nl)
                        nl = buf + size;
                _cleanup_free_ char *line = exec_output_escape(p, (size_t) (nl - p));
                if (!line)
                        return -ENOMEM;
                size_t l = strlen(line);
                if (n_out + l + 1 > 128 + (size - skip) * 6 + 1)
                        break;
                memcpy(out + n_out, line, l);
                n_out += l;
                out[n_out++] = '\n';
        }
        out[n_out] = '\0';
        /* The database takes valid UTF-8 text only. */
        utf8_sanitize(out, n_out);
        /* What the database refuses, cut from the front, as above. */
        if (n_out > FLEET_DB_OUTPUT_MAX) {
                char *start = memchr(out + n_out - FLEET_DB_OUTPUT_MAX, '\n', FLEET_DB_OUTPUT_MAX);
                start = start ? start + 1 : out + n_out - FLEET_DB_OUTPUT_MAX;
                memmove(out, start, (size_t) (out + n_out - start) + 1);
        }
        *ret = TAKE_PTR(out);
        return 0;
}

static int output_job_run(void *j_) {
        OutputJob *j = j_;
        int r;

        r = read_log_escaped(j->dir_fd, &j->log_text);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Cannot read the output log of task '%s' for the fleet: %m", j->id);
        if (!j->summary)
                return 0;
        r = read_file_at(j->dir_fd, TASK_SUMMARY_FILE, FLEET_DB_OUTPUT_MAX, &j->summary_text, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return log_warning_errno(r, "Cannot read the summary of task '%s' for the fleet: %m", j->id);
        /* Written escaped; one of an older version may not be valid text. */
        utf8_sanitize(j->summary_text, strlen(j->summary_text));
        return 0;
}

static void workers_forget(FleetPeople *p, Worker *w) {
        for (size_t i = 0; i < p->n_workers; i++)
                if (p->workers[i] == w) {
                        p->workers[i] = p->workers[--p->n_workers];
                        return;
                }
}

static void on_output_read(Worker *w, int r, void *j_, void *userdata) {
        FleetPeople *p = userdata;
        OutputJob *j = j_;

        (void) r;
        workers_forget(p, w);
        /* The summary first: a reader that finds the log's final tail
         * finds the summary too. */
        if (j->summary_text && put_output(p, j->id, j->epoch, FLEET_OUTPUT_SUMMARY, j->summary_text) < 0)
                log_warning("Cannot write the summary of task '%s' to the fleet's database.", j->id);
        if (j->log_text && put_output(p, j->id, j->epoch, FLEET_OUTPUT_LOG, j->log_text) < 0)
                log_warning("Cannot write the output log of task '%s' to the fleet's database.", j->id);
}

static int outputs_read(FleetPeople *p, Task *t, uint64_t epoch, bool summary) {
        _cleanup_(output_job_free_p) OutputJob *j = NULL;
        Worker **l, *w = NULL;
        int r;

        if (!t->factory || t->tasks_fd < 0)
                return 0;
        l = reallocarray(p->workers, p->n_workers + 1, sizeof(Worker *));
        if (!l)
                return -ENOMEM;
        p->workers = l;
        j = calloc(1, sizeof(OutputJob));
        if (!j)
                return -ENOMEM;
        j->dir_fd = -EBADF;
        j->epoch = epoch;
        j->summary = summary;
        j->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (j->dir_fd < 0)
                return -errno;
        j->id = strdup(t->id);
        if (!j->id)
                return -ENOMEM;
        r = worker_start(fleet_factory(p->fleet)->event, output_job_run, on_output_read, output_job_free, j, p, &w);
        if (r < 0)
                return r;
        TAKE_PTR(j);
        p->workers[p->n_workers++] = w;
        return 0;
}

/* ---- Which tasks wait to be written ---- */

static Pending *pending_find(FleetPeople *p, const char *id) {
        for (size_t i = 0; i < p->n_pending; i++)
                if (streq(p->pending[i].id, id))
                        return p->pending + i;
        return NULL;
}

static void pending_remove(FleetPeople *p, Pending *e) {
        free(e->id);
        *e = p->pending[--p->n_pending];
}

/* Writes the status of every task that changed, and at a task's end its
 * outputs. Nothing while fenced: the renewal that ends the fence calls
 * again. */
static void people_flush(FleetPeople *p) {
        Fleet *fl = p->fleet;
        uint64_t now = clock_now_usec(CLOCK_MONOTONIC);

        if (fleet_is_fenced(fl) || !fleet_db_is_connected(fleet_database(fl)))
                return;
        for (size_t i = 0; i < p->n_pending;) {
                Pending *e = p->pending + i;
                _cleanup_free_ char *json = NULL;
                Task *t = factory_find_task(fleet_factory(fl), e->id);
                int r;

                if (!t) {
                        pending_remove(p, e);
                        continue;
                }
                if (e->dirty) {
                        r = status_to_json(t, fleet_host(fl), e->epoch, &json);
                        if (r >= 0)
                                r = put_output(p, t->id, e->epoch, FLEET_OUTPUT_STATUS, json);
                        if (r < 0)
                                log_warning_errno(r, "Cannot write the status of task '%s' to the fleet's database: %m",
                                                  t->id);
                        e->dirty = false;
                }
                /* The log's tail while the task works, now and then; all
                 * of its outputs once at its end. */
                if (e->final || e->log_usec == 0 || now - e->log_usec >= FLEET_PEOPLE_LOG_INTERVAL_USEC) {
                        r = outputs_read(p, t, e->epoch, e->final);
                        if (r < 0)
                                log_warning_errno(r, "Cannot read the outputs of task '%s' for the fleet: %m", t->id);
                        e->log_usec = now;
                }
                if (e->final) {
                        pending_remove(p, e);
                        continue;
                }
                i++;
        }
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        people_flush(userdata);
        return 0;
}

void fleet_people_task_changed(FleetPeople *p, Task *t) {
        uint64_t epoch;
        Pending *e;

        if (!p || !t)
                return;
        /* Only what this host holds: its epoch now, kept for the write. */
        e = pending_find(p, t->id);
        epoch = fleet_task_epoch(p->fleet, t->id);
        if (epoch == 0 && !e)
                return;
        if (!e) {
                Pending *l = reallocarray(p->pending, p->n_pending + 1, sizeof(Pending));
                if (!l) {
                        log_oom();
                        return;
                }
                p->pending = l;
                e = p->pending + p->n_pending;
                *e = (Pending) { .id = strdup(t->id) };
                if (!e->id) {
                        log_oom();
                        return;
                }
                p->n_pending++;
        }
        if (epoch > 0)
                e->epoch = epoch;
        e->dirty = true;
        e->final = e->final || task_state_is_final(t->state);
        int enabled = SD_EVENT_OFF;
        (void) sd_event_source_get_enabled(p->timer, &enabled);
        if (enabled == SD_EVENT_OFF) {
                (void) sd_event_source_set_time(p->timer, clock_now_usec(CLOCK_MONOTONIC) + FLEET_PEOPLE_DEBOUNCE_USEC);
                (void) sd_event_source_set_enabled(p->timer, SD_EVENT_ONESHOT);
        }
}

void fleet_task_changed(Fleet *fl, Task *t) {
        if (fl)
                fleet_people_task_changed(fleet_people(fl), t);
}

void fleet_people_renewed(FleetPeople *p) {
        if (!p)
                return;
        people_flush(p);
        fleet_inbox_take(p->requests);
}

void fleet_people_notified(FleetPeople *p, const char *host) {
        if (p && streq_ptr(host, fleet_host(p->fleet)))
                fleet_inbox_take(p->requests);
}

int fleet_people_new(Fleet *fl, FleetPeople **ret) {
        FleetPeople *p;
        int r;

        assert(fl);
        assert(ret);

        p = calloc(1, sizeof(FleetPeople));
        if (!p)
                return -ENOMEM;
        p->fleet = fl;
        r = sd_event_add_time(fleet_factory(fl)->event, &p->timer, CLOCK_MONOTONIC, UINT64_MAX, USEC_PER_SEC / 20,
                              on_timer, p);
        if (r >= 0) {
                (void) sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
                (void) sd_event_source_set_description(p->timer, "fleet-status");
                r = fleet_inbox_new(fl, &p->requests);
        }
        if (r >= 0)
                r = fleet_db_listen(fleet_database(fl), FLEET_DB_CHANNEL_REQUESTS);
        if (r < 0) {
                fleet_people_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

FleetPeople *fleet_people_free(FleetPeople *p) {
        if (!p)
                return NULL;
        sd_event_source_disable_unref(p->timer);
        /* A read still running finishes on its own copy, and is dropped. */
        for (size_t i = 0; i < p->n_workers; i++)
                worker_detach(p->workers[i]);
        free(p->workers);
        for (size_t i = 0; i < p->n_pending; i++)
                free(p->pending[i].id);
        free(p->pending);
        fleet_inbox_free(p->requests);
        free(p);
        return NULL;
}
