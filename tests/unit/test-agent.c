/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent room under a Manager built here, with no bus, no sandbox and
 * no model: the manager starts the agents of queued tasks from its loop; an
 * agent that cannot work (no such model profile, no workspace to work in)
 * fails its task with a reason a person can act on, each state saved
 * before the bus room hears of it and in the order taken; a failed task has
 * no agent left, and the scheduler moves on to the next. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "fs-util.h"
#include "manager.h"
#include "string-util.h"
#include "tap.h"
#include "task-save.h"
#include "task-store.h"

static char dir[] = "/tmp/test-agent.XXXXXX";
static char repo[64];   /* in dir, never made */

#define HEARD_MAX 16
static struct {
        char id[16];
        TaskState state;
        bool saved;
} heard[HEARD_MAX];
static unsigned n_heard;

static void on_state_changed(Manager *m, Task *t, TaskState old_state) {
        Task *u = NULL;

        (void) old_state;
        if (n_heard >= HEARD_MAX)
                return;
        (void) snprintf(heard[n_heard].id, sizeof(heard[n_heard].id), "%s", t->id);
        heard[n_heard].state = t->state;
        heard[n_heard].saved = task_load(m->factory.tasks_fd, t->id, &u) >= 0 && u->state == t->state;
        task_free(u);
        n_heard++;
}

static const ManagerHooks recorder = {
        .task_state_changed = on_state_changed,
};

static Task *add_task(Manager *m, const char *id, const char *model) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = NULL;

        if (task_new(&t, id) < 0)
                abort();
        t->tasks_fd = m->factory.tasks_fd;
        t->owner = 1000;
        t->state = TASK_QUEUED;
        t->created_usec = t->updated_usec = 1700000000000000ULL + strtoul(id, NULL, 16);
        (void) task_spec_set_string(&t->spec, "repository", repo, &e);
        (void) task_spec_set_string(&t->spec, "goal", "Work on me", &e);
        if (model)
                (void) task_spec_set_string(&t->spec, "model", model, &e);
        if (task_create(t) < 0 || factory_add_task(&m->factory, t) < 0)
                abort();
        return t;
}

/* Runs the loop until both tasks are final, for at most 10 s. */
static void settle(Manager *m, Task *a, Task *b) {
        for (unsigned i = 0; i < 1000 && !(task_state_is_final(a->state) && task_state_is_final(b->state) &&
                                          !a->run && !b->run && !task_save_pending(a) && !task_save_pending(b)); i++)
                (void) sd_event_run(m->factory.event, 10 * 1000);
        /* A stopped agent is freed from the loop (agent_stop()). */
        for (unsigned i = 0; i < 10; i++)
                (void) sd_event_run(m->factory.event, 0);
}

static int heard_index(const char *id, TaskState state) {
        for (unsigned i = 0; i < n_heard; i++)
                if (streq(heard[i].id, id) && heard[i].state == state)
                        return (int) i;
        return -1;
}

int main(void) {
        _cleanup_free_ char *launcher = NULL;
        Manager m;
        Task *a, *b;
        int fd, r;

        if (!mkdtemp(dir))
                return 1;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 1;
        (void) snprintf(repo, sizeof(repo), "%s/no-repository", dir);

        manager_init(&m);
        m.hooks = &recorder;
        m.factory.tasks_fd = fd;
        m.factory.state_dir = strdup(dir);
        /* No launcher: nothing of this host's is touched. */
        if (asprintf(&launcher, "%s/no-launcher", dir) < 0 || !(m.factory.config.launcher_socket = strdup(launcher)))
                return 1;
        m.factory.config.max_active_tasks = 1;
        CHECK(sd_event_new(&m.factory.event) >= 0 && model_profiles_init(&m.factory.profiles) >= 0,
              "an event loop and the default model profile");

        a = add_task(&m, "00000000000a", "no-such-profile");
        b = add_task(&m, "00000000000b", NULL);
        r = manager_start_agents(&m);
        CHECK(r >= 0, "the agents are started from the loop: %d", r);
        CHECK(!a->run && !b->run, "not before the loop runs");

        settle(&m, a, b);

        CHECK(a->state == TASK_FAILED && strstr(a->reason, "no-such-profile"),
              "a task naming an unknown model profile fails, and says which: '%s'", a->reason);
        CHECK(b->state == TASK_FAILED && strstr(b->reason, "workspace") && strstr(b->reason, repo),
              "a task whose workspace cannot be made fails with a reason: %s '%s'",
              task_state_to_string(b->state), b->reason);
        CHECK(heard_index("00000000000b", TASK_PREPARING) >= 0 &&
              heard_index("00000000000b", TASK_PREPARING) < heard_index("00000000000b", TASK_FAILED),
              "its way was announced in order: preparing, then failed");
        CHECK(heard_index("00000000000a", TASK_FAILED) >= 0 &&
              heard_index("00000000000a", TASK_FAILED) < heard_index("00000000000b", TASK_PREPARING),
              "with MaxActiveTasks=1, the second started only once the first had failed");
        bool all_saved = n_heard > 0;
        for (unsigned i = 0; i < n_heard; i++)
                all_saved = all_saved && heard[i].saved;
        CHECK(all_saved, "every state was saved before it was announced (%u announced)", n_heard);
        CHECK(!a->run && !b->run && factory_active_tasks(&m.factory) == 0, "no agent is left");

        manager_done(&m);
        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
