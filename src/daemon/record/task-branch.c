/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "audit.h"
#include "conversation-file.h"
#include "factory.h"
#include "json-util.h"
#include "ledger.h"
#include "string-util.h"
#include "task-branch.h"
#include "task-job.h"
#include "task-store.h"

/* What a job needs to open the task's ledger in its thread: its own copies,
 * the task may be freed meanwhile. */
typedef struct LedgerRef {
        int dir_fd;
        char *branch;
} LedgerRef;

static int ledger_ref_init(LedgerRef *ref, Task *t) {
        ref->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (ref->dir_fd < 0)
                return -errno;
        ref->branch = strdup(t->branch);
        return ref->branch ? 0 : -ENOMEM;
}

static void ledger_ref_done(LedgerRef *ref) {
        ref->dir_fd = safe_close(ref->dir_fd);
        ref->branch = mfree_ptr(ref->branch);
}

static int task_branch_open(Task *t, Ledger **ret) {
        _cleanup_close_ int dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;
        /* Opening a ledger removes the lock files a crash left: never while
         * a job of the task may hold them. */
        if (task_job_busy(t))
                return -EBUSY;
        return ledger_open(dir_fd, t->branch, ret);
}

/* ---- The caller of a job ---- */

static void caller_tell(TaskBranchCaller *c, Task *t, int r, sd_bus_error *error, const TaskBranchResult *result) {
        task_branch_done_t done = c->done;

        c->done = NULL;
        if (done)
                done(t, r, error, result ?: &(TaskBranchResult) { .fd = -EBADF }, c->userdata);
}

static void caller_tell_stopping(TaskBranchCaller *c) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

        (void) sd_bus_error_set(&e, SD_BUS_ERROR_FAILED, "The daemon is stopping.");
        caller_tell(c, NULL, -ECANCELED, &e, NULL);
}

_printf_(5, 6)
static void caller_tell_error(TaskBranchCaller *c, Task *t, int r, const char *name, const char *fmt, ...) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        va_list ap;

        va_start(ap, fmt);
        if (name)
                (void) sd_bus_error_setfv(&e, name, fmt, ap);
        else {
                errno = -r;   /* for %m */
                (void) sd_bus_error_set_errnofv(&e, r, fmt, ap);
        }
        va_end(ap);
        caller_tell(c, t, r, &e, NULL);
}

static void caller_done(TaskBranchCaller *c) {
        if (c->free_userdata)
                c->free_userdata(c->userdata);
        *c = (TaskBranchCaller) {};
}

/* ---- Export ---- */

typedef struct ExportJob {
        LedgerRef ref;
        char format[8];
        int fd;                    /* the result */
        TaskBranchCaller caller;   /* told in done */
} ExportJob;

static void export_job_free(void *p) {
        ExportJob *j = p;

        if (!j)
                return;
        ledger_ref_done(&j->ref);
        safe_close(j->fd);
        caller_done(&j->caller);
        free(j);
}

static int export_job_run(void *p) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        ExportJob *j = p;
        int r;

        r = ledger_open(j->ref.dir_fd, j->ref.branch, &l);
        if (r < 0)
                return r;
        /* A memfd holds the export, so that the caller reads it at its own
         * pace and the daemon never blocks on a slow reader. */
        j->fd = memfd_create("agentfab-export", MFD_CLOEXEC);
        if (j->fd < 0)
                return -errno;
        r = streq(j->format, "bundle") ? ledger_export_bundle(l, j->fd) :
                streq(j->format, "mbox") ? ledger_export_mbox(l, j->fd) : ledger_export_diff(l, j->fd);
        if (r < 0)
                return r;
        if (lseek(j->fd, 0, SEEK_SET) < 0)
                return -errno;
        return 0;
}

static void on_export_done(Task *t, int r, void *p, void *userdata) {
        ExportJob *j = p;

        (void) userdata;
        if (!t)
                caller_tell_stopping(&j->caller);
        else if (r < 0)
                caller_tell_error(&j->caller, t, r, NULL, "Cannot export task '%s': %m", t->id);
        else
                caller_tell(&j->caller, t, 0, NULL, &(TaskBranchResult) { .fd = j->fd });
}

