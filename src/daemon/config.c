/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "conf-files.h"
#include "config.h"
#include "fs-util.h"
#include "log.h"
#include "string-util.h"

static const char *const budget_action_table[_BUDGET_ACTION_MAX] = {
        [BUDGET_ACTION_PAUSE] = "pause",
        [BUDGET_ACTION_FAIL]  = "fail",
};

const char *budget_action_to_string(BudgetAction a) {
        if (a < 0 || a >= _BUDGET_ACTION_MAX)
                return NULL;
        return budget_action_table[a];
}

BudgetAction budget_action_from_string(const char *s) {
        for (int i = 0; s && i < _BUDGET_ACTION_MAX; i++)
                if (streq(budget_action_table[i], s))
                        return (BudgetAction) i;
        return _BUDGET_ACTION_INVALID;
}

void config_init(Config *c) {
        *c = (Config) {
                .idle_timeout_usec = 60 * USEC_PER_SEC,
                .max_tasks = 4096,
                .max_tasks_per_user = 16,
                .max_stream_clients = 64,
                .max_active_tasks = 4,

                .max_steps = 50,
                .max_wall_clock_usec = 3600 * USEC_PER_SEC,
                .max_tokens = 2000000,
                .max_commands = 200,
                .command_timeout_usec = 600 * USEC_PER_SEC,
                .budget_action = BUDGET_ACTION_PAUSE,
                .max_rejections = 3,
                .output_keep_bytes = 16 * 1024,
                .max_repository_size = 1024ULL * 1024 * 1024,

                .memory_max = 2ULL * 1024 * 1024 * 1024,
                .tasks_max = 512,
                .cpu_quota_percent = 100,

                .max_test_failures = 5,
                .max_files_changed = 20,
                .max_lines_changed = 1000,
                .max_malformed = 3,
        };
}

void config_done(Config *c) {
        free(c->launcher_socket);
        strv_free(c->protected_paths);
        c->launcher_socket = NULL;
        c->protected_paths = NULL;
}

static int parse_unsigned(const char *v, unsigned min, unsigned max, unsigned *ret) {
        uint64_t u;
        int r = safe_atou64(v, &u);
        if (r < 0)
                return r;
        if (u < min || u > max)
                return -ERANGE;
        *ret = (unsigned) u;
        return 0;
}

static int parse_u64_range(const char *v, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t u;
        int r = safe_atou64(v, &u);
        if (r < 0)
                return r;
        if (u < min || u > max)
                return -ERANGE;
        *ret = u;
        return 0;
}

static int parse_sec_nonzero(const char *v, uint64_t *ret) {
        uint64_t u;
        int r = parse_sec(v, &u);
        if (r < 0)
                return r;
        if (u == 0)
                return -ERANGE;
        *ret = u;
        return 0;
}

static int parse_percent(const char *v, uint64_t *ret) {
        _cleanup_free_ char *copy = strdup(v);
        size_t l;

        if (!copy)
                return -ENOMEM;
        l = strlen(copy);
        if (l > 0 && copy[l - 1] == '%')
                copy[l - 1] = '\0';
        return parse_u64_range(copy, 1, 100000, ret);
}

