/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <time.h>

#include "buf.h"
#include "json-util.h"
#include "model-text-calls.h"
#include "tap.h"

/* Tool calls written in the text of a reply, as open models write them when
 * the server has no parser for their format. Each case is a text as a
 * model wrote it, the calls that must be read from it, how many blocks
 * must be counted as unread, and the text that must be left. */

static const char TOOLS[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":\"Read a file.\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"start_line\":{\"type\":\"integer\"}},\"required\":[\"path\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"edit_file\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"path\":{\"type\":\"string\"},\"old_text\":{\"type\":\"string\"},\"new_text\":{\"type\":\"string\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"run_tests\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"run_command\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"command\":{\"type\":\"string\"},\"timeout_sec\":{\"type\":\"integer\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"finish\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"summary\":{\"type\":\"string\"}}}}}]";

#define RF "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.c\"}}"
#define RF_ARGS "read_file {\"path\":\"a.c\"}"

typedef struct Case {
        const char *what;
        const char *text;
        const char *calls;      /* "name args" lines, '\n' between; NULL: none */
        unsigned unread;
        const char *rest;       /* NULL: nothing left */
} Case;

static const Case cases[] = {
        /* Hermes and Qwen 2.5/3 (through Ollama or a server without a parser). */
        { "hermes, one call", "<tool_call>\n" RF "\n</tool_call>", RF_ARGS, 0, NULL },
        { "hermes, two calls and words", "I'll read it and run the tests.\n<tool_call>\n" RF "\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"run_tests\", \"arguments\": {}}\n</tool_call>",
          RF_ARGS "\nrun_tests {}", 0, "I'll read it and run the tests." },
        { "hermes, unclosed at the end", "<tool_call>" RF, RF_ARGS, 0, NULL },
        { "hermes, several objects in one block", "<tool_call>" RF "\n{\"name\": \"run_tests\"}</tool_call>",
          RF_ARGS "\nrun_tests {}", 0, NULL },
        { "hermes, no arguments", "<tool_call>{\"name\": \"run_tests\"}</tool_call>", "run_tests {}", 0, NULL },
        { "hermes, arguments as a string of JSON", "<tool_call>{\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"a.c\\\"}\"}</tool_call>",
          RF_ARGS, 0, NULL },
        { "an OpenAI-shaped call in the text", "<tool_call>{\"type\": \"function\", \"function\": " RF "}</tool_call>", RF_ARGS, 0, NULL },

        /* Thinking is never read for calls and never kept. */
        { "thinking, then a call", "<think>Maybe " RF " or finish?</think>\n\n<tool_call>" RF "</tool_call>", RF_ARGS, 0, NULL },
        { "thinking that holds a call block", "<think>I will write <tool_call>{\"name\": \"finish\"}</tool_call></think>\nOK.",
          NULL, 0, "OK." },
        { "unclosed thinking up to the call", "<think>hmm, the file\n<tool_call>" RF "</tool_call>", RF_ARGS, 0, NULL },
        { "unclosed thinking to the end", "<think>still thinking about " RF, NULL, 0, NULL },
        { "an empty think block (Qwen3 without thinking)", "<think>\n\n</think>\n\nDone.", NULL, 0, "Done." },
        { "<thinking> blocks", "<thinking>x</thinking>Hi", NULL, 0, "Hi" },
        { "only the closing tag (DeepSeek-R1's template opens it)", "the bug is in add</think>\n\n" RF, RF_ARGS, 0, NULL },

        /* A bare object, alone on its lines (Llama 3 through Ollama). */
        { "bare object", RF, RF_ARGS, 0, NULL },
        { "bare object with parameters", "{\"name\": \"read_file\", \"parameters\": {\"path\": \"a.c\"}}", RF_ARGS, 0, NULL },
        { "bare object after words", "Let me look.\n  " RF "\n", RF_ARGS, 0, "Let me look." },
        { "bare list", "[" RF ", {\"name\": \"run_tests\", \"arguments\": {}}]", RF_ARGS "\nrun_tests {}", 0, NULL },
        { "bare object within a line is text", "Call " RF " now", NULL, 0, "Call " RF " now" },
        { "bare object of an unknown tool is text", "{\"name\": \"rm\", \"arguments\": {}}", NULL, 0,
          "{\"name\": \"rm\", \"arguments\": {}}" },
        { "JSON that is no call is text", "{\"a\": 1}\n[1, 2]", NULL, 0, "{\"a\": 1}\n[1, 2]" },

        /* Fenced blocks. */
        { "fenced json", "Reading:\n```json\n" RF "\n```\n", RF_ARGS, 0, "Reading:" },
        { "fenced list", "```\n[" RF ", {\"name\": \"finish\", \"arguments\": {\"summary\": \"ok\"}}]\n```",
          RF_ARGS "\nfinish {\"summary\":\"ok\"}", 0, NULL },
        { "fenced tool_call, unclosed", "```tool_call\n" RF, RF_ARGS, 0, NULL },
        { "a fence of another language is text", "```python\n" RF "\n```", NULL, 0, "```python\n" RF "\n```" },
        { "fenced JSON that is no call is text", "```json\n{\"a\": 1}\n```", NULL, 0, "```json\n{\"a\": 1}\n```" },

        /* Mistral. */
        { "mistral, a list", "[TOOL_CALLS][" RF ", {\"name\": \"run_tests\", \"arguments\": {}}]", RF_ARGS "\nrun_tests {}", 0, NULL },
        { "mistral, name[ARGS]", "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a.c\"}[TOOL_CALLS]run_tests[ARGS]{}",
          RF_ARGS "\nrun_tests {}", 0, NULL },
        { "mistral, with a call id", "[TOOL_CALLS]read_file[CALL_ID]a1b2c3d4e[ARGS]{\"path\": \"a.c\"}", RF_ARGS, 0, NULL },
        { "mistral, garbage after the tag", "[TOOL_CALLS]???", NULL, 1, "[TOOL_CALLS]???" },

        /* Llama 3. */
        { "llama3 python_tag", "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a.c\"}}<|eom_id|>", RF_ARGS, 0, NULL },
        { "llama3 python_tag, two calls", "<|python_tag|>" RF "; {\"name\": \"run_tests\", \"parameters\": {}}<|eot_id|>",
          RF_ARGS "\nrun_tests {}", 0, NULL },
        { "llama3 python call syntax is text", "<|python_tag|>brave_search.call(query=\"x\")", NULL, 1,
          "<|python_tag|>brave_search.call(query=\"x\")" },
        { "<function=NAME>", "<function=read_file>{\"path\": \"a.c\"}</function>", RF_ARGS, 0, NULL },
        { "<function=NAME> unclosed", "<function=read_file>{\"path\": \"a.c\"}", RF_ARGS, 0, NULL },
        { "<function= that is no name is text", "<function=a b>", NULL, 0, "<function=a b>" },

        /* Qwen3-Coder: parameters typed by the tool's schema. */
        { "qwen3-coder parameters", "<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/a.c\n</parameter>\n"
          "<parameter=start_line>\n5\n</parameter>\n</function>\n</tool_call>",
          "read_file {\"path\":\"src\\/a.c\",\"start_line\":5}", 0, NULL },
        { "qwen3-coder, a string that looks like a number stays a string", "<tool_call><function=read_file><parameter=path>123"
          "</parameter></function></tool_call>", "read_file {\"path\":\"123\"}", 0, NULL },
        { "qwen3-coder, multi-line value", "<tool_call>\n<function=edit_file>\n<parameter=path>\nc.py\n</parameter>\n"
          "<parameter=old_text>\n  a\n  b\n</parameter>\n<parameter=new_text>\n</parameter>\n</function>\n</tool_call>",
          "edit_file {\"path\":\"c.py\",\"old_text\":\"  a\\n  b\",\"new_text\":\"\"}", 0, NULL },
        { "qwen3-coder, unclosed parameter", "<tool_call><function=read_file><parameter=path>a", NULL, 1,
          "<tool_call><function=read_file><parameter=path>a" },

        /* What is not read. */
        { "unknown tool in a block", "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>", NULL, 1,
          "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>" },
        { "unknown tool next to a known one", "<tool_call>{\"name\": \"rm_rf\"}</tool_call>\n<tool_call>" RF "</tool_call>",
          RF_ARGS, 1, "<tool_call>{\"name\": \"rm_rf\"}</tool_call>" },
        { "a call cut at max_tokens", "<tool_call>{\"name\": \"edit_file\", \"arguments\": {\"path\": \"a\", \"new_text\": \"abc",
          NULL, 1, "<tool_call>{\"name\": \"edit_file\", \"arguments\": {\"path\": \"a\", \"new_text\": \"abc" },
        { "garbage in a block", "<tool_call>hello</tool_call>", NULL, 1, "<tool_call>hello</tool_call>" },
        { "single quotes are not JSON", "<tool_call>{'name': 'read_file'}</tool_call>", NULL, 1,
          "<tool_call>{'name': 'read_file'}</tool_call>" },
        { "a name with a NUL", "<tool_call>{\"name\": \"read_file\\u0000x\"}</tool_call>", NULL, 1,
          "<tool_call>{\"name\": \"read_file\\u0000x\"}</tool_call>" },
        { "plain prose", "The tests pass; I am done.", NULL, 0, "The tests pass; I am done." },
        { "markdown that looks like brackets", "[link](http://x)\n{ not json\n`code`", NULL, 0, "[link](http://x)\n{ not json\n`code`" },
        { "stray special tokens", "Done.<|im_end|>", NULL, 0, "Done." },
        { "empty text", "", NULL, 0, NULL },

        /* Several formats in one reply. */
        { "formats mixed", "<tool_call>" RF "</tool_call>\n[TOOL_CALLS][{\"name\": \"run_tests\"}]\n"
          "<function=finish>{\"summary\": \"s\"}</function>", RF_ARGS "\nrun_tests {}\nfinish {\"summary\":\"s\"}", 0, NULL },
};

static char *calls_string(const ModelTextCalls *c) {
        Buf b = {};

        if (c->n_calls == 0)
                return NULL;
        for (size_t i = 0; i < c->n_calls; i++) {
                _cleanup_json_ json_object *o = NULL;
                const char *args = c->calls[i].arguments;
                /* Serialized again, so that the table need not spell json-c's spacing. */
                if (json_parse_strict(args, strlen(args), &o) >= 0)
                        args = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
                if (buf_printf(&b, "%s%s %s", i > 0 ? "\n" : "", c->calls[i].name, args) < 0)
                        abort();
        }
        return b.s;
}

static void test_cases(json_object *tools) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const Case *t = cases + i;
                ModelTextCalls c = {};
                _cleanup_free_ char *got = NULL;
                int r;

                r = model_text_calls_parse(t->text, strlen(t->text), tools, &c);
                CHECK_ERRNO(r, 0, "%s: parsed", t->what);
                got = calls_string(&c);
                /* "a.c" as the table spells it; json-c writes "\/" only when asked. */
                CHECK_STR_EQ(got, t->calls, "%s: the calls", t->what);
                CHECK_UINT_EQ(c.unread, t->unread, "%s: unread blocks", t->what);
                CHECK_STR_EQ(c.text, t->rest, "%s: the text left", t->what);
                model_text_calls_done(&c);
        }
}

