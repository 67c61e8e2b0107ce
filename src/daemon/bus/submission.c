/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "ledger.h"
#include "log.h"
#include "repository.h"
#include "string-util.h"
#include "submission.h"
#include "task-store.h"
#include "worker.h"

/* Everything the thread touches is the job's own, the task included: at
 * shutdown the thread may outlive the Submission (worker_detach()). */
typedef struct ImportJob {
        Task *task;             /* owned until done() hands it back */
        int tasks_fd;           /* a duplicate of the manager's, for the task while the job runs */
        int repository_fd;      /* a directory, a memfd with a bundle, or -EBADF: a path or a URL */
        bool bundle;
        bool check;             /* a local path, checked with the caller's rights as well as ours */
        Caller caller;          /* with gids, the job's own copy */
        char *branch;
        char *base;
        LedgerOptions options;
        char *repository;       /* as the submitter named it, for messages */
        char *error;
        sd_bus_error bus_error; /* the repository check's refusal */
        bool import_failed;     /* the error is the repository's, with its message in error */
} ImportJob;

typedef struct Submission {
        BusServer *server;
        sd_bus_message *message;        /* the SubmitTask() call */
        Task *task;                     /* borrowed from the job while it runs, ours after */
        bool own_task;
        Worker *worker;
} Submission;

static void import_job_free(void *p) {
        ImportJob *j = p;

        if (!j)
                return;
        task_free(j->task);
        safe_close(j->tasks_fd);
        safe_close(j->repository_fd);
        free((gid_t *) j->caller.gids);
        free(j->branch);
        free(j->base);
        free(j->repository);
        free(j->error);
        sd_bus_error_free(&j->bus_error);
        free(j);
}

static int import_job_import(ImportJob *j, int dir_fd) {
        _cleanup_(ledger_freep) Ledger *l = NULL;

        if (j->repository_fd < 0)
                return 0;   /* a path or a URL: the task's repository is made when it is prepared */
        if (!j->bundle)
                return ledger_create(dir_fd, NULL, j->repository_fd, j->base, j->branch, &j->options, &j->error, &l);

        /* Opened again for an offset of our own: the submitter shares the
         * one of the fd it sent. */
        char proc[64];
        (void) snprintf(proc, sizeof(proc), "/proc/self/fd/%d", j->repository_fd);
        _cleanup_close_ int fd = open(proc, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int r = -errno;
                (void) asprintf(&j->error, "Cannot open the bundle of repository '%s' passed as 'repository_fd': %s",
                                j->repository, strerror(-r));
                return r;
        }
        return ledger_create_from_bundle(dir_fd, fd, j->branch, &j->options, &j->error, &l);
}

/* In the thread: the check of a local repository, the import of one sent as
 * an fd, and the record made durable (a state file fsynced, the directory
 * renamed into place and fsynced) — all of which may block on the disk for
 * tens of milliseconds, which the loop must not. */
static int import_job_run(void *p) {
        ImportJob *j = p;
        Task *t = j->task;
        _cleanup_close_ int dir_fd = -EBADF;
        int r;

        if (j->check) {
                _cleanup_free_ char *canonical = NULL;

                r = repository_check(t->spec.repository, t->spec.base, &j->caller, &canonical, &j->bus_error);
                if (r < 0)
                        return r;
                free(t->spec.repository);
                t->spec.repository = TAKE_PTR(canonical);
        }

        r = task_create_begin(t, &dir_fd);
        if (r < 0)
                return r;
        r = import_job_import(j, dir_fd);
        if (r < 0) {
                j->import_failed = true;
                task_create_abort(t);
                return r;
        }
        return task_create_commit(t, dir_fd);
}

static Submission *submission_free(Submission *s) {
        if (!s)
                return NULL;
        sd_bus_message_unref(s->message);
        if (s->own_task)
                task_free(s->task);
        free(s);
        return NULL;
}

static void submission_remove(BusServer *bs, Submission *s) {
        for (size_t i = 0; i < bs->n_submissions; i++)
                if (bs->submissions[i] == s) {
                        bs->submissions[i] = bs->submissions[--bs->n_submissions];
                        return;
                }
}

static int reply_import_error(Submission *s, int r, const char *message, bool directory) {
        if (r == -ENOMEM)
                return sd_bus_reply_method_errnof(s->message, r, "Out of memory.");
        /* An fd spares the daemon the way to the repository, not the
         * permission bits of the repository's own directories: the client
         * can send the history as a bundle instead. (A bundle's EACCES is
         * no permission problem of ours.) */
        if (r == -EACCES && directory)
                return sd_bus_reply_method_errorf(s->message, AGENTFAB_ERROR_REPOSITORY_UNREADABLE,
                                                  "Repository '%s' cannot be read by agentfabd even through the file "
                                                  "descriptor (%s). Send it as a bundle (agentfabctl does so by itself).",
                                                  strempty(s->task->spec.repository),
                                                  message ?: "its own directories are not readable by others");
        /* The ledger names a directory by the path the submitter gave; a
         * bundle's messages speak of "the bundle": say whose. */
        if (!directory)
                return sd_bus_reply_method_errorf(s->message, AGENTFAB_ERROR_INVALID_SPEC,
                                                  "Repository '%s', sent as a bundle: %s", strempty(s->task->spec.repository),
                                                  message ?: "the bundle cannot be read.");
        return sd_bus_reply_method_errorf(s->message, AGENTFAB_ERROR_INVALID_SPEC, "%s", message ?:
                                          "The repository passed as 'repository_fd' cannot be read.");
}