int task_branch_export(Task *t, const char *format, const TaskBranchCaller *caller, sd_bus_error *error) {
        ExportJob *j;
        int r;

        if (!streq(format, "bundle") && !streq(format, "mbox") && !streq(format, "diff"))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Unknown export format '%s': use bundle, mbox or diff.", format);
        if (!t->progress.checkpoint && !t->progress.head)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' has no commits yet.", t->id);

        j = calloc(1, sizeof(ExportJob));
        if (!j)
                return -ENOMEM;
        j->fd = -EBADF;
        (void) snprintf(j->format, sizeof(j->format), "%s", format);
        r = ledger_ref_init(&j->ref, t);
        if (r < 0) {
                export_job_free(j);
                return sd_bus_error_set_errnof(error, r, "Cannot open the ledger of task '%s': %m", t->id);
        }
        j->caller = *caller;
        r = task_job_enqueue(t, "export", export_job_run, on_export_done, export_job_free, j, NULL, NULL);
        if (r < 0) {
                j->caller = (TaskBranchCaller) {};   /* still the caller's */
                export_job_free(j);
                return r;
        }
        return 1;
}

int task_branch_base_commit(Task *t, char ret[static 41]) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        int r;

        r = task_branch_open(t, &l);
        if (r < 0)
                return r;
        return ledger_base(l, ret);
}

/* What the list of checkpoints follows from: the branch's tip and the last
 * acknowledged checkpoint, both set in memory only once the ledger holds
 * them (after the job that committed, reset or delivered). */
char *task_branch_checkpoints_key(const Task *t) {
        char *key;

        if (asprintf(&key, "%s:%s", strempty(t->progress.head), strempty(t->progress.checkpoint)) < 0)
                return NULL;
        return key;
}

void task_branch_checkpoints_set(Task *t, json_object *list) {
        char *key = task_branch_checkpoints_key(t);

        if (!key)
                return;         /* The next GetAll() reads it. */
        json_object_put(t->checkpoints);
        t->checkpoints = json_object_get(list);
        free(t->checkpoints_key);
        t->checkpoints_key = key;
}

int task_branch_checkpoints(Task *t, json_object **ret) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_free_ char *key = NULL;
        json_object *list = NULL;
        int r;

        /* Every GetAll() asks for this: the list is read once for each tip
         * of the branch, not once a call, which would open the ledger on the
         * loop hundreds of times a second under load. */
        key = task_branch_checkpoints_key(t);
        if (!key)
                return -ENOMEM;
        if (t->checkpoints && streq_ptr(t->checkpoints_key, key)) {
                *ret = json_object_get(t->checkpoints);
                return 0;
        }

        /* Read on the loop: a walk of the branch's commits, not of the
         * tree. While a job works on the ledger, the list read last. */
        r = task_branch_open(t, &l);
        if (r == -EBUSY && t->checkpoints) {
                *ret = json_object_get(t->checkpoints);
                return 0;
        }
        if (r < 0)
                return r;
        r = ledger_checkpoints(l, &list);
        if (r < 0)
                return r;
        json_object_put(t->checkpoints);
        t->checkpoints = json_object_get(list);
        free(t->checkpoints_key);
        t->checkpoints_key = TAKE_PTR(key);
        *ret = list;
        return 0;
}

/* ---- ListCommits() ---- */

typedef struct CommitsJob {
        LedgerRef ref;
        json_object *list;         /* the result; NULL: no ledger yet */
        TaskBranchCaller caller;   /* told in done */
} CommitsJob;

static void commits_job_free(void *p) {
        CommitsJob *j = p;

        if (!j)
                return;
        ledger_ref_done(&j->ref);
        json_object_put(j->list);
        caller_done(&j->caller);
        free(j);
}

static int commits_job_run(void *p) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        CommitsJob *j = p;
        int r;

        r = ledger_open(j->ref.dir_fd, j->ref.branch, &l);
        if (r == -ENOENT)
                return 0;   /* no ledger yet: no commits */
        if (r < 0)
                return r;
        return ledger_commits(l, TASK_BRANCH_COMMITS_MAX, &j->list);
}

static void on_commits_done(Task *t, int r, void *p, void *userdata) {
        CommitsJob *j = p;

        (void) userdata;
        if (!t)
                caller_tell_stopping(&j->caller);
        else if (r < 0)
                caller_tell_error(&j->caller, t, r, NULL, "Cannot read the branch of task '%s': %m", t->id);
        else
                caller_tell(&j->caller, t, 0, NULL, &(TaskBranchResult) { .fd = -EBADF, .commits = j->list });
}