/* Only the tools the request offered are called: without any, nothing is
 * read, and the text is only stripped of its thinking. */
static void test_no_tools(void) {
        ModelTextCalls c = {};
        const char *t = "<think>x</think><tool_call>" RF "</tool_call>";

        CHECK(model_text_calls_parse(t, strlen(t), NULL, &c) == 0 && c.n_calls == 0 && c.unread == 0 &&
              streq_ptr(c.text, "<tool_call>" RF "</tool_call>"), "no tools: no calls, thinking stripped");
        model_text_calls_done(&c);

        _cleanup_free_ char *s = NULL;
        const char *th = "<think>a</think>\n Hello <think>b</think>!";
        CHECK(model_text_strip_thinking(th, strlen(th), &s) == 0 && streq_ptr(s, "Hello !"),
              "model_text_strip_thinking(): '%s'", strempty(s));
}

/* SECURITY: at most MODEL_TEXT_CALLS_MAX calls a reply; a text the size of
 * the largest reply is read in bounded time; past MODEL_TEXT_SCAN_MAX
 * nothing is read but everything is kept. */
static void test_bounds(json_object *tools) {
        Buf b = {};
        ModelTextCalls c = {};

        for (unsigned i = 0; i < MODEL_TEXT_CALLS_MAX + 4; i++)
                CHECK(buf_puts(&b, "<tool_call>{\"name\": \"run_tests\"}</tool_call>\n") == 0, "text built");
        CHECK(model_text_calls_parse(b.s, b.n, tools, &c) == 0 && c.n_calls == MODEL_TEXT_CALLS_MAX && c.unread == 4 && c.text,
              "%zu calls read of %u, %u unread", c.n_calls, MODEL_TEXT_CALLS_MAX + 4, c.unread);
        model_text_calls_done(&c);
        buf_done(&b);

        /* Pathological: forty lines that begin JSON which never closes
         * (each try reads to the end), and thinking that never closes;
         * then a call past the limit. */
        size_t huge = MODEL_TEXT_SCAN_MAX + 4096;
        char *s = malloc(huge + 1);
        CHECK(s, "allocated");
        for (size_t i = 0; i < huge; i++)
                s[i] = i % (huge / 40) == 0 ? '\n' : i % (huge / 40) == 1 ? '[' : 'a';
        memcpy(s + huge - 200, "<tool_call>" RF "</tool_call>", strlen("<tool_call>" RF "</tool_call>"));
        s[huge] = '\0';
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK(model_text_calls_parse(s, huge, tools, &c) == 0 && c.n_calls == 0 && c.text && strlen(c.text) == huge - 1,
              "a call past %u bytes is not read, the text is kept (%zu calls)", MODEL_TEXT_SCAN_MAX, c.n_calls);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        model_text_calls_done(&c);
        double sec = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
        CHECK(sec < 30, "%.2f s for %zu bytes of unclosed JSON", sec, huge);

        memcpy(s, "<think>", 7);
        CHECK(model_text_calls_parse(s, huge, tools, &c) == 0 && c.n_calls == 0 && c.text && strlen(c.text) <= 4096,
              "unclosed thinking: dropped up to the limit, the text past it kept");
        model_text_calls_done(&c);

        /* A NUL ends the text. */
        CHECK(model_text_calls_parse("<tool_call>" RF "</tool_call>\0<tool_call>{\"name\": \"run_tests\"}</tool_call>",
                                     sizeof("<tool_call>" RF "</tool_call>\0<tool_call>{\"name\": \"run_tests\"}</tool_call>") - 1,
                                     tools, &c) == 0 && c.n_calls == 1, "a NUL ends the text");
        model_text_calls_done(&c);

        /* Deep nesting is refused by the bracket count, not by recursion. */
        b = (Buf) {};
        CHECK(buf_puts(&b, "<tool_call>{\"name\": \"read_file\", \"arguments\": ") == 0, "text built");
        for (unsigned i = 0; i < 100000; i++)
                (void) buf_puts(&b, "[");
        CHECK(model_text_calls_parse(b.s, b.n, tools, &c) == 0 && c.n_calls == 0 && c.unread == 1, "deep nesting: unread");
        model_text_calls_done(&c);
        buf_done(&b);
        free(s);
}

