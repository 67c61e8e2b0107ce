/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What of a conversation the model is sent (agent/context.c): within the
 * budget, always; the same request for the same conversation, so that a
 * step redone after a restart asks the same; the system prompt and the
 * first user message first and whole, so that a server's prompt cache
 * keeps working; the latest messages as they are; old tool outputs and old
 * tool arguments (whole files) shrunk to a note before any step is
 * condensed; the digest says what the condensed steps did. And what a
 * server's answers say of its context: its refusals in each server's
 * words, a count of prompt tokens that shows a cut prompt, and the
 * calibration of bytes per token that a restarted step sees as before. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "json-util.h"
#include "model-client.h"
#include "tap.h"

static json_object *message(const char *role, const char *content) {
        json_object *m = json_object_new_object();
        json_add_string(m, "role", role);
        json_add_string(m, "content", content);
        return m;
}

static json_object *tool_message(const char *id, const char *name, const char *content) {
        json_object *m = message("tool", content);
        json_add_string(m, "tool_call_id", id);
        json_add_string(m, "name", name);
        return m;
}

static json_object *assistant_call(unsigned id, const char *content, const char *name, json_object *args) {
        json_object *m = json_object_new_object(), *calls = json_object_new_array(), *call = json_object_new_object(),
                *function = json_object_new_object();
        char cid[32];

        snprintf(cid, sizeof(cid), "call_%u", id);
        json_add_string(m, "role", "assistant");
        json_object_object_add(m, "content", content ? json_object_new_string(content) : NULL);
        json_add_string(call, "id", cid);
        json_add_string(call, "type", "function");
        json_add_string(function, "name", name);
        json_add_string(function, "arguments", json_to_line(args));
        json_object_put(args);
        json_object_object_add(call, "function", function);
        json_object_array_add(calls, call);
        json_object_object_add(m, "tool_calls", calls);
        return m;
}

static json_object *args_path(const char *path, const char *key, const char *value) {
        json_object *a = json_object_new_object();
        json_add_string(a, "path", path);
        if (key)
                json_add_string(a, key, value);
        return a;
}

static char *filler(char c, size_t n) {
        char *s = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
                s[i] = (i % 61 == 60) ? '\n' : c;
        s[n] = '\0';
        return s;
}

/* A task's conversation: the prompt, the plan, then steps that write
 * large files, read them back and run the tests. */
static json_object *conversation(unsigned steps) {
        json_object *a = json_object_new_array();
        char *big = filler('x', 6000), *out = filler('o', 9000);

        json_object_array_add(a, message("system", "You are the agent.\n# Goal\nMake add() add"));
        json_object_array_add(a, message("user", "First write a plan."));
        json_object_array_add(a, message("assistant", "Plan: write, read, test.\nRisks: none."));
        json_object_array_add(a, message("user", "Now carry out the plan, step by step, with the tools."));
        for (unsigned i = 1; i <= steps; i++) {
                char path[32], id[32];

                snprintf(path, sizeof(path), "gen/file%u.txt", i);
                snprintf(id, sizeof(id), "call_%u", i);
                switch (i % 3) {
                case 1:
                        json_object_array_add(a, assistant_call(i, "Write the next file", "write_file",
                                                                args_path(path, "content", big)));
                        json_object_array_add(a, tool_message(id, "write_file", "Wrote 6000 bytes."));
                        break;
                case 2:
                        json_object_array_add(a, assistant_call(i, NULL, "read_file", args_path(path, NULL, NULL)));
                        json_object_array_add(a, tool_message(id, "read_file", out));
                        break;
                default:
                        json_object_array_add(a, assistant_call(i, NULL, "run_tests", json_object_new_object()));
                        json_object_array_add(a, tool_message(id, "run_tests",
                                              "FAILED (failures=1)\nTraceback: ..."));
                }
        }
        free(big);
        free(out);
        return a;
}

