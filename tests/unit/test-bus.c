/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus room over a Manager built here, without a bus daemon: making it
 * installs its hooks in the manager and freeing it takes them out; one
 * access check decides who sees a task, for the bus and for the stream
 * socket alike: root and, on a session bus, the daemon's own user see
 * everything, an owner their own tasks, anyone else nothing without polkit
 * (which, with no bus to ask it on, says no). Then the stream socket itself
 * (as root only: its clients are told apart by their uid): the owner
 * follows a task's history, a stranger is refused with AccessDenied. */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "access.h"
#include "audit.h"
#include "bus-server.h"
#include "fs-util.h"
#include "manager.h"
#include "stream.h"
#include "string-util.h"
#include "tap.h"
#include "task-store.h"

static char dir[] = "/tmp/test-bus.XXXXXX";
static char socket_path[64];

static Task *add_task(Manager *m, const char *id, uid_t owner) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = NULL;

        if (task_new(&t, id) < 0)
                abort();
        t->tasks_fd = m->factory.tasks_fd;
        t->owner = owner;
        t->state = TASK_QUEUED;
        t->created_usec = t->updated_usec = 1700000000000000ULL;
        (void) task_spec_set_string(&t->spec, "repository", "/srv/repo", &e);
        (void) task_spec_set_string(&t->spec, "goal", "Show me", &e);
        if (task_create(t) < 0 || factory_add_task(&m->factory, t) < 0)
                abort();
        return t;
}

static void test_access(BusServer *bs, Task *t) {
        bs->kind = BUS_SYSTEM;
        CHECK(access_uid_may_view(bs, 0, NULL, t), "root sees a task");
        CHECK(access_uid_may_view(bs, 1000, NULL, t), "its owner sees it");
        CHECK(!access_uid_may_view(bs, 1001, NULL, t), "another user does not, without polkit");
        CHECK(!access_uid_may_view(bs, 1001, ":1.42", t), "nor does a bus peer that never passed org.agentfab.manage");
        CHECK(access_uid_sees_all(bs, 0, NULL) && !access_uid_sees_all(bs, 1000, NULL), "only root sees everything");

        bs->kind = BUS_SESSION;
        CHECK(access_uid_may_view(bs, getuid(), NULL, t) && access_uid_sees_all(bs, getuid(), NULL),
              "on a session bus, the daemon's own user sees everything");
        CHECK(getuid() == 1001 || !access_uid_may_view(bs, 1001, NULL, t), "and nobody else more than on the system bus");
        bs->kind = BUS_SYSTEM;
}

/* A child as uid: asks the stream socket for task id's events and exits 0
 * with the history and its end, 2 with AccessDenied, 1 otherwise. */
static int follow_as(uid_t uid, const char *id) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char buf[65536], req[128];
        size_t n = 0;
        int fd;

        if (setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                return 1;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        (void) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", socket_path);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return 1;
        (void) snprintf(req, sizeof(req), "{\"task\": \"%s\", \"stream\": \"events\"}\n", id);
        if (write(fd, req, strlen(req)) != (ssize_t) strlen(req))
                return 1;
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;

                if (poll(&p, 1, 5000) <= 0 || n >= sizeof(buf) - 1)
                        return 1;
                k = read(fd, buf + n, sizeof(buf) - 1 - n);
                if (k < 0)
                        return 1;
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = 0;
        if (strstr(buf, "\"org.freedesktop.DBus.Error.AccessDenied\""))
                return 2;
        return strstr(buf, "\"type\":\"submitted\"") && strstr(buf, "\"type\":\"end\"") ? 0 : 1;
}

static int run_child(Manager *m, uid_t uid, const char *id) {
        int status = 0;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0)
                _exit(follow_as(uid, id));
        /* The server answers from this loop while the child waits. */
        for (unsigned i = 0; i < 1000; i++) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
                (void) sd_event_run(m->factory.event, 10 * 1000);
        }
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, &status, 0);
        return -1;
}

static void test_stream(Manager *m, BusServer *bs, Task *t) {
        int r;

        if (geteuid() != 0) {
                tap_n++;
                printf("ok %u # SKIP the stream socket tells clients apart by uid: root needed to be two users\n", tap_n);
                tap_n++;
                printf("ok %u # SKIP the stream socket tells clients apart by uid: root needed to be two users\n", tap_n);
                return;
        }
        r = stream_server_new(&bs->stream, bs, socket_path, -EBADF);
        CHECK(r >= 0, "the stream socket listens: %d", r);
        (void) chmod(socket_path, 0666);

        /* A history to send: the audit appends to the events file and hands
         * the event to the stream server through the hooks. */
        audit_task_submitted(t, t->owner);

        r = run_child(m, 1000, t->id);
        CHECK_ERRNO(r, 0, "the owner follows the task's history to its end: %d", r);
        r = run_child(m, 1001, t->id);
        CHECK_INT_EQ(r, 2, "a stranger is refused with AccessDenied (no polkit to ask): %d", r);
}

int main(void) {
        BusServer *bs = NULL;
        Manager m;
        Task *t;
        int fd, r;

        if (!mkdtemp(dir) || chmod(dir, 0711) < 0)
                return 1;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 1;
        (void) snprintf(socket_path, sizeof(socket_path), "%s/stream", dir);

        manager_init(&m);
        m.factory.tasks_fd = fd;
        m.factory.state_dir = strdup(dir);
        CHECK(sd_event_new(&m.factory.event) >= 0, "an event loop");

        r = bus_server_new(&m, &bs);
        CHECK(r >= 0 && m.server == bs && m.hooks && bs->manager == &m, "the bus room installs its hooks: %d", r);
        t = add_task(&m, "00000000000a", 1000);

        test_access(bs, t);
        CHECK_INT_EQ(manager_unfinished_tasks_of(&m, 1000), 1, "no submission importing: the owner's one task");
        /* With no connection, a change of state is announced to nobody, and
         * that is no error. */
        sd_bus_error e = SD_BUS_ERROR_NULL;
        CHECK(task_set_state(t, TASK_CANCELLED, "Cancelled by uid 1000", 1000, &e) >= 0 && t->state == TASK_CANCELLED,
              "a change of state with no bus connected: %s", e.message ?: "ok");
        sd_bus_error_free(&e);

        test_stream(&m, bs, t);

        bs = bus_server_free(bs);
        CHECK(!m.hooks && !m.server, "freeing the bus room takes its hooks out of the manager");
        manager_done(&m);
        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
