/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "agentfab-bus.h"
#include "environments.h"
#include "forge.h"
#include "string-table.h"
#include "string-util.h"
#include "task-id.h"
#include "task-spec.h"
#include "workspace-path.h"

static const char *const task_limit_table[_TASK_LIMIT_MAX] = {
        [TASK_LIMIT_MAX_STEPS]           = "max_steps",
        [TASK_LIMIT_MAX_WALL_CLOCK_SEC]  = "max_wall_clock_sec",
        [TASK_LIMIT_MAX_TOKENS]          = "max_tokens",
        [TASK_LIMIT_MAX_COMMANDS]        = "max_commands",
        [TASK_LIMIT_COMMAND_TIMEOUT_SEC] = "command_timeout_sec",
        [TASK_LIMIT_MEMORY_MAX]          = "memory_max",
        [TASK_LIMIT_TASKS_MAX]           = "tasks_max",
        [TASK_LIMIT_CPU_QUOTA_PERCENT]   = "cpu_quota_percent",
        [TASK_LIMIT_MAX_CPU_SEC]         = "max_cpu_sec",
        [TASK_LIMIT_MAX_NETWORK_BYTES]   = "max_network_bytes",
        [TASK_LIMIT_MAX_COST]            = "max_cost",
};

DEFINE_STRING_TABLE_LOOKUP(task_limit, TaskLimit);

char *task_limit_names(void) {
        _cleanup_free_ char *s = NULL;

        for (TaskLimit l = 0; l < _TASK_LIMIT_MAX; l++) {
                char *n = NULL;
                if (asprintf(&n, "%s%s%s", strempty(s), s ? ", " : "", task_limit_to_string(l)) < 0)
                        return NULL;
                free(s);
                s = n;
        }
        return TAKE_PTR(s);
}

void task_spec_init(TaskSpec *spec) {
        *spec = (TaskSpec) { .repository_fd = -EBADF };
        for (int i = 0; i < _TASK_LIMIT_MAX; i++)
                spec->limits[i] = TASK_LIMIT_UNSET;
}

void task_spec_done(TaskSpec *spec) {
        for (size_t i = 0; i < spec->n_extra_limits; i++)
                free(spec->extra_limit_names[i]);
        free(spec->repository);
        free(spec->goal);
        free(spec->acceptance);
        free(spec->test_command);
        free(spec->coverage_report);
        free(spec->base);
        free(spec->model);
        free(spec->replay);
        free(spec->reference);
        free(spec->push_url);
        free(spec->forge);
        free(spec->forge_repository);
        free(spec->environment);
        free(spec->pull_request_base);
        safe_close(spec->repository_fd);
        task_spec_init(spec);
}

bool task_repository_url_is_valid(const char *url) {
        const char *host, *end, *at;
        bool ssh;

        /* SECURITY: the daemon fetches a URL with its own network access:
         * https, or ssh with the key and known hosts of the daemon's [Git]
         * configuration (never its own ~/.ssh); no plain http, no git://, no
         * file:// that would read local paths unchecked. No password in the
         * URL, which would be stored and logged; a user name only for ssh,
         * where it says whom to log in as. */
        if (!url)
                return false;
        ssh = strneq(url, "ssh://", 6);
        if (!ssh && !strneq(url, "https://", 8))
                return false;
        host = url + (ssh ? 6 : 8);
        end = host + strcspn(host, "/?#");
        for (const char *c = url; *c; c++)
                if ((unsigned char) *c <= ' ' || *c == '\\' || (unsigned char) *c == 0x7f)
                        return false;
        at = memchr(host, '@', (size_t) (end - host));
        if (at) {
                if (!ssh || at == host || memchr(host, ':', (size_t) (at - host)) ||
                    memchr(at + 1, '@', (size_t) (end - at - 1)))
                        return false;
                host = at + 1;
        }
        if (end == host || host[0] == ':')
                return false;
        if (ssh) {
                /* What libgit2 and the host key check agree on: a plain
                 * path, a port of digits if any. */
                const char *h = host, *colon;

                if (h[0] == '[') {
                        h = memchr(host, ']', (size_t) (end - host));
                        if (!h)
                                return false;
                }
                colon = memchr(h, ':', (size_t) (end - h));
                if (colon) {
                        if (colon + 1 == end || colon + 6 < end)
                                return false;
                        for (const char *c = colon + 1; c < end; c++)
                                if (*c < '0' || *c > '9')
                                        return false;
                }
                if (*end != '/' || strpbrk(url, "?#"))
                        return false;
        }
        return *end == '/' && end[1] != '\0';
}

static int invalid(sd_bus_error *error, const char *fmt, const char *key) {
        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC, fmt, key);
}

bool task_base_is_valid(const char *base) {
        /* A conservative subset of git-check-ref-format(1): refs, tags, HEAD,
         * and object ids. The base is resolved in the repository later; this
         * only keeps nonsense and option-like strings out. */
        size_t l = strlen(base);

        if (l == 0 || l > TASK_BASE_MAX)
                return false;
        if (base[0] == '-' || base[0] == '/' || base[l - 1] == '/' || base[l - 1] == '.')
                return false;
        if (strstr(base, "..") || strstr(base, "//") || strstr(base, "@{") || strstr(base, "/."))
                return false;
        if (l >= 5 && streq(base + l - 5, ".lock"))
                return false;
        for (const unsigned char *c = (const unsigned char *) base; *c; c++)
                if (*c <= ' ' || *c == 127 || strchr("~^:?*[\\", *c))
                        return false;
        return true;
}

