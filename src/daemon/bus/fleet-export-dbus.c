/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ExportFleetTask(): the branch of a task that another host of the fleet
 * holds (or held), as Export() gives a local task's: read from Remote=,
 * where its host published each acknowledged checkpoint and, at its end,
 * the delivered tip (fleet-ack.h). A task whose host died before its
 * first checkpoint has nothing there. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access.h"
#include "agentfab-bus.h"
#include "fleet-dbus.h"
#include "fleet.h"
#include "fs-util.h"
#include "ledger.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "string-util.h"
#include "task-id.h"
#include "worker.h"

/* Where the fetched ledgers are made, below the state directory, one
 * directory per export, gone after it. */
#define FLEET_VIEWS_DIR "fleet-views"

typedef struct FleetExport {
        BusServer *server;
        sd_bus_message *message;
        char id[AGENTFAB_TASK_ID_LEN + 1];
        char format[8];
        char *user;             /* the caller's name; NULL: sees every task */
        char *url;
        char *tip_ref;
        int state_fd;           /* borrowed from the factory */
        int fd;                 /* the export */
        SshCredentials ssh;     /* for an ssh:// Remote=; secret, wiped when the export is freed */
        char *error;
} FleetExport;

static void fleet_export_free(void *p) {
        FleetExport *x = p;

        if (!x)
                return;
        sd_bus_message_unref(x->message);
        free(x->user);
        free(x->url);
        free(x->tip_ref);
        safe_close(x->fd);
        ssh_credentials_done(&x->ssh);
        free(x->error);
        free(x);
}

static int fleet_export_run(void *p) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int views_fd = -EBADF, dir_fd = -EBADF;
        _cleanup_free_ char *prefix = NULL, *branch = NULL;
        FleetExport *x = p;
        LedgerOptions o = fleet_remote_options(&x->ssh);
        char name[AGENTFAB_TASK_ID_LEN + 32];
        int r;

        if (mkdirat(x->state_fd, FLEET_VIEWS_DIR, 0700) < 0 && errno != EEXIST)
                return -errno;
        views_fd = openat(x->state_fd, FLEET_VIEWS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (views_fd < 0)
                return -errno;
        /* One of its own: exports of one task may run at once. */
        (void) snprintf(name, sizeof(name), "%s.%d.%p", x->id, (int) gettid(), (void *) x);
        (void) rm_rf_at(views_fd, name);
        if (mkdirat(views_fd, name, 0700) < 0)
                return -errno;
        dir_fd = openat(views_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0) {
                r = -errno;
                goto out;
        }
        if (asprintf(&prefix, "refs/agentfab/%s", x->id) < 0 || asprintf(&branch, "agentfab/%s", x->id) < 0) {
                r = -ENOMEM;
                goto out;
        }
        r = ledger_open_published(dir_fd, x->url, &o, prefix, x->tip_ref, branch, &l, &x->error);
        if (r < 0)
                goto out;
        x->fd = memfd_create("agentfab-export", MFD_CLOEXEC);
        if (x->fd < 0) {
                r = -errno;
                goto out;
        }
        r = streq(x->format, "bundle") ? ledger_export_bundle(l, x->fd) :
                streq(x->format, "mbox") ? ledger_export_mbox(l, x->fd) : ledger_export_diff(l, x->fd);
        if (r >= 0 && lseek(x->fd, 0, SEEK_SET) < 0)
                r = -errno;
out:
        l = ledger_free(l);
        (void) rm_rf_at(views_fd, name);
        return r;
}

static void on_fleet_exported(Worker *w, int r, void *p, void *userdata) {
        FleetExport *x = p;

        (void) w, (void) userdata;
        if (r < 0)
                (void) sd_bus_reply_method_errorf(x->message, SD_BUS_ERROR_FAILED, "Cannot export task '%s' from Remote=: %s",
                                                  x->id, x->error ?: strerror(-r));
        else
                (void) sd_bus_reply_method_return(x->message, "h", x->fd);
}