static size_t json_len(json_object *o) {
        return strlen(json_to_line(o));
}

static json_object *prefix_of(json_object *a, size_t n) {
        json_object *p = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                json_object_array_add(p, json_object_get(json_object_array_get_idx(a, i)));
        return p;
}

/* Every tool message follows an assistant message that made its call:
 * a server refuses a request with an answer to no call. */
static bool calls_answered(json_object *out) {
        json_object *calls = NULL;

        for (size_t i = 0; i < json_object_array_length(out); i++) {
                json_object *m = json_object_array_get_idx(out, i);
                const char *role = NULL, *id = NULL;
                bool found = false;

                (void) json_get_string(m, "role", &role);
                if (streq(role, "assistant")) {
                        calls = NULL;
                        (void) json_object_object_get_ex(m, "tool_calls", &calls);
                        continue;
                }
                if (!streq(role, "tool"))
                        continue;
                (void) json_get_string(m, "tool_call_id", &id);
                for (size_t j = 0; calls && id && j < json_object_array_length(calls); j++) {
                        const char *cid = NULL;
                        (void) json_get_string(json_object_array_get_idx(calls, j), "id", &cid);
                        found = found || streq_ptr(cid, id);
                }
                if (!found)
                        return false;
        }
        return true;
}

static void test_under_budget(void) {
        _cleanup_json_ json_object *a = conversation(3), *out = NULL;
        ContextStats s;
        bool same = true;

        /* Nothing to do: the conversation as it is, message by message. */
        CHECK_INT_EQ(context_compact(a, 1024 * 1024, "goal", &out, &s), 0, "a conversation under the budget");
        CHECK_UINT_EQ(json_object_array_length(out), json_object_array_length(a), "every message is sent");
        for (size_t i = 0; i < json_object_array_length(a); i++)
                same = same && json_object_array_get_idx(out, i) == json_object_array_get_idx(a, i);
        CHECK(same && s.shrunk == 0 && s.condensed == 0 && s.bytes == json_len(a),
              "each as it is (%zu bytes, %zu shrunk, %zu condensed)", s.bytes, s.shrunk, s.condensed);
}

static void test_shrink_first(void) {
        _cleanup_json_ json_object *a = conversation(12), *out = NULL;
        ContextStats s;
        size_t n, full = json_len(a);
        const char *text;

        /* Shrinking the old outputs and arguments is enough: nothing is
         * condensed, and what was shrunk says what the call was. */
        CHECK_INT_EQ(context_compact(a, full * 2 / 3, "Make add() add", &out, &s), 0, "compact to 2/3");
        n = json_object_array_length(out);
        text = json_to_line(out);
        CHECK(s.condensed == 0 && s.shrunk > 0 && n == json_object_array_length(a),
              "only shrunk: %zu shrunk, %zu condensed, %zu of %zu messages", s.shrunk, s.condensed, n,
              json_object_array_length(a));
        CHECK(s.bytes <= full * 2 / 3 && s.bytes == json_len(out), "within the budget: %zu <= %zu", s.bytes, full * 2 / 3);
        CHECK(strstr(text, "[read_file 'gen/file2.txt': output of 9000 bytes elided to fit the context budget"),
              "an old output became a note naming the call and its size");
        CHECK(strstr(text, "write_file") && strstr(text, "[6000 bytes elided to fit the context budget]") &&
              strstr(text, "\\\"path\\\":\\\"gen/file1.txt\\\""),
              "an old write_file's content became a note; its path is kept");
        CHECK(calls_answered(out), "every tool message still answers a call");
}

