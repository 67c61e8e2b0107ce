/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "access.h"
#include "agentfab-bus.h"
#include "audit.h"
#include "bus-server.h"
#include "fleet-task-dbus.h"
#include "log.h"
#include "stream.h"
#include "string-util.h"
#include "submission.h"

/* ---- What the manager tells the bus (ManagerHooks) ---- */

static void on_task_state_changed(Manager *m, Task *t, TaskState old_state) {
        BusServer *s = m->server;

        task_bus_emit_changes(s, t, TASK_CHANGE_STATE);
        (void) manager_bus_send_state_changed(s, t);
        if (task_state_is_active(old_state) != task_state_is_active(t->state))
                manager_bus_send_active_tasks(s);
}

static void on_task_changed(Manager *m, Task *t, unsigned what) {
        task_bus_emit_changes(m->server, t, what);
}

static void on_task_event(Manager *m, Task *t, json_object *event) {
        if (m->server->stream)
                stream_server_task_event(m->server->stream, t, event);
}

static void on_task_output(Manager *m, Task *t, const char *data, size_t size) {
        if (m->server->stream)
                stream_server_task_output(m->server->stream, t, data, size);
}

static bool on_busy(Manager *m) {
        return m->server->n_submissions > 0 || polkit_registry_pending(m->server->polkit) > 0;
}

static bool on_followed(Manager *m) {
        return stream_server_clients(m->server->stream) > 0;
}

static unsigned on_pending_tasks_of(Manager *m, uid_t uid) {
        return submissions_of(m->server, uid);
}

/* Gives the name back first, so that new calls queue up for D-Bus
 * activation of the next instance, then answers whatever reached us before
 * that. The stream socket belongs to systemd: connections waiting in its
 * backlog start the next instance. */
static void on_going_idle(Manager *m) {
        BusServer *s = m->server;
        int r;

        if (!s->bus)
                return;
        r = sd_bus_release_name(s->bus, AGENTFAB_BUS_NAME);
        if (r < 0)
                log_warning_errno(r, "Failed to release bus name, ignoring: %m");
        while ((r = sd_bus_process(s->bus, NULL)) > 0)
                ;
        (void) sd_bus_flush(s->bus);
}

static const ManagerHooks bus_hooks = {
        .task_state_changed = on_task_state_changed,
        .task_changed = on_task_changed,
        .task_event = on_task_event,
        .task_output = on_task_output,
        .busy = on_busy,
        .followed = on_followed,
        .pending_tasks_of = on_pending_tasks_of,
        .going_idle = on_going_idle,
};

int bus_server_new(Manager *m, BusServer **ret) {
        BusServer *s;

        s = calloc(1, sizeof(BusServer));
        if (!s)
                return -ENOMEM;
        s->manager = m;
        m->server = s;
        m->hooks = &bus_hooks;
        *ret = s;
        return 0;
}

BusServer *bus_server_free(BusServer *s) {
        if (!s)
                return NULL;
        s->stream = stream_server_free(s->stream);
        s->polkit = polkit_registry_free(s->polkit);
        s->viewers = sd_bus_track_unref(s->viewers);
        s->dropped = sd_bus_track_unref(s->dropped);
        submissions_abandon(s);
        /* Its Ping() calls go first: their slots hold the bus. */
        bus_outbox_done(&s->outbox);
        sd_bus_flush_close_unref(s->bus);
        if (s->manager) {
                s->manager->hooks = NULL;
                s->manager->server = NULL;
        }
        free(s);
        return NULL;
}

/* ---- The connection ---- */

int bus_server_send_counted(BusServer *s, sd_bus_message *reply, uint64_t bytes) {
        return bus_outbox_send(&s->outbox, s->bus, reply, bytes);
}

/* A method call from a client with too much of its answers not seen taken
 * is refused before it is handled, whatever it asks: answered with more,
 * it would pile up further (bus-outbox.h). A client past its own share is
 * dropped: refused until it disconnects (dbus-daemon never gives its
 * unique name to another), since one that asks faster than it reads would
 * otherwise go past again as soon as it took a little, and each round
 * costs everybody the answers it is built. A refusal for the
 * whole bound is the others' doing as much as its own: it lasts only
 * while the whole is past, and is reported at most every 10 seconds. The
 * refusal is small. */
static int refuse_if_piling(BusServer *s, sd_bus_message *message) {
        const char *sender = sd_bus_message_get_sender(message);
        OutboxVerdict v;
        uint64_t queued, now = 0;
        bool first;
        uid_t uid = UID_INVALID;
        int r;

        if (!sender || !sd_bus_message_is_method_call(message, NULL, NULL))
                return 0;
        if (sd_bus_track_contains(s->dropped, sender))
                return sd_bus_reply_method_errorf(message, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                                  "This connection was dropped: it asked faster than it read its answers.") < 0 ? 0 : 1;

        v = bus_outbox_admit(&s->outbox, sender, &first);
        if (v == OUTBOX_ADMIT)
                return 0;

        queued = bus_outbox_bytes_of(&s->outbox, sender);
        /* Its uid is known from the calls that piled up (cached by
         * access.c): no bus round trip behind the queue. */
        if (v == OUTBOX_REFUSE_CLIENT) {
                r = sd_bus_track_add_sender(s->dropped, message);
                if (r < 0)
                        log_warning_errno(r, "Failed to remember dropped bus client '%s', ignoring: %m", sender);
                (void) bus_message_get_caller(message, &uid);
                audit_client_dropped("bus", sender, uid, queued, s->outbox.max_per_client, "MaxQueuedBytesPerClient");
        } else {
                (void) sd_event_now(s->manager->factory.event, CLOCK_MONOTONIC, &now);
                if (first && (s->total_reported_usec == 0 || now >= s->total_reported_usec + 10 * USEC_PER_SEC)) {
                        s->total_reported_usec = now;
                        (void) bus_message_get_caller(message, &uid);
                        audit_client_dropped("bus", sender, uid, s->outbox.total, s->outbox.max_total, "MaxQueuedBytes");
                }
        }
        (void) sd_bus_reply_method_errorf(message, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                          "%" PRIu64 " bytes of answers to this connection are not read yet; "
                                          "read them before calling again.", queued);
        return 1;
}

