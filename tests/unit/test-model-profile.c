/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "model-profile.h"
#include "tap.h"

static void write_file(int dfd, const char *name, const char *text) {
        (void) write_file_atomic(dfd, name, text, strlen(text), 0600);
}

int main(void) {
        ModelProfiles ps;
        const ModelProfile *p;
        char dir[] = "/tmp/test-model-profile-XXXXXX", path[128], dropins[160], creds[160];
        char *key = NULL;

        /* Without any configuration there is a usable local default, as the
         * man page promises. */
        CHECK(model_profiles_init(&ps) >= 0, "profiles initialized");
        p = model_profiles_find(&ps, NULL);
        CHECK(p && streq(p->name, "default") && streq(p->endpoint, MODEL_PROFILE_DEFAULT_ENDPOINT) &&
              streq(p->model, MODEL_PROFILE_DEFAULT_MODEL) && p->kind == MODEL_KIND_OPENAI, "built-in default profile");
        CHECK(p && p->timeout_usec == 300 * USEC_PER_SEC && p->max_retries == 3 && p->max_reply_bytes == 8 * 1024 * 1024 &&
              !p->stream && !p->api_key_credential && p->tool_calls == MODEL_TOOL_CALLS_AUTO, "documented defaults");
        CHECK(!model_profiles_find(&ps, "nope"), "unknown profile not found");

        model_profiles_parse(&ps,
                             "[Daemon]\nMaxTasks=5\n"
                             "[Model]\nEndpoint=https://api.example.com/v1\nName=remote\nModel=gpt-x\n"
                             "APIKeyCredential=openai.key\nTimeoutSec=90\nConnectTimeoutSec=1500ms\nMaxTokens=1000\n"
                             "Temperature=0.7\nContextBudget=128000\nMaxRetries=5\nRetryBaseSec=250ms\nMaxReplySize=2M\n"
                             "Stream=yes\nToolCalls=text\n"
                             "[Model]\nName=rec\nKind=replay\nReplayPath=/var/lib/agentfab/t.jsonl\n",
                             "test");
        p = model_profiles_find(&ps, "remote");
        CHECK(p && streq(p->endpoint, "https://api.example.com/v1") && streq(p->model, "gpt-x") &&
              streq_ptr(p->api_key_credential, "openai.key"), "profile parsed: strings (Name= after other keys)");
        CHECK(p && p->timeout_usec == 90 * USEC_PER_SEC && p->connect_timeout_usec == 1500 * USEC_PER_MSEC &&
              p->retry_base_usec == 250 * USEC_PER_MSEC, "profile parsed: times");
        CHECK(p && p->max_tokens == 1000 && p->temperature > 0.69 && p->temperature < 0.71 && p->context_budget == 128000 &&
              p->max_retries == 5 && p->max_reply_bytes == 2 * 1024 * 1024 && p->stream, "profile parsed: numbers");
        CHECK(p && p->tool_calls == MODEL_TOOL_CALLS_TEXT, "profile parsed: ToolCalls=text");
        p = model_profiles_find(&ps, "rec");
        CHECK(p && p->kind == MODEL_KIND_REPLAY && streq_ptr(p->replay_path, "/var/lib/agentfab/t.jsonl"), "replay profile parsed");

        /* Bad values are ignored key by key; the profile stays usable. */
        model_profiles_parse(&ps,
                             "[Model]\nName=remote\nEndpoint=file:///etc/passwd\nMaxRetries=many\nKind=magic\n"
                             "Temperature=9\nAPIKeyCredential=../../etc/shadow\nModel=gpt-y\nToolCalls=json\n",
                             "test");
        p = model_profiles_find(&ps, "remote");
        CHECK(p && streq(p->endpoint, "https://api.example.com/v1"), "non-http endpoint refused");
        CHECK(p && p->max_retries == 5 && p->kind == MODEL_KIND_OPENAI && p->temperature < 1, "invalid numbers and kind ignored");
        CHECK(p && streq_ptr(p->api_key_credential, "openai.key"), "credential name with '/' refused");
        CHECK(p && streq(p->model, "gpt-y"), "valid key in the same section applied");
        CHECK(p && p->tool_calls == MODEL_TOOL_CALLS_TEXT, "an unknown ToolCalls= value ignored");
        CHECK(model_tool_calls_from_string("auto") == MODEL_TOOL_CALLS_AUTO &&
              model_tool_calls_from_string("native") == MODEL_TOOL_CALLS_NATIVE &&
              streq(model_tool_calls_to_string(MODEL_TOOL_CALLS_TEXT), "text") &&
              model_tool_calls_from_string("Text") == _MODEL_TOOL_CALLS_INVALID, "ToolCalls= names");

        /* A section needs a valid name. */
        model_profiles_parse(&ps, "[Model]\nEndpoint=http://10.0.0.1/v1\n[Model]\nName=bad/name\nModel=x\n[Model]\nName=\n", "test");
        CHECK_INT_EQ(ps.n_profiles, 3, "sections without a valid Name= ignored (%zu profiles)", ps.n_profiles);
        CHECK(!model_endpoint_is_valid("http://") && !model_endpoint_is_valid("ftp://x") &&
              !model_endpoint_is_valid("http://a b") &&
              !model_endpoint_is_valid("https://user:pw@host/v1") && model_endpoint_is_valid("http://host/v1?x=a@b") && model_endpoint_is_valid("http://[::1]:8080/v1"), "endpoint validation");
        CHECK(model_name_is_valid("a-b_c.d") && !model_name_is_valid("..") && !model_name_is_valid("") &&
              !model_name_is_valid("a/b"), "name validation");
        model_profiles_done(&ps);

        /* Prices: exact decimals per million tokens; without any, the cost
         * is not known; with one, the other is 0 and the currency USD. */
        CHECK(model_profiles_init(&ps) >= 0, "profiles initialized again");
        p = model_profiles_find(&ps, NULL);
        CHECK(p && !model_profile_has_prices(p) && p->price_input_micros == UINT64_MAX && p->currency[0] == '\0',
              "the default profile has no prices");
        model_profiles_parse(&ps,
                             "[Model]\nName=priced\nPriceInputPerMTok=0.15\nPriceOutputPerMTok=0.6\nCurrency=EUR\n"
                             "[Model]\nName=half\nPriceOutputPerMTok=15\n"
                             "[Model]\nName=bad\nPriceInputPerMTok=1\nPriceInputPerMTok=-1\nPriceOutputPerMTok=1e3\n"
                             "PriceOutputPerMTok=0.0000001\nCurrency=US$\nCurrency=TOOLONGNAME\n"
                             "[Model]\nName=cleared\nPriceInputPerMTok=2\nPriceInputPerMTok=\n", "prices");
        p = model_profiles_find(&ps, "priced");
        CHECK(p && model_profile_has_prices(p) && p->price_input_micros == 150000 && p->price_output_micros == 600000 &&
              streq(p->currency, "EUR"), "prices and currency parsed exactly");
        p = model_profiles_find(&ps, "half");
        CHECK(p && model_profile_has_prices(p) && p->price_input_micros == UINT64_MAX && p->price_output_micros == 15000000 &&
              p->currency[0] == '\0', "one price given: the other unset, the currency left to the default");
        p = model_profiles_find(&ps, "bad");
        CHECK(p && p->price_input_micros == 1000000 && p->price_output_micros == UINT64_MAX && p->currency[0] == '\0',
              "a negative, exponent or too fine price and a bad currency are refused, the valid value kept");
        p = model_profiles_find(&ps, "cleared");
        CHECK(p && !model_profile_has_prices(p), "an empty price clears it");
        model_profiles_done(&ps);

        /* A drop-in overrides the main file per key, in lexical order. */
        if (!mkdtemp(dir))
                return 1;
        snprintf(path, sizeof(path), "%s/agentfab.conf", dir);
        snprintf(dropins, sizeof(dropins), "%s.d", path);
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        write_file(fd, "agentfab.conf", "[Model]\nName=default\nModel=llama3\n[Model]\nName=big\nEndpoint=http://gpu:8000/v1\nModel=big\nMaxTokens=100\n");
        mkdir(dropins, 0755);
        int dfd = open(dropins, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        write_file(dfd, "20-b.conf", "[Model]\nName=big\nMaxTokens=300\n");
        write_file(dfd, "10-a.conf", "[Model]\nName=big\nMaxTokens=200\nStream=true\n");
        write_file(dfd, "30-c.conf.off", "[Model]\nName=big\nMaxTokens=999\n");
        CHECK(model_profiles_init(&ps) >= 0 && model_profiles_load(&ps, path) >= 0, "profiles loaded with drop-ins");
        p = model_profiles_find(&ps, "big");
        CHECK(p && p->max_tokens == 300 && p->stream && streq(p->endpoint, "http://gpu:8000/v1") && streq(p->model, "big"),
              "drop-ins override per key, in order");
        p = model_profiles_find(&ps, "default");
        CHECK(p && streq(p->model, "llama3") && streq(p->endpoint, MODEL_PROFILE_DEFAULT_ENDPOINT), "built-in default changed per key");
        model_profiles_done(&ps);
        CHECK(model_profiles_init(&ps) >= 0 && model_profiles_load(&ps, "/nonexistent/agentfab.conf") >= 0 && ps.n_profiles == 1,
              "missing config: only the default");
        model_profiles_done(&ps);

        /* The API key comes from the credentials directory, never from a path. */
        snprintf(creds, sizeof(creds), "%s/creds", dir);
        mkdir(creds, 0700);
        int cfd = open(creds, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        write_file(cfd, "openai.key", "sk-test-123\n");
        write_file(cfd, "evil.key", "sk-1\r\nX-Injected: yes\n");
        write_file(cfd, "empty.key", "\n");
        setenv("CREDENTIALS_DIRECTORY", creds, 1);
        ModelProfile q = { .name = (char *) "q", .api_key_credential = (char *) "openai.key" };
        CHECK(model_profile_read_api_key(&q, &key) >= 0 && streq_ptr(key, "sk-test-123"), "API key read, newline stripped");
        key = model_api_key_free(key);
        q.api_key_credential = (char *) "../creds/openai.key";
        CHECK(model_profile_read_api_key(&q, &key) == -EINVAL && !key, "credential name with '/' refused");
        q.api_key_credential = (char *) "evil.key";
        CHECK_ERRNO(model_profile_read_api_key(&q, &key), -EBADMSG, "key with a newline inside refused");
        q.api_key_credential = (char *) "empty.key";
        CHECK_ERRNO(model_profile_read_api_key(&q, &key), -ENODATA, "empty key refused");
        q.api_key_credential = (char *) "missing.key";
        CHECK_ERRNO(model_profile_read_api_key(&q, &key), -ENOENT, "missing credential");
        q.api_key_credential = NULL;
        CHECK(model_profile_read_api_key(&q, &key) == 0 && !key, "no credential: no key");
        q.api_key_credential = (char *) "openai.key";
        unsetenv("CREDENTIALS_DIRECTORY");
        CHECK_ERRNO(model_profile_read_api_key(&q, &key), -ENXIO, "no credentials directory");

        close(fd);
        close(dfd);
        close(cfd);
        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