static void test_condense(void) {
        _cleanup_json_ json_object *a = conversation(40), *out = NULL, *again = NULL;
        ContextStats s, s2;
        size_t n, budget = 24 * 1024;
        const char *digest = NULL, *role = NULL;
        bool latest = true;

        CHECK_INT_EQ(context_compact(a, budget, "Make add() add", &out, &s), 0, "compact 40 steps to 24 KiB");
        CHECK_INT_EQ(context_compact(a, budget, "Make add() add", &again, &s2), 0, "and again");
        CHECK(streq(json_to_line(out), json_to_line(again)), "the same conversation gives the same request");
        CHECK(s.bytes <= budget && s.bytes == json_len(out), "within the budget: %zu <= %zu", s.bytes, budget);
        CHECK(s.condensed > 0 && s.shrunk > 0, "old steps condensed (%zu messages), others shrunk (%zu)",
              s.condensed, s.shrunk);
        CHECK(json_object_array_get_idx(out, 0) == json_object_array_get_idx(a, 0) &&
              json_object_array_get_idx(out, 1) == json_object_array_get_idx(a, 1),
              "the system prompt and the first user message come first, as they are");

        n = json_object_array_length(out);
        for (size_t i = 1; i <= CONTEXT_KEEP_RECENT; i++)
                latest = latest && json_object_array_get_idx(out, n - i) ==
                        json_object_array_get_idx(a, json_object_array_length(a) - i);
        CHECK(latest, "the latest %u messages are sent as they are", CONTEXT_KEEP_RECENT);
        CHECK(calls_answered(out), "every tool message still answers a call");

        (void) json_get_string(json_object_array_get_idx(out, 2), "role", &role);
        (void) json_get_string(json_object_array_get_idx(out, 2), "content", &digest);
        CHECK(streq_ptr(role, "user") && digest && strncmp(digest, "[agentfab]", 10) == 0,
              "the digest follows them, a user message of the factory's");
        digest = strempty(digest);
        CHECK(strstr(digest, "Goal: Make add() add"), "the digest names the goal");
        CHECK(strstr(digest, "Files written or edited in these steps: gen/file1.txt, gen/file4.txt"),
              "the files the condensed steps changed");
        CHECK(strstr(digest, "Last test run in these steps (step "), "the last test run");
        CHECK(strstr(digest, "- the plan: Plan: write, read, test. Risks: none."), "the plan");
        CHECK(strstr(digest, "- step 1: \"Write the next file\" write_file 'gen/file1.txt' (6000 bytes) -> \"Wrote 6000 bytes.\""),
              "each step: its calls, their paths and the first line of their results");
        CHECK(strstr(digest, "- step 3: run_tests -> \"FAILED (failures=1)\""), "a test run's first line");
        CHECK(strlen(digest) <= 16 * 1024, "the digest is bounded: %zu bytes", strlen(digest));
}

static void test_stable_prefix(void) {
        _cleanup_json_ json_object *a = conversation(120);
        _cleanup_free_ char *last = NULL;
        size_t budget = 32 * 1024, changes = 0, requests = 0;

        /* Step by step, as the agent asks: the digest (and so the request's
         * beginning) changes only now and then, not at every step. */
        for (size_t L = 6; L <= json_object_array_length(a); L += 2) {
                _cleanup_json_ json_object *p = prefix_of(a, L), *out = NULL;
                ContextStats s;
                const char *d = NULL;

                if (context_compact(p, budget, "goal", &out, &s) < 0 || s.bytes > budget)
                        break;
                if (s.condensed == 0)
                        continue;
                (void) json_get_string(json_object_array_get_idx(out, 2), "content", &d);
                requests++;
                if (!last || !streq(last, strempty(d)))
                        changes++;
                free(last);
                last = strdup(strempty(d));
        }
        CHECK(requests > 10 && changes * 3 < requests,
              "the digest changed %zu times in %zu condensed requests", changes, requests);
}

