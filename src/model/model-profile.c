/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "conf-files.h"
#include "credential.h"
#include "fs-util.h"
#include "log.h"
#include "micros.h"
#include "model-profile.h"
#include "string-table.h"
#include "string-util.h"

static const char *const model_kind_table[_MODEL_KIND_MAX] = {
        [MODEL_KIND_OPENAI] = "openai",
        [MODEL_KIND_REPLAY] = "replay",
};

DEFINE_STRING_TABLE_LOOKUP(model_kind, ModelKind);

static const char *const model_tool_calls_table[_MODEL_TOOL_CALLS_MAX] = {
        [MODEL_TOOL_CALLS_AUTO] = "auto",
        [MODEL_TOOL_CALLS_NATIVE] = "native",
        [MODEL_TOOL_CALLS_TEXT] = "text",
};

DEFINE_STRING_TABLE_LOOKUP(model_tool_calls, ModelToolCalls);

bool model_name_is_valid(const char *name) {
        size_t l;

        if (!name)
                return false;
        l = strlen(name);
        if (l < 1 || l > 64)
                return false;
        if (streq(name, ".") || streq(name, ".."))
                return false;
        for (const char *c = name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      strchr("_.-", *c)))
                        return false;
        return true;
}

bool model_endpoint_is_valid(const char *endpoint) {
        const char *host;

        if (!endpoint)
                return false;
        if (strneq(endpoint, "http://", 7))
                host = endpoint + 7;
        else if (strneq(endpoint, "https://", 8))
                host = endpoint + 8;
        else
                return false;
        /* A host is needed; and no white space or control characters, which
         * libcurl would otherwise have to make sense of. */
        if (host[0] == '\0' || host[0] == '/')
                return false;
        /* SECURITY: no "user:password@" in the URL; keys come from
         * credentials only, and URLs end up in log messages. */
        if (memchr(host, '@', strcspn(host, "/?#")))
                return false;
        if (strlen(endpoint) > 2048)
                return false;
        for (const unsigned char *c = (const unsigned char *) endpoint; *c; c++)
                if (*c <= ' ' || *c == 127)
                        return false;
        return true;
}

bool model_profile_has_prices(const ModelProfile *p) {
        return p && (p->price_input_micros != UINT64_MAX || p->price_output_micros != UINT64_MAX);
}

ModelProfile *model_profile_free(ModelProfile *p) {
        if (!p)
                return NULL;
        free(p->name);
        free(p->endpoint);
        free(p->model);
        free(p->api_key_credential);
        free(p->replay_path);
        free(p);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ModelProfile *, model_profile_free);

static int model_profile_new(const char *name, ModelProfile **ret) {
        _cleanup_(model_profile_freep) ModelProfile *p = NULL;

        p = calloc(1, sizeof(ModelProfile));
        if (!p)
                return -ENOMEM;

        /* The defaults are documented in agentfab.conf(5). They suit a local
         * Ollama; a remote service needs at least Endpoint= and Model=. */
        *p = (ModelProfile) {
                .kind = MODEL_KIND_OPENAI,
                .timeout_usec = 300 * USEC_PER_SEC,
                .connect_timeout_usec = 10 * USEC_PER_SEC,
                .max_tokens = 4096,
                .temperature = 0.2,
                .context_budget = 32768,
                .max_retries = 3,
                .retry_base_usec = 1 * USEC_PER_SEC,
                .max_reply_bytes = 8 * 1024 * 1024,
                .stream = false,
                .tool_calls = MODEL_TOOL_CALLS_AUTO,
                .price_input_micros = UINT64_MAX,
                .price_output_micros = UINT64_MAX,
        };
        p->name = strdup(name);
        p->endpoint = strdup(MODEL_PROFILE_DEFAULT_ENDPOINT);
        p->model = strdup(MODEL_PROFILE_DEFAULT_MODEL);
        if (!p->name || !p->endpoint || !p->model)
                return -ENOMEM;

        *ret = TAKE_PTR(p);
        return 0;
}

