/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Work on a task's ledger that may take long on a big repository (a
 * checkpoint, a reset, an export, a delivery) runs in a worker thread, so
 * that the event loop goes on answering the bus, the stream socket and
 * every other task. Each task has a queue of such jobs, run one at a time:
 * two of them never touch the same ledger at once (opening a ledger
 * removes the lock files a crash left, which would be those of a job still
 * at work), and a job that borrows the run's Ledger owns it while it runs.
 *
 * A job is run(job) in its thread, then done(t, r, job, userdata) on the
 * loop, then free_job(job). A job cancelled before it started is freed
 * without running; one cancelled while it runs finishes on its own data,
 * and the next job of the queue waits for it; done() is not called for
 * either. When the task is freed, done() is called with t NULL and
 * -ECANCELED for every job not yet run, so that a caller waiting for an
 * answer gets one. */

#include <stdbool.h>

#include "task.h"

typedef struct TaskJob TaskJob;

typedef int (*task_job_run_t)(void *job);
typedef void (*task_job_done_t)(Task *t, int r, void *job, void *userdata);
typedef void (*task_job_free_t)(void *job);

/* Queues the job; it starts at once if the task has no other. On error the
 * caller still owns job. ret may be NULL; the handle is valid until done()
 * is called or the job is cancelled. */
int task_job_enqueue(Task *t, const char *what, task_job_run_t run, task_job_done_t done, task_job_free_t free_job,
                     void *job, void *userdata, TaskJob **ret);

/* done() will not be called. NULL is fine. */
void task_job_cancel(TaskJob *j);

/* Whether a job of t is queued or running. */
bool task_job_busy(const Task *t);

/* From task_free(): see above. */
void task_jobs_free(Task *t);
