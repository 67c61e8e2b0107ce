/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "conf-files.h"
#include "config.h"
#include "credential.h"
#include "fs-util.h"
#include "log.h"
#include "micros.h"
#include "review-settings.h"
#include "string-table.h"
#include "string-util.h"

static const char *const budget_action_table[_BUDGET_ACTION_MAX] = {
        [BUDGET_ACTION_PAUSE] = "pause",
        [BUDGET_ACTION_FAIL]  = "fail",
};

DEFINE_STRING_TABLE_LOOKUP(budget_action, BudgetAction);

void config_init(Config *c) {
        *c = (Config) {
                .idle_timeout_usec = 60 * USEC_PER_SEC,
                .max_tasks = 4096,
                .max_tasks_per_user = 16,
                .max_stream_clients = 64,
                .max_queued_bytes_per_client = 4 * 1024 * 1024,
                .max_queued_bytes = 16 * 1024 * 1024,
                .max_active_tasks = 4,
                .max_cost_per_user_per_day = UINT64_MAX,
                .max_cpu_usec_per_user_per_day = UINT64_MAX,

                .max_steps = 50,
                .max_wall_clock_usec = 3600 * USEC_PER_SEC,
                .max_tokens = 2000000,
                .max_commands = 200,
                .command_timeout_usec = 600 * USEC_PER_SEC,
                .max_cpu_usec = UINT64_MAX,
                .max_network_bytes = UINT64_MAX,
                .max_cost = UINT64_MAX,
                .budget_action = BUDGET_ACTION_PAUSE,
                .max_rejections = 3,
                .output_keep_bytes = 16 * 1024,
                .max_repository_size = 1024ULL * 1024 * 1024,

                .memory_max = 2ULL * 1024 * 1024 * 1024,
                .tasks_max = 512,
                .cpu_quota_percent = 100,
                .max_paused_usec = 3600 * USEC_PER_SEC,

                .max_test_failures = 5,
                .max_files_changed = 20,
                .max_lines_changed = 1000,
                .max_malformed = 3,

                .coverage_tolerance = 1.0,
                .max_review_rounds = 2,

                .leave_out_binaries = true,
        };
        fleet_config_init(&c->fleet);
}

/* Build output that checkpoints leave out unless LeaveOut= is emptied:
 * caches of interpreters and test runners, installed packages, compilers'
 * output directories and objects, coverage data. A directory pattern
 * applies only where the base tracks nothing below (ledger.h). */
static const char *const leave_out_defaults[] = {
        "__pycache__/", "*.pyc", "*.pyo", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", ".hypothesis/",
        ".tox/", ".nox/", "*.egg-info/", ".eggs/",
        "node_modules/", ".npm/", ".yarn/", ".next/", ".nyc_output/",
        "target/", "build/", "dist/", "_build/", ".gradle/", ".cache/", "CMakeFiles/",
        "*.o", "*.obj", "*.lo", "*.la", "*.a", "*.so", "*.so.*", "*.dylib", "*.dll", "*.exe", "*.class",
        "coverage/", "htmlcov/", ".coverage", ".coverage.*", "*.gcda", "*.gcno", "*.profraw",
        ".DS_Store",
};