int model_profiles_init(ModelProfiles *p) {
        ModelProfile *d;
        int r;

        *p = (ModelProfiles) {};
        r = model_profile_new(MODEL_PROFILE_DEFAULT_NAME, &d);
        if (r < 0)
                return r;
        p->profiles = calloc(1, sizeof(ModelProfile *));
        if (!p->profiles) {
                model_profile_free(d);
                return -ENOMEM;
        }
        p->profiles[0] = d;
        p->n_profiles = 1;
        return 0;
}

void model_profiles_done(ModelProfiles *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_profiles; i++)
                model_profile_free(p->profiles[i]);
        free(p->profiles);
        *p = (ModelProfiles) {};
}

const ModelProfile *model_profiles_find(const ModelProfiles *p, const char *name) {
        if (!name)
                name = MODEL_PROFILE_DEFAULT_NAME;
        for (size_t i = 0; i < p->n_profiles; i++)
                if (streq(p->profiles[i]->name, name))
                        return p->profiles[i];
        return NULL;
}

static int model_profiles_get(ModelProfiles *p, const char *name, ModelProfile **ret) {
        ModelProfile *n, **a;
        int r;

        for (size_t i = 0; i < p->n_profiles; i++)
                if (streq(p->profiles[i]->name, name)) {
                        *ret = p->profiles[i];
                        return 0;
                }

        if (p->n_profiles >= MODEL_PROFILES_MAX)
                return -E2BIG;

        r = model_profile_new(name, &n);
        if (r < 0)
                return r;
        a = realloc(p->profiles, (p->n_profiles + 1) * sizeof(ModelProfile *));
        if (!a) {
                model_profile_free(n);
                return -ENOMEM;
        }
        p->profiles = a;
        p->profiles[p->n_profiles++] = n;
        *ret = n;
        return 0;
}

static int parse_unsigned(const char *v, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t u;
        int r = safe_atou64(v, &u);
        if (r < 0)
                return r;
        if (u < min || u > max)
                return -ERANGE;
        *ret = u;
        return 0;
}

static int parse_string(const char *v, char **p) {
        /* An empty value resets the key to "unset". */
        return free_and_strdup(p, isempty(v) ? NULL : v);
}

