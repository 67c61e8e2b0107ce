/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

#include "bus-outbox.h"
#include "bus-polkit.h"
#include "manager.h"

/* The bus room: the daemon as its clients see it. org.agentfab.Factory1
 * (manager-dbus.c), org.agentfab.Task1 (task-dbus.c), the stream socket
 * (stream.c), who may see or act on a task (access.c), SubmitTask()'s
 * import (submission.c). It sits above the Manager: it calls the manager
 * and the rooms below, and hears of changes through the hooks it installs
 * (manager.h). Bus messages are parsed and answered here only. */

typedef struct StreamServer StreamServer;
typedef struct Submission Submission;

typedef enum BusKind {
        BUS_SYSTEM,
        BUS_SESSION,
} BusKind;

struct BusServer {
        Manager *manager;
        sd_bus *bus;
        BusKind kind;

        PolkitRegistry *polkit;
        /* Bus peers that passed polkit's org.agentfab.manage check: they may
         * see every task until they disconnect. */
        sd_bus_track *viewers;

        StreamServer *stream;

        /* The answers queued for each bus client, in bytes (bus-outbox.h),
         * and the clients dropped for going past their share: refused
         * until they disconnect. */
        BusOutbox outbox;
        sd_bus_track *dropped;
        uint64_t total_reported_usec;  /* when a refusal for MaxQueuedBytes= was last reported */

        /* SubmitTask() calls whose repository is being imported (submission.h). */
        Submission **submissions;
        size_t n_submissions;

        bool emitting;                 /* inside our own PropertiesChanged emission */
};

static inline BusServer *task_bus_server(Task *t) {
        Manager *m = manager_from_factory(t->factory);
        return m ? m->server : NULL;
}

/* Makes m's bus room and installs its hooks in m; m->server points to it. */
int bus_server_new(Manager *m, BusServer **ret);
BusServer *bus_server_free(BusServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(BusServer *, bus_server_free);

/* Connects to the bus (address NULL: the system or session bus), puts
 * every object in place, then claims the name. */
int bus_server_connect(BusServer *s, BusKind kind, const char *address);
/* What systemd passes: the stream socket (agentfab.socket) or, without
 * it, socket_path bound anew; and after a restart the sandboxes of its fd
 * store, handed to the manager. */
int bus_server_listen_stream(BusServer *s, const char *socket_path);

/* Sends an answer whose size grows with what the caller asks for
 * (bytes: its estimate), counted against the caller's share. */
int bus_server_send_counted(BusServer *s, sd_bus_message *reply, uint64_t bytes);

/* manager-dbus.c / task-dbus.c */
int manager_bus_register(BusServer *s);
int task_bus_register(BusServer *s);
void task_bus_emit_changes(BusServer *s, Task *t, unsigned what);
int manager_bus_send_state_changed(BusServer *s, Task *t);
void manager_bus_send_active_tasks(BusServer *s);
/* Adds a task SubmitTask() stored, announces it and answers the call;
 * takes t (freed if it cannot be added). */
int manager_submit_finish(BusServer *s, sd_bus_message *message, Task *t);

/* ListCaches() and ClearCache() (cache-dbus.c). */
int method_list_caches(sd_bus_message *message, void *userdata, sd_bus_error *error);
int method_clear_cache(sd_bus_message *message, void *userdata, sd_bus_error *error);

/* A task method's decision ("cancel", "approve", "reject", "pause",
 * "resume") for a caller already authorized, as the method makes it (a
 * request another host of a fleet took): 0 or a negative errno with error
 * set (task-dbus.c). */
int task_bus_apply(Task *t, const char *kind, const char *comment, uid_t uid, sd_bus_error *error);

/* GetSummary() (summary-dbus.c). */
int task_bus_reply_summary(Task *t, sd_bus_message *message);
