/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "environments.h"
#include "forge.h"
#include "fs-util.h"
#include "json-util.h"
#include "log.h"
#include "string-util.h"
#include "task-save.h"
#include "task-store.h"
#include "test-output.h"
#include "workspace-path.h"

static json_object *progress_to_json(const TaskProgress *p) {
        _cleanup_json_ json_object *j = json_object_new_object();

        if (!j ||
            json_add_uint64(j, "step", p->step) < 0 ||
            json_add_uint64(j, "messages", p->messages) < 0 ||
            json_add_uint64(j, "conversation_size", p->conversation_size) < 0 ||
            json_add_uint64(j, "extra_files", p->extra_files) < 0 ||
            json_add_uint64(j, "extra_lines", p->extra_lines) < 0 ||
            json_add_string(j, "checkpoint", p->checkpoint) < 0 ||
            json_add_string(j, "head", p->head) < 0 ||
            json_add_string(j, "plan", p->plan) < 0 ||
            json_add_uint64(j, "tokens", p->tokens) < 0 ||
            json_add_uint64(j, "commands", p->commands) < 0 ||
            json_add_uint64(j, "wall_usec", p->wall_usec) < 0 ||
            json_add_uint64(j, "extra_steps", p->extra_steps) < 0 ||
            json_add_uint64(j, "extra_tokens", p->extra_tokens) < 0 ||
            json_add_uint64(j, "extra_commands", p->extra_commands) < 0 ||
            json_add_uint64(j, "extra_wall_usec", p->extra_wall_usec) < 0 ||
            json_add_uint64(j, "rejections", p->rejections) < 0 ||
            json_add_uint64(j, "malformed", p->malformed) < 0 ||
            json_add_uint64(j, "test_failures", p->test_failures) < 0 ||
            json_add_uint64(j, "test_signature", p->test_signature) < 0 ||
            (p->baseline_passed >= 0 && json_add_uint64(j, "baseline_passed", (uint64_t) p->baseline_passed) < 0) ||
            json_object_object_add(j, "baseline_done", json_object_new_boolean(p->baseline_done)) < 0 ||
            json_add_string(j, "last_tests", p->last_tests) < 0 ||
            json_object_object_add(j, "last_test_exit", json_object_new_int(p->last_test_exit)) < 0 ||
            json_add_string(j, "breaker", p->breaker) < 0 ||
            json_add_string(j, "breaker_commit", p->breaker_commit) < 0 ||
            json_object_object_add(j, "finished", json_object_new_boolean(p->finished)) < 0 ||
            json_object_object_add(j, "reviewed", json_object_new_boolean(p->reviewed)) < 0 ||
            json_add_uint64(j, "review_rounds", p->review_rounds) < 0 ||
            json_add_string(j, "summary", p->summary) < 0 ||
            json_add_string(j, "diff_shown", p->diff_shown) < 0 ||
            json_object_object_add(j, "pushed", json_object_new_boolean(p->pushed)) < 0 ||
            json_add_string(j, "pull_request", p->pull_request) < 0 ||
            json_add_string(j, "environment_identity", p->environment_identity) < 0 ||
            json_add_uint64(j, "requirement", p->requirement) < 0 ||
            json_object_object_add(j, "verified", json_object_new_boolean(p->verified)) < 0 ||
            json_add_string(j, "paused_from", task_state_to_string(p->paused_from)) < 0)
                return NULL;
        if ((p->allowed_hosts && json_add_strv(j, "allowed_hosts", p->allowed_hosts) < 0) ||
            (p->approvals && json_add_strv(j, "approvals", p->approvals) < 0))
                return NULL;
        if (p->n_test_windows > 0) {
                json_object *a = json_object_new_array();
                if (!a || json_object_object_add(j, "test_windows", a) < 0) {
                        json_object_put(a);
                        return NULL;
                }
                for (size_t i = 0; i < 2 * p->n_test_windows; i++)
                        if (json_object_array_add(a, json_object_new_uint64(p->test_windows[i])) < 0)
                                return NULL;
        }
        if (p->baseline_recorded &&
            (json_object_object_add(j, "baseline_recorded", json_object_new_boolean(true)) < 0 ||
             json_object_object_add(j, "baseline_exit", json_object_new_int(p->baseline_exit)) < 0 ||
             json_object_object_add(j, "baseline_failed", json_object_new_int(p->baseline_failed)) < 0 ||
             (p->baseline_failures && json_add_strv(j, "baseline_failures", p->baseline_failures) < 0) ||
             json_object_object_add(j, "baseline_failures_complete",
                                    json_object_new_boolean(p->baseline_failures_complete)) < 0))
                return NULL;
        if (p->n_recent_calls > 0) {
                json_object *a = json_object_new_array();
                if (!a || json_object_object_add(j, "recent_calls", a) < 0) {
                        json_object_put(a);
                        return NULL;
                }
                for (unsigned i = 0; i < p->n_recent_calls; i++)
                        if (json_object_array_add(a, json_object_new_uint64(p->recent_calls[i])) < 0)
                                return NULL;
        }
        if (p->budget_warned != 0 && json_add_uint64(j, "budget_warned", p->budget_warned) < 0)
                return NULL;
        /* What the task used; the wall time is the progress's own. */
        {
                json_object *res = NULL;
                if (task_resources_to_json(&p->resources, &res) < 0)
                        return NULL;
                json_object_object_del(res, "wall_usec");
                if (json_object_object_add(j, "resources", res) < 0) {
                        json_object_put(res);
                        return NULL;
                }
        }
        if ((p->written && json_add_strv(j, "written", p->written) < 0) ||
            (p->kept && json_add_strv(j, "kept", p->kept) < 0) ||
            json_add_string(j, "keep_pending", p->keep_pending) < 0 ||
            json_add_string(j, "keep_reason", p->keep_reason) < 0 ||
            json_add_string(j, "kept_note", p->kept_note) < 0)
                return NULL;
        return TAKE_PTR(j);
}