static int parse_globs(Config *c, const char *value) {
        _cleanup_free_ char *copy = NULL;

        /* As with systemd's list settings: an empty assignment resets. */
        if (isempty(value)) {
                strv_free(c->protected_paths);
                c->protected_paths = NULL;
                c->protected_paths_reset = true;
                return 0;
        }
        copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        for (char *next = copy, *w; (w = strsep(&next, " \t"));) {
                if (w[0] == '\0')
                        continue;
                if (w[0] == '/' || strlen(w) > 255 || !string_is_safe(w, false))
                        return -EINVAL;
                if (strv_length(c->protected_paths) >= 256)
                        return -E2BIG;
                if (strv_extend(&c->protected_paths, w) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int config_assign_daemon(Config *c, const char *key, const char *value) {
        if (streq(key, "IdleTimeoutSec")) {
                int r = parse_sec(value, &c->idle_timeout_usec);
                /* As in systemd, 0 means "no timeout": never exit when idle. */
                if (r >= 0 && c->idle_timeout_usec == 0)
                        c->idle_timeout_usec = UINT64_MAX;
                return r;
        }
        if (streq(key, "MaxTasks"))
                return parse_unsigned(value, 1, 1000000, &c->max_tasks);
        if (streq(key, "MaxTasksPerUser"))
                return parse_unsigned(value, 1, 1000000, &c->max_tasks_per_user);
        if (streq(key, "MaxStreamClients"))
                return parse_unsigned(value, 1, 65536, &c->max_stream_clients);
        if (streq(key, "MaxActiveTasks"))
                return parse_unsigned(value, 0, 1024, &c->max_active_tasks);   /* 0: hold every task queued */
        if (streq(key, "LauncherSocket")) {
                if (value[0] != '/' || strlen(value) >= 108)
                        return -EINVAL;
                return free_and_strdup(&c->launcher_socket, value);
        }
        return -ENOENT;
}

static int config_assign_agent(Config *c, const char *key, const char *value) {
        if (streq(key, "MaxSteps"))
                return parse_u64_range(value, 1, 100000, &c->max_steps);
        if (streq(key, "MaxWallClockSec"))
                return parse_sec_nonzero(value, &c->max_wall_clock_usec);
        if (streq(key, "MaxTokens"))
                return parse_u64_range(value, 1, UINT64_MAX - 1, &c->max_tokens);
        if (streq(key, "MaxCommands"))
                return parse_u64_range(value, 1, 1000000, &c->max_commands);
        if (streq(key, "CommandTimeoutSec"))
                return parse_sec_nonzero(value, &c->command_timeout_usec);
        if (streq(key, "BudgetAction")) {
                BudgetAction a = budget_action_from_string(value);
                if (a < 0)
                        return a;
                c->budget_action = a;
                return 0;
        }
        if (streq(key, "MaxRejections"))
                return parse_unsigned(value, 0, 1000, &c->max_rejections);
        if (streq(key, "OutputKeepBytes")) {
                uint64_t u;
                int r = parse_size(value, &u);
                if (r < 0)
                        return r;
                if (u < 1024 || u > 16 * 1024 * 1024)
                        return -ERANGE;
                c->output_keep_bytes = u;
                return 0;
        }
        if (streq(key, "MaxRepositorySize"))
                return parse_size(value, &c->max_repository_size);
        return -ENOENT;
}

static int config_assign_sandbox(Config *c, const char *key, const char *value) {
        if (streq(key, "MemoryMax"))
                return parse_size(value, &c->memory_max);
        if (streq(key, "TasksMax"))
                return parse_u64_range(value, 1, 1000000, &c->tasks_max);
        if (streq(key, "CPUQuota"))
                return parse_percent(value, &c->cpu_quota_percent);
        return -ENOENT;
}

static int config_assign_breakers(Config *c, const char *key, const char *value) {
        if (streq(key, "MaxConsecutiveTestFailures"))
                return parse_unsigned(value, 1, 1000, &c->max_test_failures);
        if (streq(key, "MaxFilesChanged"))
                return parse_unsigned(value, 1, 1000000, &c->max_files_changed);
        if (streq(key, "MaxLinesChanged"))
                return parse_unsigned(value, 1, 100000000, &c->max_lines_changed);
        if (streq(key, "MaxMalformedReplies"))
                return parse_unsigned(value, 1, 1000, &c->max_malformed);
        if (streq(key, "ProtectedPaths"))
                return parse_globs(c, value);
        return -ENOENT;
}

static int config_assign(Config *c, const char *section, const char *key, const char *value) {
        if (streq(section, "Daemon"))
                return config_assign_daemon(c, key, value);
        if (streq(section, "Agent"))
                return config_assign_agent(c, key, value);
        if (streq(section, "Sandbox"))
                return config_assign_sandbox(c, key, value);
        if (streq(section, "Breakers"))
                return config_assign_breakers(c, key, value);
        return 0; /* [Model] sections are read by the model profiles (model-profile.c). */
}

typedef struct ConfigParse {
        Config *config;
        const char *filename;
} ConfigParse;

static int config_line(const char *section, const char *key, const char *value, unsigned line, void *userdata) {
        ConfigParse *p = userdata;
        int r;

        if (!section || !key)
                return 0;   /* a header, the end */
        r = config_assign(p->config, section, key, value);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT)
                log_warning("%s:%u: Unknown key '%s' in section [%s], ignoring.", p->filename, line, key, section);
        else if (r < 0)
                log_warning("%s:%u: Invalid value '%s' for %s=, ignoring.", p->filename, line, value, key);
        return 0;
}

int config_parse(Config *c, const char *text, const char *filename) {
        ConfigParse p = { .config = c, .filename = filename };
        return conf_parse_text(text, filename, true, config_line, &p);
}

static int config_parse_one(const char *text, const char *display, void *userdata) {
        return config_parse(userdata, text, display);
}

int config_load(Config *c, const char *path) {
        return conf_files_foreach(path, config_parse_one, c);
}
