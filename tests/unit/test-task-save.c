/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A state change written in a worker thread (task-save.h): memory changes
 * only once the file holds the change; a write of the state file on the
 * loop meanwhile lands after the thread's, and the change is then made
 * again from memory, so that file and memory agree; a task freed meanwhile
 * leaves the thread to finish alone. The same for a step's acknowledgement
 * (task_save_progress_async()): conversation lines, then the state file;
 * memory takes the step when the file has it, or when a write on the loop
 * waits for it. The agent's own moves between states of work
 * (task_set_state_then()): done() hears of each, and a move overtaken by a
 * Pause() or a Cancel() is not made again over it. No bus, no root. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conversation.h"
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

        CHECK_ERRNO(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled by uid 1000", 1000, NULL, NULL, NULL, &e), 1,
                    "a cancel is written in a thread");
        CHECK(t->state == TASK_QUEUED && task_save_pending(t), "memory keeps the old state until the file has the new one");
        CHECK(settle(t), "the write ends");
        CHECK(t->state == TASK_CANCELLED && streq_ptr(t->reason, "Cancelled by uid 1000"), "then memory has the new state");
        u = load("00000000000a");
        CHECK(u && u->state == TASK_CANCELLED && streq_ptr(u->reason, "Cancelled by uid 1000"), "and so has the file");

        CHECK(task_set_state_async(t, event, TASK_CANCELLED, NULL, 1000, NULL, NULL, NULL, &e) < 0 &&
              sd_bus_error_has_name(&e, AGENTFAB_ERROR_BAD_STATE) && !task_save_pending(t),
              "a change the state machine refuses is refused at once, on the loop");
        sd_bus_error_free(&e);
}

