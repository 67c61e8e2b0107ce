/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "ledger.h"
#include "log.h"
#include "string-util.h"
#include "submission.h"
#include "task-store.h"
#include "worker.h"

typedef struct ImportJob {
        int dir_fd;             /* the task's ".new-ID" directory */
        int repository_fd;      /* a directory, or a memfd with a bundle */
        bool bundle;
        char *branch;
        char *base;
        LedgerOptions options;
        char *repository;       /* as the submitter named it, for messages */
        char *error;
} ImportJob;

typedef struct Submission {
        Manager *manager;
        sd_bus_message *message;        /* the SubmitTask() call */
        Task *task;
        Worker *worker;
        int dir_fd;
} Submission;

static void import_job_free(void *p) {
        ImportJob *j = p;

        if (!j)
                return;
        safe_close(j->dir_fd);
        safe_close(j->repository_fd);
        free(j->branch);
        free(j->base);
        free(j->repository);
        free(j->error);
        free(j);
}

static int import_job_run(void *p) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        ImportJob *j = p;

        if (!j->bundle)
                return ledger_create(j->dir_fd, NULL, j->repository_fd, j->base, j->branch, &j->options, &j->error, &l);

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
        return ledger_create_from_bundle(j->dir_fd, fd, j->branch, &j->options, &j->error, &l);
}

static Submission *submission_free(Submission *s) {
        if (!s)
                return NULL;
        sd_bus_message_unref(s->message);
        task_free(s->task);
        safe_close(s->dir_fd);
        free(s);
        return NULL;
}

static void submission_remove(Manager *m, Submission *s) {
        for (size_t i = 0; i < m->n_submissions; i++)
                if (m->submissions[i] == s) {
                        m->submissions[i] = m->submissions[--m->n_submissions];
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
        Manager *m = s->manager;
        ImportJob *j = p;

        (void) w;
        s->worker = NULL;
        submission_remove(m, s);
        manager_touch(m);

        if (r < 0) {
                log_info("Submission of '%s' refused: %s", strempty(s->task->spec.repository), j->error ?: strerror(-r));
                task_create_abort(s->task);
                (void) reply_import_error(s, r, j->error, !j->bundle);
                submission_free(s);
                return;
        }

        r = task_create_commit(s->task, s->dir_fd);
        if (r < 0) {
                (void) sd_bus_reply_method_errnof(s->message, r, "Failed to store task: %m");
                submission_free(s);
                return;
        }
        Task *t = TAKE_PTR(s->task);
        r = manager_submit_finish(m, s->message, t);
        if (r < 0)
                (void) sd_bus_reply_method_errnof(s->message, r, "Failed to add task: %m");
        submission_free(s);
}

int submission_start(Manager *m, sd_bus_message *message, Task *t, sd_bus_error *error) {
        Submission *s;
        ImportJob *j;
        struct stat st;
        int r;

        assert(t->spec.repository_fd >= 0);

        if (fstat(t->spec.repository_fd, &st) < 0) {
                r = -errno;
                task_free(t);
                return sd_bus_error_set_errnof(error, r, "Cannot look at 'repository_fd': %m");
        }
        Submission **a = reallocarray(m->submissions, m->n_submissions + 1, sizeof(Submission *));
        if (!a) {
                task_free(t);
                return -ENOMEM;
        }
        m->submissions = a;

        s = calloc(1, sizeof(Submission));
        j = calloc(1, sizeof(ImportJob));
        if (!s || !j) {
                free(s);
                free(j);
                task_free(t);
                return -ENOMEM;
        }
        *s = (Submission) { .manager = m, .message = sd_bus_message_ref(message), .task = t, .dir_fd = -EBADF };
        *j = (ImportJob) {
                .dir_fd = -EBADF,
                .repository_fd = TAKE_FD(t->spec.repository_fd),  /* never stored with the task */
                .bundle = !S_ISDIR(st.st_mode),
                .branch = strdup(t->branch),
                .base = strdup(t->spec.base ?: "HEAD"),
                .options = { .max_bytes = m->config.max_repository_size, .submodules = t->spec.submodules },
                .repository = strdup(strempty(t->spec.repository)),
        };
        j->options.source_name = j->repository;
        if (!j->branch || !j->base || !j->repository) {
                import_job_free(j);
                submission_free(s);
                return -ENOMEM;
        }

        r = task_create_begin(t, &s->dir_fd);
        if (r >= 0) {
                j->dir_fd = fcntl(s->dir_fd, F_DUPFD_CLOEXEC, 3);
                if (j->dir_fd < 0)
                        r = -errno;
        }
        if (r < 0) {
                task_create_abort(t);
                import_job_free(j);
                submission_free(s);
                return sd_bus_error_set_errnof(error, r, "Failed to store task: %m");
        }

        r = worker_start(m->event, import_job_run, on_import_done, import_job_free, j, s, &s->worker);
        if (r < 0) {
                task_create_abort(t);
                import_job_free(j);
                submission_free(s);
                return sd_bus_error_set_errnof(error, r, "Cannot start importing the repository: %m");
        }
        m->submissions[m->n_submissions++] = s;
        return 0;
}

unsigned submissions_of(Manager *m, uid_t uid) {
        unsigned n = 0;

        for (size_t i = 0; i < m->n_submissions; i++)
                if (uid == UID_INVALID || m->submissions[i]->task->owner == uid)
                        n++;
        return n;
}

bool submission_has_id(Manager *m, const char *id) {
        for (size_t i = 0; i < m->n_submissions; i++)
                if (streq(m->submissions[i]->task->id, id))
                        return true;
        return false;
}

void submissions_abandon(Manager *m) {
        for (size_t i = 0; i < m->n_submissions; i++) {
                worker_detach(m->submissions[i]->worker);
                submission_free(m->submissions[i]);
        }
        m->submissions = mfree_ptr(m->submissions);
        m->n_submissions = 0;
}