/* A list of workspace-relative paths of the progress record, bounded. */
static int progress_paths(json_object *j, const char *key, size_t max, char ***ret) {
        json_object *v;

        if (!json_object_object_get_ex(j, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > max)
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(v); i++) {
                json_object *h = json_object_array_get_idx(v, i);
                const char *s = json_object_is_type(h, json_type_string) ? json_object_get_string(h) : NULL;
                if (!s || workspace_path_check(s) < 0)
                        return -EBADMSG;
                if (strv_extend(ret, s) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Optional string of the progress record: absent is NULL, present must be a
 * string of bounded length. */
static int progress_string(json_object *j, const char *key, size_t max, char **ret) {
        json_object *v;

        if (!json_object_object_get_ex(j, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_string) || (size_t) json_object_get_string_len(v) > max)
                return -EBADMSG;
        return free_and_strdup(ret, json_object_get_string(v)) < 0 ? -ENOMEM : 0;
}

static int progress_uint(json_object *j, const char *key, uint64_t max, uint64_t *ret) {
        json_object *v;
        uint64_t u;

        if (!json_object_object_get_ex(j, key, &v))
                return 0;
        if (json_get_uint64(j, key, &u) < 0 || u > max)
                return -EBADMSG;
        *ret = u;
        return 0;
}

/* An optional integer of at least min. */
static int progress_int(json_object *j, const char *key, int min, int *ret) {
        json_object *v;

        if (!json_object_object_get_ex(j, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < min ||
            json_object_get_int64(v) > INT32_MAX)
                return -EBADMSG;
        *ret = json_object_get_int(v);
        return 0;
}

static bool progress_bool(json_object *j, const char *key) {
        json_object *v;
        return json_object_object_get_ex(j, key, &v) && json_object_is_type(v, json_type_boolean) &&
                json_object_get_boolean(v);
}

static bool commit_id_is_valid(const char *s) {
        if (!s)
                return true;
        if (strlen(s) != 40)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

static int progress_from_json(TaskProgress *p, json_object *j) {
        uint64_t u;
        json_object *v;
        int r;

        if (!json_object_is_type(j, json_type_object))
                return -EBADMSG;

#define U(key, max, field) do { u = (field); r = progress_uint(j, key, max, &u); if (r < 0) return r; (field) = u; } while (0)
        U("step", 1000000, p->step);
        U("messages", 100000000, p->messages);
        U("conversation_size", UINT64_MAX, p->conversation_size);
        U("extra_files", UINT64_MAX, p->extra_files);
        U("extra_lines", UINT64_MAX, p->extra_lines);
        U("tokens", UINT64_MAX, p->tokens);
        U("commands", UINT64_MAX, p->commands);
        U("wall_usec", UINT64_MAX, p->wall_usec);
        U("extra_steps", UINT64_MAX, p->extra_steps);
        U("extra_tokens", UINT64_MAX, p->extra_tokens);
        U("extra_commands", UINT64_MAX, p->extra_commands);
        U("extra_wall_usec", UINT64_MAX, p->extra_wall_usec);
        U("rejections", 1000000, p->rejections);
        U("review_rounds", 1000000, p->review_rounds);
        U("malformed", 1000000, p->malformed);
        U("test_failures", 1000000, p->test_failures);
        U("test_signature", UINT64_MAX, p->test_signature);
        U("requirement", 1000000, p->requirement);
#undef U
        if (json_object_object_get_ex(j, "baseline_passed", &v)) {
                if (json_get_uint64(j, "baseline_passed", &u) < 0 || u > INT32_MAX)
                        return -EBADMSG;
                p->baseline_passed = (int) u;
        }
        if (json_object_object_get_ex(j, "last_test_exit", &v)) {
                if (!json_object_is_type(v, json_type_int))
                        return -EBADMSG;
                p->last_test_exit = json_object_get_int(v);
        }
        p->baseline_done = progress_bool(j, "baseline_done");
        p->finished = progress_bool(j, "finished");
        p->reviewed = progress_bool(j, "reviewed");
        p->pushed = progress_bool(j, "pushed");
        p->verified = progress_bool(j, "verified");

        if ((r = progress_string(j, "checkpoint", 40, &p->checkpoint)) < 0 ||
            (r = progress_string(j, "head", 40, &p->head)) < 0 ||
            (r = progress_string(j, "plan", 65536, &p->plan)) < 0 ||
            (r = progress_string(j, "last_tests", 16, &p->last_tests)) < 0 ||
            (r = progress_string(j, "breaker", 64, &p->breaker)) < 0 ||
            (r = progress_string(j, "breaker_commit", 40, &p->breaker_commit)) < 0 ||
            (r = progress_string(j, "summary", 65536, &p->summary)) < 0 ||
            (r = progress_string(j, "diff_shown", 40, &p->diff_shown)) < 0 ||
            (r = progress_string(j, "pull_request", FORGE_URL_MAX, &p->pull_request)) < 0 ||
            (r = progress_string(j, "environment_identity", 1024, &p->environment_identity)) < 0)
                return r;
        if (!commit_id_is_valid(p->checkpoint) || !commit_id_is_valid(p->head) || !commit_id_is_valid(p->breaker_commit) ||
            !commit_id_is_valid(p->diff_shown))
                return -EBADMSG;

        /* SECURITY: what the proxy will let the task reach: only entries of
         * the shape an approval could have added, bounded. */
        if (json_object_object_get_ex(j, "allowed_hosts", &v)) {
                if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > TASK_ALLOWED_HOSTS_MAX)
                        return -EBADMSG;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *h = json_object_array_get_idx(v, i);
                        if (!json_object_is_type(h, json_type_string) ||
                            !environment_allow_entry_is_valid(json_object_get_string(h)))
                                return -EBADMSG;
                        if (strv_extend(&p->allowed_hosts, json_object_get_string(h)) < 0)
                                return -ENOMEM;
                }
        }
        /* Text for a trailer: one line each, bounded. */
        if (json_object_object_get_ex(j, "approvals", &v)) {
                if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > TASK_APPROVALS_MAX)
                        return -EBADMSG;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *h = json_object_array_get_idx(v, i);
                        const char *s = json_object_is_type(h, json_type_string) ? json_object_get_string(h) : NULL;
                        if (!s || isempty(s) || strlen(s) > TASK_APPROVAL_TEXT_MAX || strpbrk(s, "\n\r"))
                                return -EBADMSG;
                        if (strv_extend(&p->approvals, s) < 0)
                                return -ENOMEM;
                }
        }
        if (json_object_object_get_ex(j, "test_windows", &v)) {
                size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 1;
                if (n % 2 != 0 || n > 2 * TASK_TEST_WINDOWS_MAX)
                        return -EBADMSG;
                if (n > 0) {
                        p->test_windows = calloc(n, sizeof(uint64_t));
                        if (!p->test_windows)
                                return -ENOMEM;
                }
                for (size_t i = 0; i < n; i++) {
                        json_object *w = json_object_array_get_idx(v, i);
                        if (!json_object_is_type(w, json_type_int) || json_object_get_int64(w) < 0)
                                return -EBADMSG;
                        p->test_windows[i] = json_object_get_uint64(w);
                        if (i % 2 == 1 && p->test_windows[i] < p->test_windows[i - 1])
                                return -EBADMSG;
                }
                p->n_test_windows = n / 2;
        }
        if ((r = progress_paths(j, "written", TASK_WRITTEN_MAX, &p->written)) < 0 ||
            (r = progress_paths(j, "kept", TASK_KEPT_MAX, &p->kept)) < 0 ||
            (r = progress_string(j, "keep_pending", 4096, &p->keep_pending)) < 0 ||
            (r = progress_string(j, "keep_reason", 8192, &p->keep_reason)) < 0 ||
            (r = progress_string(j, "kept_note", 65536, &p->kept_note)) < 0)
                return r;
        if (p->keep_pending && workspace_path_check(p->keep_pending) < 0)
                return -EBADMSG;
        /* The baseline's failures: names the model and the journal see,
         * so bounded and free of control characters. */
        p->baseline_recorded = progress_bool(j, "baseline_recorded");
        p->baseline_failures_complete = progress_bool(j, "baseline_failures_complete");
        if ((r = progress_int(j, "baseline_exit", INT32_MIN, &p->baseline_exit)) < 0 ||
            (r = progress_int(j, "baseline_failed", -1, &p->baseline_failed)) < 0)
                return r;
        if (json_object_object_get_ex(j, "baseline_failures", &v)) {
                if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > TEST_NAMES_MAX)
                        return -EBADMSG;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *h = json_object_array_get_idx(v, i);
                        const char *s = json_object_is_type(h, json_type_string) ? json_object_get_string(h) : NULL;
                        if (isempty(s) || strlen(s) > TEST_NAME_MAX || !string_is_safe(s, false))
                                return -EBADMSG;
                        if (strv_extend(&p->baseline_failures, s) < 0)
                                return -ENOMEM;
                }
        }
        if (json_object_object_get_ex(j, "recent_calls", &v)) {
                if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > TASK_RECENT_CALLS_MAX)
                        return -EBADMSG;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *c = json_object_array_get_idx(v, i);
                        if (!json_object_is_type(c, json_type_int))
                                return -EBADMSG;
                        p->recent_calls[i] = json_object_get_uint64(c);
                }
                p->n_recent_calls = (unsigned) json_object_array_length(v);
        }
        u = 0;
        if ((r = progress_uint(j, "budget_warned", TASK_BUDGET_WARNED_STEPS | TASK_BUDGET_WARNED_TOKENS |
                               TASK_BUDGET_WARNED_WALL, &u)) < 0)
                return r;
        p->budget_warned = (unsigned) u;
        /* A state file older than the accounting has none: nothing counted. */
        v = NULL;
        (void) json_object_object_get_ex(j, "resources", &v);
        if ((r = task_resources_from_json(&p->resources, v)) < 0)
                return r;
        p->resources.wall_usec = p->wall_usec;
        if (json_object_object_get_ex(j, "paused_from", &v)) {
                /* Only what Pause() may leave: a paused task goes back to work. */
                TaskState s = json_object_is_type(v, json_type_string) ? task_state_from_string(json_object_get_string(v)) :
                                                                          _TASK_STATE_INVALID;
                if (!IN_SET(s, TASK_RUNNING, TASK_PREPARING))
                        return -EBADMSG;
                p->paused_from = s;
        }
        return 0;
}

