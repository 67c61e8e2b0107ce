/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "factory.h"
#include "fs-util.h"
#include "log.h"
#include "string-util.h"
#include "task-save.h"
#include "task-store.h"
#include "worker.h"

struct TaskSave {
        /* The thread's, and read-only while it runs. */
        int dir_fd;
        char *text;
        const char *append_name;   /* a step's acknowledgement: its conversation lines first */
        char *append;
        size_t append_size;
        /* Set by the thread when the file is written, for task_save_wait(). */
        pthread_mutex_t lock;
        pthread_cond_t written;
        bool finished;
        int result;

        /* The loop's. */
        Task *task;                /* NULL once the task is gone */
        Worker *worker;
        /* Who hears of it when it is done, if anyone. */
        task_save_done_t done;
        void *userdata;
        /* A step's acknowledgement (task_save_progress_async()): what memory
         * takes once the file holds it. */
        bool progress;
        bool applied;
        TaskProgressAck ack;
        /* A state change (task_set_state_async(), task_set_state_then()). */
        bool redo;                 /* made again on the loop if something came in between */
        task_state_saved_t saved;  /* task_set_state_async()'s caller, told once */
        void *saved_userdata;
        void (*saved_free)(void *);
        TaskState from, state;
        char *reason;
        uid_t caller;
        uint64_t updated_usec;
        unsigned seq;              /* t->save_seq when the text was made */
};

static void task_save_free(void *p) {
        TaskSave *s = p;

        if (!s)
                return;
        safe_close(s->dir_fd);
        free(s->text);
        free(s->append);
        task_progress_ack_done(&s->ack);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->written);
        if (s->saved_free)
                s->saved_free(s->saved_userdata);
        free(s->reason);
        free(s);
}

void task_progress_ack_done(TaskProgressAck *a) {
        free(a->checkpoint);
        free(a->head);
        free(a->summary);
        free(a->plan);
        free(a->diff_shown);
        *a = (TaskProgressAck) {};
}

int task_progress_ack_set_checkpoint(TaskProgressAck *a, const char *commit) {
        a->set_checkpoint = true;
        if (free_and_strdup(&a->checkpoint, commit) < 0 || free_and_strdup(&a->head, commit) < 0)
                return -ENOMEM;
        return 0;
}

/* Swaps the acknowledged fields between memory and *a: once to make the
 * file's text, back again, and once more for good when the file has it. */
static void task_progress_ack_swap(TaskProgress *p, TaskProgressAck *a) {
#define SWAP(x, y) do { typeof(x) _t = (x); (x) = (y); (y) = _t; } while (0)
        SWAP(p->step, a->step);
        SWAP(p->messages, a->messages);
        SWAP(p->conversation_size, a->conversation_size);
        SWAP(p->malformed, a->malformed);
        SWAP(p->finished, a->finished);
        if (a->set_checkpoint) {
                SWAP(p->checkpoint, a->checkpoint);
                SWAP(p->head, a->head);
        }
        if (a->set_summary)
                SWAP(p->summary, a->summary);
        if (a->set_plan)
                SWAP(p->plan, a->plan);
        if (a->set_verified)
                SWAP(p->verified, a->verified);
        if (a->set_reviewed)
                SWAP(p->reviewed, a->reviewed);
        if (a->set_diff_shown)
                SWAP(p->diff_shown, a->diff_shown);
#undef SWAP
}

/* Both writes of a step's end, in this order: the conversation lines,
 * then the state file that acknowledges them. Each is on the disk before
 * the next begins (the lines fdatasync()ed, and their directory fsynced if
 * the file is new; the state file fsynced, renamed into place, its
 * directory fsynced), so that after a power cut the state file never
 * counts lines the conversation lacks. The step's commit is on the disk
 * already (ledger_checkpoint()); nothing is announced before this
 * returns. */
static int task_save_write(int dir_fd, const char *text, const char *append_name, const char *append, size_t append_size) {
        int r;

        if (append_name && append_size > 0) {
                r = append_file_at_sync(dir_fd, append_name, append, append_size, 0600);
                if (r < 0)
                        return r;
        }
        return write_file_atomic(dir_fd, TASK_STATE_FILE, text, strlen(text), 0600);
}

static int task_save_run(void *p) {
        TaskSave *s = p;
        int r;

        r = task_save_write(s->dir_fd, s->text, s->append_name, s->append, s->append_size);

        pthread_mutex_lock(&s->lock);
        s->result = r;
        s->finished = true;
        pthread_cond_broadcast(&s->written);
        pthread_mutex_unlock(&s->lock);
        return r;
}

/* Tells task_set_state_async()'s caller, once. */
static void task_save_tell(TaskSave *s, Task *t, int r, sd_bus_error *error) {
        task_state_saved_t saved = s->saved;

        s->saved = NULL;
        if (saved)
                saved(t, r, error, s->saved_userdata);
}

