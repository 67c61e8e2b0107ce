/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>

#include "fs-util.h"
#include "json-util.h"
#include "model-client.h"
#include "tap.h"

/* The reply parser on its own: the shapes that real servers send, without
 * a server. Every case a live server cannot easily produce is here. */

static int parse(const char *raw, bool stream, ModelReply **ret, char **ret_error) {
        return model_reply_parse(raw, strlen(raw), stream, ret, ret_error);
}

int main(void) {
        ModelReply *r = NULL;
        char *err = NULL;

        /* SSE with CRLF line ends, comments, an "event:" field and a data
         * value without the space after the colon. */
        CHECK(parse(": keep-alive\r\n\r\nevent: message\r\ndata:{\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n"
                    "data: {\"choices\":[{\"delta\":{\"content\":\" you\"},\"finish_reason\":\"stop\"}]}\r\n\r\n"
                    "data: [DONE]\r\n\r\n", true, &r, &err) == 0 && streq_ptr(r->content, "Hi you") &&
              streq_ptr(r->finish_reason, "stop") && r->stream, "SSE with CRLF, comments and fields");
        r = model_reply_free(r);

        /* An event split over two data: lines is one JSON text joined by a newline. */
        CHECK(parse("data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"split\"},\"finish_reason\":\"stop\"}]}\n\n", true, &r, NULL) == 0 &&
              streq_ptr(r->content, "split"), "multi-line SSE event");
        r = model_reply_free(r);

        /* A finish reason without [DONE] is complete (Ollama ends so); the
         * last event may lack its blank line. */
        CHECK(parse("data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"length\"}]}", true, &r, NULL) == 0 &&
              streq_ptr(r->finish_reason, "length"), "finish reason without [DONE]");
        r = model_reply_free(r);

        CHECK(parse("data: {\"choices\":[{\"delta\":{\"content\":\"s\"},\"finish_reason\":\"stop\"}]}\n\n", false, &r, NULL) == 0 &&
              r->stream && streq_ptr(r->content, "s"), "a stream where none was asked for");
        r = model_reply_free(r);

        CHECK(parse("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", true, &r, &err) == -EPIPE && !r && err,
              "stream without end: -EPIPE ('%s')", strempty(err));
        err = mfree_ptr(err);

        /* An error in the middle of a stream (llama.cpp does that). */
        CHECK(parse("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"error\":{\"message\":\"out of memory\"}}\n\n",
                    true, &r, &err) == -EBADMSG && err && strstr(err, "out of memory"), "error event: '%s'", strempty(err));
        err = mfree_ptr(err);

        CHECK_ERRNO(parse("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {oops\n\n", true, &r, NULL), -EBADMSG,
                    "broken JSON in a stream: -EBADMSG");
        CHECK(parse("", true, &r, NULL) == -EBADMSG && parse("", false, &r, NULL) == -EBADMSG, "empty body: -EBADMSG");
        CHECK_ERRNO(parse("[1,2]", false, &r, NULL), -EBADMSG, "JSON but no object: -EBADMSG");
        CHECK_ERRNO(parse("{\"choices\":[]}", false, &r, NULL), -EBADMSG, "no choices: -EBADMSG");
        CHECK_ERRNO(parse("{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}}]}",
                    false, &r, NULL), -EBADMSG, "tool call without a name: -EBADMSG");
        CHECK_ERRNO(parse("{\"choices\":[{\"message\":{\"content\":42}}]}", false, &r, NULL), -EBADMSG, "content a number: -EBADMSG");
        /* A NUL in a name made it an empty C string after its first delta
         * (found by fuzz-model-reply); in an id, an empty id. */
        CHECK(parse("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"\\u0000x\"}}]}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"read_file\",\"arguments\":\"{}\"}}]}}]}\n\n",
                    true, &r, &err) == -EBADMSG && err && strstr(err, "NUL"), "a NUL in a name: %s", strempty(err));
        err = mfree_ptr(err);
        CHECK_ERRNO(parse("{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"\\u0000\",\"function\":{\"name\":\"read_file\"}}]}}]}",
                    false, &r, NULL), -EBADMSG, "a NUL in an id: -EBADMSG");

        /* A NUL in the content made it an empty C string, the text after
         * it lost (found by fuzz-model-reply, in a part of a streamed
         * content array): U+FFFD in its place, whole and streamed. */
        CHECK(parse("{\"choices\":[{\"message\":{\"content\":\"\\u0000c!\"}}]}", false, &r, NULL) == 0 &&
              streq_ptr(r->content, "\xEF\xBF\xBD" "c!"), "a NUL in the content: U+FFFD (%s)", r && r->content ? r->content : "none");
        r = model_reply_free(r);
        CHECK(parse("data: {\"choices\":[{\"delta\":{\"content\":[{\"text\":\"\\u0000\"}]}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"content\":\"x\\u0000\"},\"finish_reason\":\"stop\"}]}\n\n",
                    true, &r, NULL) == 0 && streq_ptr(r->content, "\xEF\xBF\xBD" "x" "\xEF\xBF\xBD"),
              "NULs in streamed content, as parts and as text");
        r = model_reply_free(r);

        /* A huge index (json-c makes it INT64_MAX), then a delta without
         * an index and with a new id, the next call: "the last plus one"
         * overflowed (found by fuzz-model-reply). Out of range is garbage. */
        CHECK(parse("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":46666666666666666666666,\"id\":\"a\",\"function\":{\"name\":\"r\"}}]}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"r\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
                    true, &r, &err) == -EBADMSG && err && strstr(err, "index"), "a huge tool call index: %s", strempty(err));
        err = mfree_ptr(err);
        CHECK_ERRNO(parse("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1,\"id\":\"a\",\"function\":{\"name\":\"r\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
                    true, &r, NULL), -EBADMSG, "a negative tool call index: -EBADMSG");
        CHECK(parse("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":2147483647,\"id\":\"a\",\"function\":{\"name\":\"r\"}}]}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"s\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
                    true, &r, NULL) == 0 && r->n_tool_calls == 2 && streq_ptr(r->tool_calls[1].name, "s"),
              "the largest index taken, and a call after it without one");
        r = model_reply_free(r);

        /* Content as an array of parts; unknown fields everywhere ignored. */
        CHECK(parse("{\"id\":\"x\",\"weird\":[1],\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"reasoning_content\":\"hm\","
                    "\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}",
                    false, &r, NULL) == 0 && streq_ptr(r->content, "ab") && r->prompt_tokens == 3 && r->completion_tokens == 2,
              "content parts and extra fields");
        r = model_reply_free(r);

        /* Cached prompt tokens where the server says (OpenAI's
         * prompt_tokens_details), 0 where it does not. */
        CHECK(parse("{\"choices\":[{\"message\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}],"
                    "\"usage\":{\"prompt_tokens\":300,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":256}}}",
                    false, &r, NULL) == 0 && r->prompt_tokens == 300 && r->cached_tokens == 256,
              "cached tokens read from the usage's details");
        r = model_reply_free(r);
        CHECK(parse("{\"choices\":[{\"message\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}],"
                    "\"usage\":{\"prompt_tokens\":300,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":\"x\"}}}",
                    false, &r, NULL) == 0 && r->prompt_tokens == 300 && r->cached_tokens == 0,
              "cached tokens of the wrong type are not counted");
        r = model_reply_free(r);

        /* A name repeated in every delta is not repeated in the result. */
        CHECK(parse("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"i\",\"function\":{\"name\":\"run\",\"arguments\":\"{\\\"a\"}}]}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"i\",\"function\":{\"name\":\"run\",\"arguments\":\"\\\":1}\"}}]}}]}\n\n"
                    "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n", true, &r, NULL) == 0 &&
              r->n_tool_calls == 1 && streq_ptr(r->tool_calls[0].name, "run") && streq_ptr(r->tool_calls[0].arguments, "{\"a\":1}") &&
              streq_ptr(r->tool_calls[0].id, "i"), "repeated name and id in deltas");
        r = model_reply_free(r);

        /* Invalid JSON arguments are passed on as they are: the agent loop
         * tells the model, rather than this layer dropping the call. */
        CHECK(parse("{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"q\",\"function\":{\"name\":\"f\",\"arguments\":\"{not json\"}}]}}]}",
                    false, &r, NULL) == 0 && streq_ptr(r->tool_calls[0].arguments, "{not json"), "invalid arguments kept verbatim");
        r = model_reply_free(r);

        /* Too many tool calls are refused, not kept. */
        {
                char *big = NULL;
                size_t n = 0;
                FILE *f = open_memstream(&big, &n);
                fputs("{\"choices\":[{\"message\":{\"tool_calls\":[", f);
                for (unsigned i = 0; i <= MODEL_TOOL_CALLS_MAX; i++)
                        fprintf(f, "%s{\"function\":{\"name\":\"f\"}}", i ? "," : "");
                fputs("]}}]}", f);
                fclose(f);
                CHECK_ERRNO(parse(big, false, &r, NULL), -E2BIG, "more than %u tool calls: -E2BIG", MODEL_TOOL_CALLS_MAX);
                free(big);
        }

        /* The transcript line is what replay reads, and the reply comes back equal. */
        {
                int fd = memfd_create("transcript", MFD_CLOEXEC);
                _cleanup_json_ json_object *req = json_object_new_object();
                ModelReplay *rp = NULL;
                ModelReply *back = NULL;

                json_add_string(req, "model", "m");
                CHECK_ERRNO(parse("data: {\"choices\":[{\"delta\":{\"content\":\"line\\nbreak\"},\"finish_reason\":\"stop\"}]}\n\n", true, &r, NULL), 0,
                            "stream parsed for the transcript");
                r->attempts = 3;
                CHECK(model_transcript_append(fd, req, r) == 0 && model_transcript_append(fd, req, r) == 0, "two exchanges appended");
                lseek(fd, 0, SEEK_SET);
                char buf[4096];
                ssize_t k = read(fd, buf, sizeof(buf) - 1);
                buf[k > 0 ? k : 0] = '\0';
                CHECK(k > 0 && strchr(buf, '\n') == buf + (strlen(buf) / 2) - 1 && strstr(buf, "\"request\":{\"model\":\"m\"}") &&
                      strstr(buf, "\"stream\":true") && strstr(buf, "\"attempts\":3"), "one JSON line per exchange");

                /* Replay reads a path; /proc/self/fd/N is a symlink, which
                 * read_file_at() refuses: copy to a real file. */
                char tpath[] = "/tmp/test-model-reply-XXXXXX";
                int tfd = mkstemp(tpath);
                CHECK(tfd >= 0 && write(tfd, buf, strlen(buf)) == (ssize_t) strlen(buf), "transcript copied");
                close(tfd);
                CHECK(model_replay_open(tpath, &rp) == 0 && model_replay_next(rp, &back, NULL) == 0 &&
                      streq_ptr(back->content, "line\nbreak") && back->attempts == 3 && back->stream &&
                      back->raw_size == r->raw_size && memcmp(back->raw, r->raw, r->raw_size) == 0 &&
                      streq(json_to_line(back->message), json_to_line(r->message)), "replayed reply equals the original");
                back = model_reply_free(back);
                CHECK(model_replay_next(rp, &back, NULL) == 0 && model_replay_position(rp) == 2, "second exchange");
                back = model_reply_free(back);
                CHECK_ERRNO(model_replay_next(rp, &back, NULL), -ENODATA, "then -ENODATA");
                model_replay_free(rp);
                unlink(tpath);
                r = model_reply_free(r);
                close(fd);
        }

        /* How a body is read: asked for a stream or not, an object is an
         * object and "data:" lines are a stream; anything else is read as
         * asked. */
        CHECK(!model_reply_is_stream(" \r\n{\"choices\":[]}", 16, true) && !model_reply_is_stream("{}", 2, false),
              "an object is no stream, asked or not");
        CHECK(model_reply_is_stream("data: {}", 8, false) && model_reply_is_stream("data: {}", 8, true),
              "data: lines are a stream, asked or not");
        CHECK(model_reply_is_stream(": c\n", 4, true) && !model_reply_is_stream(": c\n", 4, false) &&
              model_reply_is_stream("", 0, true) && !model_reply_is_stream("", 0, false), "else as asked");

        return tap_done();
}
