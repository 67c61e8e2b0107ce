/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* What a submitter asks for. Parsed from the a{sv} of SubmitTask() one key at
 * a time, validated as a whole, stored in the task's state file. */

typedef enum TaskLimit {
        TASK_LIMIT_MAX_STEPS,
        TASK_LIMIT_MAX_WALL_CLOCK_SEC,
        TASK_LIMIT_MAX_TOKENS,
        TASK_LIMIT_MAX_COMMANDS,
        TASK_LIMIT_COMMAND_TIMEOUT_SEC,
        TASK_LIMIT_MEMORY_MAX,
        TASK_LIMIT_TASKS_MAX,
        TASK_LIMIT_CPU_QUOTA_PERCENT,
        /* Budgets on what the task uses, summed over its sandboxes
         * (task-resources.h): the budget breaker trips past them. */
        TASK_LIMIT_MAX_CPU_SEC,
        TASK_LIMIT_MAX_NETWORK_BYTES,
        TASK_LIMIT_MAX_COST,            /* millionths of the model profile's currency */
        _TASK_LIMIT_MAX,
        _TASK_LIMIT_INVALID = -EINVAL,
} TaskLimit;

#define TASK_LIMIT_UNSET UINT64_MAX

#define TASK_GOAL_MAX         16384
#define TASK_ACCEPTANCE_MAX   16384
#define TASK_TEST_COMMAND_MAX 4096
#define TASK_BASE_MAX         255
#define TASK_MODEL_MAX        64
#define TASK_REPOSITORY_MAX   4095
#define TASK_PUSH_URL_MAX     2048
#define TASK_FORGE_MAX        64
#define TASK_COVERAGE_REPORT_MAX 1024
#define TASK_FORGE_REPOSITORY_MAX 201
#define TASK_REFERENCE_MAX    256
#define TASK_PULL_REQUEST_BASE_DEFAULT "main"
#define TASK_EXTRA_LIMITS_MAX 16
#define TASK_LIMIT_NAME_MAX   64

typedef struct TaskSpec {
        char *repository;    /* canonical absolute path, once checked */
        char *goal;
        char *acceptance;
        char *test_command;
        char *base;
        char *model;
        char *replay;        /* id of a finished task whose model exchanges are played back */
        /* The requirement's ticket id or URL (PROJ-123, https://...): an
         * Agentfab-Ref: trailer on every commit, and in the summary. */
        char *reference;
        /* The coverage report the test command writes (lcov .info or
         * Cobertura XML), workspace-relative: the review stage compares the
         * base's with the final tree's (review-stage.c). */
        char *coverage_report;

        /* Delivery to a forge (agent-loop.c, agent_deliver()): the branch is
         * pushed to push_url, then a pull request is opened on the [Forge]
         * section named forge, in forge_repository ("owner/repo"), into
         * pull_request_base (NULL: "main"). Which push URLs a task may name
         * depends on the configuration, and is checked at submission. */
        char *push_url;
        char *forge;
        char *forge_repository;
        char *pull_request_base;
        /* The [Environment] the sandbox is built from (agentfab.conf(5)); NULL the default. */
        char *environment;
        /* The repository as an open directory the submitter handed over
         * (SubmitTask()'s repository_fd), or a memfd holding a git bundle of
         * it: read through it only, at submission. Never stored. */
        int repository_fd;
        /* Whether the submodules of base are fetched too (default: no). */
        bool submodules;
        uint64_t limits[_TASK_LIMIT_MAX];

        /* Limits this release does not know yet: stored as given, for the
         * parts of the factory that will (names checked, values integers). */
        char *extra_limit_names[TASK_EXTRA_LIMITS_MAX];
        uint64_t extra_limit_values[TASK_EXTRA_LIMITS_MAX];
        size_t n_extra_limits;
} TaskSpec;

const char *task_limit_to_string(TaskLimit l);
TaskLimit task_limit_from_string(const char *s);
/* Letters, digits and '_', beginning with a letter, at most 64. */
bool task_limit_name_is_valid(const char *name);
/* "max_steps, max_wall_clock_sec, ...": every limit a spec may name. */
char *task_limit_names(void);

void task_spec_init(TaskSpec *spec);
void task_spec_done(TaskSpec *spec);

/* Each returns 0 or a negative errno with error set to org.agentfab.Error.InvalidSpec. */
int task_spec_set_string(TaskSpec *spec, const char *key, const char *value, sd_bus_error *error);
int task_spec_set_limit(TaskSpec *spec, const char *key, uint64_t value, sd_bus_error *error);
int task_spec_validate(const TaskSpec *spec, sd_bus_error *error);

bool task_base_is_valid(const char *base);
/* An https:// or ssh:// URL the daemon may fetch a repository from (no
 * password in it; a user name for ssh only). */
bool task_repository_url_is_valid(const char *url);
bool task_model_is_valid(const char *model);
/* A ticket id or URL: 1 to TASK_REFERENCE_MAX bytes of printable characters
 * (UTF-8 allowed), no whitespace, not beginning with '-'. */
bool task_reference_is_valid(const char *reference);
