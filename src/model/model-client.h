/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "model-profile.h"

/* An OpenAI-compatible chat-completions client. One ModelClient per daemon
 * holds one libcurl multi handle, driven by the daemon's sd-event loop: an
 * I/O source per socket libcurl asks for, and one timer. Nothing here ever
 * blocks; each request ends in exactly one call of its handler from the event
 * loop (unless cancelled). */

typedef struct ModelClient ModelClient;
typedef struct ModelCall ModelCall;
typedef struct ModelReplay ModelReplay;

#define MODEL_TOOL_CALLS_MAX 128U
#define MODEL_RETRY_MAX_USEC (60 * USEC_PER_SEC)

typedef struct ModelToolCall {
        char *id;               /* as sent, or generated ("call_<hash>_<n>") when the server sent none */
        char *name;
        char *arguments;        /* raw JSON text as the model sent it, may be invalid; an object is serialized */
} ModelToolCall;

typedef struct ModelReply {
        char *content;          /* may be NULL (content: null) */
        ModelToolCall *tool_calls;
        size_t n_tool_calls;
        char *finish_reason;    /* "stop" | "tool_calls" | "length" | ... or NULL */
        uint64_t prompt_tokens, completion_tokens;      /* 0 if not reported */
        uint64_t cached_tokens; /* usage.prompt_tokens_details.cached_tokens; 0 if not reported */
        json_object *message;   /* the assistant message, normalized, ready to append to the conversation */
        json_object *request;   /* the request body that was sent (no credentials in it); NULL for replays */
        char *raw;              /* the raw body (plain) or the stream as received (SSE), at most max_reply_bytes */
        size_t raw_size;
        bool stream;            /* raw is an SSE stream */
        unsigned attempts;      /* HTTP attempts made */
        /* Set by model_reply_read_text() (model-text-calls.h). */
        bool text_calls;        /* the tool calls were written in the text of content */
        unsigned unread_calls;  /* calls written in the text that could not be read */
} ModelReply;

ModelReply *model_reply_free(ModelReply *r);
static inline void model_reply_freep(ModelReply **r) {
        model_reply_free(*r);
}

/* Parses a reply body as the client does: an SSE stream if stream, else one
 * JSON object. Exposed for replay and for tests. On failure, *ret_error_message
 * (if given) gets a short human explanation. */
int model_reply_parse(const char *raw, size_t size, bool stream, ModelReply **ret, char **ret_error_message);
/* Makes r->message from r->content and r->tool_calls: the assistant
 * message the conversation keeps. */
int model_reply_build_message(ModelReply *r);
/* Whether model_reply_parse() reads raw as a stream when asked for one or
 * not: a server asked for a stream may answer with one object, and one not
 * asked may stream all the same. */
bool model_reply_is_stream(const char *raw, size_t size, bool asked);

/* Whether an error body from a model server says that the request is
 * longer than the model's context, in the words of OpenAI
 * ("context_length_exceeded"), vLLM ("This model's maximum context length
 * is N tokens"), llama.cpp ("exceeds the available context size", "context
 * shift is disabled") or Ollama ("the input length exceeds the context
 * length"). *ret_tokens (optional) gets the context length the body names,
 * or 0. */
bool model_error_is_context_overflow(const char *body, uint64_t *ret_tokens);

/* error is 0 and reply non-NULL on success; else a negative errno and a
 * one-line message; -EMSGSIZE when the server refused the request as
 * longer than the model's context (model_error_is_context_overflow(), or
 * HTTP 413), whatever the status, and without retries. reply and error_message belong to the call and are freed
 * after the handler returns, along with the call itself: take a reference
 * (json_object_get(reply->message)) to keep something. */
typedef void (*model_reply_handler_t)(ModelCall *call, int error, const char *error_message,
                                      const ModelReply *reply, void *userdata);

/* The client takes a reference on e. Create it once, after the event loop
 * and before the first task; free it before the loop. */
int model_client_new(sd_event *e, ModelClient **ret);
/* Cancels every call still running, without calling handlers. Not from
 * within a handler: the call being handled is freed after its handler. */
ModelClient *model_client_free(ModelClient *c);
static inline void model_client_freep(ModelClient **c) {
        model_client_free(*c);
}

/* Starts POST <endpoint>/chat/completions with {"model","messages","tools",
 * "max_tokens","temperature","stream"}; never blocks. With ToolCalls=text
 * there are no "tools": the messages are sent as
 * model_text_calls_messages() writes them (model-text-calls.h). api_key may be NULL (no
 * Authorization header). Everything needed is copied: p, api_key, messages
 * and tools may go away once this returns. tools may be NULL.
 *
 * With a replay profile, the next exchange is read from the transcript at
 * p->replay_path through a cursor the client keeps per path (see
 * model_client_replay_reset()), and delivered from a defer source. For an
 * explicit per-task cursor use model_client_chat_replay().
 *
 * ret_call may be NULL; the pointer is valid until the handler has returned
 * or the call has been cancelled. */
int model_client_chat(ModelClient *c, const ModelProfile *p, const char *api_key, json_object *messages,
                      json_object *tools, model_reply_handler_t handler, void *userdata, ModelCall **ret_call);

/* Handler not called afterwards. Safe from within any handler, also its own
 * (then a no-op). */
void model_call_cancel(ModelCall *call);

/* Replay. A transcript is a file of JSON lines, one per exchange:
 * {"request":{...},"reply":{"raw":"...","stream":bool,"attempts":N}}.
 * A ModelReplay is a cursor over one: each next() yields the following reply,
 * parsed from its raw text exactly as the live reply was. */
int model_replay_open(const char *path, ModelReplay **ret);
ModelReplay *model_replay_free(ModelReplay *r);
static inline void model_replay_freep(ModelReplay **r) {
        model_replay_free(*r);
}
/* -ENODATA when the transcript is exhausted; -EBADMSG for an exchange that
 * cannot be parsed (the cursor still moves past it). ret_request (optional)
 * gets a reference to the recorded request. model_replay_position() is the
 * number of exchanges read so far (1 after the first). */
int model_replay_next(ModelReplay *r, ModelReply **ret, json_object **ret_request);
size_t model_replay_position(const ModelReplay *r);

/* Delivers r's next reply asynchronously, like a live call. r must stay
 * alive until the handler has run or the call is cancelled. */
int model_client_chat_replay(ModelClient *c, ModelReplay *r, model_reply_handler_t handler, void *userdata,
                             ModelCall **ret_call);

/* Forgets the client's cursor for path (all paths if NULL): the next replay
 * starts at the first exchange again. */
void model_client_replay_reset(ModelClient *c, const char *path);

/* Appends one exchange to a transcript: one write() of one JSON line. request
 * NULL means reply->request. */
int model_transcript_append(int fd, json_object *request, const ModelReply *reply);
