/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A state change written in a worker thread (task-save.h): memory changes
 * only once the file holds the change; a write of the state file on the
 * loop meanwhile lands after the thread's, and the change is then made
 * again from memory, so that file and memory agree; a task freed meanwhile
 * leaves the thread to finish alone. No bus, no root. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "tap.h"
#include "task-save.h"
#include "task-store.h"
#include "task.h"

static int tasks_fd = -1;
static sd_event *event = NULL;

static Task *make_task(const char *id) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = NULL;

        if (task_new(&t, id) < 0)
                abort();
        t->tasks_fd = tasks_fd;
        t->owner = 1000;
        t->state = TASK_QUEUED;
        t->created_usec = t->updated_usec = 1700000000000000ULL;
        task_spec_set_string(&t->spec, "repository", "/srv/repo", &e);
        task_spec_set_string(&t->spec, "goal", "Save me", &e);
        if (task_create(t) < 0)
                abort();
        return t;
}

static Task *load(const char *id) {
        Task *u = NULL;
        if (task_load(tasks_fd, id, &u) < 0)
                return NULL;
        return u;
}

/* Runs the loop until t has no write under way, for at most 10 s. */
static bool settle(Task *t) {
        for (unsigned i = 0; i < 1000 && task_save_pending(t); i++)
                (void) sd_event_run(event, 10 * 1000);
        return !task_save_pending(t);
}

static void test_plain(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000000a"), *u = NULL;

        CHECK(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled by uid 1000", 1000, NULL, &e) == 1,
              "a cancel is written in a thread");
        CHECK(t->state == TASK_QUEUED && task_save_pending(t), "memory keeps the old state until the file has the new one");
        CHECK(settle(t), "the write ends");
        CHECK(t->state == TASK_CANCELLED && streq_ptr(t->reason, "Cancelled by uid 1000"), "then memory has the new state");
        u = load("00000000000a");
        CHECK(u && u->state == TASK_CANCELLED && streq_ptr(u->reason, "Cancelled by uid 1000"), "and so has the file");

        CHECK(task_set_state_async(t, event, TASK_CANCELLED, NULL, 1000, NULL, &e) < 0 &&
              sd_bus_error_has_name(&e, AGENTFAB_ERROR_BAD_STATE) && !task_save_pending(t),
              "a change the state machine refuses is refused at once, on the loop");
        sd_bus_error_free(&e);
}

static void test_save_in_between(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000000b"), *u = NULL;

        CHECK(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled", 1000, NULL, &e) == 1, "a cancel under way");
        /* The loop writes the task meanwhile, with progress of its own. */
        t->progress.step = 7;
        CHECK(task_save(t) >= 0, "a save on the loop waits for the thread's write");
        u = load("00000000000b");
        CHECK(u && u->state == TASK_QUEUED && u->progress.step == 7, "and lands after it");
        u = task_free(u);
        CHECK(settle(t), "the write ends");
        u = load("00000000000b");
        CHECK(t->state == TASK_CANCELLED && u && u->state == TASK_CANCELLED && u->progress.step == 7,
              "the cancel is made again from memory: file and memory agree, the progress kept");
}

static void test_state_moved(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000000c"), *u = NULL;

        CHECK(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled", 1000, NULL, &e) == 1, "a cancel under way");
        CHECK(task_set_state(t, TASK_PREPARING, NULL, UID_INVALID, &e) >= 0, "the task is started meanwhile");
        CHECK(settle(t), "the write ends");
        u = load("00000000000c");
        CHECK(t->state == TASK_CANCELLED && u && u->state == TASK_CANCELLED, "the cancel applies to the started task");
        CHECK(task_set_state_async(t, event, TASK_FAILED, NULL, 1000, NULL, &e) < 0, "a final state stays");
        sd_bus_error_free(&e);
}

static void test_freed(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = make_task("00000000000d");
        _cleanup_(task_freep) Task *u = NULL;

        CHECK(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled", 1000, NULL, &e) == 1, "a cancel under way");
        t = task_free(t);
        /* The thread ends on its own data; the loop frees the job. */
        for (unsigned i = 0; i < 100; i++)
                (void) sd_event_run(event, 10 * 1000);
        u = load("00000000000d");
        CHECK(u && IN_SET(u->state, TASK_QUEUED, TASK_CANCELLED), "a task freed meanwhile: the file has one state or the other");
}

int main(void) {
        char dir[] = "/tmp/test-task-save-XXXXXX";

        if (!mkdtemp(dir))
                return 1;
        tasks_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tasks_fd < 0 || sd_event_new(&event) < 0)
                return 1;

        test_plain();
        test_save_in_between();
        test_state_moved();
        test_freed();

        sd_event_unref(event);
        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