json_object *task_to_json(const Task *t) {
        _cleanup_json_ json_object *j = json_object_new_object();
        _cleanup_json_ json_object *spec = json_object_new_object();
        _cleanup_json_ json_object *limits = json_object_new_object();

        if (!j || !spec || !limits)
                return NULL;

        for (int i = 0; i < _TASK_LIMIT_MAX; i++)
                if (t->spec.limits[i] != TASK_LIMIT_UNSET &&
                    json_add_uint64(limits, task_limit_to_string(i), t->spec.limits[i]) < 0)
                        return NULL;
        for (size_t i = 0; i < t->spec.n_extra_limits; i++)
                if (json_add_uint64(limits, t->spec.extra_limit_names[i], t->spec.extra_limit_values[i]) < 0)
                        return NULL;

        if (json_add_string(spec, "repository", t->spec.repository) < 0 ||
            json_add_string(spec, "goal", t->spec.goal) < 0 ||
            json_add_string(spec, "acceptance", t->spec.acceptance) < 0 ||
            json_add_string(spec, "test_command", t->spec.test_command) < 0 ||
            json_add_string(spec, "coverage_report", t->spec.coverage_report) < 0 ||
            json_add_string(spec, "base", t->spec.base) < 0 ||
            json_add_string(spec, "model", t->spec.model) < 0 ||
            json_add_string(spec, "replay", t->spec.replay) < 0 ||
            json_add_string(spec, "reference", t->spec.reference) < 0 ||
            json_add_string(spec, "push_url", t->spec.push_url) < 0 ||
            json_add_string(spec, "forge", t->spec.forge) < 0 ||
            json_add_string(spec, "forge_repository", t->spec.forge_repository) < 0 ||
            json_add_string(spec, "pull_request_base", t->spec.pull_request_base) < 0 ||
            json_add_string(spec, "environment", t->spec.environment) < 0 ||
            (t->spec.submodules && json_object_object_add(spec, "submodules", json_object_new_boolean(true)) < 0) ||
            json_object_object_add(spec, "limits", TAKE_PTR(limits)) < 0)
                return NULL;

        if (json_add_uint64(j, "version", TASK_STATE_VERSION) < 0 ||
            json_add_string(j, "id", t->id) < 0 ||
            json_add_uint64(j, "owner", t->owner) < 0 ||
            json_add_string(j, "state", task_state_to_string(t->state)) < 0 ||
            json_add_string(j, "reason", t->reason) < 0 ||
            json_add_uint64(j, "created_usec", t->created_usec) < 0 ||
            json_add_uint64(j, "updated_usec", t->updated_usec) < 0 ||
            json_add_string(j, "branch", t->branch) < 0 ||
            json_object_object_add(j, "spec", TAKE_PTR(spec)) < 0 ||
            json_object_object_add(j, "progress", progress_to_json(&t->progress)) < 0)
                return NULL;

        return TAKE_PTR(j);
}

