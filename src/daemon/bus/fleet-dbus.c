/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "agentfab-bus.h"
#include "fleet-dbus.h"
#include "fleet.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "string-util.h"

/* The database answers later: the call waits, referenced, for it. */
typedef struct FleetBusCall {
        BusServer *server;
        sd_bus_message *message;
        Task *task;
} FleetBusCall;

static void fleet_bus_call_free(FleetBusCall *c) {
        if (!c)
                return;
        sd_bus_message_unref(c->message);
        task_free(c->task);
        free(c);
}

static void on_enqueued(Fleet *fl, int error, const char *message, void *userdata) {
        FleetBusCall *c = userdata;
        _cleanup_free_ char *path = NULL;

        (void) fl;
        if (error == -EEXIST)
                (void) sd_bus_reply_method_errorf(c->message, SD_BUS_ERROR_FAILED,
                                                  "The fleet has a task '%s' already; submit again.", c->task->id);
        else if (error < 0)
                (void) sd_bus_reply_method_errorf(c->message, SD_BUS_ERROR_FAILED,
                                                  "The fleet's database did not take the task: %s",
                                                  message ?: strerror(-error));
        else {
                log_info("Task '%s' queued in the fleet.", c->task->id);
                path = task_object_path(c->task);
                if (!path)
                        (void) sd_bus_reply_method_errnof(c->message, -ENOMEM, "Out of memory.");
                else
                        (void) sd_bus_reply_method_return(c->message, "so", c->task->id, path);
        }
        fleet_bus_call_free(c);
}

int fleet_dbus_submit(BusServer *bs, sd_bus_message *message, Task *t, sd_bus_error *error) {
        Manager *m = bs->manager;
        FleetBusCall *c;
        int r;

        assert(m->fleet);

        /* Any host of the fleet may take the task: its repository must be
         * one that every host can fetch. */
        if (t->spec.repository_fd >= 0 || !task_repository_url_is_valid(t->spec.repository)) {
                r = sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                      "On a host of a fleet, a task's repository must be an https:// or ssh:// URL "
                                      "that every host can fetch, not '%s'.", strempty(t->spec.repository));
                task_free(t);
                return r;
        }
        c = calloc(1, sizeof(FleetBusCall));
        if (!c) {
                task_free(t);
                return -ENOMEM;
        }
        c->server = bs;
        c->message = sd_bus_message_ref(message);
        c->task = t;
        r = fleet_enqueue(m->fleet, t, on_enqueued, c);
        if (r == -ESRCH) {
                r = sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "User %u has no name here: the fleet needs one.",
                                      (unsigned) t->owner);
                fleet_bus_call_free(c);
                return r;
        }
        if (r < 0) {
                fleet_bus_call_free(c);
                return sd_bus_error_set_errnof(error, r, "Cannot queue the task in the fleet: %m");
        }
        return 1;
}

typedef struct FleetListCall {
        BusServer *server;
        sd_bus_message *message;
        char *user;             /* the caller's name: whose tasks they see; NULL: all */
} FleetListCall;

static void fleet_list_call_free(FleetListCall *c) {
        if (!c)
                return;
        sd_bus_message_unref(c->message);
        free(c->user);
        free(c);
}

static int reply_fleet_list(FleetListCall *c, const FleetTaskInfo *tasks, size_t n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(c->message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(ssstst)");
        for (size_t i = 0; r >= 0 && i < n; i++) {
                if (c->user && !fleet_owner_is(tasks[i].owner, c->user))
                        continue;
                r = sd_bus_message_append(reply, "(ssstst)", tasks[i].id, fleet_task_state_to_string(tasks[i].state),
                                          strempty(tasks[i].host), tasks[i].epoch, strempty(tasks[i].owner),
                                          tasks[i].updated_usec);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_send(reply);
        return r;
}

static void on_listed(Fleet *fl, int error, const char *message, const FleetTaskInfo *tasks, size_t n, void *userdata) {
        FleetListCall *c = userdata;
        int r;

        (void) fl;
        if (error < 0)
                (void) sd_bus_reply_method_errorf(c->message, SD_BUS_ERROR_FAILED,
                                                  "Cannot read the fleet's tasks from its database: %s",
                                                  message ?: strerror(-error));
        else {
                r = reply_fleet_list(c, tasks, n);
                if (r < 0)
                        (void) sd_bus_reply_method_errnof(c->message, r, "Failed to answer: %m");
        }
        fleet_list_call_free(c);
}

/* As ListTasks(): a caller sees their own tasks of the whole fleet, and
 * everybody's with org.agentfab.manage (granted on this connection by
 * GetTask(), or root). Never prompts. */
int method_list_fleet_tasks(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        FleetListCall *c;
        struct passwd *pw;
        uid_t uid;
        int r;

        if (!m->fleet)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                        "This host is not in a fleet (see [Fleet] in agentfab.conf(5)).");
        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(FleetListCall));
        if (!c)
                return -ENOMEM;
        c->server = bs;
        c->message = sd_bus_message_ref(message);
        if (!access_uid_sees_all(bs, uid, sd_bus_message_get_sender(message))) {
                pw = getpwuid(uid);
                /* A caller without a name owns nothing in the fleet. */
                c->user = strdup(pw ? pw->pw_name : "");
                if (!c->user) {
                        fleet_list_call_free(c);
                        return -ENOMEM;
                }
        }
        r = fleet_list(m->fleet, on_listed, c);
        if (r < 0) {
                fleet_list_call_free(c);
                return sd_bus_error_set_errnof(error, r, "Cannot read the fleet's tasks: %m");
        }
        return 1;
}
