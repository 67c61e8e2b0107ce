/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A task's conversation with its model: JSON lines in conversation.jsonl,
 * appended; the state file says how many of them count. Messages of the
 * step in flight stay in memory until its checkpoint acknowledges them. */

#include <json-c/json.h>

#include "agent-run.h"
#include "context.h"
#include "conversation-file.h"
#include "task.h"

/* What the model's server showed of its context, one JSON line each
 * (context.h's ContextEntry): read when a run starts, appended as replies
 * come, so that a step redone after a restart is sent as it was. */
#define TASK_CONTEXT_FILE "context.jsonl"
#define TASK_CONTEXT_FILE_MAX (1024u * 1024u)
/* Requests of one step refused as too long, or cut by the server, in a
 * row before the task fails. */
#define CONTEXT_TRIES_MAX 4u

/* The run's view of the model's context window (run->context). */
typedef struct AgentContext {
        ContextEntry *entries;
        size_t n_entries;
        ContextGauge gauge;        /* of the request in flight */
        unsigned step;             /* its steps done */
        uint64_t sent_bytes;       /* its messages and tools, as JSON */
        uint64_t refused_bytes;    /* the size of the last request refused as too long, 0: none */
        unsigned tries;            /* requests of this step refused or cut, in a row */
        size_t tools_bytes;        /* the tools' schemas, as JSON; SIZE_MAX: not yet known */
} AgentContext;

AgentContext *agent_context_free(AgentContext *c);

/* Adds message (owned) to run->messages only: the step in flight. */
int conversation_add(AgentRun *run, json_object *message);

/* The messages of run->messages the state file does not count yet
 * (t->progress.messages on), as the lines of the conversation file. */
int conversation_unsaved_lines(AgentRun *run, char **ret, size_t *ret_size);


/* Reads the acknowledged messages and cuts off what follows them, in the
 * task's job queue (run->job, phase PHASE_LEDGER meanwhile); then sets
 * run->messages and calls done() on the loop, with -EBADMSG if fewer are
 * there than the state file counts. done() is not called when the run
 * stopped meanwhile. */
typedef void (*conversation_loaded_t)(AgentRun *run, int r);
int conversation_load(AgentRun *run, conversation_loaded_t done);



/* What is sent to the model: run->messages compacted (context.h) to what
 * the context budget leaves for messages: the profile's ContextBudget=
 * (or less, once the server showed it takes less) less the reply's
 * max_tokens, a margin and the tools' schemas, at the bytes per token the
 * server's counts showed. NULL: out of memory. */
json_object *conversation_for_model(AgentRun *run);

/* After the model's answer to that request (error and error_message as
 * the model client gave them, reply NULL on error). Learns bytes per
 * token from usage.prompt_tokens. When the server refused the request as
 * longer than the model's context (-EMSGSIZE), the budget becomes half of
 * what that request took of it for the rest of the task (or the context
 * length the error names, if smaller); when it counted far fewer prompt tokens than it was sent (it
 * cut the prompt, as Ollama does past num_ctx), the budget becomes what it
 * took. Both are journaled and recorded in TASK_CONTEXT_FILE. Returns 1
 * when the same step is to be asked again, compacted harder; 0 to go on
 * with the reply or the error; -E2BIG with *ret_reason when the server
 * refused or cut CONTEXT_TRIES_MAX requests of the step in a row, or the
 * request cannot get shorter. */
int conversation_context_answered(AgentRun *run, int error, const char *error_message, const ModelReply *reply,
                                  char **ret_reason);

/* The system prompt: goal, acceptance criteria, test command, the files,
 * the repository's instructions for agents, the rules. */
int conversation_system_prompt(AgentRun *run, char **ret);