static int fail(char **ret_error, int r, const char *msg) {
        if (ret_error)
                *ret_error = strdup(msg);
        return r;
}

static int spec_from_json(TaskSpec *spec, json_object *s, char **ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        json_object *limits;

        if (!json_object_is_type(s, json_type_object))
                return fail(ret_error, -EBADMSG, "'spec' is not an object");

        json_object_object_foreach(s, key, value) {
                if (streq(key, "limits"))
                        continue;
                if (streq(key, "submodules")) {
                        if (!json_object_is_type(value, json_type_boolean))
                                return fail(ret_error, -EBADMSG, "'submodules' is not a boolean");
                        spec->submodules = json_object_get_boolean(value);
                        continue;
                }
                if (!json_object_is_type(value, json_type_string))
                        return fail(ret_error, -EBADMSG, "a spec field is not a string");
                if (task_spec_set_string(spec, key, json_object_get_string(value), &error) < 0)
                        return fail(ret_error, -EBADMSG, error.message ?: "invalid spec");
        }

        if (json_object_object_get_ex(s, "limits", &limits)) {
                if (!json_object_is_type(limits, json_type_object))
                        return fail(ret_error, -EBADMSG, "'limits' is not an object");
                json_object_object_foreach(limits, lkey, lvalue) {
                        uint64_t v;
                        (void) lvalue;
                        if (json_get_uint64(limits, lkey, &v) < 0 ||
                            task_spec_set_limit(spec, lkey, v, &error) < 0)
                                return fail(ret_error, -EBADMSG, error.message ?: "invalid limit");
                }
        }

        if (task_spec_validate(spec, &error) < 0)
                return fail(ret_error, -EBADMSG, error.message);
        return 0;
}

