/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The agent's run of one task, shared by the modules of the agent: the loop
 * (agent-loop.c, the state machine), its conversation (conversation.c), the
 * summary (summary.c) and the delivery (delivery.c). Not for anyone else:
 * the rest of the daemon talks to the agent through agent.h. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "breakers.h"
#include "buf.h"
#include "exec-session.h"
#include "factory.h"
#include "ledger.h"
#include "macro.h"
#include "model-client.h"
#include "model-profile.h"
#include "sandbox-usage.h"
#include "step-commit.h"
#include "task-job.h"
#include "task-save.h"
#include "task.h"
#include "tools.h"
#include "worker.h"

typedef struct StepCommit StepCommit;

typedef enum AgentPhase {
        PHASE_IDLE,                /* nothing in flight: agent_advance() decides */
        PHASE_PREPARE,             /* the workspace is being made, in a worker thread */
        PHASE_SANDBOX,             /* the launcher makes the sandbox, or we wait our turn for it */
        PHASE_BASELINE,            /* the test command before any change */
        PHASE_OUTLINE,             /* ctags for the first prompt's symbol outline (agent-outline.c) */
        PHASE_MODEL,               /* a model call in flight */
        PHASE_TOOL,                /* a command of a tool call in flight */
        PHASE_VERIFY,              /* delivery's own run of the test command on the final tree */
        PHASE_REVIEW,              /* the review stage: a checker in the sandbox, or the analysis in a worker thread */
        PHASE_LEDGER,              /* a checkpoint, a reset or the delivery's commit, in a worker thread */
        PHASE_SAVE,                /* a step's acknowledgement is written, in a worker thread (task-save.h) */
        PHASE_STATE,               /* a move to the next state of work, or the first messages, are written, likewise */
        PHASE_DELIVER,             /* the push and the pull request, in a worker thread */
} AgentPhase;

#define PLAN_LOOKS_MAX 5U

struct AgentRun {
        Task *task;                /* NULL once stopped: callbacks then do nothing */
        Factory *factory;
        sd_event_source *defer;    /* runs agent_advance() */
        sd_event_source *dispose;  /* frees a stopped run outside its own callbacks */
        AgentPhase phase;

        int dir_fd;                /* tasks/<id> */
        int log_fd;                /* output.log */
        Ledger *ledger;
        SandboxSession *session;
        const ModelProfile *profile;
        char *api_key;
        char *model_name;          /* "<profile>/<model>" for trailers and the journal */
        ModelCall *call;
        Worker *worker;            /* making the workspace */
        TaskJob *job;              /* a job on the ledger (step-commit.h) or the delivery to a forge */
        void (*commit_done)(AgentRun *run, StepCommit *c);
        void (*reset_done)(AgentRun *run, int r);
        void (*coverage_done)(AgentRun *run);   /* review_stage_keep_base_coverage() */
        /* A step's end that came back while the task was paused: taken up
         * when it is resumed (step_commit_take_held()), so that nothing
         * follows from it while the task says "paused". */
        StepCommit *held;
        void (*held_done)(AgentRun *run, StepCommit *c);
        /* The ledger job's result whose acknowledgement is being written
         * (PHASE_SAVE), and what follows once the file holds it: a step's
         * change lists for its breakers, the delivery's next stage. */
        StepCommit *saving;
        void (*saving_done)(AgentRun *run, StepCommit *c);
        uint64_t save_start_usec;  /* AGENTFAB_TRACE=1: when that write began */
        /* On a host of a fleet, the step the state file acknowledged while
         * the fleet publishes it (agent.h, agent_set_publisher(); PHASE_SAVE still), and
         * what follows once it is published. */
        StepCommit *publishing;
        void (*publishing_done)(AgentRun *run, StepCommit *c);
        uint64_t publish_cookie;   /* the publish waited for; 0: none */
        unsigned published;        /* the conversation's messages the fleet's database holds, as far as this run knows */
        TaskState next_state;      /* the state being written (PHASE_STATE) */
        char *next_reason;         /* and its reason, should the write fail */
        bool saving_plan;          /* the messages being written (PHASE_STATE) end with the plan */
        bool tools_held;           /* a file tool came back while paused: the next call waits for the resume */
        struct ReviewJob *held_review;   /* the same for the review's analysis (review-stage.c) */
        int held_review_result;
        bool at_checkpoint;        /* the workspace was reset to the acknowledged checkpoint */
        ModelReplay *replay;       /* with spec.replay: the recorded exchanges instead of the endpoint */
        json_object *messages;     /* the conversation: acknowledged messages, then the step in flight */
        json_object *tools;
        /* While planning, the model may look first (read_file, list_files,
         * search), up to PLAN_LOOKS_MAX replies of calls; their results
         * are messages of the conversation, not a step. */
        json_object *plan_tools;
        unsigned plan_looks;
        bool planning_look;
        /* The first prompt's symbol outline: tried once a run, the files
         * ctags was given while it runs, then the text (NULL: none). */
        bool outline_tried;
        char **outline_files;
        char *outline;
        struct AgentContext *context;   /* what the model's server showed of its context (conversation.h) */
        uint64_t clock_usec;       /* CLOCK_MONOTONIC when wall-clock use was last counted */
        /* What the sandbox's scope had used when last read
         * (agent-resources.c), and its PID 1 (-1: not read yet). */
        pid_t usage_pid;
        SandboxUsage usage_seen;
        /* The budgets' watch while a command runs (agent-budget.c). */
        sd_event_source *budget_timer;