int config_leave_out(const Config *c, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;

        if (!c->leave_out_reset)
                for (size_t i = 0; i < ELEMENTSOF(leave_out_defaults); i++)
                        if (strv_extend(&l, leave_out_defaults[i]) < 0)
                                return -ENOMEM;
        for (char **p = c->leave_out; p && *p; p++)
                if (strv_extend(&l, *p) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

static void forge_config_done(ForgeConfig *f) {
        free(f->name);
        free(f->api);
        free(f->token_credential);
        *f = (ForgeConfig) {};
}

void config_done(Config *c) {
        for (size_t i = 0; i < c->n_forges; i++)
                forge_config_done(c->forges + i);
        c->n_forges = 0;
        free(c->launcher_socket);
        free(c->proxy_socket);
        c->proxy_socket = NULL;
        strv_free(c->protected_paths);
        strv_free(c->leave_out);
        c->leave_out = NULL;
        free(c->vulnerability_database);
        strv_free(c->secret_scan_ignore);
        strv_free(c->checkers);
        free(c->review_model);
        c->review_model = NULL;
        c->vulnerability_database = NULL;
        c->secret_scan_ignore = c->checkers = NULL;
        free(c->ssh_key_credential);
        free(c->ssh_known_hosts_credential);
        c->ssh_key_credential = c->ssh_known_hosts_credential = NULL;
        c->launcher_socket = NULL;
        c->protected_paths = NULL;
        fleet_config_done(&c->fleet);
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

/* A list of relative path globs, separated by white space; each assignment
 * adds to the list and, as with systemd's list settings, an empty one
 * resets it (and sets *reset, where the caller needs to know). */
static int parse_glob_list(const char *value, char ***list, bool *reset) {
        _cleanup_free_ char *copy = NULL;

        if (isempty(value)) {
                strv_free(*list);
                *list = NULL;
                if (reset)
                        *reset = true;
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
                if (strv_length(*list) >= 256)
                        return -E2BIG;
                if (strv_extend(list, w) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* A budget: "infinity" or empty is none (UINT64_MAX), 0 is refused. */
static int parse_budget_sec(const char *v, uint64_t *ret) {
        if (isempty(v) || streq(v, "infinity")) {
                *ret = UINT64_MAX;
                return 0;
        }
        return parse_sec_nonzero(v, ret);
}

static int parse_budget_size(const char *v, uint64_t *ret) {
        uint64_t u;
        int r;

        if (isempty(v) || streq(v, "infinity")) {
                *ret = UINT64_MAX;
                return 0;
        }
        r = parse_size(v, &u);
        if (r < 0)
                return r;
        if (u == 0 || u == UINT64_MAX)
                return -ERANGE;
        *ret = u;
        return 0;
}

static int parse_budget_cost(const char *v, uint64_t *ret) {
        uint64_t u;
        int r;

        if (isempty(v) || streq(v, "infinity")) {
                *ret = UINT64_MAX;
                return 0;
        }
        r = parse_micros(v, &u);
        if (r < 0)
                return r;
        if (u == 0)
                return -ERANGE;
        *ret = u;
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
        if (streq(key, "MaxQueuedBytesPerClient") || streq(key, "MaxQueuedBytes")) {
                uint64_t *p = streq(key, "MaxQueuedBytes") ? &c->max_queued_bytes : &c->max_queued_bytes_per_client;
                int r = parse_size(value, p);
                /* Less than an answer's header would refuse every caller. */
                return r < 0 ? r : *p < 4096 ? -ERANGE : 0;
        }
        if (streq(key, "MaxActiveTasks"))
                return parse_unsigned(value, 0, 1024, &c->max_active_tasks);   /* 0: hold every task queued */
        if (streq(key, "MaxCostPerUserPerDay"))
                return parse_budget_cost(value, &c->max_cost_per_user_per_day);
        if (streq(key, "MaxCPUSecPerUserPerDay"))
                return parse_budget_sec(value, &c->max_cpu_usec_per_user_per_day);
        if (streq(key, "LauncherSocket")) {
                if (value[0] != '/' || strlen(value) >= 108)
                        return -EINVAL;
                return free_and_strdup(&c->launcher_socket, value);
        }
        if (streq(key, "ProxySocket")) {
                if (value[0] != '/' || strlen(value) >= 108)
                        return -EINVAL;
                return free_and_strdup(&c->proxy_socket, value);
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
        if (streq(key, "MaxCPUSec"))
                return parse_budget_sec(value, &c->max_cpu_usec);
        if (streq(key, "MaxNetworkBytes"))
                return parse_budget_size(value, &c->max_network_bytes);
        if (streq(key, "MaxCost"))
                return parse_budget_cost(value, &c->max_cost);
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
        if (streq(key, "LeaveOut")) {
                int r = parse_glob_list(value, &c->leave_out, &c->leave_out_reset);
                for (char **p = c->leave_out; r >= 0 && p && *p; p++)
                        if (!leave_out_pattern_is_valid(*p))
                                r = -EINVAL;
                return r;
        }
        if (streq(key, "LeaveOutBinaries")) {
                int b = parse_boolean(value);
                if (b < 0)
                        return b;
                c->leave_out_binaries = b;
                return 0;
        }
        return -ENOENT;
}

static int config_assign_sandbox(Config *c, const char *key, const char *value) {
        if (streq(key, "MemoryMax"))
                return parse_size(value, &c->memory_max);
        if (streq(key, "TasksMax"))
                return parse_u64_range(value, 1, 1000000, &c->tasks_max);
        if (streq(key, "CPUQuota"))
                return parse_percent(value, &c->cpu_quota_percent);
        if (streq(key, "NetworkMaxConnections"))
                return parse_unsigned(value, 1, 4096, &c->network_max_connections);
        if (streq(key, "NetworkMaxBytes"))
                return parse_size(value, &c->network_max_bytes);
        if (streq(key, "NetworkIdleTimeoutSec"))
                return parse_sec_nonzero(value, &c->network_idle_timeout_usec);
        if (streq(key, "MaxPausedSec"))
                return parse_sec_nonzero(value, &c->max_paused_usec);
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
                return parse_glob_list(value, &c->protected_paths, &c->protected_paths_reset);
        return -ENOENT;
}

static int config_assign_review(Config *c, const char *key, const char *value) {
        if (streq(key, "VulnerabilityDatabase")) {
                /* Empty: no dependency vulnerability check. The daemon never downloads one. */
                if (isempty(value))
                        return free_and_strdup(&c->vulnerability_database, NULL);
                if (value[0] != '/' || strlen(value) > 4096 || !string_is_safe(value, false))
                        return -EINVAL;
                return free_and_strdup(&c->vulnerability_database, value);
        }
        if (streq(key, "CoverageTolerance")) {
                char *end = NULL;
                double d;

                if (isempty(value))
                        return -EINVAL;
                errno = 0;
                d = strtod(value, &end);
                if (errno != 0 || *end != '\0' || !(d >= 0 && d <= 100))
                        return -ERANGE;
                c->coverage_tolerance = d;
                return 0;
        }
        if (streq(key, "SecretScanIgnore"))
                return parse_glob_list(value, &c->secret_scan_ignore, NULL);
        if (streq(key, "Checker")) {
                if (isempty(value)) {
                        strv_free(c->checkers);
                        c->checkers = NULL;
                        return 0;
                }
                if (strlen(value) > 1024 || !string_is_safe(value, false))
                        return -EINVAL;
                if (strv_length(c->checkers) >= 16)
                        return -E2BIG;
                return strv_extend(&c->checkers, value);
        }
        if (streq(key, "Model")) {
                /* A [Model] profile's name; checked when a review needs it. */
                if (isempty(value))
                        return free_and_strdup(&c->review_model, NULL);
                if (strlen(value) > 64 || !string_is_safe(value, false) || strpbrk(value, " \t/"))
                        return -EINVAL;
                return free_and_strdup(&c->review_model, value);
        }
        if (streq(key, "MaxReviewRounds"))
                return parse_unsigned(value, 0, 100, &c->max_review_rounds);
        return -ENOENT;
}

/* ---- [Forge] ----
 *
 * As with [Model], Name= may come anywhere in its section, so a section's
 * values are parsed as they come (warnings name the right line) into a
 * pending record, and merged into the forge of that name when the section
 * ends: a later section with the same Name= changes only the keys it sets. */

typedef struct PendingForge {
        bool active;
        unsigned start;
        char *name;
        ForgeKind kind;
        char *api;
        char *token_credential;
        bool allow_file_urls;
        bool kind_set, api_set, token_set, allow_set;
} PendingForge;

static void pending_forge_reset(PendingForge *f) {
        free(f->name);
        free(f->api);
        free(f->token_credential);
        *f = (PendingForge) {};
}

static bool credential_name_is_valid(const char *s) {
        return forge_name_is_valid(s) && strlen(s) <= FORGE_NAME_MAX;
}

static int config_assign_forge(PendingForge *f, const char *key, const char *value) {
        int r;

        if (streq(key, "Name")) {
                if (!forge_name_is_valid(value) || strlen(value) > FORGE_NAME_MAX)
                        return -EINVAL;
                return free_and_strdup(&f->name, value);
        }
        if (streq(key, "Kind")) {
                ForgeKind k = forge_kind_from_string(value);
                if (k < 0)
                        return k;
                f->kind = k;
                f->kind_set = true;
                return 0;
        }
        if (streq(key, "API")) {
                if (!forge_api_is_valid(value))
                        return -EINVAL;
                f->api_set = true;
                return free_and_strdup(&f->api, value);
        }
        if (streq(key, "TokenCredential")) {
                /* SECURITY: a file name below the credentials directory, nothing else. */
                if (!isempty(value) && !credential_name_is_valid(value))
                        return -EINVAL;
                f->token_set = true;
                return free_and_strdup(&f->token_credential, isempty(value) ? NULL : value);
        }
        if (streq(key, "AllowFileURLs")) {
                r = parse_boolean(value);
                if (r < 0)
                        return r;
                f->allow_file_urls = r;
                f->allow_set = true;
                return 0;
        }
        return -ENOENT;
}

static int pending_forge_apply(Config *c, PendingForge *f, const char *filename) {
        ForgeConfig *t = NULL;

        if (!f->active)
                return 0;
        if (!f->name) {
                log_warning("%s:%u: [Forge] section without a valid Name=, ignoring it.", filename, f->start);
                return 0;
        }
        for (size_t i = 0; i < c->n_forges; i++)
                if (streq(c->forges[i].name, f->name))
                        t = c->forges + i;
        if (!t) {
                if (!f->api) {
                        log_warning("%s:%u: [Forge] section '%s' without a valid API=, ignoring it.", filename, f->start, f->name);
                        return 0;
                }
                if (c->n_forges >= CONFIG_FORGES_MAX) {
                        log_warning("%s:%u: More than %u [Forge] sections, ignoring '%s'.", filename, f->start,
                                    CONFIG_FORGES_MAX, f->name);
                        return 0;
                }
                t = c->forges + c->n_forges++;
                *t = (ForgeConfig) { .name = TAKE_PTR(f->name), .kind = FORGE_KIND_GITEA };
        }
        if (f->kind_set)
                t->kind = f->kind;
        if (f->api_set && f->api) {
                free(t->api);
                t->api = TAKE_PTR(f->api);
        }
        if (f->token_set) {
                free(t->token_credential);
                t->token_credential = TAKE_PTR(f->token_credential);
        }
        if (f->allow_set)
                t->allow_file_urls = f->allow_file_urls;
        return 0;
}

const ForgeConfig *config_find_forge(const Config *c, const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < c->n_forges; i++)
                if (streq(c->forges[i].name, name))
                        return c->forges + i;
        return NULL;
}

char *forge_token_free(char *token) {
        return credential_free(token);
}

int config_forge_read_token(const ForgeConfig *f, char **ret) {
        assert(f);
        assert(ret);

        *ret = NULL;
        if (!f->token_credential)
                return 0;
        /* A token has no spaces: it goes into a header after "token "/"Bearer ". */
        return credential_read_line(f->token_credential, FORGE_TOKEN_MAX, false, ret);
}

static int config_assign_git(Config *c, const char *key, const char *value) {
        char **field;

        if (streq(key, "SSHKeyCredential"))
                field = &c->ssh_key_credential;
        else if (streq(key, "SSHKnownHostsCredential"))
                field = &c->ssh_known_hosts_credential;
        else
                return -ENOENT;
        /* SECURITY: a file name below the credentials directory, nothing else;
         * empty resets. */
        if (!isempty(value) && !credential_name_is_valid(value))
                return -EINVAL;
        return free_and_strdup(field, isempty(value) ? NULL : value);
}

int config_read_credential(const char *name, size_t max, char **ret) {
        assert(ret);

        *ret = NULL;
        /* SECURITY: as for forge tokens, no path may lead out of the directory. */
        if (!name || !credential_name_is_valid(name))
                return -EINVAL;
        return credential_read_text(name, max, ret);
}

void ssh_credentials_done(SshCredentials *s) {
        s->key = credential_text_free(s->key);
        s->known_hosts = credential_text_free(s->known_hosts);
}

int config_read_ssh_credentials(const Config *c, const char *url, const char *key_credential, const char *key_setting,
                                SshCredentials *ret, char **ret_error) {
        _cleanup_(ssh_credentials_done) SshCredentials s = {};
        int r;

        assert(c);
        assert(ret);

        if (!url || !strneq(url, "ssh://", 6)) {
                *ret = (SshCredentials) {};
                return 0;
        }
        /* SECURITY: without known hosts, no ssh connection at all. */
        if (!c->ssh_known_hosts_credential)
                return asprintf(ret_error, "ssh:// repositories need [Git] SSHKnownHostsCredential= in the daemon's "
                                "configuration.") < 0 ? -ENOMEM : -EPERM;
        r = config_read_credential(c->ssh_known_hosts_credential, CONFIG_SSH_KNOWN_HOSTS_MAX, &s.known_hosts);
        if (r < 0)
                return asprintf(ret_error, "Cannot read the known hosts credential '%s': %s",
                                c->ssh_known_hosts_credential, strerror(-r)) < 0 ? -ENOMEM : r;
        if (key_credential) {
                r = config_read_credential(key_credential, CONFIG_SSH_KEY_MAX, &s.key);
                if (r < 0)
                        return asprintf(ret_error, "Cannot read the ssh key credential '%s' (%s): %s", key_credential,
                                        key_setting, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        *ret = s;
        s = (SshCredentials) {};
        return 0;
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
        if (streq(section, "Git"))
                return config_assign_git(c, key, value);
        if (streq(section, "Review"))
                return config_assign_review(c, key, value);
        return 0; /* [Model] sections are read by the model profiles (model-profile.c), [Forge] and [Fleet] below. */
}

typedef struct ConfigParse {
        Config *config;
        PendingForge forge;
} ConfigParse;

static int config_line(const char *filename, const char *section, const char *key, const char *value, unsigned line,
                       void *userdata) {
        ConfigParse *p = userdata;
        int r;

        if (!key) {
                /* A [Forge] section ends where the next section begins, or with the text. */
                r = pending_forge_apply(p->config, &p->forge, filename);
                pending_forge_reset(&p->forge);
                if (r < 0)
                        return r;
                p->forge.active = section && streq(section, "Forge");
                p->forge.start = line;
                return 0;
        }

        /* [Fleet] warns in its own words: a refused line there stops the daemon. */
        if (section && streq(section, "Fleet"))
                return fleet_config_assign(&p->config->fleet, key, value, filename, line);

        r = p->forge.active ? config_assign_forge(&p->forge, key, value) : config_assign(p->config, section, key, value);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT)
                log_warning("%s:%u: Unknown key '%s' in section [%s], ignoring.", filename, line, key, section);
        else if (r < 0)
                log_warning("%s:%u: Invalid value '%s' for %s=, ignoring.", filename, line, value, key);
        return 0;
}

static void config_parse_done(void *userdata) {
        ConfigParse *p = userdata;

        pending_forge_reset(&p->forge);
}

static const ConfParser config_parser = {
        .line = config_line,
        .done = config_parse_done,
        .warn = true,
};

int config_parse(Config *c, const char *text, const char *filename) {
        return conf_parse_text(&config_parser, text, filename, &(ConfigParse) { .config = c });
}

int config_load(Config *c, const char *path) {
        return conf_parse_files(&config_parser, path, &(ConfigParse) { .config = c });
}

/* Where a task may deliver to, as the configuration has it. Checked at
 * submission, and again at delivery (the configuration may have changed). */
int config_check_delivery(const Config *c, const TaskSpec *spec, sd_bus_error *error) {
        const ForgeConfig *f = NULL;

        if (spec->forge) {
                f = config_find_forge(c, spec->forge);
                if (!f)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "There is no forge '%s' (see [Forge] in agentfab.conf(5)).", spec->forge);
        }
        if (!spec->push_url)
                return 0;

        /* SECURITY: a file:// URL would have the daemon write into any
         * repository its user can write, its own task ledgers included:
         * only where the administrator allowed it for the forge named,
         * which is meant for tests. */
        if (strneq(spec->push_url, "file://", 7)) {
                if (!f || !f->allow_file_urls)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Push URL '%s' is refused: only https:// push URLs are accepted%s.",
                                                 spec->push_url, f ? " (the forge does not set AllowFileURLs=yes)" : "");
                return 0;
        }
        if (!forge_push_url_is_valid(spec->push_url, false))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Push URL '%s' is refused: only https:// push URLs are accepted.", spec->push_url);

        /* SECURITY: the forge's token goes with the push: only to the
         * forge's own host, never to one a submitter names. */
        if (f && f->token_credential && !forge_push_url_matches_api(f->api, spec->push_url))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Push URL '%s' is not on the host of forge '%s': its token goes to that host only.",
                                         spec->push_url, f->name);
        return 0;
}