bool task_model_is_valid(const char *model) {
        size_t l = strlen(model);

        if (l == 0 || l > TASK_MODEL_MAX)
                return false;
        for (const char *c = model; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr("_.-", *c))
                        return false;
        return model[0] != '.' && model[0] != '-';
}

bool task_reference_is_valid(const char *reference) {
        size_t l = strlen(reference);

        /* SECURITY: it becomes a trailer line of every commit and a line of
         * the pull request: one line, no spaces that could make it look
         * like more than one value, nothing a terminal or parser would take
         * for control. Bytes >= 0x80 are allowed (ids in other scripts) and
         * made valid UTF-8 where it is written. */
        if (l == 0 || l > TASK_REFERENCE_MAX || reference[0] == '-')
                return false;
        for (const unsigned char *c = (const unsigned char *) reference; *c; c++)
                if (*c <= ' ' || *c == 127)
                        return false;
        return true;
}

/* Letters, digits, '_', '.', '/', '-': what a forge's branch names are made of. */
static bool branch_chars_only(const char *s) {
        for (; *s; s++)
                if (!isalnum((unsigned char) *s) && !strchr("_./-", *s))
                        return false;
        return true;
}

int task_spec_set_string(TaskSpec *spec, const char *key, const char *value, sd_bus_error *error) {
        char **field;
        size_t max;
        bool multiline;

        if (streq(key, "repository")) {
                field = &spec->repository, max = TASK_REPOSITORY_MAX, multiline = false;
                if (strstr(value, "://")) {
                        if (!task_repository_url_is_valid(value))
                                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                         "Repository URL '%s' is not supported: only https://HOST/PATH "
                                                         "without a user name or password in it, or "
                                                         "ssh://[USER@]HOST[:PORT]/PATH without a password.", value);
                } else if (value[0] != '/' && strchr(value, ':') && strcspn(value, ":") < strcspn(value, "/"))
                        /* git's scp-like USER@HOST:PATH is not taken: one form per
                         * thing, and the spelled-out one says which port. */
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Repository '%s' looks like git's scp-like syntax, which is not "
                                                 "supported: write it as ssh://[USER@]HOST[:PORT]/PATH.", value);
                else if (value[0] != '/')
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Repository '%s' is not an absolute path.", value);
        } else if (streq(key, "goal"))
                field = &spec->goal, max = TASK_GOAL_MAX, multiline = true;
        else if (streq(key, "acceptance"))
                field = &spec->acceptance, max = TASK_ACCEPTANCE_MAX, multiline = true;
        else if (streq(key, "test_command"))
                field = &spec->test_command, max = TASK_TEST_COMMAND_MAX, multiline = true;
        else if (streq(key, "coverage_report")) {
                field = &spec->coverage_report, max = TASK_COVERAGE_REPORT_MAX, multiline = false;
                /* SECURITY: read by the daemon beneath the workspace only
                 * (workspace_open()); refused here when it could not be. */
                if (workspace_path_check(value) < 0)
                        return invalid(error, "Key 'coverage_report' must be a relative path inside the repository, "
                                       "without '..'.", NULL);
        } else if (streq(key, "base")) {
                field = &spec->base, max = TASK_BASE_MAX, multiline = false;
                if (!task_base_is_valid(value))
                        return invalid(error, "Key 'base' is not a valid git ref or object id.", NULL);
        } else if (streq(key, "model")) {
                field = &spec->model, max = TASK_MODEL_MAX, multiline = false;
                if (!task_model_is_valid(value))
                        return invalid(error, "Key 'model' must be a profile name: letters, digits, '_', '.', '-', at most 64.", NULL);
        } else if (streq(key, "environment")) {
                field = &spec->environment, max = ENVIRONMENT_NAME_MAX, multiline = false;
                if (!environment_name_is_valid(value))
                        return invalid(error, "Key 'environment' must be an environment's name: letters, digits, '_', '.', '-', at most 64.", NULL);
        } else if (streq(key, "replay")) {
                field = &spec->replay, max = AGENTFAB_TASK_ID_LEN, multiline = false;
                if (!task_id_is_valid(value))
                        return invalid(error, "Key 'replay' must be a task id (12 hexadecimal digits).", NULL);
        } else if (streq(key, "reference")) {
                field = &spec->reference, max = TASK_REFERENCE_MAX, multiline = false;
                if (!task_reference_is_valid(value))
                        return invalid(error, "Key 'reference' must be a ticket id or URL: 1 to 256 printable characters, "
                                       "no spaces or control characters, not beginning with '-'.", NULL);
        } else if (streq(key, "push_url")) {
                field = &spec->push_url, max = TASK_PUSH_URL_MAX, multiline = false;
                /* Syntax only here: whether file:// is allowed is the
                 * configuration's to say, at submission. */
                if (!forge_push_url_is_valid(value, true))
                        return invalid(error, "Key 'push_url' must be an https:// URL with a path and no user name or password "
                                       "(or file:/// where the forge allows it).", NULL);
        } else if (streq(key, "forge")) {
                field = &spec->forge, max = TASK_FORGE_MAX, multiline = false;
                if (!forge_name_is_valid(value) || strlen(value) > TASK_FORGE_MAX)
                        return invalid(error, "Key 'forge' must be a [Forge] name: letters, digits, '_', '.', '-', at most 64.", NULL);
        } else if (streq(key, "forge_repository")) {
                field = &spec->forge_repository, max = TASK_FORGE_REPOSITORY_MAX, multiline = false;
                if (!forge_repository_is_valid(value))
                        return invalid(error, "Key 'forge_repository' must be OWNER/REPO, each letters, digits, '_', '.', '-'.", NULL);
        } else if (streq(key, "pull_request_base")) {
                field = &spec->pull_request_base, max = TASK_BASE_MAX, multiline = false;
                /* SECURITY: the head is always the task's own agentfab/ID;
                 * proposing into another factory branch makes no sense. */
                if (!task_base_is_valid(value) || !branch_chars_only(value) || streq(value, "HEAD") ||
                    strneq(value, "agentfab/", 9) || strneq(value, "refs/", 5))
                        return invalid(error, "Key 'pull_request_base' must be a branch name (not HEAD, nothing under agentfab/).", NULL);
        } else if (streq(key, "limits"))
                return invalid(error, "Key '%s' must be of type a{sv}.", key);
        else
                return invalid(error, "Unknown key '%s' in task spec.", key);

        if (*field)
                return invalid(error, "Key '%s' given more than once.", key);
        if (strlen(value) > max)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Key '%s' is longer than %zu bytes.", key, max);
        if (!string_is_safe(value, multiline))
                return invalid(error, "Key '%s' contains control characters.", key);

        return free_and_strdup(field, value);
}

