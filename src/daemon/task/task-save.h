/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A state change asked for over the bus (Cancel()) whose state file is
 * written and fsynced in a worker thread, so that the loop does not wait
 * for the disk: under load that is tens of milliseconds a call, for every
 * other caller too.
 *
 * The state file stays the single point of truth. Nothing changes in
 * memory, and nobody is told, until the file holds the new state: the
 * change is applied and the call answered when the thread is done. A crash
 * before that finds the old state or the new one, never a mix, and the
 * caller was told neither. Meanwhile the task's other writes of its state
 * file (task_save()) wait for the thread's first, so that the newest is the
 * last to land; if one came in between, or the task's state moved, the
 * change is made again on the loop from what memory holds then. */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "task.h"

/* The part of a task's progress that a step's end acknowledges
 * (agent-loop.c): the step, its checkpoint and the conversation messages
 * the conversation file holds from now on. */
typedef struct TaskProgressAck {
        unsigned step;
        unsigned messages;
        uint64_t conversation_size; /* set by task_save_progress_async() from append_size */
        unsigned malformed;
        bool set_checkpoint;       /* a commit was made: checkpoint and head move */
        char *checkpoint;
        char *head;
        bool finished;
        bool set_summary;
        char *summary;             /* with set_summary */
        bool set_plan;
        char *plan;                /* with set_plan */
        bool set_verified;         /* delivery's own test run is on the branch */
        bool verified;
        bool set_reviewed;         /* the review stage passed */
        bool reviewed;
        bool set_diff_shown;       /* the model was shown the diff of this tip, to review */
        char *diff_shown;
} TaskProgressAck;

void task_progress_ack_done(TaskProgressAck *a);

/* A commit was made: checkpoint and head move to it. -ENOMEM or 0. */
int task_progress_ack_set_checkpoint(TaskProgressAck *a, const char *commit);

typedef void (*task_save_done_t)(Task *t, int r, void *userdata);

/* A step's acknowledgement, written in a worker thread: append (the step's
 * conversation lines, append_size bytes, may be NULL) is appended to the
 * conversation file, then t's state file is written and fsynced with *ack
 * applied to its progress, the same order and the same two writes as on the
 * loop. Memory takes *ack only once the file holds it: when the thread is
 * done, or earlier when a write of the state file on the loop
 * (task_save(), through task_save_wait()) waits for this one, so that what
 * the loop writes then includes it. Then done(t, r, userdata) is called on
 * the loop (never if the task is freed first, nor after
 * task_save_forget()). Takes *ack and append in any case.
 *
 * Returns 1 if the write is under way in a thread. Where it cannot be (no
 * event loop, a write of t's state file already under way, a broken or
 * unsaved record), both writes are made here, on the loop, and their
 * result is returned (<= 0); done() is not called then. */
int task_save_progress_async(Task *t, sd_event *e, const char *conversation_file, TaskProgressAck *ack,
                             char *append, size_t append_size, task_save_done_t done, void *userdata);

/* done() of the acknowledgement or state change under way for userdata
 * will not be called: its caller went away. The write itself lands (or
 * fails) as it would. */
void task_save_forget(Task *t, void *userdata);

/* Told once when task_set_state_async()'s change is saved (r >= 0) or was
 * refused or failed (r < 0, error may say why); t is NULL when the task went
 * away before (r is -ECANCELED then). */
typedef void (*task_state_saved_t)(Task *t, int r, sd_bus_error *error, void *userdata);

/* Makes t's state `state`, as task_set_state() does. Returns 1 if the
 * write is under way in a thread: saved() is called once it is done, and
 * free_userdata(userdata) after that, or when it is dropped. Otherwise the
 * change was made (or refused) on the loop like task_set_state(), whose
 * result is returned (<= 0, error set), and userdata stays the caller's. */
int task_set_state_async(Task *t, sd_event *e, TaskState state, const char *reason, uid_t caller,
                         task_state_saved_t saved, void *userdata, void (*free_userdata)(void *),
                         sd_bus_error *error);

/* The same for t's agent (agent-loop.c), which moves it between the states
 * of work: done(t, r, userdata) is called on the loop once the write is
 * done, with r 0 when file and memory hold the change, negative when the
 * write failed (nothing changed), -ESTALE when the state moved meanwhile (a
 * Pause(), a Cancel(), written on the loop after this): the change is then
 * not made, and the agent looks at the task again. Returns 1 if under way in
 * a thread; otherwise as task_set_state_async(), and done() is not called. */
int task_set_state_then(Task *t, sd_event *e, TaskState state, const char *reason, task_save_done_t done,
                        void *userdata, sd_bus_error *error);

/* Whether a state change of t is being written. */
bool task_save_pending(const Task *t);

/* Waits until the thread's write of t's state file, if any, has landed. */
void task_save_wait(Task *t);

/* From task_free(): the thread finishes on its own data; the caller is
 * told the task went away. */
void task_save_detach(Task *t);
