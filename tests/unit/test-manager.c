/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The task room and the manager that wires it, with a Manager built here
 * and no bus: the registry finds what was added and refuses a second task
 * of one id; a change of state is on disk before anyone hears of it, the
 * index follows it, and the bus room's hook hears it once with the state
 * left; a task's audit events reach the bus room's hook as they reach the
 * events file; the unfinished tasks of an owner count the submissions the
 * bus room still imports. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs-util.h"
#include "manager.h"
#include "string-util.h"
#include "tap.h"
#include "task-save.h"
#include "task-store.h"

static char dir[] = "/tmp/test-manager.XXXXXX";

/* What the bus room would hear (ManagerHooks), recorded. */
static struct {
        unsigned state_changes;
        TaskState old_state, new_state;
        bool saved_first;          /* the state file held the new state when the hook ran */
        unsigned changes;
        unsigned what;
        unsigned events;
        char last_event[64];
        unsigned pending;
} heard;

static void on_state_changed(Manager *m, Task *t, TaskState old_state) {
        Task *u = NULL;

        heard.state_changes++;
        heard.old_state = old_state;
        heard.new_state = t->state;
        heard.saved_first = task_load(m->factory.tasks_fd, t->id, &u) >= 0 && u->state == t->state;
        task_free(u);
}

static void on_changed(Manager *m, Task *t, unsigned what) {
        (void) m, (void) t;
        heard.changes++;
        heard.what |= what;
}

static void on_event(Manager *m, Task *t, json_object *event) {
        json_object *type;

        (void) m, (void) t;
        heard.events++;
        if (json_object_object_get_ex(event, "type", &type))
                (void) snprintf(heard.last_event, sizeof(heard.last_event), "%s", json_object_get_string(type));
}

static unsigned on_pending(Manager *m, uid_t uid) {
        (void) m;
        return uid == 1000 || uid == UID_INVALID ? heard.pending : 0;
}

static const ManagerHooks recorder = {
        .task_state_changed = on_state_changed,
        .task_changed = on_changed,
        .task_event = on_event,
        .pending_tasks_of = on_pending,
};

static Task *make_task(Manager *m, const char *id, uid_t owner) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = NULL;

        if (task_new(&t, id) < 0)
                abort();
        t->tasks_fd = m->factory.tasks_fd;
        t->owner = owner;
        t->state = TASK_QUEUED;
        t->created_usec = t->updated_usec = 1700000000000000ULL;
        (void) task_spec_set_string(&t->spec, "repository", "/srv/repo", &e);
        (void) task_spec_set_string(&t->spec, "goal", "Wire me", &e);
        if (task_create(t) < 0)
                abort();
        return t;
}

static void test_registry(Manager *m) {
        Task *a = make_task(m, "00000000000b", 1000), *b = make_task(m, "00000000000a", 1001);
        Task *again = make_task(m, "00000000000c", 1000);
        int r;

        CHECK(factory_add_task(&m->factory, a) == 0 && factory_add_task(&m->factory, b) == 0, "two tasks added");
        CHECK(a->factory == &m->factory && a->tasks_fd == m->factory.tasks_fd, "an added task knows its factory");
        CHECK(manager_find_task(m, "00000000000a") == b && manager_find_task(m, "00000000000b") == a,
              "each is found by its id");
        CHECK(!manager_find_task(m, "00000000000z") && !manager_find_task(m, "../etc") && !manager_find_task(m, ""),
              "an unknown or malformed id finds nothing");
        CHECK(m->factory.tasks[0] == a && m->factory.tasks[1] == b, "ListTasks()' order is the order of adding");

        free(again->id);
        again->id = strdup("00000000000a");
        r = factory_add_task(&m->factory, again);
        CHECK_ERRNO(r, -EEXIST, "a second task of one id is refused: %d", r);
        task_free(again);
        CHECK_INT_EQ(m->factory.n_tasks, 2, "and not added");
}

static void test_state_changes(Manager *m) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = manager_find_task(m, "00000000000a");
        unsigned events = heard.events;
        int r;

        CHECK_INT_EQ(factory_active_tasks(&m->factory), 0, "no task at work");
        r = task_set_state(t, TASK_PREPARING, NULL, UID_INVALID, &e);
        CHECK(r >= 0, "queued -> preparing: %d", r);
        CHECK(heard.state_changes == 1 && heard.old_state == TASK_QUEUED && heard.new_state == TASK_PREPARING,
              "the bus room heard it once, with the state left: %u %s -> %s", heard.state_changes,
              task_state_to_string(heard.old_state), task_state_to_string(heard.new_state));
        CHECK(heard.saved_first, "saved, then announced");
        CHECK_INT_EQ(factory_active_tasks(&m->factory), 1, "the index follows the state");
        CHECK(heard.events == events + 1 && streq(heard.last_event, "state"),
              "the audit's state event reached the followers: %u '%s'", heard.events - events, heard.last_event);

        r = task_set_state(t, TASK_DELIVERING, NULL, UID_INVALID, &e);
        CHECK(r < 0 && sd_bus_error_has_name(&e, AGENTFAB_ERROR_BAD_STATE) && heard.state_changes == 1,
              "an illegal move is refused, and nobody hears of it: %s", e.message ?: "-");
        sd_bus_error_free(&e);

        heard.state_changes = 0;
        task_fail_unsaved(t, "The disk is full.", -ENOSPC);
        CHECK(t->state == TASK_FAILED && heard.state_changes == 1 && heard.new_state == TASK_FAILED,
              "a task failed in memory only is announced too");
        CHECK(strstr(t->reason, "could not be written"), "and says why: '%s'", t->reason);
        CHECK_INT_EQ(factory_active_tasks(&m->factory), 0, "it left the active tasks");

        task_changed(t, TASK_CHANGE_PROGRESS | TASK_CHANGE_FINDINGS);
        CHECK(heard.changes == 1 && heard.what == (TASK_CHANGE_PROGRESS | TASK_CHANGE_FINDINGS),
              "a change of properties reaches the bus room as it was said");
}

static void test_unfinished(Manager *m) {
        /* 00000000000b (uid 1000) is queued, 00000000000a (uid 1001) failed. */
        CHECK(manager_unfinished_tasks_of(m, 1000) == 1 && manager_unfinished_tasks_of(m, 1001) == 0,
              "unfinished tasks by owner");
        heard.pending = 2;
        CHECK(manager_unfinished_tasks_of(m, 1000) == 3 && manager_unfinished_tasks_of(m, UID_INVALID) == 3,
              "submissions still importing count against the quota: %u", manager_unfinished_tasks_of(m, 1000));
        heard.pending = 0;
}

int main(void) {
        Manager m;
        int fd;

        if (!mkdtemp(dir))
                return 1;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 1;

        manager_init(&m);
        m.hooks = &recorder;
        m.factory.tasks_fd = fd;
        m.factory.state_dir = strdup(dir);
        CHECK(sd_event_new(&m.factory.event) >= 0, "an event loop");

        test_registry(&m);
        test_state_changes(&m);
        test_unfinished(&m);

        manager_done(&m);
        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
