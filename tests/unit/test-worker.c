/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <sys/resource.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "tap.h"
#include "worker.h"

typedef struct Job {
        int value;
        int *freed;
} Job;

static int job_run(void *p) {
        Job *j = p;
        usleep(50 * 1000);
        return j->value;
}

static void job_free(void *p) {
        Job *j = p;
        (*j->freed)++;
        free(j);
}

/* The worker's nice value, as it sees it. */
static int nice_run(void *p) {
        int *ret = p;
        errno = 0;
        *ret = getpriority(PRIO_PROCESS, (id_t) gettid());
        return errno == 0 ? 0 : -errno;
}

static int done_result = -1, done_calls = 0;

static void on_done(Worker *w, int r, void *job, void *userdata) {
        (void) w, (void) job;
        done_result = r;
        done_calls++;
        (void) userdata;
}

int main(void) {
        sd_event *e = NULL;
        Worker *w = NULL;
        int freed = 0, ticks = 0;
        Job *j;

        CHECK(sd_event_new(&e) >= 0, "event loop");

        /* The loop goes on while the job runs, and hears its result once. */
        j = calloc(1, sizeof(Job));
        *j = (Job) { .value = 7, .freed = &freed };
        CHECK(worker_start(e, job_run, on_done, job_free, j, e, &w) >= 0, "worker started");
        while (done_calls == 0 && sd_event_run(e, 10 * 1000) >= 0)
                ticks++;
        CHECK(done_result == 7 && done_calls == 1, "done() got the job's result once (%d)", done_result);
        CHECK_INT_EQ(freed, 1, "the job was freed after done()");
        CHECK(ticks >= 1, "the loop ran while the job worked (%d turns)", ticks);

        /* Detached: the owner went away; the job still finishes and is freed,
         * and nobody is called back. */
        done_calls = 0;
        j = calloc(1, sizeof(Job));
        *j = (Job) { .value = 9, .freed = &freed };
        CHECK(worker_start(e, job_run, on_done, job_free, j, e, &w) >= 0, "second worker started");
        worker_detach(w);
        for (int i = 0; i < 100 && freed < 2; i++)
                (void) sd_event_run(e, 20 * 1000);
        CHECK_INT_EQ(done_calls, 0, "a detached worker calls nobody back");
        CHECK_INT_EQ(freed, 2, "a detached worker's job is freed when the thread ends");

        /* A worker yields to the loop: its thread runs at a higher nice value
         * than the loop's, which keeps its own. */
        int loop_nice = getpriority(PRIO_PROCESS, (id_t) gettid()), *worker_nice = calloc(1, sizeof(int));
        done_calls = 0;
        CHECK(worker_start(e, nice_run, on_done, NULL, worker_nice, e, &w) >= 0, "third worker started");
        while (done_calls == 0 && sd_event_run(e, 10 * 1000) >= 0)
                ;
        CHECK(done_result == 0 && (*worker_nice == loop_nice + 5 || (loop_nice > 14 && *worker_nice == 19)),
              "the worker ran at nice %d, the loop at %d", *worker_nice, loop_nice);
        CHECK_INT_EQ(getpriority(PRIO_PROCESS, (id_t) gettid()), loop_nice, "the loop's nice value is unchanged");
        free(worker_nice);

        sd_event_unref(e);
        return tap_done();
}
