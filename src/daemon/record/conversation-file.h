/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A task's conversation file: JSON lines in conversation.jsonl, appended;
 * the state file says how many of them count (TaskProgress.messages and
 * conversation_size). The agent keeps the step in flight in memory
 * (agent/conversation.h); this is the file as the rest of the daemon reads
 * and extends it. */

#include <json-c/json.h>
#include <stddef.h>

#include "task.h"

#define TASK_CONVERSATION_FILE "conversation.jsonl"
/* The longest conversation file read back. */
#define CONVERSATION_MAX (64u * 1024u * 1024u)

/* Reads the first want messages of a conversation file's text (JSON
 * objects, one a line) into the array messages; -EBADMSG when there are
 * fewer complete lines or one is not an object. *ret_good is the length of
 * the part read: what follows belongs to no acknowledged step. The parser
 * behind conversation_load(), exposed for tests/fuzz. */
int conversation_parse(const char *text, size_t size, unsigned want, json_object *messages, size_t *ret_good);

/* A chat message {role, content}; NULL when out of memory. */
json_object *conversation_message_new(const char *role, const char *content);

/* A tool's answer to call_id. */
json_object *conversation_tool_message_new(const char *call_id, const char *name, const char *content);

/* Adds a user message to the conversation of t, which no run holds (a
 * decision, a reset): what the state file does not acknowledge is cut first,
 * and t->progress.messages counts the new one (the caller saves t). */
int conversation_append_user(Task *t, const char *text);
