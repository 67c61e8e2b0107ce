/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A task's conversation with its model: JSON lines in conversation.jsonl,
 * appended; the state file says how many of them count. Messages of the
 * step in flight stay in memory until its checkpoint acknowledges them. */

#include <json-c/json.h>

#include "agent-run.h"
#include "conversation-file.h"
#include "task.h"

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



/* What is sent to the model: run->messages with old tool outputs elided
 * while it exceeds the profile's context budget. */
json_object *conversation_for_model(AgentRun *run);

/* The system prompt: goal, acceptance criteria, test command, the files,
 * the repository's instructions for agents, the rules. */
int conversation_system_prompt(AgentRun *run, char **ret);