        /* The step in flight. */
        json_object *calls;        /* the tool calls of the model's reply */
        size_t next_call;
        char *call_id;             /* of the tool call whose command runs */
        ToolKind call_kind;
        uint64_t tests_started;    /* CLOCK_REALTIME µs: the test command runs since (a leave-out window) */
        char *call_command;
        /* The syntax check after a write (syntax-check.h) runs: the
         * write's call and answer wait for it. */
        char *check_id;
        char *check_text;
        ToolKind check_kind;
        char **commands;           /* run in this step, for the Agentfab-Command: trailers */
        char *subject;
        char *body;                /* the reply's words after its first line, and its tool calls */
        bool tests_ran;
        bool tests_passed;
        bool tests_accepted;       /* and finish's rule accepts them (test-judge.h), green or not */
        int test_exit;
        int tests_n_passed;
        uint64_t output_start;     /* where the test command's output begins in output.log; UINT64_MAX: unknown */
        char *gave_up;             /* finish with cannot_complete: the model's reason */
        char *stuck;               /* the call made MaxRepeatedCalls times with the same result */
        bool network;              /* a command failed for want of the network */
        char *network_command;
        bool finish;               /* finish called and its tests passed */
        unsigned good_calls;       /* tool calls of this step that parsed */
        unsigned bad_calls;        /* and those that did not */
        bool reply_malformed;      /* the reply called no tool, or was cut: counts towards MaxMalformedReplies= */
        bool reply_cut;            /* the reply ended at its token limit (finish_reason "length") */
        uint64_t cut_tokens;       /* and at how many tokens, as the server counted them or MaxTokens= */
        bool cut_untold;           /* and a call written in its text was cut: told after the others ran */
        char *finish_summary;

        bool sandbox_opening;      /* the launcher makes our sandbox: one of agent-prepare.c's sandbox_opening */
        bool sandbox_waiting;      /* in line for that, in sandbox_waiters */
        AgentRun *sandbox_next;
        struct ReviewJob *review;  /* the review stage's, while its checkers run (review-stage.c) */
        char *review_api_key;      /* the reviewer model's (review-model.c) */
        char *review_model_name;   /* "<profile>/<model>" of the reviewer */
        uint64_t trace_start_usec; /* AGENTFAB_TRACE=1: when the agent started, until its first model call */
        const char *trace_sandbox; /* static: how it came by its sandbox, for that trace */
};

/* CLOCK_MONOTONIC in microseconds. */
uint64_t agent_now_usec(void);

/* Counts the wall-clock time used since it was last counted. */
void agent_count_clock(AgentRun *run);

/* Runs agent_advance() from the event loop, soon. */
void agent_schedule(AgentRun *run);

/* The run's job in its task's queue (task-job.h): run->job, with the
 * run's phase saying what is under way. A job on the ledger borrows the
 * run's: with ledger (the job's field for it) not NULL, the ledger is the
 * job's until the job comes back. On error the ledger is the run's again
 * and job is freed. */
int agent_job_start(AgentRun *run, const char *what, task_job_run_t fn, task_job_done_t done, task_job_free_t free_job,
                    void *job, Ledger **ledger, AgentPhase phase);
/* First in a done() of the run's job: the run is idle again, and has its
 * ledger back from *ledger if the job borrowed it. False if the run was
 * stopped meanwhile: done() has nothing more to do. */
bool agent_job_ended(AgentRun *run, Ledger **ledger);

/* Moves the task to state; a state that is not active stops the run. A
 * failure with nothing of the run in flight is written in a worker thread
 * (as agent_set_state_then()), the rest on the loop. */
void agent_set_state(AgentRun *run, TaskState state, const char *reason);

