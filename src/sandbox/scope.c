/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "sandbox.h"
#include "scope.h"
#include "sd-bus-dlopen.h"
#include "string-util.h"
#include "time-util.h"

/* Everything of sd-bus here goes through sd-bus-dlopen.h; so do the
 * cleanup helpers, which sd-bus.h would bind to the linked library. */
static void bus_message_unrefp(sd_bus_message **m) {
        if (*m)
                sym_sd_bus_message_unref(*m);
}

static void bus_slot_unrefp(sd_bus_slot **s) {
        if (*s)
                sym_sd_bus_slot_unref(*s);
}

void scope_error_free(sd_bus_error *e) {
        /* Nothing to free in an error never set: then libsystemd may not
         * even be loaded. */
        if (e && (e->name || e->message))
                sym_sd_bus_error_free(e);
}

sd_bus *scope_bus_close(sd_bus *bus) {
        if (bus)
                sym_sd_bus_flush_close_unref(bus);
        return NULL;
}

void scope_bus_closep(sd_bus **bus) {
        *bus = scope_bus_close(*bus);
}

bool scope_manager_booted(void) {
        /* What sd_booted() checks. */
        return access("/run/systemd/system/", F_OK) >= 0;
}

int scope_connect_private(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/run/systemd/private" };

        if (geteuid() != 0)
                return -EPERM;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        return TAKE_FD(fd);
}

typedef struct JobWait {
        const char *job;        /* object path of the job to wait for; NULL until known */
        char result[32];        /* "done", "failed", ...; empty until it finished */
        char early_job[256];    /* a JobRemoved that came before the reply named the job */
        char early_result[32];
} JobWait;

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        JobWait *w = userdata;
        const char *path, *unit, *result;
        uint32_t id;

        (void) error;
        if (sym_sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
                return 0;
        if (w->job) {
                if (streq(path, w->job))
                        snprintf(w->result, sizeof(w->result), "%s", result);
        } else {
                /* The signal may overtake the method reply on the wire. */
                snprintf(w->early_job, sizeof(w->early_job), "%s", path);
                snprintf(w->early_result, sizeof(w->early_result), "%s", result);
        }
        return 0;
}

/* Takes the job path from a method reply and processes the bus until its
 * JobRemoved came, at most timeout_usec. */
static int job_wait(sd_bus *bus, JobWait *w, uint64_t timeout_usec, sd_bus_error *error) {
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + timeout_usec;
        int r;

        if (streq(w->early_job, w->job))
                snprintf(w->result, sizeof(w->result), "%s", w->early_result);
        while (w->result[0] == '\0') {
                uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return sym_sd_bus_error_set(error, SD_BUS_ERROR_TIMEOUT, "Timed out waiting for a job of the system manager.");
                r = sym_sd_bus_process(bus, NULL);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                r = sym_sd_bus_wait(bus, MIN(deadline - now, USEC_PER_SEC));
                if (r < 0 && r != -EINTR)
                        return r;
        }
        return 0;
}

static int subscribe(sd_bus *bus, sd_bus_slot **ret_slot, JobWait *w, sd_bus_error *error) {
        int r;

        /* Subscribe first, then ask: JobRemoved must not be missed. */
        r = sym_sd_bus_match_signal(bus, ret_slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                    "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, w);
        if (r < 0)
                return r;
        return sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                      "org.freedesktop.systemd1.Manager", "Subscribe", error, NULL, NULL);
}

int scope_bus_open(int fd, sd_bus **ret) {
        _cleanup_(scope_bus_closep) sd_bus *bus = NULL;
        _cleanup_close_ int private_fd = fd;
        int r;

        r = dlopen_sd_bus();
        if (r < 0)
                return r;

        if (private_fd < 0)
                private_fd = scope_connect_private();
        if (private_fd >= 0) {
                r = sym_sd_bus_new(&bus);
                if (r >= 0)
                        r = sym_sd_bus_set_fd(bus, private_fd, private_fd);
                if (r >= 0) {
                        TAKE_FD(private_fd); /* the bus's now */
                        r = sym_sd_bus_start(bus);
                }
                if (r < 0)
                        bus = scope_bus_close(bus);
        } else
                r = private_fd;
        if (r < 0)
                r = sym_sd_bus_open_system(&bus);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bus);
        return 0;
}

static bool error_is_no_such_unit(const sd_bus_error *e) {
        return sym_sd_bus_error_has_names_sentinel(e, "org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.LoadFailed", NULL);
}

int scope_stop(sd_bus *bus, const char *unit, uint64_t timeout_usec, sd_bus_error *error) {
        _cleanup_(bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(bus_slot_unrefp) sd_bus_slot *slot = NULL;
        _cleanup_(scope_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + timeout_usec;
        JobWait w = {};
        const char *job;
        int r;

        r = subscribe(bus, &slot, &w, error);
        if (r < 0)
                return r;

        /* What a crashed owner left behind gets no grace period: it is
         * sandboxed code, nothing that needs a clean shutdown. */
        r = sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                   "org.freedesktop.systemd1.Manager", "KillUnit", &e, NULL, "ssi", unit, "all", SIGKILL);
        if (r < 0 && error_is_no_such_unit(&e))
                return 0;
        /* Killed it: then it may be gone before the stop, and still counts. */
        bool existed = r >= 0;
        sym_sd_bus_error_free(&e);

        r = sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                   "org.freedesktop.systemd1.Manager", "StopUnit", &e, &reply, "ss", unit, "replace");
        if (r < 0) {
                if (error_is_no_such_unit(&e))
                        return existed;
                return sym_sd_bus_error_move(error, &e), r;
        }
        r = sym_sd_bus_message_read(reply, "o", &job);
        if (r < 0)
                return r;
        w.job = job;
        r = job_wait(bus, &w, timeout_usec, error);
        if (r < 0)
                return r;

        /* A failed unit stays loaded and its name taken: reset it, then wait
         * until the manager has let go of the name, so that a new scope of
         * the same name can be made at once. */
        (void) sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                      "org.freedesktop.systemd1.Manager", "ResetFailedUnit", NULL, NULL, "s", unit);
        for (;;) {
                _cleanup_(scope_error_free) sd_bus_error g = SD_BUS_ERROR_NULL;
                r = sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "GetUnit", &g, NULL, "s", unit);
                if (r < 0 && error_is_no_such_unit(&g))
                        return 1;
                if (clock_now_usec(CLOCK_MONOTONIC) >= deadline)
                        return sym_sd_bus_error_setf(error, SD_BUS_ERROR_TIMEOUT, "Unit '%s' was stopped but is still loaded.", unit);
                (void) usleep(10 * 1000);
        }
}

