/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "agentfab-bus.h"
#include "macro.h"
#include "task-id.h"
#include "task-resources.h"
#include "task-spec.h"
#include "task-state.h"

typedef struct Factory Factory;
typedef struct AgentRun AgentRun;
typedef struct SandboxSession SandboxSession;
typedef struct TaskJob TaskJob;
typedef struct TaskSave TaskSave;

/* How far the agent got, persisted in the state file with the task: a step
 * counts only once this record names it (see agent-loop.c). */
#define TASK_RECENT_CALLS_MAX 20U

#define TASK_BUDGET_WARNED_STEPS  (1U << 0)
#define TASK_BUDGET_WARNED_TOKENS (1U << 1)
#define TASK_BUDGET_WARNED_WALL   (1U << 2)
#define TASK_BUDGET_WARNED_CPU     (1U << 3)
#define TASK_BUDGET_WARNED_NETWORK (1U << 4)
#define TASK_BUDGET_WARNED_COST    (1U << 5)

typedef struct TaskProgress {
        unsigned step;             /* steps done and acknowledged */
        unsigned messages;         /* conversation messages acknowledged */
        uint64_t conversation_size; /* their bytes in the file; 0 with messages: not known (an older state file) */
        char *checkpoint;          /* commit of the last acknowledged step; NULL: the base */
        char *head;                /* the branch's tip, for HeadCommit */
        char *plan;                /* the model's plan, once it made one */
        uint64_t tokens;           /* budget used */
        uint64_t commands;
        uint64_t wall_usec;
        uint64_t extra_steps;      /* budget extensions granted by approvals */
        uint64_t extra_tokens;
        uint64_t extra_commands;
        uint64_t extra_wall_usec;
        uint64_t extra_files;      /* allowances added by approvals of size breakers */
        uint64_t extra_lines;
        unsigned rejections;
        unsigned malformed;        /* malformed model replies in a row */
        unsigned test_failures;    /* test runs in a row that failed the same way */
        uint64_t test_signature;   /* of the last failure (test_run_parse()) */
        int baseline_passed;       /* tests passing at the start; -1 unknown */
        bool baseline_done;
        /* The baseline's failures (test-run.h), with baseline_recorded:
         * each test result is told against them, and finish's rule weighs
         * them (test-judge.h). */
        bool baseline_recorded;
        int baseline_exit;
        int baseline_failed;       /* failures counted; -1: the output did not say */
        char **baseline_failures;  /* their names, at most TEST_NAMES_MAX */
        bool baseline_failures_complete;
        char *last_tests;          /* "pass", "fail" or NULL (not run) */
        int last_test_exit;
        char *breaker;             /* the breaker that paused the task; NULL none */
        char *breaker_commit;      /* the checkpoint before the step that tripped it */
        bool finished;             /* finish accepted: deliver */
        bool reviewed;             /* the review stage passed, or a person approved what it found */
        unsigned review_rounds;    /* the reviewer model's requests for changes so far */
        char *summary;             /* the model's own summary at finish */
        /* The tip whose whole diff against the base the model was shown at
         * a finish, to review it: a finish is accepted once it is the tip
         * (agent-loop.c). NULL: none shown yet. */
        char *diff_shown;
        bool pushed;               /* delivery pushed the branch to spec.push_url */
        char *environment_identity; /* "NAME (os-release; digest)": where the branch was built */
        char *pull_request;        /* the forge's URL of the pull request delivery opened */
        unsigned requirement;      /* version of goal + acceptance criteria, raised by Amend(); 0 means 1 */
        bool verified;             /* delivery's own test run is recorded on the branch (delivery.c) */
        char **allowed_hosts;      /* allow entries approvals added (approve --allow-host), besides the environment's */
        char **approvals;          /* "step N, breaker B, by NAME (uid U)": each approval, for the delivered tip */
        TaskState paused_from;     /* paused: the state Resume() goes back to */
        /* What checkpoints leave out (ledger.h, LedgerLeaveOut): when the
         * test command ran, what the agent wrote through its tools, what it
         * keeps on purpose, and the binary it asked to keep (the binary-file
         * breaker's, until a person decides). */
        uint64_t *test_windows;    /* n_test_windows pairs [start, end] of CLOCK_REALTIME µs */
        size_t n_test_windows;
        char **written;
        char **kept;
        char *keep_pending;        /* its path */
        char *keep_reason;         /* "'path' (binary, N bytes): why", for the breaker and the commit */
        char *kept_note;           /* "Kept on purpose: ..." lines for the next commit's body */
        /* The stuck breaker's: signatures of the latest tool calls with
         * their results, since a tool last changed the workspace (or the
         * breaker was decided on), oldest first. */
        uint64_t recent_calls[TASK_RECENT_CALLS_MAX];
        unsigned n_recent_calls;
        unsigned budget_warned;    /* TASK_BUDGET_WARNED_*: the budgets the model was told of at 80 % */
        TaskResources resources;   /* what the task has used (task-resources.h) */
} TaskProgress;