int task_from_json(Task *t, json_object *j, char **ret_error) {
        const char *id, *state, *reason;
        uint64_t version, owner, created, updated;
        json_object *spec;
        TaskState s;
        int r;

        if (!json_object_is_type(j, json_type_object))
                return fail(ret_error, -EBADMSG, "not a JSON object");
        if (json_get_uint64(j, "version", &version) < 0)
                return fail(ret_error, -EBADMSG, "no 'version'");
        if (version != TASK_STATE_VERSION) {
                if (ret_error && asprintf(ret_error, "state file version %llu is not supported (this agentfabd reads version %i)",
                                          (unsigned long long) version, TASK_STATE_VERSION) < 0)
                        *ret_error = NULL;
                return -EPROTONOSUPPORT;
        }

        if (json_get_string(j, "id", &id) < 0 || !streq(id, t->id))
                return fail(ret_error, -EBADMSG, "'id' missing or not matching the directory");
        if (json_get_uint64(j, "owner", &owner) < 0 || owner >= UID_INVALID)
                return fail(ret_error, -EBADMSG, "'owner' missing or invalid");
        if (json_get_string(j, "state", &state) < 0 || (s = task_state_from_string(state)) < 0)
                return fail(ret_error, -EBADMSG, "'state' missing or unknown");
        if (json_get_string(j, "reason", &reason) < 0 || strlen(reason) > 4096)
                return fail(ret_error, -EBADMSG, "'reason' missing or too long");
        if (json_get_uint64(j, "created_usec", &created) < 0 ||
            json_get_uint64(j, "updated_usec", &updated) < 0)
                return fail(ret_error, -EBADMSG, "timestamps missing");
        if (!json_object_object_get_ex(j, "spec", &spec))
                return fail(ret_error, -EBADMSG, "'spec' missing");

        TaskSpec parsed;
        task_spec_init(&parsed);
        r = spec_from_json(&parsed, spec, ret_error);
        if (r < 0) {
                task_spec_done(&parsed);
                return r;
        }

        /* Records of the first release have no progress: nothing done yet. */
        TaskProgress progress = { .baseline_passed = -1, .paused_from = TASK_RUNNING };
        json_object *pj;
        task_resources_init(&progress.resources);
        if (json_object_object_get_ex(j, "progress", &pj)) {
                r = progress_from_json(&progress, pj);
                if (r < 0) {
                        task_progress_done(&progress);
                        task_spec_done(&parsed);
                        return fail(ret_error, r == -ENOMEM ? r : -EBADMSG, "'progress' is invalid");
                }
        }
        task_progress_done(&t->progress);
        t->progress = progress;

        r = free_and_strdup(&t->reason, reason);
        if (r < 0) {
                task_spec_done(&parsed);
                return r;
        }
        task_spec_done(&t->spec);
        t->spec = parsed;
        t->owner = (uid_t) owner;
        t->state = s;
        t->created_usec = created;
        t->updated_usec = updated;
        return 0;
}