static void on_import_done(Worker *w, int r, void *p, void *userdata) {
        Submission *s = userdata;
        BusServer *bs = s->server;
        Manager *m = bs->manager;
        ImportJob *j = p;

        (void) w;
        s->worker = NULL;
        submission_remove(bs, s);
        manager_touch(m);

        /* Ours again, with the manager's directory fd. */
        s->task = TAKE_PTR(j->task);
        s->own_task = true;
        s->task->tasks_fd = m->factory.tasks_fd;

        if (r < 0) {
                if (sd_bus_error_is_set(&j->bus_error))
                        (void) sd_bus_reply_method_error(s->message, &j->bus_error);
                else if (j->import_failed) {
                        log_info("Submission of '%s' refused: %s", strempty(s->task->spec.repository),
                                 j->error ?: strerror(-r));
                        (void) reply_import_error(s, r, j->error, !j->bundle);
                } else
                        (void) sd_bus_reply_method_errnof(s->message, r, "Failed to store task: %m");
                submission_free(s);
                return;
        }

        Task *t = TAKE_PTR(s->task);
        r = manager_submit_finish(bs, s->message, t);
        if (r < 0)
                (void) sd_bus_reply_method_errnof(s->message, r, "Failed to add task: %m");
        submission_free(s);
}

int submission_start(BusServer *bs, sd_bus_message *message, Task *t, const Caller *caller, sd_bus_error *error) {
        Submission *s;
        ImportJob *j;
        struct stat st = {};
        int r;

        if (t->spec.repository_fd >= 0 && fstat(t->spec.repository_fd, &st) < 0) {
                r = -errno;
                task_free(t);
                return sd_bus_error_set_errnof(error, r, "Cannot look at 'repository_fd': %m");
        }
        Submission **a = reallocarray(bs->submissions, bs->n_submissions + 1, sizeof(Submission *));
        if (!a) {
                task_free(t);
                return -ENOMEM;
        }
        bs->submissions = a;

        s = calloc(1, sizeof(Submission));
        j = calloc(1, sizeof(ImportJob));
        if (!s || !j) {
                free(s);
                free(j);
                task_free(t);
                return -ENOMEM;
        }
        *s = (Submission) { .server = bs, .message = sd_bus_message_ref(message), .task = t };
        *j = (ImportJob) {
                .task = t,
                .tasks_fd = fcntl(bs->manager->factory.tasks_fd, F_DUPFD_CLOEXEC, 3),
                .repository_fd = TAKE_FD(t->spec.repository_fd),  /* never stored with the task */
                .check = caller != NULL,
                .branch = strdup(t->branch),
                .base = strdup(t->spec.base ?: "HEAD"),
                .options = { .max_bytes = bs->manager->factory.config.max_repository_size, .submodules = t->spec.submodules },
                .repository = strdup(strempty(t->spec.repository)),
                .bus_error = SD_BUS_ERROR_NULL,
        };
        j->bundle = j->repository_fd >= 0 && !S_ISDIR(st.st_mode);
        j->options.source_name = j->repository;
        if (caller) {
                j->caller = (Caller) { .uid = caller->uid, .gid = caller->gid, .n_gids = caller->n_gids };
                if (caller->n_gids > 0) {
                        gid_t *g = calloc(caller->n_gids, sizeof(gid_t));
                        if (g)
                                memcpy(g, caller->gids, caller->n_gids * sizeof(gid_t));
                        j->caller.gids = g;
                }
        }
        if (!j->branch || !j->base || !j->repository || (j->caller.n_gids > 0 && !j->caller.gids)) {
                import_job_free(j);   /* frees t */
                s->task = NULL;
                submission_free(s);
                return -ENOMEM;
        }
        if (j->tasks_fd < 0) {
                r = -errno;
                import_job_free(j);
                s->task = NULL;
                submission_free(s);
                return sd_bus_error_set_errnof(error, r, "Failed to store task: %m");
        }
        t->tasks_fd = j->tasks_fd;

        /* libgit2's set-up is not for two threads at once: done here, once. */
        repository_library_init();

        r = worker_start(bs->manager->factory.event, import_job_run, on_import_done, import_job_free, j, s, &s->worker);
        if (r < 0) {
                import_job_free(j);
                s->task = NULL;
                submission_free(s);
                return sd_bus_error_set_errnof(error, r, "Cannot start making the task: %m");
        }
        bs->submissions[bs->n_submissions++] = s;
        return 0;
}

unsigned submissions_of(BusServer *bs, uid_t uid) {
        unsigned n = 0;

        for (size_t i = 0; i < bs->n_submissions; i++)
                if (uid == UID_INVALID || bs->submissions[i]->task->owner == uid)
                        n++;
        return n;
}

bool submission_has_id(BusServer *bs, const char *id) {
        for (size_t i = 0; i < bs->n_submissions; i++)
                if (streq(bs->submissions[i]->task->id, id))
                        return true;
        return false;
}

void submissions_abandon(BusServer *bs) {
        for (size_t i = 0; i < bs->n_submissions; i++) {
                /* The job keeps the task it is writing. */
                worker_detach(bs->submissions[i]->worker);
                submission_free(bs->submissions[i]);
        }
        bs->submissions = mfree_ptr(bs->submissions);
        bs->n_submissions = 0;
}