static int model_profile_assign(ModelProfile *p, const char *key, const char *value) {
        uint64_t u;
        int r;

        if (streq(key, "Kind")) {
                ModelKind k = model_kind_from_string(value);
                if (k < 0)
                        return -EINVAL;
                p->kind = k;
                return 0;
        }
        if (streq(key, "Endpoint")) {
                if (!model_endpoint_is_valid(value))
                        return -EINVAL;
                return free_and_strdup(&p->endpoint, value);
        }
        if (streq(key, "Model")) {
                if (isempty(value) || strlen(value) > 256 || !string_is_safe(value, false))
                        return -EINVAL;
                return free_and_strdup(&p->model, value);
        }
        if (streq(key, "APIKeyCredential")) {
                if (!isempty(value) && !model_name_is_valid(value))
                        return -EINVAL;
                return parse_string(value, &p->api_key_credential);
        }
        if (streq(key, "ReplayPath")) {
                if (!isempty(value) && (value[0] != '/' || !string_is_safe(value, false)))
                        return -EINVAL;
                return parse_string(value, &p->replay_path);
        }
        if (streq(key, "TimeoutSec") || streq(key, "ConnectTimeoutSec") || streq(key, "RetryBaseSec")) {
                r = parse_sec(value, &u);
                if (r < 0)
                        return r;
                if (u == UINT64_MAX)
                        u = 0; /* infinity: no limit, which is what 0 means to libcurl */
                if (streq(key, "TimeoutSec"))
                        p->timeout_usec = u;
                else if (streq(key, "ConnectTimeoutSec"))
                        p->connect_timeout_usec = u;
                else
                        p->retry_base_usec = u;
                return 0;
        }
        if (streq(key, "MaxTokens")) {
                r = parse_unsigned(value, 0, 1000000, &u);
                if (r >= 0)
                        p->max_tokens = (unsigned) u;
                return r;
        }
        if (streq(key, "MaxRetries")) {
                r = parse_unsigned(value, 0, 100, &u);
                if (r >= 0)
                        p->max_retries = (unsigned) u;
                return r;
        }
        if (streq(key, "ContextBudget")) {
                r = parse_unsigned(value, 1, UINT32_MAX, &u);
                if (r >= 0)
                        p->context_budget = u;
                return r;
        }
        if (streq(key, "MaxReplySize")) {
                r = parse_size(value, &u);
                if (r < 0)
                        return r;
                if (u < 1024 || u > 1024ULL * 1024 * 1024)
                        return -ERANGE;
                p->max_reply_bytes = u;
                return 0;
        }
        if (streq(key, "Temperature")) {
                char *end = NULL;
                double d;

                if (isempty(value)) {
                        p->temperature = -1; /* leave it to the server */
                        return 0;
                }
                errno = 0;
                d = strtod(value, &end);
                if (errno != 0 || !end || *end != '\0' || !isfinite(d) || d < 0 || d > 2)
                        return -EINVAL;
                p->temperature = d;
                return 0;
        }
        if (streq(key, "Stream")) {
                r = parse_boolean(value);
                if (r < 0)
                        return r;
                p->stream = r;
                return 0;
        }
        if ((streq(key, "PriceInputPerMTok") || streq(key, "PriceOutputPerMTok"))) {
                uint64_t *price = streq(key, "PriceInputPerMTok") ? &p->price_input_micros : &p->price_output_micros;

                if (isempty(value)) {
                        *price = UINT64_MAX;
                        return 0;
                }
                /* Exactly, into millionths: no floating point on the way
                 * to what a task is told it cost. */
                r = parse_micros(value, &u);
                if (r < 0)
                        return r;
                *price = u;
                return 0;
        }
        if (streq(key, "Currency")) {
                size_t n = strlen(value);

                if (n >= MODEL_CURRENCY_MAX)
                        return -EINVAL;
                for (size_t i = 0; i < n; i++)
                        if (!((value[i] >= 'A' && value[i] <= 'Z') || (value[i] >= 'a' && value[i] <= 'z')))
                                return -EINVAL;
                memcpy(p->currency, value, n + 1);
                return 0;
        }
        if (streq(key, "ToolCalls")) {
                ModelToolCalls t = model_tool_calls_from_string(value);
                if (t < 0)
                        return -EINVAL;
                p->tool_calls = t;
                return 0;
        }
        return -ENOENT;
}

/* One [Model] section as read: the lines are kept until the section ends,
 * since Name= may come after the keys it names. */
typedef struct PendingLine {
        char *key, *value;
        unsigned line;
} PendingLine;

typedef struct PendingSection {
        PendingLine *lines;
        size_t n_lines;
        unsigned start;
        bool active;
} PendingSection;

static void pending_section_reset(PendingSection *s) {
        for (size_t i = 0; i < s->n_lines; i++) {
                free(s->lines[i].key);
                free(s->lines[i].value);
        }
        free(s->lines);
        *s = (PendingSection) {};
}

static int pending_section_add(PendingSection *s, const char *key, const char *value, unsigned line) {
        PendingLine *a;

        if (s->n_lines >= 1024)
                return -E2BIG;
        a = realloc(s->lines, (s->n_lines + 1) * sizeof(PendingLine));
        if (!a)
                return -ENOMEM;
        s->lines = a;
        a[s->n_lines] = (PendingLine) { .key = strdup(key), .value = strdup(value), .line = line };
        if (!a[s->n_lines].key || !a[s->n_lines].value) {
                free(a[s->n_lines].key);
                free(a[s->n_lines].value);
                return -ENOMEM;
        }
        s->n_lines++;
        return 0;
}

