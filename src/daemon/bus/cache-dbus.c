/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <systemd/sd-bus.h>

#include "access.h"
#include "bus-server.h"
#include "cache.h"
#include "fs-util.h"
#include "log.h"
#include "string-util.h"
#include "worker.h"

/* ListCaches() and ClearCache(): the caller's own caches, measured or
 * cleared in a worker thread and answered when that is done. */

typedef struct CacheJob {
        sd_bus_message *message;   /* answered when done */
        char **names;              /* environments with caches */
        int *fds;                  /* their caches of the caller, -EBADF none */
        uint64_t *bytes;
        uint64_t *files;
        size_t n;
        bool clear;
} CacheJob;

static void cache_job_free(void *p) {
        CacheJob *j = p;
        if (!j)
                return;
        sd_bus_message_unref(j->message);
        for (size_t i = 0; i < j->n; i++)
                safe_close(j->fds[i]);
        strv_free(j->names);
        free(j->fds);
        free(j->bytes);
        free(j->files);
        free(j);
}

static int cache_job_run(void *p) {
        CacheJob *j = p;
        int r;

        for (size_t i = 0; i < j->n; i++) {
                if (j->fds[i] < 0)
                        continue;
                if (j->clear) {
                        r = cache_clear(j->fds[i]);
                        if (r < 0)
                                return r;
                }
                r = cache_usage(j->fds[i], j->bytes + i, j->files + i);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void on_cache_job_done(Worker *w, int result, void *p, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        CacheJob *j = p;
        int r;

        (void) w, (void) userdata;
        if (result < 0) {
                (void) sd_bus_reply_method_errnof(j->message, result, "Cannot %s the cache: %m",
                                                  j->clear ? "clear" : "measure");
                return;
        }
        r = sd_bus_message_new_method_return(j->message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(stt)");
        for (size_t i = 0; r >= 0 && i < j->n; i++)
                r = sd_bus_message_append(reply, "(stt)", j->names[i], j->bytes[i], j->files[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to answer a cache request, ignoring: %m");
}

static int cache_request(sd_bus_message *message, BusServer *bs, const char *only, sd_bus_error *error) {
        Manager *m = bs->manager;
        CacheJob *j;
        Worker *w = NULL;
        uid_t uid;
        int r;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        j = calloc(1, sizeof(CacheJob));
        if (!j)
                return -ENOMEM;
        j->message = sd_bus_message_ref(message);
        j->clear = !!only;
        j->fds = calloc(m->factory.environments.n, sizeof(int));
        j->bytes = calloc(m->factory.environments.n, sizeof(uint64_t));
        j->files = calloc(m->factory.environments.n, sizeof(uint64_t));
        if (!j->fds || !j->bytes || !j->files) {
                cache_job_free(j);
                return -ENOMEM;
        }
        for (size_t i = 0; i < m->factory.environments.n; i++) {
                const Environment *e = m->factory.environments.list + i;

                if (!e->caches || (only && !streq(only, e->name)))
                        continue;
                if (strv_extend(&j->names, e->name) < 0) {
                        cache_job_free(j);
                        return -ENOMEM;
                }
                /* A cache not made yet is there with nothing in it. */
                j->fds[j->n++] = cache_open(m->factory.state_fd, e->name, uid, false);
        }
        if (only && j->n == 0) {
                cache_job_free(j);
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Environment '%s' does not exist or keeps no cache.", only);
        }
        r = worker_start(m->factory.event, cache_job_run, on_cache_job_done, cache_job_free, j, m, &w);
        if (r < 0) {
                cache_job_free(j);
                return r;
        }
        return 1;   /* answered when the job is done */
}

int method_list_caches(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return cache_request(message, userdata, NULL, error);
}

int method_clear_cache(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        const char *environment;
        int r;

        r = sd_bus_message_read(message, "s", &environment);
        if (r < 0)
                return r;
        if (!environment_name_is_valid(environment))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "'%s' is not an environment's name.", environment);
        return cache_request(message, userdata, environment, error);
}