int task_branch_list_commits(Task *t, const TaskBranchCaller *caller, sd_bus_error *error) {
        CommitsJob *j;
        int r;

        j = calloc(1, sizeof(CommitsJob));
        if (!j)
                return -ENOMEM;
        r = ledger_ref_init(&j->ref, t);
        if (r == -ENOENT) {
                /* No task directory yet: no commits. */
                commits_job_free(j);
                return 0;
        }
        if (r < 0) {
                commits_job_free(j);
                return sd_bus_error_set_errnof(error, r, "Cannot read the branch of task '%s': %m", t->id);
        }
        j->caller = *caller;
        r = task_job_enqueue(t, "commits", commits_job_run, on_commits_done, commits_job_free, j, NULL, NULL);
        if (r < 0) {
                j->caller = (TaskBranchCaller) {};   /* still the caller's */
                commits_job_free(j);
                return r;
        }
        return 1;
}

/* ---- ResetTo() ---- */

/* Two jobs: the first finds the checkpoint, then the loop acknowledges it
 * in the state file, then the second resets the workspace and the branch.
 * Acknowledged first: should the reset itself fail or the daemon stop in
 * between, a resume makes the workspace match this checkpoint anyway. */
typedef struct ResetToJob {
        LedgerRef ref;
        char rev[41];
        uid_t uid;
        TaskBranchCaller caller;   /* told at the end */
        /* Results. */
        char found[41];
        unsigned found_step;
        char undone[41];
        bool ambiguous;
} ResetToJob;

static void reset_to_job_free(void *p) {
        ResetToJob *j = p;

        if (!j)
                return;
        ledger_ref_done(&j->ref);
        caller_done(&j->caller);
        free(j);
}

static int reset_to_find_run(void *p) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_json_ json_object *list = NULL;
        ResetToJob *j = p;
        size_t n = strlen(j->rev);
        char base[41];
        int r;

        r = ledger_open(j->ref.dir_fd, j->ref.branch, &l);
        if (r < 0)
                return r;
        r = ledger_base(l, base);
        if (r >= 0)
                r = ledger_checkpoints(l, &list);
        /* The tip that goes off the branch, for the journal: its objects stay. */
        if (r >= 0)
                r = ledger_head(l, j->undone);
        if (r < 0)
                return r;

        if (streq(j->rev, "base") || strneq(base, j->rev, n))
                memcpy(j->found, base, sizeof(j->found));
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *c = json_object_array_get_idx(list, i);
                const char *commit;
                uint64_t step;

                if (json_get_string(c, "commit", &commit) < 0 || json_get_uint64(c, "step", &step) < 0 ||
                    streq(j->rev, "base") || !strneq(commit, j->rev, n))
                        continue;
                if (j->found[0] && !streq(j->found, commit)) {
                        j->ambiguous = true;
                        return 0;
                }
                strncpy(j->found, commit, sizeof(j->found) - 1);
                j->found_step = (unsigned) step;
        }
        return 0;
}

static int reset_to_reset_run(void *p) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        ResetToJob *j = p;
        int r;

        r = ledger_open(j->ref.dir_fd, j->ref.branch, &l);
        if (r < 0)
                return r;
        return ledger_reset(l, j->found);
}

static void on_reset_to_reset_done(Task *t, int r, void *p, void *userdata) {
        ResetToJob *j = p;

        (void) userdata;
        if (!t)
                return caller_tell_stopping(&j->caller);
        if (r < 0)
                return caller_tell_error(&j->caller, t, r, NULL, "Cannot reset the workspace of task '%s' to %s: %m",
                                         t->id, j->found);
        audit_task_reset(t, j->uid, j->found_step, j->found, j->undone);
        task_changed(t, TASK_CHANGE_PROGRESS);
        caller_tell(&j->caller, t, 0, NULL, &(TaskBranchResult) { .fd = -EBADF, .step = j->found_step, .commit = j->found });
}

