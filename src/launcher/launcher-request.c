/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "environments.h"
#include "json-util.h"
#include "launcher-request.h"
#include "macro.h"
#include "string-util.h"

static bool is_alpha_(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

bool launcher_env_name_is_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > LAUNCHER_ENV_NAME_MAX || !is_alpha_(name[0]))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!is_alpha_(name[i]) && !(name[i] >= '0' && name[i] <= '9'))
                        return false;
        /* SECURITY: nothing that steers the dynamic loader of every command. */
        if (strneq(name, "LD_", 3))
                return false;
        return true;
}

void launcher_request_done(LauncherRequest *r) {
        strv_free(r->env);
        strv_free(r->keep);
        *r = (LauncherRequest) {};
}

static bool string_is_clean(json_object *v, size_t max) {
        size_t n = (size_t) json_object_get_string_len(v);
        /* "\u0000" makes a NUL inside a JSON string. */
        return n <= max && !memchr(json_object_get_string(v), '\0', n);
}

/* A positive integer, clamped to max (UINT64_MAX: no maximum). */
static int parse_limit(json_object *v, uint64_t max, uint64_t *ret, bool *clamped) {
        if (!json_object_is_type(v, json_type_int))
                return -EINVAL;
        int64_t s = json_object_get_int64(v);
        uint64_t u = json_object_get_uint64(v);
        if (s <= 0 && u <= INT64_MAX)
                return -EINVAL; /* zero or negative */
        if (u > max) {
                u = max;
                *clamped = true;
        }
        *ret = u;
        return 0;
}

static const char *parse_limits(json_object *o, LauncherRequest *r) {
        if (!json_object_is_type(o, json_type_object))
                return "'limits' must be an object";
        json_object_object_foreach(o, key, v) {
                uint64_t *field;
                if (streq(key, "memory_max"))
                        field = &r->limits.memory_max;
                else if (streq(key, "tasks_max"))
                        field = &r->limits.tasks_max;
                else if (streq(key, "cpu_quota_percent"))
                        field = &r->limits.cpu_quota_percent;
                else if (streq(key, "runtime_max_sec"))
                        field = &r->limits.runtime_max_sec;
                else
                        return "unknown limit";
                /* The granted value so far is the maximum. */
                if (parse_limit(v, *field, field, &r->clamped) < 0)
                        return "limits must be positive integers";
        }
        return NULL;
}

static const char *parse_env(json_object *o, LauncherRequest *r) {
        if (!json_object_is_type(o, json_type_object))
                return "'env' must be an object";
        if (json_object_object_length(o) > LAUNCHER_ENV_MAX)
                return "too many environment variables";
        json_object_object_foreach(o, name, v) {
                _cleanup_free_ char *entry = NULL;
                if (!launcher_env_name_is_valid(name))
                        return "invalid or refused environment variable name";
                if (!json_object_is_type(v, json_type_string) || !string_is_clean(v, LAUNCHER_ENV_VALUE_MAX))
                        return "environment values must be strings of at most 4096 bytes";
                if (asprintf(&entry, "%s=%s", name, json_object_get_string(v)) < 0 || strv_extend(&r->env, entry) < 0)
                        return "out of memory";
        }
        return NULL;
}

static const char *parse_sandbox(json_object *j, LauncherRequest *r) {
        json_object *task = NULL;
        const char *error;

        json_object_object_foreach(j, key, v) {
                if (streq(key, "type"))
                        continue;
                if (streq(key, "task"))
                        task = v;
                else if (streq(key, "limits")) {
                        if ((error = parse_limits(v, r)))
                                return error;
                } else if (streq(key, "env")) {
                        if ((error = parse_env(v, r)))
                                return error;
                } else if (streq(key, "environment")) {
                        if (!json_object_is_type(v, json_type_string) || !string_is_clean(v, ENVIRONMENT_NAME_MAX) ||
                            !environment_name_is_valid(json_object_get_string(v)))
                                return "'environment' must be an environment's name";
                        memcpy(r->environment, json_object_get_string(v), strlen(json_object_get_string(v)) + 1);
                } else if (streq(key, "cache")) {
                        if (!json_object_is_type(v, json_type_boolean))
                                return "'cache' must be a boolean";
                        r->cache = json_object_get_boolean(v);
                } else if (streq(key, "history")) {
                        if (!json_object_is_type(v, json_type_boolean))
                                return "'history' must be a boolean";
                        r->history = json_object_get_boolean(v);
                } else if (streq(key, "proxy")) {
                        if (!json_object_is_type(v, json_type_boolean))
                                return "'proxy' must be a boolean";
                        r->proxy = json_object_get_boolean(v);
                } else
                        return "unknown field in a sandbox request";
        }
        if (!task || !json_object_is_type(task, json_type_string) || !string_is_clean(task, AGENTFAB_TASK_ID_LEN) ||
            !task_id_is_valid(json_object_get_string(task)))
                return "'task' must be a task id of 12 lower-case hex digits";
        memcpy(r->task, json_object_get_string(task), AGENTFAB_TASK_ID_LEN + 1);
        return NULL;
}