/* The file holds the acknowledgement: memory takes it. On the loop. */
static void task_save_apply(TaskSave *s) {
        if (!s->progress || s->applied || s->result < 0 || !s->task)
                return;
        task_progress_ack_swap(&s->task->progress, &s->ack);
        s->applied = true;
}

/* A state change's write is done (r): memory takes the change if the
 * file holds it. Returns the change's result. */
static int task_save_land_state(TaskSave *s, int r, sd_bus_error *error) {
        Task *t = s->task;

        if (r < 0)
                /* As task_set_state() does: nothing changed in memory. */
                return sd_bus_error_set_errnof(error, r, "Failed to save task '%s': %m", t->id);

        if (t->save_seq == s->seq && t->state == s->from && !t->progress_unsaved) {
                /* The file holds what memory held plus the change: apply it. */
                TaskState old = t->state;

                free(t->reason);
                t->reason = TAKE_PTR(s->reason);
                t->state = s->state;
                t->updated_usec = s->updated_usec;
                t->save_seq++;
                task_state_changed(t, old, s->caller);
                return 0;
        }

        /* Something else was written meanwhile (after this, as it waited),
         * or the state moved. A caller's change is made again from what
         * memory holds now, and written on the loop. The agent's is not,
         * once the state moved under it (a Pause(), a Cancel()): it looks
         * at the task again. */
        if (t->state == s->state)
                return 0;
        if (!s->redo && t->state != s->from)
                return -ESTALE;
        return task_set_state(t, s->state, s->reason, s->caller, error);
}

static void on_task_save_done(Worker *w, int r, void *p, void *userdata) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        TaskSave *s = p;
        Task *t = s->task;

        (void) w, (void) userdata;
        t->pending_save = NULL;
        /* The scheduler passed the task over meanwhile. */
        factory_schedule(t->factory);

        if (s->progress) {
                task_save_apply(s);
                if (s->done)
                        s->done(t, r, s->userdata);
                return;
        }

        /* Landing a final state stops the agent, which forgets its
         * callback here (task_save_forget()). */
        t->landing_save = s;
        r = task_save_land_state(s, r, &error);
        t->landing_save = NULL;
        task_save_tell(s, t, r, &error);
        if (s->done)
                s->done(t, r, s->userdata);
}

static int task_set_state_start(Task *t, sd_event *e, TaskState state, const char *reason, uid_t caller,
                                bool redo, task_save_done_t done, void *userdata, sd_bus_error *error,
                                task_state_saved_t saved, void *saved_userdata, void (*saved_free)(void *)) {
        TaskSave *s;
        int r;

        /* Whatever is not the plain case is done on the loop, as ever. */
        if (!e || t->broken || t->progress_unsaved || t->pending_save || !task_state_transition_allowed(t->state, state))
                return task_set_state(t, state, reason, caller, error);

        s = calloc(1, sizeof(TaskSave));
        if (!s)
                return -ENOMEM;
        *s = (TaskSave) {
                .dir_fd = -EBADF,
                .lock = PTHREAD_MUTEX_INITIALIZER,
                .written = PTHREAD_COND_INITIALIZER,
                .task = t,
                .done = done,
                .userdata = userdata,
                .redo = redo,
                .from = t->state,
                .state = state,
                .reason = strdup(strempty(reason)),
                .caller = caller,
                .updated_usec = now_usec(),
                .seq = t->save_seq,
        };
        if (!s->reason) {
                task_save_free(s);
                return -ENOMEM;
        }

        /* The text of the state file with the change, made from memory
         * now; memory itself changes once the file holds it. */
        TaskState old_state = t->state;
        char *old_reason = t->reason;
        uint64_t old_updated = t->updated_usec;
        t->state = s->state;
        t->reason = s->reason;
        t->updated_usec = s->updated_usec;
        s->text = task_state_text(t);
        t->state = old_state;
        t->reason = old_reason;
        t->updated_usec = old_updated;
        if (!s->text) {
                task_save_free(s);
                return -ENOMEM;
        }

        s->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (s->dir_fd < 0) {
                r = -errno;
                task_save_free(s);
                return sd_bus_error_set_errnof(error, r, "Failed to save task '%s': %m", t->id);
        }

        r = worker_start(e, task_save_run, on_task_save_done, task_save_free, s, NULL, &s->worker);
        if (r < 0) {
                task_save_free(s);
                return task_set_state(t, state, reason, caller, error);
        }
        /* Under way: saved_userdata is ours from here. */
        s->saved = saved;
        s->saved_userdata = saved_userdata;
        s->saved_free = saved_free;
        t->pending_save = s;
        return 1;
}

int task_set_state_async(Task *t, sd_event *e, TaskState state, const char *reason, uid_t caller,
                         task_state_saved_t saved, void *userdata, void (*free_userdata)(void *),
                         sd_bus_error *error) {
        return task_set_state_start(t, e, state, reason, caller, true, NULL, NULL, error,
                                    saved, userdata, free_userdata);
}