int scope_list(sd_bus *bus, const char *pattern, char ***ret, sd_bus_error *error) {
        _cleanup_(bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_strv_free_ char **units = NULL;
        const char *name;
        int r;

        r = sym_sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                               "org.freedesktop.systemd1.Manager", "ListUnitsByPatterns");
        if (r < 0)
                return r;
        r = sym_sd_bus_message_append(m, "as", 0);
        if (r >= 0)
                r = sym_sd_bus_message_append(m, "as", 1, pattern);
        if (r < 0)
                return r;
        r = sym_sd_bus_call(bus, m, 0, error, &reply);
        if (r < 0)
                return r;

        r = sym_sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        if (r < 0)
                return r;
        while ((r = sym_sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)) > 0) {
                r = strv_extend(&units, name);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sym_sd_bus_message_exit_container(reply);
        if (r < 0)
                return r;
        if (!units) {
                units = calloc(1, sizeof(char *));
                if (!units)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(units);
        return 0;
}

static int append_limit(sd_bus_message *m, const char *name, uint64_t value) {
        if (value == UINT64_MAX)
                return 0;
        return sym_sd_bus_message_append(m, "(sv)", name, "t", value);
}

int scope_start(sd_bus *bus, const char *unit, const char *description, pid_t pid,
                const ScopeLimits *limits, sd_bus_error *error) {
        _cleanup_(bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(bus_slot_unrefp) sd_bus_slot *slot = NULL;
        JobWait w = {};
        const char *job;
        int r;

        /* The match and the subscription go out before StartTransientUnit
         * and are not waited for: the bus daemon and systemd handle one
         * connection's messages in order, so both are in force before the
         * job exists, and JobRemoved cannot be missed. On systemd's private
         * socket the match is local and Subscribe() is not needed at all:
         * systemd sends its signals to every direct connection. */
        r = sym_sd_bus_match_signal_async(bus, &slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                          "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, NULL, &w);
        if (r < 0)
                return r;
        if (sym_sd_bus_is_bus_client(bus) > 0) {
                r = sym_sd_bus_call_method_async(bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                                 "org.freedesktop.systemd1.Manager", "Subscribe", NULL, NULL, NULL);
                if (r < 0)
                        return r;
        }
        sandbox_trace("parent: subscribed");

        r = sym_sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                               "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (r < 0)
                return r;
        r = sym_sd_bus_message_append(m, "ss", unit, "fail");
        if (r < 0)
                return r;
        r = sym_sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                return r;
        /* A sandbox's PID 1 ignores SIGTERM from outside (the kernel drops
         * signals to a namespace's init that has no handler), so a stop
         * (RuntimeMaxSec=, systemctl stop) ends it with the SIGKILL after
         * TimeoutStopSec=: keep that short. */
        r = sym_sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)",
                                      "Description", "s", description,
                                      "Slice", "s", AGENTFAB_SLICE,
                                      "PIDs", "au", 1, (uint32_t) pid,
                                      "CollectMode", "s", "inactive-or-failed",
                                      "TimeoutStopUSec", "t", (uint64_t) (5 * USEC_PER_SEC));
        if (r >= 0)
                r = append_limit(m, "MemoryMax", limits->memory_max);
        if (r >= 0)
                r = append_limit(m, "TasksMax", limits->tasks_max);
        if (r >= 0)
                r = append_limit(m, "CPUQuotaPerSecUSec", limits->cpu_quota_per_sec_usec);
        if (r >= 0)
                r = append_limit(m, "RuntimeMaxUSec", limits->runtime_max_usec);
        if (r >= 0)
                r = sym_sd_bus_message_close_container(m);
        if (r >= 0)
                r = sym_sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r < 0)
                return r;

        r = sym_sd_bus_call(bus, m, 0, error, &reply);
        if (r < 0)
                return r;
        r = sym_sd_bus_message_read(reply, "o", &job);
        if (r < 0)
                return r;
        w.job = job;
        sandbox_trace("parent: StartTransientUnit replied");

        r = job_wait(bus, &w, 30 * USEC_PER_SEC, error);
        if (r < 0)
                return r;

        if (!streq(w.result, "done"))
                return sym_sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Starting scope '%s' ended with '%s'.", unit, w.result);
        return 0;
}

int scope_freeze(sd_bus *bus, const char *unit, bool freeze, sd_bus_error *error) {
        return sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                      "org.freedesktop.systemd1.Manager", freeze ? "FreezeUnit" : "ThawUnit",
                                      error, NULL, "s", unit);
}
