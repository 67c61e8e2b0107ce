/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

/* A blocking job (a clone of a big repository, say) run in a thread of its
 * own, so that the event loop goes on serving the bus and other tasks. The
 * job owns everything it touches: when its owner goes away first
 * (worker_detach()), the thread still finishes on the job's own data, and
 * the job is freed then. */

typedef struct Worker Worker;

typedef int (*worker_run_t)(void *job);                                 /* in the thread */
typedef void (*worker_done_t)(Worker *w, int r, void *job, void *userdata);  /* on the loop */
typedef void (*worker_free_t)(void *job);

/* Starts run(job) in a new thread; done() is called on the loop with its
 * result, then the job is freed with free_job() and the worker with it. */
int worker_start(sd_event *e, worker_run_t run, worker_done_t done, worker_free_t free_job, void *job,
                 void *userdata, Worker **ret);

/* done() will not be called; the job is freed when the thread ends. */
void worker_detach(Worker *w);