bool task_limit_name_is_valid(const char *name) {
        size_t l = strlen(name);

        if (l == 0 || l > TASK_LIMIT_NAME_MAX || !isalpha((unsigned char) name[0]))
                return false;
        for (const char *c = name; *c; c++)
                if (!isalnum((unsigned char) *c) && *c != '_')
                        return false;
        return true;
}

static int task_spec_set_extra_limit(TaskSpec *spec, const char *key, uint64_t value, sd_bus_error *error) {
        if (!task_limit_name_is_valid(key))
                return invalid(error, "Limit name '%s' is not valid: letters, digits and '_', at most 64.", key);
        for (size_t i = 0; i < spec->n_extra_limits; i++)
                if (streq(spec->extra_limit_names[i], key))
                        return invalid(error, "Limit '%s' given more than once.", key);
        if (spec->n_extra_limits >= TASK_EXTRA_LIMITS_MAX)
                return invalid(error, "Too many limits.", NULL);

        char *name = strdup(key);
        if (!name)
                return -ENOMEM;
        spec->extra_limit_names[spec->n_extra_limits] = name;
        spec->extra_limit_values[spec->n_extra_limits++] = value;
        return 0;
}

int task_spec_set_limit(TaskSpec *spec, const char *key, uint64_t value, sd_bus_error *error) {
        TaskLimit l = task_limit_from_string(key);

        if (l < 0)
                return task_spec_set_extra_limit(spec, key, value, error);
        if (spec->limits[l] != TASK_LIMIT_UNSET)
                return invalid(error, "Limit '%s' given more than once.", key);
        if (value == 0 || value == TASK_LIMIT_UNSET)
                return invalid(error, "Limit '%s' must be a positive number.", key);
        if (l == TASK_LIMIT_CPU_QUOTA_PERCENT && value > 100 * 1024)
                return invalid(error, "Limit '%s' is out of range.", key);

        spec->limits[l] = value;
        return 0;
}

int task_spec_validate(const TaskSpec *spec, sd_bus_error *error) {
        if (!spec->repository)
                return invalid(error, "Key 'repository' is missing.", NULL);
        if (!spec->goal)
                return invalid(error, "Key 'goal' is missing.", NULL);

        /* A goal of only whitespace is as empty as an empty one. */
        bool blank = true;
        for (const char *c = spec->goal; *c; c++)
                if (!isspace((unsigned char) *c))
                        blank = false;
        if (blank)
                return invalid(error, "Key 'goal' is empty.", NULL);

        /* A pull request needs the branch on the forge and a place for it. */
        if (spec->forge && !spec->push_url)
                return invalid(error, "Key 'forge' needs 'push_url': the branch must be pushed before a pull request is opened.", NULL);
        if (spec->forge && !spec->forge_repository)
                return invalid(error, "Key 'forge' needs 'forge_repository' (OWNER/REPO).", NULL);
        if (!spec->forge && (spec->forge_repository || spec->pull_request_base))
                return invalid(error, "Keys 'forge_repository' and 'pull_request_base' need 'forge'.", NULL);

        return 0;
}