static int pending_section_apply(ModelProfiles *p, PendingSection *s, const char *filename) {
        const char *name = NULL;
        ModelProfile *m;
        int r;

        if (!s->active)
                return 0;

        for (size_t i = 0; i < s->n_lines; i++)
                if (streq(s->lines[i].key, "Name"))
                        name = s->lines[i].value;
        if (!name) {
                log_warning("%s:%u: [Model] section without Name=, ignoring it.", filename, s->start);
                return 0;
        }
        if (!model_name_is_valid(name)) {
                log_warning("%s:%u: Invalid model profile name '%s', ignoring section.", filename, s->start, name);
                return 0;
        }

        r = model_profiles_get(p, name, &m);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_warning_errno(r, "%s:%u: Too many model profiles, ignoring section: %m", filename, s->start);
                return 0;
        }

        for (size_t i = 0; i < s->n_lines; i++) {
                PendingLine *l = s->lines + i;

                if (streq(l->key, "Name"))
                        continue;
                r = model_profile_assign(m, l->key, l->value);
                if (r == -ENOMEM)
                        return r;
                if (r == -ENOENT)
                        log_warning("%s:%u: Unknown key '%s' in section [Model], ignoring.", filename, l->line, l->key);
                else if (r < 0 && (streq(l->key, "PriceInputPerMTok") || streq(l->key, "PriceOutputPerMTok")))
                        log_warning("%s:%u: Invalid price '%s' for %s=, ignoring: expected a decimal number of the "
                                    "currency's units per million tokens, such as 0.15, with at most six decimals.",
                                    filename, l->line, l->value, l->key);
                else if (r < 0 && streq(l->key, "Currency"))
                        log_warning("%s:%u: Invalid currency '%s', ignoring: expected letters only, at most %u, such as USD.",
                                    filename, l->line, l->value, MODEL_CURRENCY_MAX - 1);
                else if (r < 0)
                        log_warning("%s:%u: Invalid value '%s' for %s=, ignoring.", filename, l->line, l->value, l->key);
        }
        return 0;
}

typedef struct ProfilesParse {
        ModelProfiles *profiles;
        PendingSection section;
} ProfilesParse;

static int profiles_line(const char *filename, const char *section, const char *key, const char *value, unsigned line,
                         void *userdata) {
        ProfilesParse *pp = userdata;
        PendingSection *s = &pp->section;
        int r;

        if (!key) {
                /* A section ends where the next begins, or with the text. */
                r = pending_section_apply(pp->profiles, s, filename);
                pending_section_reset(s);
                if (r < 0)
                        return r;
                s->active = section && streq(section, "Model");
                s->start = line;
                return 0;
        }
        if (!s->active)
                return 0;   /* other sections belong to config_parse() */

        r = pending_section_add(s, key, value, line);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                log_warning("%s:%u: Too many lines in section [Model], ignoring.", filename, line);
        return 0;
}

static void profiles_parse_done(void *userdata) {
        ProfilesParse *pp = userdata;

        pending_section_reset(&pp->section);
}

static const ConfParser profiles_parser = {
        .line = profiles_line,
        .done = profiles_parse_done,
        /* config_parse() reads the same files and warns about malformed lines. */
        .warn = false,
};

int model_profiles_parse(ModelProfiles *p, const char *text, const char *filename) {
        return conf_parse_text(&profiles_parser, text, filename, &(ProfilesParse) { .profiles = p });
}

int model_profiles_load(ModelProfiles *p, const char *path) {
        return conf_parse_files(&profiles_parser, path, &(ProfilesParse) { .profiles = p });
}

char *model_api_key_free(char *key) {
        return credential_free(key);
}

int model_profile_read_api_key(const ModelProfile *p, char **ret) {
        assert(p);
        assert(ret);

        *ret = NULL;
        if (!p->api_key_credential)
                return 0;
        /* SECURITY: the name is a file name below the credentials directory
         * and nothing else (credential_read_line() checks it too). */
        if (!model_name_is_valid(p->api_key_credential))
                return -EINVAL;
        return credential_read_line(p->api_key_credential, MODEL_API_KEY_MAX, true, ret);
}