/* The same, with the state file written in a worker thread (PHASE_STATE,
 * task-save.h): for a move the run makes with nothing else in flight.
 * agent_advance() runs again once the file holds it, or looks at the task
 * as it is if a Pause() or Cancel() overtook it. (agent-state.c) */
void agent_set_state_then(AgentRun *run, TaskState state, const char *reason);

/* A done() for agent_save_progress_then() after which agent_advance()
 * decides. */
void agent_saved_go_on(AgentRun *run, StepCommit *c);

/* An acknowledgement of the progress as memory holds it: set its fields,
 * then agent_save_progress_then(). */
void agent_progress_ack_init(AgentRun *run, TaskProgressAck *ack);

/* Writes *ack (and append, the conversation's new lines, may be NULL) in a
 * worker thread (PHASE_SAVE); memory takes it once the file holds it, and
 * then done(run, c) runs: at once if written here, after the resume if the
 * task was paused meanwhile. c (a ledger job's result, may be NULL) moves to
 * the run for that. A failed write fails the task. Takes *ack and append. */
void agent_save_progress_then(AgentRun *run, TaskProgressAck *ack, char *append, size_t append_size, StepCommit *c,
                              void (*done)(AgentRun *run, StepCommit *c));

/* agent-publish.c. done(run, c) for a step the state file holds: at once
 * on one host; on a host of a fleet once the publisher has published it
 * (agent.h, agent_set_publisher()). */
void agent_publish_step(AgentRun *run, StepCommit *c, void (*done)(AgentRun *run, StepCommit *c));

/* agent-prepare.c. Opens the task's workspace, making it if create: 0 it
 * is there; 1 it is being made (in a worker thread) and agent_advance()
 * runs again when it is; < 0 the task failed. */
int agent_open_workspace(AgentRun *run, bool create);
/* Opens the task's sandbox unless it is open: 0 it is there; > 0 it is
 * being made (or waits its turn) and agent_advance() runs again when it is;
 * < 0 the task failed. */
int agent_open_sandbox(AgentRun *run);
/* The run's turn at the launcher is over (or given up): the next in line
 * goes. */
void agent_sandbox_release(AgentRun *run);

/* The timeout of one command of the task. */
uint64_t agent_command_timeout_usec(AgentRun *run);

/* The task's wall-clock budget, its limit or the configuration's. */
uint64_t agent_wall_budget_usec(AgentRun *run);

/* Stops the task for a person's approval: breaker b tripped for reason;
 * commit_before is where a rejection takes the branch back to. */
void agent_trip(AgentRun *run, Breaker b, const char *reason, const char *commit_before);

/* The task fails with the reason given. */
void agent_fail(AgentRun *run, const char *fmt, ...) _printf_(2, 3);

/* agent-breakers.c. After a step: path rules look at what this step changed
 * (from c->before), size rules at everything since the base, with the
 * allowance approvals added. Returns 1 if a breaker tripped (the task is
 * paused). */
int agent_check_breakers(AgentRun *run, const StepCommit *c);
/* Budgets, before each model call. Returns 1 if one is exhausted (the task
 * is paused or failed). */
int agent_check_budget(AgentRun *run);

/* agent-budget.c. The CPU, network and cost budgets: 1 if one is used up
 * (the task is paused for a person, or failed with BudgetAction=fail). */
int agent_check_resource_budget(AgentRun *run);
/* Checks them every second while the command just sent runs. */
void agent_budget_watch(AgentRun *run);
void agent_budget_done(AgentRun *run);
/* " CPU time 1.7 s of max_cpu_sec=2 used.": each of them 80 % spent and
 * not told before, for the model's warning. */
int agent_budget_warn(AgentRun *run, Buf *b);

/* agent-resources.c: what the task uses, counted in its progress. A
 * sandbox the run made counts from 0; one it took up, from now. */
void agent_resources_sandbox_new(AgentRun *run);
void agent_resources_sandbox_taken(AgentRun *run);
/* After a command and before a sandbox goes: its scope's CPU time, memory
 * peak and bytes read and written, and the proxy's counters. */
void agent_resources_sample(AgentRun *run);
/* The task's CPU time with what the live sandbox's scope used since the
 * last sample, not counted: the budget's reading while a command runs. */
uint64_t agent_resources_cpu_usec(AgentRun *run);
/* After a model call (reply NULL: it failed), at profile's prices. */
void agent_resources_model_call(Task *t, const ModelProfile *profile, const ModelReply *reply);

/* agent-loop.c: the step's end, when the model called no more tools (or
 * the last one is done): the checkpoint is made and acknowledged, then the
 * breakers look at it. */
void agent_end_step(AgentRun *run);

