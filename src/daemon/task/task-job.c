/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "factory.h"
#include "log.h"
#include "task-job.h"
#include "worker.h"

struct TaskJob {
        Task *task;                /* NULL once the task is gone */
        TaskJob *next;
        char what[32];             /* for the log */
        task_job_run_t run;
        task_job_done_t done;
        task_job_free_t free_job;
        void *job;
        void *userdata;
        Worker *worker;            /* while it runs */
        bool cancelled;
};

static void task_job_free(void *p) {
        TaskJob *j = p;

        if (!j)
                return;
        if (j->free_job)
                j->free_job(j->job);
        free(j);
}

static int task_job_thread(void *p) {
        TaskJob *j = p;
        return j->run(j->job);
}

static void factory_count_job(Task *t, int delta) {
        if (t->factory)
                t->factory->n_jobs = (size_t) ((ssize_t) t->factory->n_jobs + delta);
}

static void task_jobs_kick(Task *t);

/* On the loop, when the thread is done: the next job may start, then the
 * caller hears of this one. The worker frees j after this returns. */
static void on_task_job_done(Worker *w, int r, void *p, void *userdata) {
        TaskJob *j = p;
        Task *t = j->task;

        (void) w, (void) userdata;
        assert(t && t->jobs == j);
        t->jobs = j->next;
        if (!t->jobs)
                t->jobs_tail = NULL;
        j->next = NULL;
        j->worker = NULL;
        factory_count_job(t, -1);

        task_jobs_kick(t);
        if (!j->cancelled)
                j->done(t, r, j->job, j->userdata);
        /* The agent waits for a quiet ledger before it starts (agent_advance()). */
        if (!t->jobs && t->run)
                task_jobs_idle(t);
}

static void task_jobs_kick(Task *t) {
        while (t->jobs && !t->jobs->worker) {
                TaskJob *j = t->jobs;
                int r;

                r = worker_start(t->factory->event, task_job_thread, on_task_job_done, task_job_free, j, NULL, &j->worker);
                if (r >= 0)
                        return;
                log_warning_errno(r, "Failed to start %s of task '%s': %m", j->what, t->id);
                t->jobs = j->next;
                if (!t->jobs)
                        t->jobs_tail = NULL;
                factory_count_job(t, -1);
                if (!j->cancelled)
                        j->done(t, r, j->job, j->userdata);
                task_job_free(j);
        }
}

int task_job_enqueue(Task *t, const char *what, task_job_run_t run, task_job_done_t done, task_job_free_t free_job,
                     void *job, void *userdata, TaskJob **ret) {
        TaskJob *j;

        assert(t && t->factory && run && done);

        j = calloc(1, sizeof(TaskJob));
        if (!j)
                return -ENOMEM;
        *j = (TaskJob) { .task = t, .run = run, .done = done, .free_job = free_job, .job = job, .userdata = userdata };
        (void) snprintf(j->what, sizeof(j->what), "%s", what);
        if (t->jobs_tail)
                t->jobs_tail->next = j;
        else
                t->jobs = j;
        t->jobs_tail = j;
        factory_count_job(t, +1);
        if (ret)
                *ret = j;
        /* Started from here: a failure to start calls done(), which the
         * caller must not see before it has its handle. Hence: the job at
         * the head only, and only if it is the only one. */
        if (t->jobs == j) {
                int r = worker_start(t->factory->event, task_job_thread, on_task_job_done, task_job_free, j, NULL,
                                     &j->worker);
                if (r < 0) {
                        t->jobs = t->jobs_tail = NULL;
                        factory_count_job(t, -1);
                        free(j);
                        if (ret)
                                *ret = NULL;
                        return r;
                }
        }
        return 0;
}

void task_job_cancel(TaskJob *j) {
        Task *t;

        if (!j)
                return;
        t = j->task;
        if (j->worker || !t) {
                j->cancelled = true;   /* it finishes; the queue waits for it */
                return;
        }
        for (TaskJob **p = &t->jobs, *prev = NULL; *p; prev = *p, p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        if (t->jobs_tail == j)
                                t->jobs_tail = prev;
                        break;
                }
        factory_count_job(t, -1);
        task_job_free(j);
}

bool task_job_busy(const Task *t) {
        return t && t->jobs;
}

void task_jobs_free(Task *t) {
        while (t->jobs) {
                TaskJob *j = t->jobs;

                t->jobs = j->next;
                j->next = NULL;
                j->task = NULL;
                factory_count_job(t, -1);
                if (j->worker) {
                        /* Finishes on its own data; freed when its thread ends. */
                        worker_detach(j->worker);
                        continue;
                }
                if (!j->cancelled)
                        j->done(NULL, -ECANCELED, j->job, j->userdata);
                task_job_free(j);
        }
        t->jobs_tail = NULL;
}
