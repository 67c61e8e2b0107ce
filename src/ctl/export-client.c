/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus-client.h"
#include "export-client.h"
#include "ledger.h"
#include "macro.h"
#include "string-util.h"
#include "task-id.h"
#include "task-info.h"

/* A task this host does not have may be another host's of the fleet:
 * ExportFleetTask() reads its branch from the fleet's Remote=. -ENOENT:
 * this host is in no fleet (the caller's "No task" stands). */
static int export_fleet_fd(sd_bus *bus, const char *id, const char *format, int *ret_fd) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int fd, r;

        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                               "ExportFleetTask", &error, &reply, "ss", id, format);
        if (r < 0 && (sd_bus_error_has_name(&error, SD_BUS_ERROR_NOT_SUPPORTED) ||
                      sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD)))
                return -ENOENT;
        if (r < 0)
                return bus_fail("export task", &error, r);
        r = sd_bus_message_read(reply, "h", &fd);
        if (r < 0)
                return EXIT_FAIL;
        *ret_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        return *ret_fd < 0 ? EXIT_FAIL : EXIT_OK;
}

/* Asks for an export of the task's branch; returns an fd to read it from. */
static int export_fd(sd_bus *bus, const char *id, const char *format, int *ret_fd, char **ret_repository) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *props = NULL;
        _cleanup_free_ char *path = NULL;
        const char *p;
        int fd, r;

        if (!task_id_is_valid(id)) {
                fprintf(stderr, "'%s' is not a task id (12 hex digits).\n", id);
                return EXIT_USAGE;
        }
        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE, "GetTask",
                               &error, &reply, "s", id);
        if (r < 0 && sd_bus_error_has_name(&error, AGENTFAB_ERROR_NO_SUCH_TASK)) {
                /* Another host's, maybe: its repository is a URL anyway
                 * (a fleet takes no other), so fetch needs --repo. */
                if (ret_repository)
                        *ret_repository = NULL;
                r = export_fleet_fd(bus, id, format, ret_fd);
                if (r != -ENOENT)
                        return r;
        }
        if (r < 0)
                return bus_fail("get task", &error, r);
        r = sd_bus_message_read(reply, "o", &p);
        if (r < 0)
                return EXIT_FAIL;
        path = strdup(p);
        if (!path)
                return EXIT_FAIL;
        reply = sd_bus_message_unref(reply);
        if (ret_repository) {
                TaskInfo info;
                r = task_info_get(bus, path, &props, &info, &error);
                if (r < 0)
                        return bus_fail("read task", &error, r);
                *ret_repository = info.repository ? strdup(info.repository) : NULL;
        }
        r = bus_call_task_method_s(bus, path, "Export", format, &error, &reply);
        if (r < 0)
                return bus_fail("export task", &error, r);
        r = sd_bus_message_read(reply, "h", &fd);
        if (r < 0)
                return EXIT_FAIL;
        *ret_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        return *ret_fd < 0 ? EXIT_FAIL : EXIT_OK;
}

static int copy_fd_to_stdout(int fd) {
        char buf[65536];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        fprintf(stderr, "Failed to read the export: %m\n");
                        return EXIT_FAIL;
                }
                if (n == 0)
                        return EXIT_OK;
                if (fwrite(buf, 1, (size_t) n, stdout) != (size_t) n) {
                        fprintf(stderr, "Failed to write the export: %m\n");
                        return EXIT_FAIL;
                }
        }
}

int export_to_stdout(sd_bus *bus, const char *id, const char *format) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = export_fd(bus, id, format, &fd, NULL);
        if (r != EXIT_OK)
                return r;
        return copy_fd_to_stdout(fd);
}

/* The client writes the user's repository, with the user's own rights: the
 * daemon only hands over a bundle. */
int export_fetch(sd_bus *bus, const char *id, const char *repo) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *repository = NULL, *error = NULL, *branch = NULL;
        const char *target;
        int r;

        r = export_fd(bus, id, "bundle", &fd, &repository);
        if (r != EXIT_OK)
                return r;
        target = repo ?: repository;
        if (isempty(target) || strstr(target, "://")) {
                fprintf(stderr, "The task's repository is not a local one: give one to fetch into with --repo=PATH.\n");
                return EXIT_USAGE;
        }
        if (asprintf(&branch, "agentfab/%s", id) < 0)
                return EXIT_FAIL;
        r = ledger_import_bundle(target, fd, branch, UINT64_MAX, &error);
        if (r == -EEXIST) {
                fprintf(stderr, "Branch '%s' exists already in '%s'; it was left as it is.\n", branch, target);
                return EXIT_FAIL;
        }
        if (r < 0) {
                fprintf(stderr, "Failed to fetch into '%s': %s\n", target, error ?: strerror(-r));
                return EXIT_FAIL;
        }
        printf("Fetched branch %s into %s.\n", branch, target);
        return EXIT_OK;
}