/* {"type":"freeze"|"thaw","task":ID}: the scope is found from the pidfd
 * that comes with it, never from anything named in the request; the id
 * only has to match what the kernel says. */
static const char *parse_freezer(json_object *j, LauncherRequest *r) {
        json_object *task = NULL;

        json_object_object_foreach(j, key, v) {
                if (streq(key, "type"))
                        continue;
                if (streq(key, "task"))
                        task = v;
                else
                        return "unknown field in a freeze or thaw request";
        }
        if (!task || !json_object_is_type(task, json_type_string) || !string_is_clean(task, AGENTFAB_TASK_ID_LEN) ||
            !task_id_is_valid(json_object_get_string(task)))
                return "'task' must be a task id of 12 lower-case hex digits";
        memcpy(r->task, json_object_get_string(task), AGENTFAB_TASK_ID_LEN + 1);
        return NULL;
}

static const char *parse_reap(json_object *j, LauncherRequest *r) {
        json_object *keep = NULL;

        json_object_object_foreach(j, key, v) {
                if (streq(key, "type"))
                        continue;
                if (streq(key, "keep"))
                        keep = v;
                else
                        return "unknown field in a reap request";
        }
        if (!keep || !json_object_is_type(keep, json_type_array) || json_object_array_length(keep) > LAUNCHER_KEEP_MAX)
                return "'keep' must be an array of at most 4096 task ids";
        /* An empty list is a list: strv, never NULL. */
        r->keep = calloc(1, sizeof(char *));
        if (!r->keep)
                return "out of memory";
        for (size_t i = 0; i < json_object_array_length(keep); i++) {
                json_object *id = json_object_array_get_idx(keep, i);
                if (!json_object_is_type(id, json_type_string) || !string_is_clean(id, AGENTFAB_TASK_ID_LEN) ||
                    !task_id_is_valid(json_object_get_string(id)))
                        return "'keep' must be an array of task ids";
                if (strv_extend(&r->keep, json_object_get_string(id)) < 0)
                        return "out of memory";
        }
        return NULL;
}

int launcher_request_parse(const char *text, size_t size, const LauncherLimits *maxima,
                           LauncherRequest *ret, const char **ret_error) {
        _cleanup_json_ json_object *j = NULL;
        const char *type, *error;
        LauncherRequest r = { .type = _LAUNCHER_REQUEST_TYPE_INVALID, .limits = *maxima };

        if (size >= LAUNCHER_REQUEST_MAX)
                error = "request too long";
        else if (json_parse_strict(text, size, &j) < 0)
                error = "request is not JSON";
        else if (!json_object_is_type(j, json_type_object))
                error = "request is not an object";
        else if (json_get_string(j, "type", &type) < 0)
                error = "request has no type";
        else if (streq(type, "sandbox")) {
                r.type = LAUNCHER_REQUEST_SANDBOX;
                error = parse_sandbox(j, &r);
        } else if (streq(type, "reap")) {
                r.type = LAUNCHER_REQUEST_REAP;
                error = parse_reap(j, &r);
        } else if (streq(type, "freeze") || streq(type, "thaw")) {
                r.type = streq(type, "freeze") ? LAUNCHER_REQUEST_FREEZE : LAUNCHER_REQUEST_THAW;
                error = parse_freezer(j, &r);
        } else
                error = "unknown request type";

        if (error) {
                launcher_request_done(&r);
                *ret_error = error;
                return streq(error, "out of memory") ? -ENOMEM : -EINVAL;
        }
        *ret = r;
        *ret_error = NULL;
        return 0;
}