char *task_state_text(const Task *t) {
        _cleanup_json_ json_object *j = task_to_json(t);
        const char *text;
        char *line;

        if (!j)
                return NULL;
        text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return NULL;
        if (asprintf(&line, "%s\n", text) < 0)
                return NULL;
        return line;
}

static int task_write_state(const Task *t, int dir_fd) {
        _cleanup_free_ char *line = task_state_text(t);

        if (!line)
                return -ENOMEM;
        return write_file_atomic(dir_fd, TASK_STATE_FILE, line, strlen(line), 0600);
}

int task_save(Task *t) {
        if (t->broken)
                return -EROFS;

        /* A state change written in a thread (task-save.h) lands first:
         * what is written now is newer. Rare, and one fsync long. */
        task_save_wait(t);
        t->save_seq++;

        _cleanup_close_ int fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return task_write_state(t, fd);
}

int task_settle_progress(Task *t) {
        _cleanup_(task_freep) Task *disk = NULL;
        int r;

        if (!t->progress_unsaved)
                return 0;

        /* What the file acknowledges is what happened: the steps the memory
         * holds beyond it are redone, their conversation lines cut off when
         * the agent starts, exactly as after a crash. */
        r = task_load(t->tasks_fd, t->id, &disk);
        if (r < 0)
                return r;
        if (disk->broken)
                return -EBADMSG;

        task_progress_done(&t->progress);
        t->progress = disk->progress;
        disk->progress = (TaskProgress) {};
        t->progress_unsaved = false;
        log_info("Task '%s': the steps its state file never acknowledged are done again (it goes on from step %u).",
                 t->id, t->progress.step);
        return 0;
}

static char *new_dir_name(const Task *t) {
        char *name;
        return asprintf(&name, ".new-%s", t->id) < 0 ? NULL : name;
}

