/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "model-client.h"
#include "model-profile.h"

/* Tool calls written in the text of a reply. Many open models answer with
 * their calls in "content" and no "tool_calls" at all: the server has no
 * parser for the model's format (llama.cpp without --jinja, vLLM without
 * --tool-call-parser), or its parser missed them. The formats read, each
 * anywhere in the text and several times:
 *
 *   <tool_call>{"name": N, "arguments": {...}}</tool_call>     Hermes, Qwen 2.5/3
 *   <tool_call><function=N><parameter=K>V</parameter></function></tool_call>   Qwen3-Coder
 *   {"name": N, "arguments": {...}}  (or "parameters"), alone on its lines
 *   ```json {...} or [{...}, ...] ```
 *   [TOOL_CALLS][{...}, ...]  and  [TOOL_CALLS]N[ARGS]{...}    Mistral
 *   <|python_tag|>{"name": N, "parameters": {...}}             Llama 3
 *   <function=N>{...}</function>                                Llama 3.1 custom tools
 *
 * SECURITY: the text is the model's, and what it quotes (a file, a
 * command's output) may be anyone's. Only names of the tools the request
 * offered count; at most MODEL_TEXT_CALLS_MAX calls a reply are read, and at
 * most MODEL_TEXT_SCAN_MAX bytes of text are looked at. Thinking
 * (<think>...</think>) is never read for calls and never kept. */

#define MODEL_TEXT_CALLS_MAX 16U
#define MODEL_TEXT_SCAN_MAX (8U * 1024U * 1024U)

typedef struct ModelTextCall {
        char *name;
        char *arguments;        /* JSON text: an object serialized, or a string's text as written */
} ModelTextCall;

typedef struct ModelTextCalls {
        ModelTextCall calls[MODEL_TEXT_CALLS_MAX];
        size_t n_calls;
        /* Blocks written as calls that were not read: their JSON is broken
         * or cut, they name a tool that does not exist, or they came after
         * the first MODEL_TEXT_CALLS_MAX. Their text stays in text. */
        unsigned unread;
        /* The text without the calls read and without thinking, trimmed;
         * NULL when nothing is left. */
        char *text;
} ModelTextCalls;

void model_text_calls_done(ModelTextCalls *c);

/* Reads the calls written in text. tools is the request's "tools" array
 * (the names of its functions count, and their parameter types make the
 * values of <parameter=K> blocks); NULL or empty reads no calls and only
 * strips the thinking. Never fails on what the text holds: 0, or -ENOMEM. */
int model_text_calls_parse(const char *text, size_t size, json_object *tools, ModelTextCalls *ret);

/* The text without its thinking, trimmed; *ret NULL when nothing is left. */
int model_text_strip_thinking(const char *text, size_t size, char **ret);

/* The reply as the agent takes it: its content without thinking, and with
 * mode auto (when the reply has no tool calls of its own) or text, the
 * calls written in its content as its tool calls, with ids made from the
 * reply, and its message (what the conversation keeps) with them as
 * "tool_calls" and the rest of the text as "content". *ret is NULL when
 * the reply stays as it is; else a new reply, whose raw text is not kept
 * (the transcript has it from r). */
int model_reply_read_text(const ModelReply *r, ModelToolCalls mode, json_object *tools, ModelReply **ret);

/* For ToolCalls=text: the part of the system prompt that describes the
 * tools and how to call them. NULL on -ENOMEM. */
char *model_text_calls_prompt(json_object *tools);

/* For ToolCalls=text: the messages as a server without tool support takes
 * them. The tools' description is added to the first system message (if
 * tools are given); an assistant message's tool calls become
 * <tool_call>...</tool_call> blocks of its content; tool results become
 * <tool_response name="N">...</tool_response> blocks of a user message; and
 * user messages in a row become one, since many chat templates want the
 * roles to alternate. messages is not changed. */
int model_text_calls_messages(json_object *messages, json_object *tools, json_object **ret);