static void test_last_resort(void) {
        _cleanup_json_ json_object *a = conversation(4), *out = NULL;
        _cleanup_free_ char *huge = filler('h', 200 * 1024);
        const char *content = NULL;
        ContextStats s;
        size_t budget = 20 * 1024;

        /* A last tool output larger than the whole budget: cut in the
         * middle, its start and end kept; the request stays within. */
        json_object_array_add(a, assistant_call(99, NULL, "run_command", json_object_new_object()));
        json_object_array_add(a, tool_message("call_99", "run_command", huge));
        CHECK_INT_EQ(context_compact(a, budget, "goal", &out, &s), 0, "compact a 200 KiB output into 20 KiB");
        CHECK(s.bytes <= budget && s.clipped > 0, "within the budget (%zu bytes), %zu clipped", s.bytes, s.clipped);
        (void) json_get_string(json_object_array_get_idx(out, json_object_array_length(out) - 1), "content", &content);
        CHECK(content && strstr(content, "bytes cut here to fit the context budget") && content[0] == 'h' &&
              content[strlen(content) - 1] == 'h', "the latest output keeps its start and its end");
        CHECK(json_object_array_get_idx(out, 0) == json_object_array_get_idx(a, 0), "the system prompt is whole");
}

static void test_message_budget(void) {
        /* The budget counts the reply (max_tokens), a margin, the tools'
         * schemas and the request's own fields. */
        CHECK_UINT_EQ(context_message_budget(32768, 4000, 4096, 3000),
                      (uint64_t) (32768 - 4096 - 3276) * 4 - 3000 - 256, "32768 tokens, 4096 for the reply, 3000 bytes of tools");
        CHECK_UINT_EQ(context_message_budget(8192, 3000, 100000, 0), (uint64_t) (8192 - 4096 - 819) * 3 - 256,
                      "the reply takes at most half; 3 bytes a token");
        CHECK_UINT_EQ(context_message_budget(1000, 4000, 4096, 50000), CONTEXT_MESSAGES_MIN,
                      "never less than %u bytes", CONTEXT_MESSAGES_MIN);
}

static void test_overflow_words(void) {
        static const struct {
                const char *body;
                uint64_t tokens;
        } yes[] = {
                { "{\"error\":{\"message\":\"This model's maximum context length is 8192 tokens. However, your messages "
                  "resulted in 9000 tokens. Please reduce the length of the messages.\",\"type\":\"invalid_request_error\","
                  "\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}", 8192 },
                { "{\"object\":\"error\",\"message\":\"This model's maximum context length is 4096 tokens. However, you "
                  "requested 5000 tokens (4000 in the messages, 1000 in the completion).\",\"type\":\"BadRequestError\","
                  "\"param\":null,\"code\":400}", 4096 },
                { "{\"error\":{\"code\":400,\"message\":\"request (4476 tokens) exceeds the available context size (4096 "
                  "tokens), try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":4476,\"n_ctx\":4096}}",
                  4096 },
                { "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available context size, try increasing it\","
                  "\"type\":\"invalid_request_error\"}}", 0 },
                { "{\"error\":{\"code\":500,\"message\":\"context shift is disabled\",\"type\":\"server_error\"}}", 0 },
                { "{\"error\":{\"message\":\"the input length exceeds the context length\",\"type\":\"api_error\"}}", 0 },
        };
        uint64_t tokens = 1;

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                bool b = model_error_is_context_overflow(yes[i].body, &tokens);
                CHECK(b && tokens == yes[i].tokens, "a refusal as too long (%" PRIu64 " tokens named): %.60s", tokens,
                      yes[i].body);
        }
        CHECK(!model_error_is_context_overflow("{\"error\":{\"message\":\"model 'x' not found\"}}", &tokens) && tokens == 0,
              "another refusal is not one");
        CHECK(!model_error_is_context_overflow(NULL, NULL) && !model_error_is_context_overflow("", NULL), "nor an empty body");
}

