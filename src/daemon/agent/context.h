/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What of a task's conversation its model is sent, and what the model's
 * server showed of its context window. Pure functions of their arguments,
 * so that a redone step sends the same request and unit tests can check
 * them without a server; the agent's use of them is in conversation.c. */

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The system prompt and the first user message: always sent first and as
 * they are, so that a server's prompt cache keeps working. */
#define CONTEXT_PREFIX             2u
/* Messages at the end sent as they are, and the whole of the latest step. */
#define CONTEXT_KEEP_RECENT        6u
/* The bytes of messages a request may always have, whatever the budget. */
#define CONTEXT_MESSAGES_MIN       4096u
/* Bytes per token before a server's count says otherwise, in thousandths. */
#define CONTEXT_BPT_DEFAULT_MILLI  4000u
/* The smallest context budget a refusal halves to, in tokens. */
#define CONTEXT_BUDGET_MIN         1024u
/* The fewest prompt tokens a server must have counted for the count to
 * say that it cut the prompt (a count of the part it did not have cached
 * is smaller; no server's window is). */
#define CONTEXT_TRUNCATED_MIN      1024u

typedef struct ContextStats {
        size_t bytes;           /* the messages sent, as JSON */
        size_t full_bytes;      /* the whole conversation, as JSON */
        size_t shrunk;          /* messages whose tool output, arguments or long words became a note */
        size_t condensed;       /* messages the digest stands for */
        size_t clipped;         /* recent messages cut in the middle because nothing else was left */
} ContextStats;

/* messages (a JSON array of chat messages) as sent within budget bytes of
 * JSON: when the whole is larger, the oldest tool outputs and the
 * arguments of old tool calls (whole files for write_file, the texts of
 * edit_file, patches) become a note saying what the call was and its
 * size; if that is not enough, the oldest steps after the system prompt
 * and the first user message are condensed into one message, a digest the
 * daemon writes (goal, the files changed, the last test run, and what
 * each step did: its calls' names and paths and the first lines of their
 * results). The latest messages stay as they are unless nothing else is
 * left. Past the budget a shrinking or condensing goes a quarter below it,
 * so that the same request prefix is sent for some steps after. The
 * result depends on messages, budget and goal only. Returns 0 and a new
 * array in *ret, or -ENOMEM. */
int context_compact(json_object *messages, size_t budget, const char *goal, json_object **ret,
                    ContextStats *ret_stats);

/* The bytes of messages a request may have: the budget's tokens less the
 * reply's (max_tokens, at most half of it) and a tenth for the error of
 * the estimate, at bytes_per_token_milli / 1000 bytes a token, less the
 * tools' schemas and the request's own fields; at least
 * CONTEXT_MESSAGES_MIN. */
size_t context_message_budget(uint64_t budget_tokens, unsigned bytes_per_token_milli, unsigned max_tokens,
                              size_t tools_bytes);

/* What replies showed of the server's context: one line each of the
 * task's context.jsonl. */
typedef enum ContextCause {
        CONTEXT_CALIBRATED,     /* a count of prompt tokens set bytes per token lower, or the largest prompt taken higher */
        CONTEXT_REFUSED,        /* the server refused a request as too long: the budget was halved */
        CONTEXT_TRUNCATED,      /* the server counted far fewer tokens than it was sent: the budget is what it took */
        _CONTEXT_CAUSE_MAX,
        _CONTEXT_CAUSE_INVALID = -EINVAL,
} ContextCause;

const char *context_cause_to_string(ContextCause c);
ContextCause context_cause_from_string(const char *s);

typedef struct ContextEntry {
        ContextCause cause;
        unsigned step;                  /* the steps done when the request was made */
        uint64_t profile_budget;        /* the profile's ContextBudget= then */
        uint64_t sent_bytes;            /* the messages and tools sent */
        uint64_t prompt_tokens;         /* as the server counted them; 0 for a refusal */
        unsigned bytes_per_token_milli; /* CALIBRATED: the lowest seen, or 0 if this count gave none */
        uint64_t taken;                 /* CALIBRATED: the most prompt tokens of a request taken whole */
        uint64_t budget;                /* REFUSED, TRUNCATED: the budget in tokens from then on */
} ContextEntry;

int context_entry_to_json(const ContextEntry *e, json_object **ret);
/* -EBADMSG for a line that is not an entry. */
int context_entry_from_json(json_object *o, ContextEntry *ret);

typedef struct ContextGauge {
        uint64_t budget;                /* tokens a request may fill */
        unsigned bytes_per_token_milli;
        bool calibrated;                /* a server's count gave bytes_per_token_milli */
        uint64_t taken;                 /* the most prompt tokens counted of a request taken whole */
} ContextGauge;

/* The gauge for a request made with step steps done: the profile's budget,
 * lowered by the refusals and truncations of requests made with at most
 * that many steps done (the same step's own, for its next attempt) and
 * recorded under the same profile budget; calibrated by the counts of
 * requests made with fewer steps done, so that a step done again after a
 * restart is sent as it was the first time. */
void context_gauge_from(ContextGauge *g, uint64_t profile_budget, const ContextEntry *entries, size_t n,
                        unsigned step);

/* Whether a server that counted prompt_tokens of sent_bytes cut the
 * prompt: it counted at least CONTEXT_TRUNCATED_MIN and, with a calibrated
 * gauge, less than 60 % of the estimate while at least 80 % of the most it
 * took whole before (a count of only the part it had not cached is
 * smaller than that), or without one, less than half the estimate at 4
 * bytes a token. *ret_estimate (optional) gets the estimate. */
bool context_truncated(const ContextGauge *g, uint64_t sent_bytes, uint64_t prompt_tokens, uint64_t *ret_estimate);

/* Whether a count of a request taken whole changes the gauge: bytes per
 * token 1 % lower (within 1 to 8 bytes a token; a count of only the part
 * not cached gives more), or the most taken 10 % higher. Fills ret
 * (cause CALIBRATED) with the new values if so. */
bool context_calibrate(const ContextGauge *g, unsigned step, uint64_t profile_budget, uint64_t sent_bytes,
                       uint64_t prompt_tokens, ContextEntry *ret);