int task_create_begin(Task *t, int *ret_dir_fd) {
        _cleanup_free_ char *tmp = new_dir_name(t);

        if (!tmp)
                return -ENOMEM;
        (void) rm_rf_at(t->tasks_fd, tmp);
        if (mkdirat(t->tasks_fd, tmp, 0700) < 0)
                return -errno;
        int fd = openat(t->tasks_fd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                int r = -errno;
                (void) rm_rf_at(t->tasks_fd, tmp);
                return r;
        }
        *ret_dir_fd = fd;
        return 0;
}

int task_create_commit(Task *t, int dir_fd) {
        _cleanup_free_ char *tmp = new_dir_name(t);
        int r;

        if (!tmp)
                return -ENOMEM;
        r = task_write_state(t, dir_fd);
        /* renameat2(RENAME_NOREPLACE): never replace a task that is already there. */
        if (r >= 0 && renameat2(t->tasks_fd, tmp, t->tasks_fd, t->id, RENAME_NOREPLACE) < 0)
                r = -errno;
        if (r >= 0)
                r = fsync_directory(t->tasks_fd);
        if (r < 0) {
                task_create_abort(t);
                return r;
        }
        return 0;
}

void task_create_abort(Task *t) {
        _cleanup_free_ char *tmp = new_dir_name(t);

        if (tmp)
                (void) rm_rf_at(t->tasks_fd, tmp);
}

int task_create(Task *t) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = task_create_begin(t, &fd);
        if (r < 0)
                return r;
        return task_create_commit(t, fd);
}

int task_load(int tasks_fd, const char *id, Task **ret) {
        _cleanup_(task_freep) Task *t = NULL;
        _cleanup_free_ char *text = NULL, *error = NULL;
        _cleanup_json_ json_object *j = NULL;
        size_t size;
        int r;

        r = task_new(&t, id);
        if (r < 0)
                return r;
        t->tasks_fd = tasks_fd;

        _cleanup_close_ int fd = openat(tasks_fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;

        r = read_file_at(fd, TASK_STATE_FILE, TASK_STATE_FILE_MAX, &text, &size);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                if (asprintf(&error, "cannot read %s: %s", TASK_STATE_FILE, strerror(-r)) < 0)
                        return -ENOMEM;
        } else if (json_parse_strict(text, size, &j) < 0) {
                error = strdup("not valid JSON (truncated or garbage)");
                if (!error)
                        return -ENOMEM;
        } else {
                r = task_from_json(t, j, &error);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 && !error)
                        return -ENOMEM;
                if (r >= 0)
                        error = mfree_ptr(error);
        }

        if (error) {
                /* Keep the record, but failed and read-only, with the reason. */
                task_spec_done(&t->spec);
                t->broken = true;
                t->state = TASK_FAILED;
                t->owner = 0; /* unknown: only root and managers see it */
                free(t->reason);
                if (asprintf(&t->reason, "State file unreadable: %s", error) < 0)
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(t);
        return 0;
}

void task_store_clean(int tasks_fd) {
        DIR *d = xopendirat(tasks_fd, ".", 0);
        if (!d)
                return;
        for (struct dirent *de; (de = readdir(d));)
                if (strneq(de->d_name, ".new-", 5)) {
                        log_info("Removing '%s', left by an interrupted task creation.", de->d_name);
                        (void) rm_rf_at(tasks_fd, de->d_name);
                }
        closedir(d);
}

int task_append_event(Task *t, json_object *event) {
        _cleanup_free_ char *line = NULL;

        if (t->broken)
                return -EROFS;

        _cleanup_close_ int fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (asprintf(&line, "%s\n", json_to_line(event)) < 0)
                return -ENOMEM;
        return append_file_at(fd, TASK_EVENTS_FILE, line, strlen(line), 0600);
}

int task_read_json_at(int dir_fd, const char *name, size_t max, json_object **ret) {
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        r = read_file_at(dir_fd, name, max, &text, &size);
        if (r < 0)
                return r;
        return json_parse_strict(text, size, ret);
}

int task_read_json(Task *t, const char *name, size_t max, json_object **ret) {
        _cleanup_close_ int dir_fd = -EBADF;

        if (t->tasks_fd < 0)
                return -ENOENT;
        dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return -errno;
        return task_read_json_at(dir_fd, name, max, ret);
}
