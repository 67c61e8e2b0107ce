/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tool calls written in the text of a reply (model-text-calls.h): what an
 * open model writes in its content, and what it quotes there (files,
 * command output) may be anyone's.
 *
 * Input: the first byte chooses the mode, the rest is the text.
 * Invariants: at most MODEL_TEXT_CALLS_MAX calls, each of a tool the
 * request offered, with arguments; the text left is made of the input's
 * bytes, so never longer; reading twice gives the same; stripping the
 * thinking leaves no more than the input; and with bit 0 of the mode, the
 * reply read from that content carries the calls in its message, and the
 * conversation written as text for ToolCalls=text holds one <tool_call>
 * block for each. */
#include <json-c/json.h>
#include <stdlib.h>

#include "fuzz.h"
#include "json-util.h"
#include "model-text-calls.h"
#include "string-util.h"

static json_object *tools;

static const char TOOLS[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"path\":{\"type\":\"string\"},\"start_line\":{\"type\":\"integer\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"edit_file\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"path\":{\"type\":\"string\"},\"old_text\":{\"type\":\"string\"},\"new_text\":{\"type\":\"string\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"search\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"pattern\":{\"type\":\"string\"},\"regex\":{\"type\":\"boolean\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"run_tests\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"finish\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"summary\":{\"type\":\"string\"}}}}}]";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        if (json_parse_strict(TOOLS, sizeof(TOOLS) - 1, &tools) < 0)
                abort();
        return 0;
}

static bool is_tool(const char *name) {
        static const char *const names[] = { "read_file", "edit_file", "search", "run_tests", "finish" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (streq(name, names[i]))
                        return true;
        return false;
}

static void check_calls(const ModelTextCalls *c, size_t size) {
        FUZZ_CHECK(c->n_calls <= MODEL_TEXT_CALLS_MAX, "%zu calls", c->n_calls);
        FUZZ_CHECK(!c->text || (*c->text && strlen(c->text) <= size), "text left bounded by the input");
        for (size_t i = 0; i < c->n_calls; i++) {
                FUZZ_CHECK(c->calls[i].name && is_tool(c->calls[i].name), "call %zu of a tool offered", i);
                /* Serialized again, a string grows at most sixfold (\u00XX). */
                FUZZ_CHECK(c->calls[i].arguments && strlen(c->calls[i].arguments) <= 6 * size + 16,
                           "arguments of call %zu bounded", i);
        }
}

static void same(const ModelTextCalls *a, const ModelTextCalls *b) {
        FUZZ_CHECK(a->n_calls == b->n_calls && a->unread == b->unread && fuzz_streq_ptr(a->text, b->text), "read alike twice");
        for (size_t i = 0; i < a->n_calls; i++)
                FUZZ_CHECK(streq(a->calls[i].name, b->calls[i].name) && streq(a->calls[i].arguments, b->calls[i].arguments),
                           "call %zu alike", i);
}

/* The reply an agent takes, and the conversation ToolCalls=text sends. */
static void check_reply(const char *text, const ModelTextCalls *c) {
        ModelReply *r = calloc(1, sizeof(ModelReply)), *n = NULL;
        json_object *calls = NULL, *msgs = NULL, *out = NULL;

        FUZZ_CHECK(r, "allocated");
        r->content = strdup(text);
        FUZZ_CHECK(r->content && model_reply_build_message(r) == 0, "reply built");
        int k = model_reply_read_text(r, MODEL_TOOL_CALLS_AUTO, tools, &n);
        FUZZ_CHECK(k >= 0 || k == -ENOMEM, "read: %d", k);
        if (k == 1) {
                FUZZ_CHECK(n->n_tool_calls == c->n_calls && n->text_calls == (c->n_calls > 0), "the calls read");
                FUZZ_CHECK(fuzz_streq_ptr(n->content, c->text), "the text left is the content");
                FUZZ_CHECK(n->n_tool_calls == 0 || (json_object_object_get_ex(n->message, "tool_calls", &calls) &&
                                                   json_object_array_length(calls) == n->n_tool_calls),
                           "the message carries them");
                for (size_t i = 0; i < n->n_tool_calls; i++)
                        FUZZ_CHECK(n->tool_calls[i].id && strneq(n->tool_calls[i].id, "call_", 5), "an id for call %zu", i);
        } else if (k == 0)
                FUZZ_CHECK(c->n_calls == 0 && c->unread == 0 && fuzz_streq_ptr(c->text, text), "unchanged only if nothing read");

        msgs = json_object_new_array();
        FUZZ_CHECK(msgs, "allocated");
        json_object *sys = json_object_new_object();
        json_object_object_add(sys, "role", json_object_new_string("system"));
        json_object_object_add(sys, "content", json_object_new_string("S"));
        json_object_array_add(msgs, sys);
        json_object_array_add(msgs, json_object_get((n ?: r)->message));
        for (size_t i = 0; n && i < n->n_tool_calls; i++) {
                json_object *t = json_object_new_object();
                json_object_object_add(t, "role", json_object_new_string("tool"));
                json_object_object_add(t, "tool_call_id", json_object_new_string(n->tool_calls[i].id));
                json_object_object_add(t, "name", json_object_new_string(n->tool_calls[i].name));
                json_object_object_add(t, "content", json_object_new_string(n->tool_calls[i].arguments));
                json_object_array_add(msgs, t);
        }
        k = model_text_calls_messages(msgs, tools, &out);
        FUZZ_CHECK(k == 0 || k == -ENOMEM, "messages: %d", k);
        if (k == 0) {
                size_t want = 2 + (n && n->n_tool_calls > 0 ? 1 : 0);
                FUZZ_CHECK(json_object_array_length(out) == want, "%zu messages, %zu wanted", json_object_array_length(out), want);
                const char *as = json_object_get_string(json_object_object_get(json_object_array_get_idx(out, 1), "content"));
                size_t blocks = 0;
                for (const char *p = as; p && (p = strstr(p, "<tool_call>{\"name\": ")); p++)
                        blocks++;
                FUZZ_CHECK(!n || n->n_tool_calls == 0 || blocks >= n->n_tool_calls, "a block for each call");
        }
        json_object_put(out);
        json_object_put(msgs);
        model_reply_free(n);
        model_reply_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ModelTextCalls a = {}, b = {};
        char *text, *stripped = NULL;
        uint8_t mode;

        if (size < 1)
                return 0;
        mode = data[0];
        text = fuzz_text(data + 1, size - 1);
        size--;

        if (model_text_calls_parse(text, size, (mode & 2) ? NULL : tools, &a) == 0) {
                check_calls(&a, size);
                FUZZ_CHECK(!(mode & 2) || (a.n_calls == 0 && a.unread == 0), "no tools, no calls");
                if (model_text_calls_parse(text, size, (mode & 2) ? NULL : tools, &b) == 0)
                        same(&a, &b);
                if ((mode & 1) && !(mode & 2) && strlen(text) == size)
                        check_reply(text, &a);
        }
        if (model_text_strip_thinking(text, size, &stripped) == 0)
                FUZZ_CHECK(!stripped || strlen(stripped) <= size, "stripped text bounded");

        free(stripped);
        model_text_calls_done(&a);
        model_text_calls_done(&b);
        free(text);
        return 0;
}