static void on_reset_to_found(Task *t, int r, void *p, void *userdata) {
        _cleanup_free_ char *text = NULL;
        ResetToJob *j = p, *k;

        (void) userdata;
        if (!t)
                return caller_tell_stopping(&j->caller);
        if (r < 0) {
                caller_tell_error(&j->caller, t, r, NULL, "Cannot read the checkpoints of task '%s': %m", t->id);
                return;
        }
        if (j->ambiguous) {
                caller_tell_error(&j->caller, t, -EINVAL, SD_BUS_ERROR_INVALID_ARGS,
                                                  "'%s' is ambiguous among the checkpoints of task '%s'.", j->rev, t->id);
                return;
        }
        if (!j->found[0]) {
                caller_tell_error(&j->caller, t, -EINVAL, SD_BUS_ERROR_INVALID_ARGS,
                                                  "'%s' is not the base nor a checkpoint of task '%s' (see its Checkpoints).",
                                                  j->rev, t->id);
                return;
        }
        /* Someone resumed it meanwhile: its workspace is the sandbox's now. */
        if (t->state != TASK_FAILED) {
                caller_tell_error(&j->caller, t, -EBUSY, AGENTFAB_ERROR_BAD_STATE, "Task '%s' is %s, not failed.",
                                                  t->id, task_state_to_string(t->state));
                return;
        }

        /* Resume goes on from here; the model hears what is gone. */
        TaskProgress *pr = &t->progress;
        if (free_and_strdup(&pr->checkpoint, j->found) < 0 || free_and_strdup(&pr->head, j->found) < 0) {
                caller_tell_error(&j->caller, t, -ENOMEM, NULL, "Out of memory.");
                return;
        }
        /* A delivery's record of its tests may be gone from the branch now. */
        pr->verified = false;
        /* And its review was of another tree. */
        pr->reviewed = false;
        if (j->found_step > 0)
                r = asprintf(&text, "A human (uid %u) reset the workspace and the branch to the checkpoint of step %u "
                             "(commit %s): everything you did after it is undone. Continue from there.",
                             (unsigned) j->uid, j->found_step, j->found);
        else
                r = asprintf(&text, "A human (uid %u) reset the workspace and the branch to where the task started "
                             "(commit %s): everything you did is undone. Start again from there.", (unsigned) j->uid, j->found);
        if (r < 0) {
                caller_tell_error(&j->caller, t, -ENOMEM, NULL, "Out of memory.");
                return;
        }
        r = conversation_append_user(t, text);
        if (r < 0) {
                caller_tell_error(&j->caller, t, r, NULL, "Cannot tell the model about the reset of task '%s': %m", t->id);
                return;
        }
        r = task_save(t);
        if (r < 0) {
                caller_tell_error(&j->caller, t, r, NULL, "Cannot save task '%s': %m", t->id);
                return;
        }

        /* The second job gets what the first found; this one is freed after us. */
        k = malloc(sizeof(ResetToJob));
        if (!k) {
                caller_tell_error(&j->caller, t, -ENOMEM, NULL, "Out of memory.");
                return;
        }
        *k = *j;
        j->ref = (LedgerRef) { .dir_fd = -EBADF };
        j->caller = (TaskBranchCaller) {};
        r = task_job_enqueue(t, "reset", reset_to_reset_run, on_reset_to_reset_done, reset_to_job_free, k, NULL, NULL);
        if (r < 0) {
                caller_tell_error(&k->caller, t, r, NULL, "Cannot reset the workspace of task '%s': %m", t->id);
                reset_to_job_free(k);
        }
}

int task_branch_reset_to(Task *t, const char *rev, uid_t uid, const TaskBranchCaller *caller, sd_bus_error *error) {
        ResetToJob *j;
        size_t n = rev ? strlen(rev) : 0;
        int r;

        /* A commit id of the branch, abbreviated to no less than 7 digits, or "base". */
        if (!rev || (!streq(rev, "base") && (n < 7 || n > 40 || strspn(rev, "0123456789abcdef") != n)))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "'%s' is neither 'base' nor a commit id of 7 to 40 lowercase hex digits.", strempty(rev));

        j = calloc(1, sizeof(ResetToJob));
        if (!j)
                return -ENOMEM;
        (void) snprintf(j->rev, sizeof(j->rev), "%s", rev);
        j->uid = uid;
        r = ledger_ref_init(&j->ref, t);
        if (r < 0) {
                reset_to_job_free(j);
                return sd_bus_error_set_errnof(error, r, "Cannot open the ledger of task '%s': %m", t->id);
        }
        j->caller = *caller;
        r = task_job_enqueue(t, "reset", reset_to_find_run, on_reset_to_found, reset_to_job_free, j, NULL, NULL);
        if (r < 0) {
                j->caller = (TaskBranchCaller) {};   /* still the caller's */
                reset_to_job_free(j);
                return r;
        }
        return 1;
}
