/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

#include "config-fleet.h"
#include "forge.h"
#include "task-spec.h"

#define AGENTFAB_CONFIG_FILE "/etc/agentfab/agentfab.conf"

typedef enum BudgetAction {
        BUDGET_ACTION_PAUSE,            /* awaiting-approval: an approver may extend the budget */
        BUDGET_ACTION_FAIL,
        _BUDGET_ACTION_MAX,
        _BUDGET_ACTION_INVALID = -EINVAL,
} BudgetAction;

/* One [Forge] section: where delivery may open pull requests. */
#define CONFIG_FORGES_MAX 32U

typedef struct ForgeConfig {
        char *name;                     /* Name= : what a task spec's "forge" names */
        ForgeKind kind;                 /* Kind=gitea|github */
        char *api;                      /* API= : base URL of the REST API */
        char *token_credential;         /* TokenCredential= : credential NAME; NULL none */
        bool allow_file_urls;           /* AllowFileURLs= : file:// push URLs (tests only) */
} ForgeConfig;

typedef struct Config {
        uint64_t idle_timeout_usec;     /* [Daemon] IdleTimeoutSec= */
        unsigned max_tasks;             /* [Daemon] MaxTasks= : unfinished tasks of all users */
        unsigned max_tasks_per_user;    /* [Daemon] MaxTasksPerUser= : unfinished tasks per uid */
        unsigned max_stream_clients;    /* [Daemon] MaxStreamClients= */
        uint64_t max_queued_bytes_per_client; /* [Daemon] MaxQueuedBytesPerClient= : bus answers held for one client */
        uint64_t max_queued_bytes;      /* [Daemon] MaxQueuedBytes= : for all of them */
        unsigned max_active_tasks;      /* [Daemon] MaxActiveTasks= : tasks worked on at once */
        char *launcher_socket;          /* [Daemon] LauncherSocket= */
        char *proxy_socket;             /* [Daemon] ProxySocket= : agentfab-proxy's control socket */
        /* [Daemon] daily quotas per owner (UINT64_MAX: none): past one, the
         * owner's new tasks wait queued until the next UTC day. */
        uint64_t max_cost_per_user_per_day;     /* MaxCostPerUserPerDay= : millionths of the currency */
        uint64_t max_cpu_usec_per_user_per_day; /* MaxCPUSecPerUserPerDay= */

        /* [Agent]: the default budget of a task; a task's limits override it. */
        uint64_t max_steps;             /* MaxSteps= */
        uint64_t max_wall_clock_usec;   /* MaxWallClockSec= */
        uint64_t max_tokens;            /* MaxTokens= */
        uint64_t max_commands;          /* MaxCommands= */
        uint64_t command_timeout_usec;  /* CommandTimeoutSec= */
        /* Budgets on what a task uses (task-resources.h); UINT64_MAX: none. */
        uint64_t max_cpu_usec;          /* MaxCPUSec= */
        uint64_t max_network_bytes;     /* MaxNetworkBytes= : up and down, all its sandboxes */
        uint64_t max_cost;              /* MaxCost= : millionths of the model profile's currency */
        BudgetAction budget_action;     /* BudgetAction=pause|fail */
        unsigned max_rejections;        /* MaxRejections= : rejections before the task fails */
        uint64_t output_keep_bytes;     /* OutputKeepBytes= : of a tool's output, for the model */
        uint64_t max_repository_size;   /* MaxRepositorySize= */

        /* [Sandbox]: default scope limits of a task's sandbox. */
        uint64_t memory_max;            /* MemoryMax= */
        uint64_t tasks_max;             /* TasksMax= */
        uint64_t cpu_quota_percent;     /* CPUQuota= */
        /* What the egress proxy allows a task with a network (0: the proxy's default). */
        unsigned network_max_connections;       /* NetworkMaxConnections= : at once */
        uint64_t network_max_bytes;             /* NetworkMaxBytes= : up and down, per sandbox */
        uint64_t network_idle_timeout_usec;     /* NetworkIdleTimeoutSec= : per connection */
        uint64_t max_paused_usec;       /* MaxPausedSec= : a frozen sandbox without a command is torn down after it */

        /* [Breakers] */
        unsigned max_test_failures;     /* MaxConsecutiveTestFailures= */
        unsigned max_files_changed;     /* MaxFilesChanged= */
        unsigned max_lines_changed;     /* MaxLinesChanged= */
        unsigned max_malformed;         /* MaxMalformedReplies= */
        char **protected_paths;         /* ProtectedPaths= : globs added to the defaults; empty resets */
        char **leave_out;               /* LeaveOut= : names of build output added to the defaults; empty resets */
        bool leave_out_reset;
        bool leave_out_binaries;        /* LeaveOutBinaries= */
        bool protected_paths_reset;     /* an empty ProtectedPaths= dropped the defaults */

        /* [Git]: credentials (systemd credential NAMEs) for ssh:// repositories. */
        char *ssh_key_credential;          /* SSHKeyCredential= : private key; NULL none */
        char *ssh_known_hosts_credential;  /* SSHKnownHostsCredential= : known_hosts lines; NULL refuses ssh:// */

        /* [Review]: the review stage between the last step and delivery (src/review/). */
        char *vulnerability_database;   /* VulnerabilityDatabase= : osv.dev export directory; NULL: no check */
        double coverage_tolerance;      /* CoverageTolerance= : percentage points a coverage may drop */
        char **secret_scan_ignore;      /* SecretScanIgnore= : globs the secret scan skips; empty resets */
        char **checkers;                /* Checker= : command lines, one per assignment; empty resets */
        char *review_model;             /* Model= : the reviewer model's profile; NULL: no reviewer model */
        unsigned max_review_rounds;     /* MaxReviewRounds= : its change requests before a person decides */

        /* [Forge] sections, in the order first seen. */
        ForgeConfig forges[CONFIG_FORGES_MAX];
        size_t n_forges;

        /* [Fleet]: absent, this host is on its own. */
        FleetConfig fleet;
} Config;