int task_set_state_then(Task *t, sd_event *e, TaskState state, const char *reason, task_save_done_t done,
                        void *userdata, sd_bus_error *error) {
        return task_set_state_start(t, e, state, reason, UID_INVALID, false, done, userdata, error,
                                    NULL, NULL, NULL);
}

/* Both writes on the loop, for when no thread can take them
 * (task_save_progress_async()). */
static int task_save_progress_here(Task *t, int dir_fd, const char *conversation_file, TaskProgressAck *ack,
                                   const char *append, size_t append_size) {
        int r;

        if (conversation_file && append_size > 0) {
                r = append_file_at_sync(dir_fd, conversation_file, append, append_size, 0600);
                if (r < 0) {
                        task_progress_ack_done(ack);
                        return r;
                }
        }
        /* Memory first, then the file: task_save() writes memory (and
         * refuses a broken record). If it fails, memory is ahead of the
         * file: the caller fails the task, which marks its progress
         * unsaved. */
        task_progress_ack_swap(&t->progress, ack);
        task_progress_ack_done(ack);
        return task_save(t);
}

int task_save_progress_async(Task *t, sd_event *e, const char *conversation_file, TaskProgressAck *ack,
                             char *append, size_t append_size, task_save_done_t done, void *userdata) {
        _cleanup_free_ char *lines = append;
        _cleanup_close_ int dir_fd = -EBADF;
        const TaskProgress *p = &t->progress;
        TaskSave *s;
        int r;

        /* The conversation's acknowledged size follows what is appended to
         * it (a size not known stays so: conversation_load() learns it). */
        if (!conversation_file)
                append_size = 0;
        ack->conversation_size = p->messages > 0 && p->conversation_size == 0 ? 0 : p->conversation_size + append_size;

        dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0) {
                task_progress_ack_done(ack);
                return -errno;
        }

        /* Whatever is not the plain case is done on the loop, as ever. */
        if (!e || t->broken || t->progress_unsaved || t->pending_save)
                return task_save_progress_here(t, dir_fd, conversation_file, ack, lines, append_size);

        s = calloc(1, sizeof(TaskSave));
        if (!s)
                return task_save_progress_here(t, dir_fd, conversation_file, ack, lines, append_size);
        *s = (TaskSave) {
                .dir_fd = -EBADF,
                .append_name = conversation_file,
                .append_size = append_size,
                .lock = PTHREAD_MUTEX_INITIALIZER,
                .written = PTHREAD_COND_INITIALIZER,
                .task = t,
                .progress = true,
                .done = done,
                .userdata = userdata,
        };

        /* The text of the state file with the acknowledgement, made from
         * memory now; memory itself takes it once the file holds it. */
        task_progress_ack_swap(&t->progress, ack);
        s->text = task_state_text(t);
        task_progress_ack_swap(&t->progress, ack);
        if (!s->text) {
                task_save_free(s);
                return task_save_progress_here(t, dir_fd, conversation_file, ack, lines, append_size);
        }
        s->dir_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (s->dir_fd < 0) {
                task_save_free(s);
                return task_save_progress_here(t, dir_fd, conversation_file, ack, lines, append_size);
        }
        s->append = lines;
        s->ack = *ack;

        r = worker_start(e, task_save_run, on_task_save_done, task_save_free, s, NULL, &s->worker);
        if (r < 0) {
                /* Back to the caller's hands, and written here. */
                s->append = NULL;
                s->ack = (TaskProgressAck) {};
                task_save_free(s);
                return task_save_progress_here(t, dir_fd, conversation_file, ack, lines, append_size);
        }
        TAKE_PTR(lines);
        *ack = (TaskProgressAck) {};
        t->save_seq++;
        t->pending_save = s;
        return 1;
}

void task_save_forget(Task *t, void *userdata) {
        if (!t)
                return;
        if (t->pending_save && t->pending_save->userdata == userdata)
                t->pending_save->done = NULL;
        if (t->landing_save && t->landing_save->userdata == userdata)
                t->landing_save->done = NULL;
}

bool task_save_pending(const Task *t) {
        return t->pending_save;
}

void task_save_wait(Task *t) {
        TaskSave *s = t->pending_save;

        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        while (!s->finished)
                pthread_cond_wait(&s->written, &s->lock);
        pthread_mutex_unlock(&s->lock);
        /* The file holds the step now: so does memory, before anything
         * else is written from it. */
        task_save_apply(s);
}

void task_save_detach(Task *t) {
        if (!t->pending_save)
                return;
        task_save_tell(t->pending_save, NULL, -ECANCELED, NULL);
        t->pending_save->task = NULL;
        worker_detach(t->pending_save->worker);
        t->pending_save = NULL;
}