static ModelReply *reply_of(const char *body) {
        ModelReply *r = NULL;
        CHECK(model_reply_parse(body, strlen(body), false, &r, NULL) == 0, "reply parsed");
        return r;
}

/* The reply as the agent takes it: calls from the text with ids of their
 * own, the message the conversation keeps carries them as tool_calls and
 * no thinking and no call text; the modes decide what is read. */
static void test_reply(json_object *tools) {
        _cleanup_(model_reply_freep) ModelReply *r = NULL, *n = NULL, *s = NULL, *s2 = NULL, *m = NULL;
        json_object *tcs = NULL, *content = NULL;

        r = reply_of("{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"<think>hm</think>Reading.\\n<tool_call>"
                     "{\\\"name\\\": \\\"read_file\\\", \\\"arguments\\\": {\\\"path\\\": \\\"a.c\\\"}}</tool_call>\"},"
                     "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}");
        CHECK(model_reply_read_text(r, MODEL_TOOL_CALLS_AUTO, tools, &n) == 1 && n, "auto: a new reply");
        CHECK(n && n->n_tool_calls == 1 && n->text_calls && streq_ptr(n->tool_calls[0].name, "read_file") &&
              n->tool_calls[0].id && strncmp(n->tool_calls[0].id, "call_", 5) == 0, "auto: the call, with an id ('%s')",
              n && n->n_tool_calls ? n->tool_calls[0].id : "");
        CHECK(n && streq_ptr(n->content, "Reading.") && n->prompt_tokens == 7 && n->completion_tokens == 3 &&
              streq_ptr(n->finish_reason, "stop"), "auto: the rest of the text, usage and finish reason kept");
        CHECK(n && json_object_object_get_ex(n->message, "tool_calls", &tcs) && json_object_array_length(tcs) == 1 &&
              json_object_object_get_ex(n->message, "content", &content) &&
              streq(json_object_get_string(content), "Reading."), "auto: the message: %s", n ? json_to_line(n->message) : "");
        CHECK(n && !strstr(json_to_line(n->message), "think") && !strstr(json_to_line(n->message), "<tool_call>"),
              "no thinking and no call text in the conversation");

        /* The same reply read again gets the same ids (a replay). */
        CHECK(model_reply_read_text(r, MODEL_TOOL_CALLS_TEXT, tools, &s) == 1 && s && n &&
              streq(s->tool_calls[0].id, n->tool_calls[0].id), "text: the same call and id");

        /* native: no calls from the text, but no thinking either. */
        CHECK(model_reply_read_text(r, MODEL_TOOL_CALLS_NATIVE, tools, &m) == 1 && m && m->n_tool_calls == 0 &&
              m->content && !strstr(m->content, "think") && strstr(m->content, "<tool_call>"), "native: thinking stripped only");
        m = model_reply_free(m);

        /* A reply with calls of its own: the text is not read for more. */
        s = model_reply_free(s);
        s = reply_of("{\"choices\":[{\"message\":{\"content\":\"<tool_call>{\\\"name\\\": \\\"run_tests\\\"}</tool_call>\","
                     "\"tool_calls\":[{\"id\":\"x\",\"function\":{\"name\":\"finish\",\"arguments\":\"{}\"}}]}}]}");
        CHECK(model_reply_read_text(s, MODEL_TOOL_CALLS_AUTO, tools, &m) == 0 && !m, "structured calls: as it is");

        /* A plain reply stays as it is; one that was all thinking gets "" as its content. */
        r = model_reply_free(r);
        r = reply_of("{\"choices\":[{\"message\":{\"content\":\"All done.\"}}]}");
        CHECK(model_reply_read_text(r, MODEL_TOOL_CALLS_AUTO, tools, &m) == 0 && !m, "plain text: as it is");
        r = model_reply_free(r);
        r = reply_of("{\"choices\":[{\"message\":{\"content\":\"<think>hm\"}}],\"finish_reason\":\"length\"}");
        CHECK(model_reply_read_text(r, MODEL_TOOL_CALLS_AUTO, tools, &s2) == 1 && s2 && !s2->content &&
              s2->n_tool_calls == 0 && json_object_object_get_ex(s2->message, "content", &content) &&
              streq(json_object_get_string(content), ""), "all thinking: content \"\" in the message");
}