static void on_found(Fleet *fl, int error, const char *message, const FleetTaskInfo *tasks, size_t n, void *userdata) {
        FleetExport *x = userdata;
        const FleetTaskInfo *info = NULL;
        int r;

        (void) fl;
        if (error < 0) {
                (void) sd_bus_reply_method_errorf(x->message, SD_BUS_ERROR_FAILED,
                                                  "Cannot read the fleet's tasks from its database: %s",
                                                  message ?: strerror(-error));
                return fleet_export_free(x);
        }
        for (size_t i = 0; i < n && !info; i++)
                if (streq(tasks[i].id, x->id))
                        info = tasks + i;
        /* Not the caller's: as for a task here, it does not exist for them. */
        if (!info || (x->user && !fleet_owner_is(info->owner, x->user))) {
                (void) sd_bus_reply_method_errorf(x->message, AGENTFAB_ERROR_NO_SUCH_TASK, "No task '%s' in the fleet.", x->id);
                return fleet_export_free(x);
        }
        if (info->epoch == 0) {
                (void) sd_bus_reply_method_errorf(x->message, AGENTFAB_ERROR_BAD_STATE,
                                                  "Task '%s' is still queued in the fleet: it has no commits yet.", x->id);
                return fleet_export_free(x);
        }
        if (asprintf(&x->tip_ref, "refs/agentfab/%s/%llu", x->id, (unsigned long long) info->epoch) < 0) {
                x->tip_ref = NULL;
                (void) sd_bus_reply_method_errnof(x->message, -ENOMEM, "Out of memory.");
                return fleet_export_free(x);
        }
        r = worker_start(x->server->manager->factory.event, fleet_export_run, on_fleet_exported, fleet_export_free, x,
                         NULL, NULL);
        if (r < 0) {
                (void) sd_bus_reply_method_errnof(x->message, r, "Cannot start the export: %m");
                fleet_export_free(x);
        }
}

/* Who may: the task's owner (by name, on any host), and whoever sees every
 * task (root; org.agentfab.manage granted on this connection). Never
 * prompts. */
int method_export_fleet_task(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        const char *id, *format;
        FleetExport *x;
        uid_t uid;
        int r;

        r = sd_bus_message_read(message, "ss", &id, &format);
        if (r < 0)
                return r;
        if (!task_id_is_valid(id))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "'%s' is not a task id.", id);
        if (!streq(format, "bundle") && !streq(format, "mbox") && !streq(format, "diff"))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Unknown export format '%s': use bundle, mbox or diff.", format);
        if (!m->fleet)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                        "This host is not in a fleet (see [Fleet] in agentfab.conf(5)).");
        if (!m->factory.config.fleet.remote)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                        "This host of the fleet has no Remote= to read other hosts' branches from.");
        if (factory_find_task(&m->factory, id))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE,
                                         "Task '%s' is on this host: use its Export().", id);
        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;

        x = calloc(1, sizeof(FleetExport));
        if (!x)
                return -ENOMEM;
        x->server = bs;
        x->message = sd_bus_message_ref(message);
        x->fd = -EBADF;
        x->state_fd = m->factory.state_fd;
        (void) snprintf(x->id, sizeof(x->id), "%s", id);
        (void) snprintf(x->format, sizeof(x->format), "%s", format);
        x->url = strdup(m->factory.config.fleet.remote);
        if (!x->url) {
                fleet_export_free(x);
                return -ENOMEM;
        }
        _cleanup_free_ char *ssh_error = NULL;
        r = fleet_remote_read_ssh(&m->factory.config, &x->ssh, &ssh_error);
        if (r < 0) {
                fleet_export_free(x);
                /* The message names a credential, never its text. */
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Cannot read the credentials for Remote=: %s",
                                         ssh_error ?: strerror(-r));
        }
        if (!access_uid_sees_all(bs, uid, sd_bus_message_get_sender(message))) {
                struct passwd *pw = getpwuid(uid);
                /* A caller without a name owns nothing in the fleet. */
                x->user = strdup(pw ? pw->pw_name : "");
                if (!x->user) {
                        fleet_export_free(x);
                        return -ENOMEM;
                }
        }
        r = fleet_list(m->fleet, on_found, x);
        if (r < 0) {
                fleet_export_free(x);
                return sd_bus_error_set_errnof(error, r, "Cannot read the fleet's tasks: %m");
        }
        return 1;
}