const char *budget_action_to_string(BudgetAction a);
BudgetAction budget_action_from_string(const char *s);

void config_init(Config *c);
void config_done(Config *c);

/* Reads path, then path.d/ *.conf in lexical order; later settings win. A
 * missing file is not an error; a malformed line is logged and skipped. */
int config_load(Config *c, const char *path);

/* The [Forge] section with this Name=, or NULL. */
const ForgeConfig *config_find_forge(const Config *c, const char *name);

/* Reads the forge's token from $CREDENTIALS_DIRECTORY/<TokenCredential>,
 * like model_profile_read_api_key(): *ret NULL (and 0) when the forge names
 * no credential; a trailing newline is stripped; control characters are
 * -EBADMSG. Free with model_api_key_free()'s twin forge_token_free(), which
 * wipes it. Never log it. */
int config_forge_read_token(const ForgeConfig *f, char **ret);
char *forge_token_free(char *token);
static inline void forge_token_freep(char **t) {
        forge_token_free(*t);
}

/* Reads $CREDENTIALS_DIRECTORY/<name> whole, for [Git]: at most max bytes,
 * no NUL in it, not empty (-ENODATA). -EINVAL for a name that is not a plain
 * file name, -ENXIO without a credentials directory. Free with
 * credential_text_free(), which wipes it. Never log it. */
#define CONFIG_SSH_KEY_MAX (64U * 1024U)
#define CONFIG_SSH_KNOWN_HOSTS_MAX (1024U * 1024U)
int config_read_credential(const char *name, size_t max, char **ret);
static inline char *credential_text_free(char *t) {
        return forge_token_free(t);
}

/* What an ssh:// connection authenticates with, read from credentials:
 * secrets, wiped by ssh_credentials_done(). Never log them. */
typedef struct SshCredentials {
        char *key;              /* NULL: no key configured */
        char *known_hosts;
} SshCredentials;

/* For an ssh:// url, reads the known hosts ([Git] SSHKnownHostsCredential=,
 * required: -EPERM without it) and the key credential key_credential (may
 * be NULL: no key), named key_setting in messages; nothing for another URL.
 * A message naming the credential (never its text) goes to *ret_error. */
int config_read_ssh_credentials(const Config *c, const char *url, const char *key_credential, const char *key_setting,
                                SshCredentials *ret, char **ret_error);
void ssh_credentials_done(SshCredentials *s);

/* Parses one file's text; exposed for tests. */
int config_parse(Config *c, const char *text, const char *filename);

/* The names of build output checkpoints leave out: the defaults (unless
 * an empty LeaveOut= dropped them) and LeaveOut='s (ledger.h). */
int config_leave_out(const Config *c, char ***ret);

/* Whether c lets spec push where it says and open a pull request on the
 * forge it names; errors are org.agentfab.Error.InvalidSpec. Checked at
 * submission, and again at delivery (the configuration may have changed). */
int config_check_delivery(const Config *c, const TaskSpec *spec, sd_bus_error *error);
