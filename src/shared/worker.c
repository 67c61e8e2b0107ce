/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "macro.h"
#include "worker.h"

struct Worker {
        sd_event_source *source;   /* the eventfd the thread writes when done */
        int fd;
        worker_run_t run;
        worker_done_t done;        /* NULL once detached */
        worker_free_t free_job;
        void *job;
        void *userdata;
        int result;                /* written by the thread before it signals */
};

static void worker_free(Worker *w) {
        sd_event_source_disable_unref(w->source);
        safe_close(w->fd);
        if (w->free_job)
                w->free_job(w->job);
        free(w);
}

/* A worker runs this many nice steps above the event loop (whose nice value
 * its thread inherits; 19 at most): on a busy
 * machine the loop's thread, which answers the bus and the stream socket,
 * gets a core before a thread that scans or hashes a tree, and before the
 * kernel's io-wq threads the worker's io_uring starts (they inherit it).
 * The loop waits for nothing a worker does while it runs, so the work only
 * takes longer when the cores are short. */
#define WORKER_NICE_STEPS 5

static void *worker_thread(void *p) {
        Worker *w = p;
        uint64_t one = 1;

        /* On Linux the nice value is the thread's own. Where the unit's
         * filter refuses it (EPERM), the thread runs as the loop does. */
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t) gettid());
        if (errno == 0)
                (void) setpriority(PRIO_PROCESS, (id_t) gettid(), MIN(nice + WORKER_NICE_STEPS, 19));
        w->result = w->run(w->job);
        /* The eventfd write is the only thing the loop waits for: the
         * result is visible to it once it reads the counter. */
        while (write(w->fd, &one, sizeof(one)) < 0 && errno == EINTR)
                ;
        return NULL;
}

static int on_worker_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Worker *w = userdata;
        uint64_t n;

        (void) s, (void) revents;
        if (read(fd, &n, sizeof(n)) < 0 && errno == EAGAIN)
                return 0;
        if (w->done)
                w->done(w, w->result, w->job, w->userdata);
        worker_free(w);
        return 0;
}

int worker_start(sd_event *e, worker_run_t run, worker_done_t done, worker_free_t free_job, void *job,
                 void *userdata, Worker **ret) {
        Worker *w;
        pthread_attr_t attr;
        pthread_t thread;
        sigset_t all, old;
        int r;

        w = calloc(1, sizeof(Worker));
        if (!w)
                return -ENOMEM;
        *w = (Worker) { .fd = -EBADF, .run = run, .done = done, .free_job = free_job, .job = job, .userdata = userdata };

        w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->fd < 0) {
                r = -errno;
                w->free_job = NULL;   /* the caller still owns the job */
                worker_free(w);
                return r;
        }
        r = sd_event_add_io(e, &w->source, w->fd, EPOLLIN, on_worker_done, w);
        if (r < 0) {
                w->free_job = NULL;
                worker_free(w);
                return r;
        }
        (void) sd_event_source_set_description(w->source, "worker");

        /* The thread takes no signals: they belong to the loop's signalfd. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&thread, &attr, worker_thread, w);
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                w->free_job = NULL;
                worker_free(w);
                return r;
        }

        if (ret)
                *ret = w;
        return 0;
}

void worker_detach(Worker *w) {
        if (w)
                w->done = NULL;
}