static void test_gauge(void) {
        ContextEntry e[4] = {
                { .cause = CONTEXT_CALIBRATED, .step = 2, .profile_budget = 32768, .sent_bytes = 36000,
                  .prompt_tokens = 10000, .bytes_per_token_milli = 3600, .taken = 10000 },
                { .cause = CONTEXT_REFUSED, .step = 3, .profile_budget = 32768, .sent_bytes = 130000, .budget = 16384 },
                { .cause = CONTEXT_TRUNCATED, .step = 5, .profile_budget = 65536, .budget = 4096 },
                { .cause = CONTEXT_CALIBRATED, .step = 4, .profile_budget = 32768, .bytes_per_token_milli = 0, .taken = 12000 },
        };
        ContextGauge g;
        ContextEntry c, back;
        _cleanup_json_ json_object *o = NULL;
        uint64_t estimate = 0;

        /* A step redone after a restart sees the gauge its first attempt
         * saw: calibrations by its own reply come after it. */
        context_gauge_from(&g, 32768, e, ELEMENTSOF(e), 2);
        CHECK(g.budget == 32768 && !g.calibrated && g.bytes_per_token_milli == CONTEXT_BPT_DEFAULT_MILLI,
              "step 2: the profile's budget, uncalibrated");
        context_gauge_from(&g, 32768, e, ELEMENTSOF(e), 3);
        CHECK(g.budget == 16384 && g.calibrated && g.bytes_per_token_milli == 3600 && g.taken == 10000,
              "step 3: calibrated by step 2's reply, halved by its own refusal");
        context_gauge_from(&g, 32768, e, ELEMENTSOF(e), 9);
        CHECK(g.budget == 16384 && g.bytes_per_token_milli == 3600 && g.taken == 12000,
              "later: a truncation recorded under another ContextBudget= does not count");

        /* The server cut the prompt, or only counted what it had not cached. */
        context_gauge_from(&g, 32768, NULL, 0, 1);
        CHECK(context_truncated(&g, 100000, 4096, &estimate) && estimate == 25000,
              "uncalibrated: 4096 tokens of 100000 bytes is a cut prompt");
        CHECK(!context_truncated(&g, 100000, 20000, NULL), "20000 tokens of 100000 bytes is not");
        CHECK(!context_truncated(&g, 100000, 500, NULL), "nor a count below %u", CONTEXT_TRUNCATED_MIN);
        context_gauge_from(&g, 32768, e, 1, 3);
        CHECK(context_truncated(&g, 100000, 9000, NULL), "calibrated: 9000 of ~27700 expected, as much as ever taken");
        CHECK(!context_truncated(&g, 100000, 1500, NULL), "1500: only what was not cached, not a cut");
        CHECK(!context_truncated(&g, 36000, 9000, NULL), "9000 of ~10000 expected: taken");

        /* Calibration from counts. */
        CHECK(context_calibrate(&g, 3, 32768, 30000, 10000, &c) && c.bytes_per_token_milli == 3000 && c.taken == 10000,
              "3 bytes a token: lower, recorded");
        CHECK(!context_calibrate(&g, 3, 32768, 35900, 10000, &c), "within 1 %% and no larger: nothing to record");
        CHECK(context_calibrate(&g, 3, 32768, 200000, 20000, &c) && c.bytes_per_token_milli == 0 && c.taken == 20000,
              "10 bytes a token gives no ratio, but a larger prompt taken");
        CHECK(!context_calibrate(&g, 3, 32768, 200, 50, &c), "a prompt of 50 tokens says nothing");

        CHECK(context_entry_to_json(&e[1], &o) >= 0 && context_entry_from_json(o, &back) >= 0 &&
              back.cause == CONTEXT_REFUSED && back.step == 3 && back.budget == 16384 && back.sent_bytes == 130000,
              "an entry read back from its line: %s", json_to_line(o));
}

int main(void) {
        test_under_budget();
        test_shrink_first();
        test_condense();
        test_stable_prefix();
        test_last_resort();
        test_message_budget();
        test_overflow_words();
        test_gauge();
        return tap_done();
}
