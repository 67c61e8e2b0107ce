/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The per-task job queue (task-job.h): a task's jobs on its ledger run one
 * at a time, in order, in worker threads; a cancelled job that already
 * runs keeps the queue busy until it ends (two jobs on one ledger at once
 * could remove each other's lock files); jobs not yet run are answered
 * with -ECANCELED when the task goes away. No bus, no root. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "factory.h"
#include "tap.h"
#include "task-job.h"

static atomic_int running, max_running;
static char order[16];
static size_t n_order;
static int done_count, cancelled_count;

typedef struct Job {
        char name;
        unsigned sleep_ms;
        bool freed_check;
} Job;

static int job_run(void *p) {
        Job *j = p;
        int now = atomic_fetch_add(&running, 1) + 1;
        int m = atomic_load(&max_running);
        while (now > m && !atomic_compare_exchange_weak(&max_running, &m, now))
                ;
        usleep(j->sleep_ms * 1000);
        atomic_fetch_sub(&running, 1);
        return j->name;
}

static unsigned freed;
static void job_free(void *p) {
        freed++;
        free(p);
}

static void job_done(Task *t, int r, void *p, void *userdata) {
        Job *j = p;

        if (!t) {
                CHECK_ERRNO(r, -ECANCELED, "job %c answered with -ECANCELED when its task went away", j->name);
                cancelled_count++;
                return;
        }
        order[n_order++] = j->name;
        CHECK_INT_EQ(r, j->name, "job %c's result reaches its done()", j->name);
        done_count++;
}

static TaskJob *enqueue(Task *t, char name, unsigned sleep_ms) {
        Job *j = calloc(1, sizeof(Job));
        TaskJob *h = NULL;

        j->name = name;
        j->sleep_ms = sleep_ms;
        CHECK_ERRNO(task_job_enqueue(t, "test", job_run, job_done, job_free, j, NULL, &h), 0, "job %c queued", name);
        return h;
}

int main(void) {
        Factory m = {};
        Task *t = NULL;

        CHECK(sd_event_new(&m.event) >= 0, "an event loop");
        CHECK_ERRNO(task_new(&t, "0123456789ab"), 0, "a task");
        t->factory = &m;

        /* Four jobs, the second cancelled while it waits, the first while it runs. */
        TaskJob *a = enqueue(t, 'a', 100);
        TaskJob *b = enqueue(t, 'b', 10);
        (void) enqueue(t, 'c', 10);
        (void) enqueue(t, 'd', 10);
        CHECK(m.n_jobs == 4 && task_job_busy(t), "four jobs counted for the idle exit");
        task_job_cancel(b);
        CHECK_INT_EQ(m.n_jobs, 3, "a job cancelled before it ran is gone at once");
        task_job_cancel(a);
        for (int i = 0; i < 500 && task_job_busy(t); i++)
                (void) sd_event_run(m.event, 10 * 1000);
        CHECK(n_order == 2 && order[0] == 'c' && order[1] == 'd', "c, then d; a's done() not called, b never ran: '%.*s'",
              (int) n_order, order);
        CHECK_INT_EQ(atomic_load(&max_running), 1, "never two jobs of the task at once");
        CHECK(m.n_jobs == 0 && !task_job_busy(t), "the queue is empty");

        /* Jobs left when the task is freed: the running one finishes on
         * its own, the others are answered. */
        (void) enqueue(t, 'e', 50);
        (void) enqueue(t, 'f', 10);
        (void) enqueue(t, 'g', 10);
        t = task_free(t);
        CHECK_INT_EQ(cancelled_count, 2, "the two waiting jobs were answered: %i", cancelled_count);
        /* The detached one is freed by the loop when its thread ends. */
        for (int i = 0; i < 100 && freed < 7; i++)
                (void) sd_event_run(m.event, 10 * 1000);
        CHECK_INT_EQ(freed, 7, "every job freed once: %u", freed);
        sd_event_unref(m.event);
        return tap_done();
}
