/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "scope.h"

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
        if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
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

static int append_limit(sd_bus_message *m, const char *name, uint64_t value) {
        if (value == UINT64_MAX)
                return 0;
        return sd_bus_message_append(m, "(sv)", name, "t", value);
}

int scope_start(sd_bus *bus, const char *unit, const char *description, pid_t pid,
                const ScopeLimits *limits, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        JobWait w = {};
        const char *job;
        int r;

        /* Subscribe first, then ask: JobRemoved must not be missed. */
        r = sd_bus_match_signal(bus, &slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, &w);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "Subscribe", error, NULL, NULL);
        if (r < 0)
                return r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)",
                                  "Description", "s", description,
                                  "Slice", "s", AGENTFAB_SLICE,
                                  "PIDs", "au", 1, (uint32_t) pid,
                                  "CollectMode", "s", "inactive-or-failed");
        if (r >= 0)
                r = append_limit(m, "MemoryMax", limits->memory_max);
        if (r >= 0)
                r = append_limit(m, "TasksMax", limits->tasks_max);
        if (r >= 0)
                r = append_limit(m, "CPUQuotaPerSecUSec", limits->cpu_quota_per_sec_usec);
        if (r >= 0)
                r = append_limit(m, "RuntimeMaxUSec", limits->runtime_max_usec);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r < 0)
                return r;

        r = sd_bus_call(bus, m, 0, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "o", &job);
        if (r < 0)
                return r;
        w.job = job;
        if (streq(w.early_job, job))
                snprintf(w.result, sizeof(w.result), "%s", w.early_result);

        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        while (w.result[0] == '\0') {
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec - start.tv_sec > 30)
                        return sd_bus_error_set(error, SD_BUS_ERROR_TIMEOUT, "Timed out waiting for the scope job.");
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                r = sd_bus_wait(bus, USEC_PER_SEC);
                if (r < 0)
                        return r;
        }

        if (!streq(w.result, "done"))
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Starting scope '%s' ended with '%s'.", unit, w.result);
        return 0;
}
