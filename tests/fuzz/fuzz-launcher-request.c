/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The launcher's request line, from an unprivileged peer. Invariants: what
 * is accepted is within the documented bounds (valid task ids, granted
 * limits positive and never above the maxima, at most 64 environment
 * entries with valid names and bounded values, at most 4096 ids to keep),
 * and an accepted request written out again parses to the same request. */
#include <inttypes.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "json-util.h"
#include "launcher-request.h"
#include "string-util.h"

static size_t strv_len(char **l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

static void check_bounds(const LauncherRequest *r, const LauncherLimits *m) {
        const uint64_t got[] = { r->limits.memory_max, r->limits.tasks_max, r->limits.cpu_quota_percent, r->limits.runtime_max_sec };
        const uint64_t max[] = { m->memory_max, m->tasks_max, m->cpu_quota_percent, m->runtime_max_sec };

        if (r->type == LAUNCHER_REQUEST_SANDBOX) {
                FUZZ_CHECK(task_id_is_valid(r->task), "task id '%s'", r->task);
                for (size_t i = 0; i < ELEMENTSOF(got); i++)
                        FUZZ_CHECK(got[i] > 0 && got[i] <= max[i], "limit %zu: %" PRIu64 " of %" PRIu64, i, got[i], max[i]);
                FUZZ_CHECK(strv_len(r->env) <= LAUNCHER_ENV_MAX, "%zu env entries", strv_len(r->env));
                for (char **e = r->env; e && *e; e++) {
                        const char *eq = strchr(*e, '=');
                        FUZZ_CHECK(eq, "env entry without '='");
                        char *name = strndup(*e, (size_t) (eq - *e));
                        FUZZ_CHECK(name && launcher_env_name_is_valid(name), "env name '%s'", name ? name : "?");
                        FUZZ_CHECK(strlen(eq + 1) <= LAUNCHER_ENV_VALUE_MAX, "env value of %zu bytes", strlen(eq + 1));
                        free(name);
                }
                FUZZ_CHECK(!r->keep, "a sandbox request keeps nothing");
        } else if (r->type == LAUNCHER_REQUEST_FREEZE || r->type == LAUNCHER_REQUEST_THAW) {
                FUZZ_CHECK(task_id_is_valid(r->task), "task id '%s'", r->task);
                FUZZ_CHECK(!r->env && !r->keep, "a freeze or thaw request has no lists");
        } else {
                FUZZ_CHECK(r->type == LAUNCHER_REQUEST_REAP, "type %d", (int) r->type);
                FUZZ_CHECK(r->keep, "a reap request always has a list");
                FUZZ_CHECK(strv_len(r->keep) <= LAUNCHER_KEEP_MAX, "%zu ids", strv_len(r->keep));
                for (char **k = r->keep; *k; k++)
                        FUZZ_CHECK(task_id_is_valid(*k), "kept id '%s'", *k);
                FUZZ_CHECK(!r->env, "a reap request has no environment");
        }
}

/* Writes r as the daemon would ask for it. */
static char *request_format(const LauncherRequest *r) {
        json_object *j = json_object_new_object();

        if (r->type == LAUNCHER_REQUEST_SANDBOX) {
                json_object *l = json_object_new_object(), *env = json_object_new_object();
                json_object_object_add(j, "type", json_object_new_string("sandbox"));
                json_object_object_add(j, "task", json_object_new_string(r->task));
                json_object_object_add(l, "memory_max", json_object_new_uint64(r->limits.memory_max));
                json_object_object_add(l, "tasks_max", json_object_new_uint64(r->limits.tasks_max));
                json_object_object_add(l, "cpu_quota_percent", json_object_new_uint64(r->limits.cpu_quota_percent));
                json_object_object_add(l, "runtime_max_sec", json_object_new_uint64(r->limits.runtime_max_sec));
                json_object_object_add(j, "limits", l);
                for (char **e = r->env; e && *e; e++) {
                        char *name = strndup(*e, strcspn(*e, "="));
                        json_object_object_add(env, name, json_object_new_string(strchr(*e, '=') + 1));
                        free(name);
                }
                json_object_object_add(j, "env", env);
        } else if (r->type == LAUNCHER_REQUEST_FREEZE || r->type == LAUNCHER_REQUEST_THAW) {
                json_object_object_add(j, "type", json_object_new_string(r->type == LAUNCHER_REQUEST_FREEZE ? "freeze" : "thaw"));
                json_object_object_add(j, "task", json_object_new_string(r->task));
        } else {
                json_object *keep = json_object_new_array();
                json_object_object_add(j, "type", json_object_new_string("reap"));
                for (char **k = r->keep; *k; k++)
                        json_object_array_add(keep, json_object_new_string(*k));
                json_object_object_add(j, "keep", keep);
        }
        char *s = strdup(json_to_line(j));
        json_object_put(j);
        if (!s)
                abort();
        return s;
}

static void check_one(const char *text, size_t size, const LauncherLimits *maxima) {
        LauncherRequest r = {}, again = {};
        const char *error = NULL;
        int k;

        k = launcher_request_parse(text, size, maxima, &r, &error);
        if (k < 0) {
                FUZZ_CHECK(error && k == -EINVAL, "a refusal says why (%d)", k);
                return;
        }
        FUZZ_CHECK(!error, "no message on success");
        check_bounds(&r, maxima);

        /* Round trip, with what was granted as the maxima: nothing clamped. */
        char *line = request_format(&r);
        k = launcher_request_parse(line, strlen(line), &r.limits, &again, &error);
        FUZZ_CHECK(k == 0, "'%s' parses again: %s", line, error);
        FUZZ_CHECK(again.type == r.type && streq(again.task, r.task) && !again.clamped &&
                   memcmp(&again.limits, &r.limits, sizeof(r.limits)) == 0, "same request after a round trip");
        FUZZ_CHECK(strv_len(again.env) == strv_len(r.env) && strv_len(again.keep) == strv_len(r.keep), "same lists");
        for (size_t i = 0; i < strv_len(r.env); i++)
                FUZZ_CHECK(streq(again.env[i], r.env[i]), "env entry %zu", i);
        for (size_t i = 0; i < strv_len(r.keep); i++)
                FUZZ_CHECK(streq(again.keep[i], r.keep[i]), "kept id %zu", i);
        free(line);
        launcher_request_done(&again);
        launcher_request_done(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const LauncherLimits defaults = LAUNCHER_LIMITS_DEFAULT;
        const LauncherLimits unlimited = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX };

        fuzz_quiet();
        check_one((const char *) data, size, &defaults);
        check_one((const char *) data, size, &unlimited);
        return 0;
}