/* Bounds of what the leave-out rules keep in the state file: windows past
 * the first ones merge (more is left out, never less), paths written past
 * the bound are not remembered (a file the tests touched after the agent
 * wrote it is then left out). */
#define TASK_TEST_WINDOWS_MAX 256U
#define TASK_WRITTEN_MAX 4096U
#define TASK_KEPT_MAX 64U

/* At most this many hosts an approval adds to one task. */
#define TASK_ALLOWED_HOSTS_MAX 64U
/* The approvals a delivered tip lists; later ones are journaled only. */
#define TASK_APPROVALS_MAX 16U   /* within LEDGER_TRAILERS_MAX with the review's */
#define TASK_APPROVAL_TEXT_MAX 256U

/* A task record and its state machine. No D-Bus here: task-dbus.c exposes
 * it, task-store.c persists it. */
typedef struct Task {
        Factory *factory;          /* NULL until factory_add_task() */
        int tasks_fd;              /* borrowed: the directory holding the task directories */

        char *id;
        uid_t owner;
        TaskState state;
        char *reason;              /* why it waits or failed; empty otherwise */
        uint64_t created_usec;
        uint64_t updated_usec;
        TaskSpec spec;
        char *branch;
        TaskProgress progress;
        AgentRun *run;             /* the agent at work, while the task is active (or paused) */
        TaskJob *jobs, *jobs_tail; /* work on its ledger in worker threads, one at a time (task-job.h) */
        json_object *checkpoints;  /* the Checkpoints property as last read, for while a job runs */
        char *checkpoints_key;     /* the tip and checkpoint it was read at (task_branch_checkpoints()) */
        TaskSave *pending_save;    /* a state change being written in a thread (task-save.h) */
        TaskSave *landing_save;    /* the one whose result memory takes now (its callbacks may stop the agent) */
        /* How much of the events file (that inode) a history sent on the
         * stream socket found to be whole JSON lines: the file only grows,
         * so that part is sent as it is, not parsed again (stream.c). */
        uint64_t events_checked;
        dev_t events_dev;
        ino_t events_ino;
        unsigned save_seq;         /* counts the writes of the state file */

        /* Its place among the factory's tasks (task-index.h): the list of
         * the state it was last seen in, and its position in
         * Factory.tasks, the order ListTasks() gives. */
        TaskState indexed_state;
        bool indexed;
        struct Task *state_prev, *state_next;
        size_t position;

        /* A frozen sandbox kept without an agent (freezer.c): while the task
         * waits for approval, or is paused after a restart of the daemon. */
        SandboxSession *sandbox;
        bool sandbox_stale;        /* it ran a command when frozen: not to be used again */
        char *fdstore_name;        /* its connection is in systemd's fd store under this name */
        SandboxSession *fdstore_session; /* the session whose connection that is (compared, never used) */
        sd_event_source *release_timer;  /* MaxPausedSec= */

        /* The state file could not be read: the record is shown as failed and
         * kept read-only so that nothing overwrites what an administrator may
         * want to recover. */
        bool broken;
        /* The progress in memory went past the state file, which could not be
         * written (task_fail_unsaved()): before the task goes on, it is read
         * back from the file, as after a crash (task_settle_progress()). */
        bool progress_unsaved;
} Task;

/* The test command ran from start to end (CLOCK_REALTIME µs). */
int task_progress_add_test_window(TaskProgress *p, uint64_t start, uint64_t end);
/* The agent wrote path through its tools; kept: it keeps path on purpose.
 * Once each; -E2BIG past the bound. */
int task_progress_add_written(TaskProgress *p, const char *path);
int task_progress_add_kept(TaskProgress *p, const char *path);

int task_new(Task **ret, const char *id);
Task *task_free(Task *t);
void task_progress_done(TaskProgress *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(Task *, task_free);

int task_id_generate(char ret[static AGENTFAB_TASK_ID_LEN + 1]);

/* Moves the task to a new state: refuses illegal transitions
 * (org.agentfab.Error.BadState), persists the record before anything is
 * announced, and restores the old state in memory if persisting fails.
 * caller is the uid whose request caused it, or UID_INVALID. */
int task_set_state(Task *t, TaskState state, const char *reason, uid_t caller, sd_bus_error *error);
/* Fails the task in memory when its state file cannot be written. */
void task_fail_unsaved(Task *t, const char *reason, int error);
int task_settle_progress(Task *t);

/* The version of the task's requirement (goal and acceptance criteria):
 * 1 as submitted, raised by each Amend(). */
unsigned task_requirement_version(const Task *t);

/* The task's D-Bus object path; freed by the caller. */
char *task_object_path(const Task *t);

uint64_t now_usec(void);
