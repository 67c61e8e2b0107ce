/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs-util.h"
#include "log.h"
#include "manager.h"
#include "task-save.h"
#include "task-store.h"
#include "worker.h"

struct TaskSave {
        /* The thread's, and read-only while it runs. */
        int dir_fd;
        char *text;
        /* Set by the thread when the file is written, for task_save_wait(). */
        pthread_mutex_t lock;
        pthread_cond_t written;
        bool finished;

        /* The loop's. */
        Task *task;                /* NULL once the task is gone */
        Worker *worker;
        sd_bus_message *message;
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
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->written);
        sd_bus_message_unref(s->message);
        free(s->reason);
        free(s);
}

static int task_save_run(void *p) {
        TaskSave *s = p;
        int r;

        r = write_file_atomic(s->dir_fd, TASK_STATE_FILE, s->text, strlen(s->text), 0600);

        pthread_mutex_lock(&s->lock);
        s->finished = true;
        pthread_cond_broadcast(&s->written);
        pthread_mutex_unlock(&s->lock);
        return r;
}

static void task_save_reply(TaskSave *s, int r, sd_bus_error *error) {
        if (!s->message)
                return;
        if (r >= 0)
                (void) sd_bus_reply_method_return(s->message, NULL);
        else if (sd_bus_error_is_set(error))
                (void) sd_bus_reply_method_error(s->message, error);
        else
                (void) sd_bus_reply_method_errnof(s->message, r, "Failed to save task '%s': %m", s->task->id);
}

static void on_task_save_done(Worker *w, int r, void *p, void *userdata) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        TaskSave *s = p;
        Task *t = s->task;

        (void) w, (void) userdata;
        t->pending_save = NULL;
        /* The scheduler passed the task over meanwhile. */
        if (t->manager)
                manager_schedule(t->manager);

        if (r < 0) {
                /* As task_set_state() does: nothing changed in memory. */
                (void) sd_bus_error_set_errnof(&error, r, "Failed to save task '%s': %m", t->id);
                task_save_reply(s, r, &error);
                return;
        }

        if (t->save_seq == s->seq && t->state == s->from && !t->progress_unsaved) {
                /* The file holds what memory held plus the change: apply it. */
                TaskState old = t->state;

                free(t->reason);
                t->reason = TAKE_PTR(s->reason);
                t->state = s->state;
                t->updated_usec = s->updated_usec;
                t->save_seq++;
                if (t->manager)
                        manager_task_state_changed(t->manager, t, old, s->caller);
                task_save_reply(s, 0, NULL);
                return;
        }

        /* Something else was written meanwhile (after this, as it waited),
         * or the state moved: the change is made again from what memory
         * holds now, and written on the loop. */
        if (t->state == s->state) {
                task_save_reply(s, 0, NULL);
                return;
        }
        r = task_set_state(t, s->state, s->reason, s->caller, &error);
        task_save_reply(s, r, &error);
}

int task_set_state_async(Task *t, sd_event *e, TaskState state, const char *reason, uid_t caller,
                         sd_bus_message *message, sd_bus_error *error) {
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
                .message = sd_bus_message_ref(message),
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
        t->pending_save = s;
        return 1;
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
}

void task_save_detach(Task *t) {
        if (!t->pending_save)
                return;
        if (t->pending_save->message)
                (void) sd_bus_reply_method_errorf(t->pending_save->message, SD_BUS_ERROR_FAILED,
                                                  "Task '%s' went away while its state was being saved.", t->id);
        t->pending_save->task = NULL;
        worker_detach(t->pending_save->worker);
        t->pending_save = NULL;
}