static int on_bus_message(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        BusServer *s = userdata;
        Manager *m = s->manager;

        (void) error;

        /* dbus-daemon went away (restarted, or the bus is gone): sd-bus does
         * not reconnect, and staying up would keep our name from ever coming
         * back, so callers would wait for D-Bus activation of a service that
         * is already running, for as long as a task keeps us busy. Exit with
         * a failure instead: systemd starts us again (Restart=on-failure) on
         * the new bus, and the tasks at work go on from their checkpoints, as
         * after any other end of the daemon. */
        if (sd_bus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected")) {
                log_error("Lost the connection to the bus, exiting to be started again.");
                (void) sd_notify(false, "STOPPING=1\nSTATUS=Lost the bus connection.");
                return sd_event_exit(m->factory.event, -ENOTCONN);
        }

        manager_touch(m);
        return refuse_if_piling(s, message);
}

int bus_server_connect(BusServer *s, BusKind kind, const char *address) {
        Manager *m = s->manager;
        int r;

        s->kind = kind;
        bus_outbox_init(&s->outbox, m->factory.config.max_queued_bytes_per_client, m->factory.config.max_queued_bytes);

        if (address) {
                r = sd_bus_new(&s->bus);
                if (r >= 0)
                        r = sd_bus_set_address(s->bus, address);
                if (r >= 0)
                        r = sd_bus_set_bus_client(s->bus, true);
                if (r >= 0)
                        r = sd_bus_start(s->bus);
        } else if (kind == BUS_SYSTEM)
                r = sd_bus_open_system(&s->bus);
        else
                r = sd_bus_open_user(&s->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the %s bus: %m", kind == BUS_SYSTEM ? "system" : "session");

        (void) sd_bus_set_description(s->bus, "agentfabd");

        r = sd_bus_add_filter(s->bus, NULL, on_bus_message, s);
        if (r < 0)
                return r;

        r = manager_bus_register(s);
        if (r < 0)
                return log_error_errno(r, "Failed to register D-Bus objects: %m");
        fleet_task_bus_register(s);
        r = task_bus_register(s);
        if (r < 0)
                return log_error_errno(r, "Failed to register task objects: %m");

        r = sd_bus_track_new(s->bus, &s->viewers, NULL, NULL);
        if (r < 0)
                return r;
        r = sd_bus_track_new(s->bus, &s->dropped, NULL, NULL);
        if (r < 0)
                return r;

        r = sd_bus_attach_event(s->bus, m->factory.event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach bus to event loop: %m");

        /* Claim the name last, when every object is in place: D-Bus
         * activation holds callers back until the name appears. */
        r = sd_bus_request_name(s->bus, AGENTFAB_BUS_NAME, 0);
        if (r == -EEXIST)
                return log_error_errno(r, "Another agentfabd already owns '%s'.", AGENTFAB_BUS_NAME);
        if (r < 0)
                return log_error_errno(r, "Failed to acquire bus name '%s': %m", AGENTFAB_BUS_NAME);
        return 0;
}

/* What systemd passes: the stream socket (agentfab.socket), and after a
 * restart the connections of sandboxes from the fd store: frozen ones
 * ("sandbox-...") and running ones of tasks at work ("running-..."). */
int bus_server_listen_stream(BusServer *s, const char *socket_path) {
        Manager *m = s->manager;
        _cleanup_strv_free_ char **names = NULL, **stored_names = NULL;
        _cleanup_free_ int *stored = NULL;
        size_t n_stored = 0;
        int listen_fd = -EBADF, n;

        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return log_error_errno(n, "Failed to get sockets from systemd: %m");
        if (n > 0) {
                stored = calloc((size_t) n, sizeof(int));
                if (!stored)
                        return log_oom();
        }
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names && names[i] ? names[i] : "";

                if (strneq(name, "sandbox-", 8) || strneq(name, "running-", 8)) {
                        if (strv_extend(&stored_names, name) < 0)
                                return log_oom();
                        stored[n_stored++] = fd;
                } else if (listen_fd < 0 && sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) > 0)
                        listen_fd = fd;
                else {
                        /* Another version's entry in the fd store, or a
                         * second socket: not ours to guess at. Dropped, so
                         * that the start goes on (a refusal to start would
                         * make systemd restart us into the same refusal). */
                        log_warning("Dropping file descriptor '%s' that systemd passed: not one agentfabd knows.", name);
                        if (!isempty(name))
                                (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", name);
                        safe_close(fd);
                }
        }
        manager_adopt_stored(m, stored, stored_names, n_stored);

        return stream_server_new(&s->stream, s, socket_path, listen_fd);
}

