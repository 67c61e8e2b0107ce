/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Model profiles: named sets of settings for talking to a model, read from
 * [Model] sections of agentfab.conf and its drop-ins (see agentfab.conf(5)).
 * There is always a built-in profile "default", which a [Model] section with
 * Name=default may change key by key. */

#define MODEL_PROFILE_DEFAULT_NAME "default"
#define MODEL_PROFILE_DEFAULT_ENDPOINT "http://127.0.0.1:11434/v1"
#define MODEL_PROFILE_DEFAULT_MODEL "qwen2.5-coder"
#define MODEL_PROFILES_MAX 256U
#define MODEL_API_KEY_MAX 4096U

typedef enum ModelKind {
        MODEL_KIND_OPENAI,      /* an OpenAI-compatible HTTP server */
        MODEL_KIND_REPLAY,      /* replies read back from a recorded transcript */
        _MODEL_KIND_MAX,
        _MODEL_KIND_INVALID = -EINVAL,
} ModelKind;

/* How the model's tool calls reach us (ToolCalls=, agentfab.conf(5)). */
typedef enum ModelToolCalls {
        MODEL_TOOL_CALLS_AUTO,          /* the reply's tool_calls; when it has none, calls written in its text */
        MODEL_TOOL_CALLS_NATIVE,        /* the reply's tool_calls only */
        MODEL_TOOL_CALLS_TEXT,          /* no tools in the request: the system prompt describes them, the text holds the calls */
        _MODEL_TOOL_CALLS_MAX,
        _MODEL_TOOL_CALLS_INVALID = -EINVAL,
} ModelToolCalls;

#define MODEL_CURRENCY_MAX 8U /* with the NUL; letters only */

typedef struct ModelProfile {
        char *name;
        ModelKind kind;
        char *endpoint;                 /* base URL, e.g. http://127.0.0.1:11434/v1 */
        char *model;
        char *api_key_credential;       /* credential NAME, read from $CREDENTIALS_DIRECTORY/NAME; NULL: none */
        uint64_t timeout_usec;          /* whole request, 0 = none */
        uint64_t connect_timeout_usec;
        unsigned max_tokens;            /* 0: not sent */
        double temperature;             /* < 0: not sent */
        uint64_t context_budget;        /* tokens, approximate; for the agent loop */
        unsigned max_retries;           /* further attempts after the first */
        uint64_t retry_base_usec;
        uint64_t max_reply_bytes;
        bool stream;
        ModelToolCalls tool_calls;
        char *replay_path;
        /* Prices per million tokens, in millionths of the currency's unit
         * (PriceInputPerMTok=, PriceOutputPerMTok=); UINT64_MAX: not
         * given. With either given, an absent one is 0 and currency is
         * "USD" unless Currency= says otherwise. */
        uint64_t price_input_micros, price_output_micros;
        char currency[MODEL_CURRENCY_MAX];
} ModelProfile;

/* Whether the profile gives a price: the cost of its tokens is known. */
bool model_profile_has_prices(const ModelProfile *p);

typedef struct ModelProfiles {
        ModelProfile **profiles;
        size_t n_profiles;
} ModelProfiles;

const char *model_kind_to_string(ModelKind k);
ModelKind model_kind_from_string(const char *s);
const char *model_tool_calls_to_string(ModelToolCalls t);
ModelToolCalls model_tool_calls_from_string(const char *s);

/* [A-Za-z0-9_.-]{1,64}, and not "." or "..". Profile and credential names. */
bool model_name_is_valid(const char *name);
bool model_endpoint_is_valid(const char *endpoint);

/* Fills p with the built-in "default" profile only. */
int model_profiles_init(ModelProfiles *p);
void model_profiles_done(ModelProfiles *p);

/* Parses the [Model] sections of one file's text. Other sections are left
 * to their owners and ignored silently. As for [Daemon], an unknown key or an
 * invalid value is warned about and ignored (the key keeps its earlier
 * value); a section without Name= (or with an invalid one) is warned about
 * and ignored as a whole. A later section with the same Name= changes only
 * the keys it sets. Returns 0, or -ENOMEM. */
int model_profiles_parse(ModelProfiles *p, const char *text, const char *filename);

/* Reads path, then path.d/ *.conf in lexical order, like config_load(). A
 * missing file is not an error. */
int model_profiles_load(ModelProfiles *p, const char *path);

/* NULL name means "default". */
const ModelProfile *model_profiles_find(const ModelProfiles *p, const char *name);

/* Reads the API key from $CREDENTIALS_DIRECTORY/<api_key_credential>. *ret is
 * NULL (and 0 returned) when the profile names no credential. The key is at
 * most MODEL_API_KEY_MAX bytes, a trailing newline is stripped, control
 * characters are refused (-EBADMSG: they would end up in an HTTP header).
 * Free the result with model_api_key_free(), which wipes it. Never log it. */
int model_profile_read_api_key(const ModelProfile *p, char **ret);
char *model_api_key_free(char *key);
static inline void model_api_key_freep(char **k) {
        model_api_key_free(*k);
}

ModelProfile *model_profile_free(ModelProfile *p);