/* ToolCalls=text: what a server without tool support is sent. */
static void test_messages(json_object *tools) {
        _cleanup_json_ json_object *msgs = NULL, *out = NULL;
        const char *in =
                "[{\"role\":\"system\",\"content\":\"You are an agent.\"},"
                "{\"role\":\"user\",\"content\":\"Plan.\"},"
                "{\"role\":\"assistant\",\"content\":\"Reading.\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                "\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"a.c\\\"}\"}},{\"id\":\"c2\",\"type\":\"function\","
                "\"function\":{\"name\":\"edit_file\",\"arguments\":\"{\\\"path\\\":\\\"a\"}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"name\":\"read_file\",\"content\":\"1| int x;\"},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"name\":\"edit_file\",\"content\":\"cut\"},"
                "{\"role\":\"user\",\"content\":\"Go on.\"}]";

        CHECK(json_parse_strict(in, strlen(in), &msgs) == 0, "messages parsed");
        CHECK(model_text_calls_messages(msgs, tools, &out) == 0 && json_object_array_length(out) == 4,
              "system, user, assistant, user: %s", out ? json_to_line(out) : "");
        if (!out || json_object_array_length(out) != 4)
                return;
        const char *sys = json_object_get_string(json_object_object_get(json_object_array_get_idx(out, 0), "content"));
        const char *as = json_object_get_string(json_object_object_get(json_object_array_get_idx(out, 2), "content"));
        const char *user = json_object_get_string(json_object_object_get(json_object_array_get_idx(out, 3), "content"));
        CHECK(strncmp(sys, "You are an agent.\n\n# Tools", 26) == 0 &&
              strstr(sys, "<tool_call>{\"name\": \"TOOL\", \"arguments\": {...}}</tool_call>") && strstr(sys, "## read_file") &&
              strstr(sys, "## finish") && strstr(sys, "\"required\":[\"path\"]"), "the system prompt describes the tools and the format");
        CHECK_STR_EQ(as, "Reading.\n\n<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\":\"a.c\"}}</tool_call>\n"
                     "<tool_call>{\"name\": \"edit_file\", \"arguments\": \"{\\\"path\\\":\\\"a\"}</tool_call>",
                     "the assistant's calls as blocks, a cut one as the string it was");
        CHECK(!json_object_object_get_ex(json_object_array_get_idx(out, 2), "tool_calls", NULL), "no tool_calls field");
        CHECK_STR_EQ(user, "<tool_response name=\"read_file\">\n1| int x;\n</tool_response>\n\n"
                     "<tool_response name=\"edit_file\">\ncut\n</tool_response>\n\nGo on.",
                     "the results and the next words: one user message");
        CHECK(json_object_array_length(msgs) == 6 && strstr(json_to_line(msgs), "\"tool_calls\""), "the conversation is not changed");

        _cleanup_json_ json_object *plain = NULL;
        CHECK(model_text_calls_messages(msgs, NULL, &plain) == 0 &&
              !strstr(json_to_line(plain), "# Tools"), "without tools, no description");
}

int main(void) {
        _cleanup_json_ json_object *tools = NULL;

        CHECK(json_parse_strict(TOOLS, strlen(TOOLS), &tools) == 0, "tools parsed");
        test_cases(tools);
        test_no_tools();
        test_bounds(tools);
        test_reply(tools);
        test_messages(tools);
        return tap_done();
}