void agent_tests_ended(AgentRun *run);
/* The read-only tools of schema, for looking while planning. */
json_object *agent_plan_tools(json_object *schema);
bool agent_tool_reads_only(ToolKind k);
/* A look while planning is done: its messages written, the plan asked again. */
void agent_plan_look_done(AgentRun *run);
/* A line "Kept on purpose: what" for the next commit's body. */
int agent_add_kept_note(TaskProgress *p, const char *what);
void agent_note_written(AgentRun *run, const char *path);
/* agent-tools.c. A command of the tool "tool" in the sandbox, with its
 * output followed; agent_on_command_done() takes its result. */
int agent_run_command(AgentRun *run, const char *tool, const char *command, uint64_t timeout_sec);
void agent_on_command_done(SandboxSession *s, int error, const ExecResult *result, void *userdata);
/* Runs the next of the model's tool calls, or ends the step. */
void agent_next_tool(AgentRun *run);
/* From task_unpaused(): goes on with the tool calls held (tools_held). */
void agent_take_held_tools(AgentRun *run);
/* Answers the tool call call_id with text; the stuck breaker sees it first
 * (agent_note_call()). */
void agent_tool_result(AgentRun *run, const char *call_id, const char *name, const char *text);
/* agent-breakers.c. Counts the call being answered (run->calls[next_call -
 * 1]) with its result among the recent ones: at BREAKER_WARN_REPEATED_CALLS
 * of the same, *ret_text is text with a warning to the model; at
 * BREAKER_MAX_REPEATED_CALLS, with a note that the task stops, and
 * run->stuck is set for the step's end. *ret_text NULL: text as it is. */
int agent_note_call(AgentRun *run, const char *name, const char *text, char **ret_text);

/* agent-tests.c. A run of the test command, read back from output.log in
 * the task's job queue (the run's phase meanwhile): parsed (test-run.h)
 * and cut to the parts about failures for the model. */
typedef struct TestResult {
        TestRun run;
        char *text;                /* the output for the model: all of it, or the parts about failures */
        int status;                /* as the model sees it: 128 + the signal for a signal */
        int signal;
        bool timed_out, limit_killed;
        uint64_t duration_usec;
} TestResult;
void test_result_done(TestResult *r);
typedef void (*agent_tests_read_t)(AgentRun *run, TestResult *r);
/* Before the command starts: where its output will begin in the log. */
void agent_note_output_start(AgentRun *run);
int agent_read_tests(AgentRun *run, const ExecResult *result, AgentPhase phase, agent_tests_read_t done);
/* The baseline's run, or run_tests' or finish's: recorded, judged against
 * the baseline, told to the model; then the next tool call. */
int agent_tests_command_done(AgentRun *run, const ExecResult *result);
/* The baseline as progress keeps it, as a TestRun that borrows its names. */
void agent_baseline_view(const TaskProgress *p, TestRun *ret);
/* The goal and the acceptance criteria, for finish's rule. */
char *agent_requirement(Task *t);
/* finish's rule (test-judge.h) for tr against the task's baseline. */
int agent_judge_tests(AgentRun *run, const TestRun *tr, char **ret_why);

/* agent-model.c. The first messages of the conversation (or of the plan's
 * steps), and one model call for the step. The first two return 0 when
 * the run may go on, 1 when their messages are being written (PHASE_STATE,
 * agent_advance() runs again once the file holds them) or, for the first,
 * when the symbol outline is being made (PHASE_OUTLINE, likewise),
 * negative on failure. */
int agent_begin_conversation(AgentRun *run);
/* agent-outline.c. Before the first messages: 1 if ctags runs in the
 * sandbox for the symbol outline (PHASE_OUTLINE; agent_advance() runs again
 * when it is done, with run->outline set or not), 0 if there is nothing to
 * run (no file named, tried before, ctags cannot start), negative only if
 * memory is out. */
int agent_outline_start(AgentRun *run);
int agent_start_plan_steps(AgentRun *run);
/* Writes the messages of run->messages the state file does not count
 * yet, then the state file that counts them (and holds plan, if not NULL),
 * in a worker thread (task-save.h); memory counts them once the file does.
 * 1: under way (PHASE_STATE); 0: written here; negative: failed. */
int agent_save_messages(AgentRun *run, const char *plan);
void agent_call_model(AgentRun *run);
/* What the model is told of a reply cut at its token limit (run->reply_cut):
 * what happened, and how to do better; tool names the call that was cut,
 * or is NULL for its last call (written in its text), which did not run
 * while the others did, or when none of its calls was complete. */
char *agent_cut_note(AgentRun *run, const char *tool);