static void test_save_in_between(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000000b"), *u = NULL;

        CHECK_ERRNO(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled", 1000, NULL, NULL, NULL, &e), 1, "a cancel under way");
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

        CHECK_ERRNO(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled", 1000, NULL, NULL, NULL, &e), 1, "a cancel under way");
        CHECK(task_set_state(t, TASK_PREPARING, NULL, UID_INVALID, &e) >= 0, "the task is started meanwhile");
        CHECK(settle(t), "the write ends");
        u = load("00000000000c");
        CHECK(t->state == TASK_CANCELLED && u && u->state == TASK_CANCELLED, "the cancel applies to the started task");
        CHECK(task_set_state_async(t, event, TASK_FAILED, NULL, 1000, NULL, NULL, NULL, &e) < 0, "a final state stays");
        sd_bus_error_free(&e);
}

static void test_freed(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = make_task("00000000000d");
        _cleanup_(task_freep) Task *u = NULL;

        CHECK_ERRNO(task_set_state_async(t, event, TASK_CANCELLED, "Cancelled", 1000, NULL, NULL, NULL, &e), 1, "a cancel under way");
        t = task_free(t);
        /* The thread ends on its own data; the loop frees the job. */
        for (unsigned i = 0; i < 100; i++)
                (void) sd_event_run(event, 10 * 1000);
        u = load("00000000000d");
        CHECK(u && IN_SET(u->state, TASK_QUEUED, TASK_CANCELLED), "a task freed meanwhile: the file has one state or the other");
}

/* ---- A step's acknowledgement ---- */

static int n_done = 0, last_r = 1;

static void on_done(Task *t, int r, void *userdata) {
        (void) t;
        if (userdata == &n_done)
                n_done++;
        last_r = r;
}

static TaskProgressAck make_ack(unsigned step, const char *commit) {
        return (TaskProgressAck) {
                .step = step,
                .messages = step * 2,
                .set_checkpoint = true,
                .checkpoint = strdup(commit),
                .head = strdup(commit),
        };
}

static char *conversation(const char *id) {
        _cleanup_close_ int fd = openat(tasks_fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *text = NULL;
        if (fd < 0 || read_file_at(fd, "conversation.jsonl", 1 << 20, &text, NULL) < 0)
                return NULL;
        return text;
}

static void test_progress_plain(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000001a"), *u = NULL;
        _cleanup_free_ char *conv = NULL;
        TaskProgressAck ack = make_ack(1, "1111111111111111111111111111111111111111");

        n_done = 0;
        CHECK_ERRNO(task_save_progress_async(t, event, "conversation.jsonl", &ack, strdup("{\"a\":1}\n{\"b\":2}\n"), 16,
                                             on_done, &n_done), 1, "a step's acknowledgement is written in a thread");
        CHECK(!ack.checkpoint && !ack.head, "and it took the acknowledgement");
        CHECK(t->progress.step == 0 && !t->progress.checkpoint && task_save_pending(t),
              "memory keeps the old step until the file has the new one");
        CHECK(settle(t), "the write ends");
        CHECK(n_done == 1 && last_r >= 0, "done() is called once, with success");
        CHECK(t->progress.step == 1 && t->progress.messages == 2 &&
              streq_ptr(t->progress.checkpoint, "1111111111111111111111111111111111111111") &&
              streq_ptr(t->progress.head, t->progress.checkpoint), "then memory has the step");
        u = load("00000000001a");
        CHECK(u && u->progress.step == 1 && u->progress.messages == 2 &&
              streq_ptr(u->progress.checkpoint, "1111111111111111111111111111111111111111"), "and so has the file");
        conv = conversation("00000000001a");
        CHECK(streq_ptr(conv, "{\"a\":1}\n{\"b\":2}\n"), "after the conversation lines it acknowledges");
        CHECK(t->progress.conversation_size == 16 && u && u->progress.conversation_size == 16,
              "memory and file know the conversation's acknowledged size");
}

static void append_raw(const char *id, const char *text) {
        _cleanup_close_ int fd = openat(tasks_fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0 && append_file_at(fd, "conversation.jsonl", text, strlen(text), 0600) >= 0, "appended: %s", text);
}

/* A person's words (a decision, a reset, an amendment) join the
 * conversation where the acknowledged messages end: lines of a step the
 * state file never acknowledged are cut first. The state file says where
 * that is; one from before it said is read once. */
static void test_append_user(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000003a");
        _cleanup_free_ char *conv = NULL, *conv2 = NULL, *conv3 = NULL;
        TaskProgressAck ack = make_ack(1, "1111111111111111111111111111111111111111");
#define USER "{\"role\":\"user\",\"content\":\"go on\"}\n"
        const char *user = USER;

        n_done = 0;
        CHECK(task_save_progress_async(t, event, "conversation.jsonl", &ack, strdup("{\"a\":1}\n{\"b\":2}\n"), 16,
                                       on_done, &n_done) == 1 && settle(t), "two messages acknowledged");
        append_raw("00000000003a", "{\"torn\":1}\n{\"to");
        CHECK_ERRNO(conversation_append_user(t, "go on"), 0, "a person's words are added");
        conv = conversation("00000000003a");
        CHECK(streq_ptr(conv, "{\"a\":1}\n{\"b\":2}\n" USER), "after the acknowledged lines, the rest cut: %s", strempty(conv));
        CHECK(t->progress.messages == 3 && t->progress.conversation_size == 16 + strlen(user), "memory counts them");

        /* A state file of before: the size is not known, and counted. */
        t->progress.conversation_size = 0;
        append_raw("00000000003a", "{\"unacknowledged\":1}\n");
        CHECK_ERRNO(conversation_append_user(t, "go on"), 0, "without the size, the lines are counted");
        conv2 = conversation("00000000003a");
        CHECK(streq_ptr(conv2, "{\"a\":1}\n{\"b\":2}\n" USER USER), "and the rest cut: %s", strempty(conv2));
        CHECK(t->progress.messages == 4 && t->progress.conversation_size == 16 + 2 * strlen(user), "the size is known again");

        /* A file that does not agree with the state file is not written to. */
        t->progress.conversation_size += 3;
        CHECK_ERRNO(conversation_append_user(t, "go on"), -EBADMSG, "a file shorter than the state file says: -EBADMSG");
        t->progress.conversation_size -= 4;
        CHECK_ERRNO(conversation_append_user(t, "go on"), -EBADMSG, "a size that ends inside a line: -EBADMSG");
        conv3 = conversation("00000000003a");
        CHECK(streq_ptr(conv3, conv2), "and the file is as it was");
#undef USER
}

static void test_progress_save_in_between(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000001b"), *u = NULL;
        TaskProgressAck ack = make_ack(3, "3333333333333333333333333333333333333333");

        n_done = 0;
        t->progress.summary = strdup("kept");
        CHECK_ERRNO(task_save_progress_async(t, event, "conversation.jsonl", &ack, NULL, 0, on_done, &n_done), 1,
                    "an acknowledgement under way");
        /* The loop writes the task meanwhile, with a change of its own. */
        t->progress.tokens = 42;
        CHECK(task_save(t) >= 0, "a save on the loop waits for the thread's write");
        CHECK(t->progress.step == 3 && streq_ptr(t->progress.checkpoint, "3333333333333333333333333333333333333333"),
              "and memory has the step before that save writes it");
        u = load("00000000001b");
        CHECK(u && u->progress.step == 3 && u->progress.tokens == 42 && streq_ptr(u->progress.summary, "kept"),
              "so the file has both, and what the acknowledgement leaves alone");
        CHECK(settle(t) && n_done == 1 && last_r >= 0 && t->progress.step == 3, "done() follows, nothing applied twice");
}

static void test_progress_forget(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000001c"), *u = NULL;
        TaskProgressAck ack = make_ack(2, "2222222222222222222222222222222222222222");

        n_done = 0;
        ack.set_summary = true;
        ack.summary = strdup("done");
        CHECK_ERRNO(task_save_progress_async(t, event, "conversation.jsonl", &ack, NULL, 0, on_done, &n_done), 1,
                    "an acknowledgement under way");
        task_save_forget(t, &n_done);
        CHECK(settle(t) && n_done == 0, "its caller went away: done() is not called");
        u = load("00000000001c");
        CHECK(t->progress.step == 2 && streq_ptr(t->progress.summary, "done") && u && u->progress.step == 2 &&
              streq_ptr(u->progress.summary, "done"), "the step lands all the same, in the file and in memory");
}

static void test_progress_fails(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000001d"), *u = NULL;
        _cleanup_close_ int fd = openat(tasks_fd, "00000000001d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        TaskProgressAck ack = make_ack(5, "5555555555555555555555555555555555555555");

        n_done = 0;
        /* The conversation cannot be appended to: a directory in its place. */
        CHECK(fd >= 0 && mkdirat(fd, "conversation.jsonl", 0700) >= 0, "a conversation file that cannot be written");
        CHECK_ERRNO(task_save_progress_async(t, event, "conversation.jsonl", &ack, strdup("{}\n"), 3, on_done, &n_done), 1,
                    "an acknowledgement under way");
        CHECK(settle(t) && n_done == 1 && last_r < 0, "done() hears of the failure");
        u = load("00000000001d");
        CHECK(t->progress.step == 0 && !t->progress.checkpoint && u && u->progress.step == 0,
              "nothing acknowledged: not in memory, not in the file");
}

static void test_progress_here(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000001e"), *u = NULL;
        _cleanup_free_ char *conv = NULL;
        TaskProgressAck ack = make_ack(4, "4444444444444444444444444444444444444444");

        n_done = 0;
        CHECK_ERRNO(task_save_progress_async(t, NULL, "conversation.jsonl", &ack, strdup("{}\n"), 3, on_done, &n_done), 0,
                    "without an event loop the acknowledgement is written at once");
        u = load("00000000001e");
        conv = conversation("00000000001e");
        CHECK(n_done == 0 && t->progress.step == 4 && u && u->progress.step == 4 && streq_ptr(conv, "{}\n"),
              "memory, file and conversation have it; done() is not called");
}

static void test_progress_freed(void) {
        Task *t = make_task("00000000001f");
        _cleanup_(task_freep) Task *u = NULL;
        TaskProgressAck ack = make_ack(6, "6666666666666666666666666666666666666666");

        n_done = 0;
        CHECK_ERRNO(task_save_progress_async(t, event, "conversation.jsonl", &ack, strdup("{}\n"), 3, on_done, &n_done), 1,
                    "an acknowledgement under way");
        t = task_free(t);
        for (unsigned i = 0; i < 100; i++)
                (void) sd_event_run(event, 10 * 1000);
        u = load("00000000001f");
        CHECK(n_done == 0 && u && IN_SET(u->progress.step, 0u, 6u), "a task freed meanwhile: the file has one step or the other");
}

/* ---- The agent's own moves (task_set_state_then()) ---- */

static void test_then_plain(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000002a"), *u = NULL;

        n_done = 0, last_r = 1;
        CHECK_ERRNO(task_set_state_then(t, event, TASK_PREPARING, NULL, on_done, &n_done, &e), 1,
                    "the agent's move to preparing is written in a thread");
        CHECK(t->state == TASK_QUEUED && task_save_pending(t) && n_done == 0, "memory keeps the old state meanwhile");
        CHECK(settle(t) && n_done == 1 && last_r == 0 && t->state == TASK_PREPARING, "then done() hears of it, memory has it");
        u = load("00000000002a");
        CHECK(u && u->state == TASK_PREPARING, "and so has the file");

        CHECK(task_set_state_then(t, event, TASK_SUCCEEDED, NULL, on_done, &n_done, &e) < 0 && n_done == 1 &&
              !task_save_pending(t), "a move the state machine refuses is refused at once; done() is not called");
        sd_bus_error_free(&e);
}

static void test_then_paused_meanwhile(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000002b"), *u = NULL;

        CHECK(task_set_state(t, TASK_PREPARING, NULL, UID_INVALID, &e) >= 0, "a task being prepared");
        n_done = 0, last_r = 1;
        CHECK_ERRNO(task_set_state_then(t, event, TASK_RUNNING, NULL, on_done, &n_done, &e), 1, "its move to running under way");
        /* Pause() comes meanwhile and is written on the loop, after it. */
        t->progress.paused_from = TASK_PREPARING;
        CHECK(task_set_state(t, TASK_PAUSED, "Paused", 1000, &e) >= 0, "the task is paused meanwhile");
        CHECK(settle(t) && n_done == 1 && last_r == -ESTALE, "done() hears that the state moved");
        u = load("00000000002b");
        CHECK(t->state == TASK_PAUSED && u && u->state == TASK_PAUSED,
              "the move is not made again over the pause: file and memory say paused");
        sd_bus_error_free(&e);
}

static void test_then_forgotten(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000002c"), *u = NULL;

        CHECK(task_set_state(t, TASK_PREPARING, NULL, UID_INVALID, &e) >= 0, "a task being prepared");
        n_done = 0;
        CHECK_ERRNO(task_set_state_then(t, event, TASK_RUNNING, NULL, on_done, &n_done, &e), 1, "its move to running under way");
        task_save_forget(t, &n_done);
        CHECK(task_set_state(t, TASK_CANCELLED, "Cancelled", 1000, &e) >= 0, "cancelled meanwhile, its agent gone");
        CHECK(settle(t) && n_done == 0, "done() is not called");
        u = load("00000000002c");
        CHECK(t->state == TASK_CANCELLED && u && u->state == TASK_CANCELLED, "the cancel stands");
        sd_bus_error_free(&e);
}

static void test_then_save_in_between(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(task_freep) Task *t = make_task("00000000002d"), *u = NULL;

        n_done = 0, last_r = 1;
        CHECK_ERRNO(task_set_state_then(t, event, TASK_PREPARING, NULL, on_done, &n_done, &e), 1, "a move under way");
        t->progress.tokens = 9;
        CHECK(task_save(t) >= 0, "the loop writes the task meanwhile, its state unchanged");
        CHECK(settle(t) && n_done == 1 && last_r == 0, "done() hears of success");
        u = load("00000000002d");
        CHECK(t->state == TASK_PREPARING && u && u->state == TASK_PREPARING && u->progress.tokens == 9,
              "the move is made again from memory: file and memory agree, the progress kept");
        sd_bus_error_free(&e);
}

static void test_progress_plan(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000002e"), *u = NULL;
        _cleanup_free_ char *conv = NULL;
        TaskProgressAck ack = { .messages = 3, .set_plan = true, .plan = strdup("1. read\n2. fix") };
        const char *line = "{\"role\":\"assistant\"}\n";

        n_done = 0, last_r = 1;
        CHECK_ERRNO(task_save_progress_async(t, event, "conversation.jsonl", &ack, strdup(line), strlen(line),
                                             on_done, &n_done), 1, "a plan's acknowledgement under way");
        CHECK(!t->progress.plan && t->progress.messages == 0, "memory has no plan until the file does");
        CHECK(settle(t) && n_done == 1 && last_r >= 0, "the write ends");
        u = load("00000000002e");
        conv = conversation("00000000002e");
        CHECK(streq_ptr(t->progress.plan, "1. read\n2. fix") && t->progress.messages == 3 && u &&
              streq_ptr(u->progress.plan, "1. read\n2. fix") && u->progress.messages == 3 &&
              streq_ptr(conv, line), "then memory, file and conversation have the plan");
}

/* The delivery's records (delivery.c, review-stage.c): a flag and the
 * checkpoint, nothing appended; the fields not set stay as they are. */
#define COMMIT "0123456789abcdef0123456789abcdef01234567"
static void test_progress_flags(void) {
        _cleanup_(task_freep) Task *t = make_task("00000000002f"), *u = NULL;
        TaskProgressAck ack = { .step = 4, .messages = 9, .set_verified = true, .verified = true, .set_reviewed = true,
                                .reviewed = true, .set_checkpoint = true, .checkpoint = strdup(COMMIT),
                                .head = strdup(COMMIT) };

        t->progress.plan = strdup("the plan");
        n_done = 0, last_r = 1;
        CHECK_ERRNO(task_save_progress_async(t, event, "conversation.jsonl", &ack, NULL, 0, on_done, &n_done), 1,
                    "a record of the verification under way");
        CHECK(!t->progress.verified && !t->progress.reviewed && !t->progress.checkpoint,
              "memory is not verified until the file is");
        CHECK(settle(t) && n_done == 1 && last_r >= 0, "the write ends");
        u = load("00000000002f");
        CHECK(t->progress.verified && t->progress.reviewed && streq_ptr(t->progress.checkpoint, COMMIT) &&
              t->progress.step == 4 && u && u->progress.verified && u->progress.reviewed &&
              streq_ptr(u->progress.head, COMMIT) && u->progress.messages == 9,
              "then memory and file are verified and reviewed, at the new checkpoint");
        CHECK(streq_ptr(t->progress.plan, "the plan") && u && streq_ptr(u->progress.plan, "the plan"),
              "the plan, not part of it, stays");
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
        test_progress_plain();
        test_progress_save_in_between();
        test_progress_forget();
        test_progress_fails();
        test_progress_here();
        test_progress_freed();
        test_then_plain();
        test_then_paused_meanwhile();
        test_then_forgotten();
        test_then_save_in_between();
        test_progress_plan();
        test_progress_flags();
        test_append_user();

        sd_event_unref(event);
        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
