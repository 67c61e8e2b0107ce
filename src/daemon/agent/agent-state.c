/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How the agent writes its task's state file: at once on the loop
 * (agent_set_state(): a breaker's pause, a failure in the middle of other
 * work of the run), or in a worker thread with the run waiting for it
 * (task-save.h): a step's end, the moves between the states of work, a
 * failure with nothing else under way, a malformed reply's count, a
 * reviewer's request for changes, the delivery's records and its last
 * word. A run that waits for a write has nothing else in flight, so no
 * callback of it can come in between. */
#include <errno.h>
#include <string.h>

#include "agent-run.h"
#include "agent.h"
#include "conversation-file.h"
#include "log.h"
#include "step-commit.h"
#include "string-util.h"
#include "task-save.h"
#include "task-store.h"
#include "trace.h"

/* After a change of state was written (r): a task that could not change
 * fails all the same, one no longer at work loses its agent. */
static void agent_state_set(AgentRun *run, Task *t, TaskState state, const char *reason, int r,
                            const sd_bus_error *error) {
        if (r < 0)
                log_error("Task '%s': cannot become %s: %s", t->id, task_state_to_string(state),
                          error && error->message ? error->message : strerror(-r));
        if (r < 0 && !t->broken && task_state_is_active(t->state) && task_state_transition_allowed(t->state, TASK_FAILED)) {
                _cleanup_free_ char *why = NULL;
                if (state != TASK_FAILED && asprintf(&why, "Cannot become %s", task_state_to_string(state)) < 0)
                        why = NULL;
                task_fail_unsaved(t, state == TASK_FAILED ? reason : why, r);
        }
        if (!task_state_is_active(t->state))
                agent_stop(t);
}

/* Nothing of the run can call back while its state is written: no model
 * call, command, job or thread of it under way. */
static bool agent_quiet(const AgentRun *run) {
        return run->phase == PHASE_IDLE && !run->call && !run->job && !run->worker && !run->sandbox_waiting &&
               run->defer;
}

void agent_set_state(AgentRun *run, TaskState state, const char *reason) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Task *t = run->task;   /* a final state stops the run: run->task is NULL then */
        int r;

        /* A failure is written off the loop when nothing else of the run is
         * under way (a model endpoint that is down fails every task at
         * work at once: one fsync each). A breaker's pause is not: a
         * Pause() that overtook it would leave the agent to go on, after
         * the resume, without the approval the breaker asks for. */
        if (state == TASK_FAILED && agent_quiet(run))
                return agent_set_state_then(run, state, reason);

        agent_count_clock(run);
        r = task_set_state(t, state, reason, UID_INVALID, &error);
        agent_state_set(run, t, state, reason, r, &error);
}

static void on_state_saved(Task *t, int r, void *userdata) {
        AgentRun *run = userdata;

        run->phase = PHASE_IDLE;
        if (!run->task)
                return;
        /* The state moved meanwhile (paused, say), and what that change
         * means for the agent was done then: agent_advance() looks at the
         * task as it is now. */
        if (r != -ESTALE)
                agent_state_set(run, t, run->next_state, run->next_reason, r, NULL);
        run->next_reason = mfree_ptr(run->next_reason);
        if (run->task)
                agent_schedule(run);
}

void agent_set_state_then(AgentRun *run, TaskState state, const char *reason) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Task *t = run->task;
        int r;

        agent_count_clock(run);
        run->next_state = state;
        r = task_set_state_then(t, run->factory->event, state, reason, on_state_saved, run, &error);
        if (r > 0) {
                run->phase = PHASE_STATE;
                /* Without it, a failed write fails the task all the same. */
                (void) free_and_strdup(&run->next_reason, reason);
                return;
        }
        agent_state_set(run, t, state, reason, r, &error);
        if (run->task)
                agent_schedule(run);
}

void agent_saved_go_on(AgentRun *run, StepCommit *c) {
        agent_schedule(run);
}

void agent_progress_ack_init(AgentRun *run, TaskProgressAck *ack) {
        const TaskProgress *p = &run->task->progress;

        *ack = (TaskProgressAck) {
                .step = p->step,
                .messages = p->messages,
                .malformed = p->malformed,
                .finished = p->finished,
        };
}

/* The acknowledgement is in the state file: memory has it now, and what
 * follows from it may follow. */
static void on_progress_saved(Task *t, int r, void *userdata) {
        AgentRun *run = userdata;
        _cleanup_(step_commit_freep) StepCommit *c = TAKE_PTR(run->saving);
        step_commit_done_t done = TAKE_PTR(run->saving_done);

        (void) t;
        run->phase = PHASE_IDLE;
        if (!run->task)
                return;
        if (c && run->save_start_usec > 0)
                c->save_usec = trace_now_usec() - run->save_start_usec;
        run->save_start_usec = 0;
        if (r < 0)
                return agent_fail(run, "Cannot save the task's state: %s", strerror(-r));
        if (run->task->state == TASK_PAUSED) {
                /* Paused meanwhile: what was acknowledged counts (the file
                 * says so), but what follows from it waits for the resume,
                 * as a ledger job's end that came back paused does
                 * (step-commit.h). Without a commit there is nothing to
                 * hold: the resume's agent_advance() goes on from memory. */
                if (!c)
                        return;
                run->held = TAKE_PTR(c);
                run->held_done = done;
                run->phase = PHASE_LEDGER;
                return;
        }
        done(run, c);
}

void agent_save_progress_then(AgentRun *run, TaskProgressAck *ack, char *append, size_t append_size, StepCommit *c,
                              step_commit_done_t done) {
        Task *t = run->task;
        int r;

        agent_count_clock(run);
        run->save_start_usec = trace_enabled() ? trace_now_usec() : 0;
        r = task_save_progress_async(t, run->factory->event, TASK_CONVERSATION_FILE, ack, append, append_size,
                                     on_progress_saved, run);
        if (r < 0) {
                run->save_start_usec = 0;
                return agent_fail(run, "Cannot save the task's state: %s", strerror(-r));
        }
        if (r == 0) {
                /* Written here (task-save.h says when). */
                if (c && run->save_start_usec > 0)
                        c->save_usec = trace_now_usec() - run->save_start_usec;
                run->save_start_usec = 0;
                return done(run, c);
        }
        /* The ledger job frees c after we return: it moves to the run. */
        if (c) {
                run->saving = step_commit_steal(c);
                if (!run->saving)
                        return agent_fail(run, "Out of memory.");
        }
        run->saving_done = done;
        run->phase = PHASE_SAVE;
}
