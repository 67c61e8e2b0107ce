#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A scripted OpenAI-compatible chat-completions server for tests.

    model-server.py --script SCRIPT.json [--log REQUESTS.jsonl] [--port N] [--by-step]
                    [--context-limit BYTES [--context-error openai|vllm|llamacpp|ollama | --context-truncate]]
                    [--bytes-per-token R]

Binds 127.0.0.1 (port 0 = any free one) and prints the port on its first
line of stdout. Every POST to a path ending in /chat/completions takes the
next entry of the script, in order of arrival; when the script has run out,
the answer is a plain "stop" message with the content "done". With
--by-step, a request that carries K assistant messages gets entry K
instead, whenever it arrives (for replies that must not depend on retries
or on a crashed client asking twice; a conversation whose old steps the
daemon condensed to fit its context budget has fewer assistant messages
than steps, so a test that condenses uses the order of arrival). Every request
is appended to the log as one JSON line:
    {"n": N, "t": arrival (time.time()), "path": "...", "headers": {lower-case name: value},
     "body": <parsed JSON or null>, "bytes": <the body's length>, "raw": "<body if not JSON>"}
(a GET as {"n": null, "method": "GET", "path": ..., "headers": ..., "body": null}).

The script is a JSON list of entries (or {"responses": [...]}). With
{"responses": [...], "review": [...]}, a request that offers the tool
review_verdict (agentfabd's reviewer model) takes the next entry of "review"
instead, in order of arrival (also with --by-step); when those have run out
it gets {} like any other. An entry:
    "reply": {"content": "text" | null,
              "tool_calls": [{"id": "call_1" (optional), "name": "read_file",
                              "arguments": "{...}" | {...}}],
              "finish_reason": "stop" (default: "tool_calls" if there are
                                       tool calls, else "stop"),
              "usage": {"prompt_tokens": N, "completion_tokens": M},
              "omit_ids": true (send tool calls without ids),
              "omit_index": true (stream deltas without "index")}
    "stream": true | false      default: what the request asked for
    "chunk": N                  stream content/arguments in pieces of N chars (default 4)
    "status": 500               an HTTP error; the body is "body" or an
                                OpenAI-style error object
    "retry_after": S            sends "Retry-After: S"
    "body": "text"              sends this body verbatim (status 200 unless given)
    "garbage": true             a 200 body that is not JSON
    "cut_stream_after": N       stream N events, then close without [DONE]
    "delay": S                  wait S seconds (float) before answering
    "hold_while": PATH          wait while PATH exists (at most 120 s)
    "huge": BYTES               a 200 reply whose content is BYTES long
    "headers": {"Name": "value"} further response headers
    "text_calls": "hermes" | "bare" | "fenced" | "mistral" | "llama3" | "function" | "xml"
                                the reply's tool calls written into its content, in
                                that model family's format, and no "tool_calls" (as a
                                server without a parser for the format sends them):
                                <tool_call>{...}</tool_call>, a bare {"name","arguments"}
                                object a line, a ```json block, [TOOL_CALLS][...],
                                <|python_tag|>{"name","parameters"}, <function=N>{...}
                                </function>, Qwen3-Coder's <function=N><parameter=K>.
                                Arguments given as a string that is not JSON are
                                written as they are and end the text (a cut call).
    "think": "text"             the content begins with <think>text</think>
    "reasoning": "text"         sent as "reasoning_content" beside the content

A model's context, as servers keep it (--context-limit BYTES): a request
whose body is longer than BYTES is more than the model takes. It is
answered with HTTP 400 and the error the server named by --context-error
sends (default openai): OpenAI's context_length_exceeded, vLLM's "This
model's maximum context length is N tokens", llama.cpp's "request (M
tokens) exceeds the available context size (N tokens)" with
exceed_context_size_error, or Ollama's "the input length exceeds the
context length"; such a request takes no entry of the script, and is
logged with "refused": "context". With --context-truncate it is answered
instead as Ollama does past num_ctx: as scripted, and without a word, but
usage.prompt_tokens counts only the last BYTES (the front of the prompt,
the system message first, is what the model never saw); it is logged with
"truncated": true. Tokens are bytes / R (--bytes-per-token, default 4);
with --context-limit or --bytes-per-token every reply whose script gives
no usage reports usage.prompt_tokens so counted.
Before a finish is accepted, agentfabd shows the model its whole diff once
and asks it to call finish again (a user message that begins with
DIFF_REVIEW, or holds it, with ToolCalls=text). Unless --review-scripted is given, such a request is answered
here with that finish again, with the same arguments as the one before
(written as text, Hermes style, when the request offers no tools), and
takes no entry of the script: with --by-step, the assistant messages that
answered a review are not counted either, so scripts written for a finish
that is accepted at once keep working. With --review-scripted the script
answers the review like any other request.
Only the Python standard library is used.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"script": [], "next": 0, "count": 0, "log": None, "review": [], "review_next": 0}


def is_review_request(body):
    tools = body.get("tools") if isinstance(body, dict) else None
    if not isinstance(tools, list):
        return False
    return any(isinstance(t, dict) and (t.get("function") or {}).get("name") == "review_verdict" for t in tools)


DIFF_REVIEW = "Before your work is delivered, review your whole change once."


def is_diff_review(m):
    # With ToolCalls=text the review may share a user message with the
    # tool results before it.
    return isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str) \
        and DIFF_REVIEW in m["content"]


def diff_review_answer(body):
    """The finish again, for a request whose last message asks to review
    the diff; None for any other request."""
    msgs = body.get("messages", []) if isinstance(body, dict) else []
    pending = False
    for m in reversed(msgs):
        if not isinstance(m, dict) or m.get("role") == "assistant":
            break
        if is_diff_review(m):
            pending = True
            break
    if not pending:
        return None
    args = {}
    for m in reversed(msgs):
        calls = m.get("tool_calls") if isinstance(m, dict) and m.get("role") == "assistant" else None
        for tc in calls or []:
            fn = tc.get("function") or {}
            if fn.get("name") == "finish":
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                break
        if args:
            break
    e = {"reply": {"content": "I reviewed the diff: it is what the task needs.",
                   "tool_calls": [{"name": "finish", "arguments": args or {"summary": "Reviewed the whole change."}}]}}
    if not body.get("tools"):
        e["text_calls"] = "hermes"
    return e


def diff_reviews_answered(msgs):
    """How many assistant messages answered a request to review the diff."""
    n = 0
    for i, m in enumerate(msgs):
        if is_diff_review(m) and any(isinstance(x, dict) and x.get("role") == "assistant" for x in msgs[i + 1:]):
            n += 1
    return n


def take_entry(body=None):
    with lock:
        n = state["count"]
        state["count"] += 1
        if not state.get("review_scripted") and not is_review_request(body):
            e = diff_review_answer(body)
            if e is not None:
                return n, e
        if is_review_request(body):
            if state["review_next"] < len(state["review"]):
                e = state["review"][state["review_next"]]
                state["review_next"] += 1
                return n, e
            return n, {}
        if state.get("by_step"):
            # The entry is chosen by the conversation, not by arrival: a
            # request with K assistant messages gets entry K, so a step
            # redone after a crash gets the same answer.
            msgs = body.get("messages", []) if isinstance(body, dict) else []
            k = sum(1 for m in msgs if isinstance(m, dict) and m.get("role") == "assistant")
            if not state.get("review_scripted"):
                k -= diff_reviews_answered(msgs)
            if k < len(state["script"]):
                return n, state["script"][k]
            return n, {}
        if state["next"] < len(state["script"]):
            e = state["script"][state["next"]]
            state["next"] += 1
            return n, e
        return n, {}


def context_error(style, limit_tokens, sent_tokens, max_tokens):
    """HTTP 400's body for a request longer than the context, in the words
    of the server named."""
    if style == "vllm":
        return {"error": {"message": "This model's maximum context length is %d tokens. However, you requested %d "
                                     "tokens (%d in the messages, %d in the completion). Please reduce the length "
                                     "of the messages or completion." % (limit_tokens, sent_tokens + max_tokens,
                                                                         sent_tokens, max_tokens),
                          "type": "BadRequestError", "param": None, "code": 400}}
    if style == "llamacpp":
        return {"error": {"code": 400,
                          "message": "request (%d tokens) exceeds the available context size (%d tokens), try "
                                     "increasing it" % (sent_tokens, limit_tokens),
                          "type": "exceed_context_size_error", "n_prompt_tokens": sent_tokens, "n_ctx": limit_tokens}}
    if style == "ollama":
        return {"error": {"message": "the input length exceeds the context length", "type": "api_error",
                          "param": None, "code": None}}
    return {"error": {"message": "This model's maximum context length is %d tokens. However, your messages resulted "
                                 "in %d tokens. Please reduce the length of the messages." % (limit_tokens, sent_tokens),
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def log_request(entry):
    if not state["log"]:
        return
    with lock:
        with open(state["log"], "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def render_text_calls(reply, style):
    """The reply's tool calls as a model writes them in its text."""
    out = []
    for tc in reply.get("tool_calls", []):
        name, args, cut = tc["name"], tc.get("arguments", "{}"), False
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                cut = True
        key = "parameters" if style == "llama3" else "arguments"
        if cut:
            # Cut at max_tokens: the text ends within the call.
            head = {"function": "<function=%s>" % name,
                    "xml": "<tool_call>\n<function=%s>\n<parameter=content>\n" % name,
                    "hermes": "<tool_call>\n"}.get(style, "")
            if style in ("function", "xml"):
                out.append(head + args)
            else:
                out.append(head + '{"name": %s, "%s": %s' % (json.dumps(name), key, args))
            return out, True
        obj = json.dumps({"name": name, key: args})
        if style == "hermes":
            out.append("<tool_call>\n%s\n</tool_call>" % obj)
        elif style in ("bare", "fenced", "mistral", "llama3"):
            out.append(obj)
        elif style == "function":
            out.append("<function=%s>%s</function>" % (name, json.dumps(args)))
        elif style == "xml":
            params = "".join("<parameter=%s>\n%s\n</parameter>\n" % (k, v if isinstance(v, str) else json.dumps(v))
                             for k, v in args.items())
            out.append("<tool_call>\n<function=%s>\n%s</function>\n</tool_call>" % (name, params))
        else:
            raise ValueError("unknown text_calls style %r" % style)
    return out, False


def text_calls_content(reply, style):
    calls, cut = render_text_calls(reply, style)
    if style == "fenced":
        text = "```json\n" + ("\n".join(calls) if cut else "%s\n```" % (
            calls[0] if len(calls) == 1 else "[" + ", ".join(calls) + "]"))
    elif style == "mistral":
        text = "[TOOL_CALLS][" + ", ".join(calls) + ("" if cut else "]")
    elif style == "llama3":
        text = "<|python_tag|>" + "; ".join(calls) + ("" if cut else "<|eom_id|>")
    else:
        text = "\n".join(calls)
    content = reply.get("content")
    return (content + "\n\n" if content else "") + text


def message_of(reply):
    msg = {"role": "assistant", "content": reply.get("content")}
    if reply.get("reasoning"):
        msg["reasoning_content"] = reply["reasoning"]
    calls = []
    for i, tc in enumerate(reply.get("tool_calls", [])):
        c = {"type": "function",
             "function": {"name": tc["name"], "arguments": tc.get("arguments", "{}")}}
        if not reply.get("omit_ids"):
            c["id"] = tc.get("id", "call_%d" % i)
        calls.append(c)
    if calls:
        msg["tool_calls"] = calls
    return msg


def finish_of(reply):
    if "finish_reason" in reply:
        return reply["finish_reason"]
    return "tool_calls" if reply.get("tool_calls") else "stop"


def pieces(s, n):
    return [s[i:i + n] for i in range(0, len(s), n)] or [""]


def stream_events(reply, model, chunk):
    """The chunks of a streamed reply, as JSON objects."""
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def ev(delta, finish=None):
        d = dict(base)
        d["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        return d

    out = [ev({"role": "assistant", "content": None if reply.get("content") is None else ""})]
    if reply.get("reasoning"):
        for p in pieces(reply["reasoning"], chunk):
            out.append(ev({"reasoning_content": p}))
    if reply.get("content"):
        for p in pieces(reply["content"], chunk):
            out.append(ev({"content": p}))
    for i, tc in enumerate(reply.get("tool_calls", [])):
        args = tc.get("arguments", "{}")
        first = {"type": "function", "function": {"name": tc["name"], "arguments": ""}}
        if not reply.get("omit_index"):
            first["index"] = i
        if not reply.get("omit_ids"):
            first["id"] = tc.get("id", "call_%d" % i)
        if not isinstance(args, str):
            first["function"]["arguments"] = args
            out.append(ev({"tool_calls": [first]}))
            continue
        out.append(ev({"tool_calls": [first]}))
        for p in pieces(args, chunk):
            d = {"function": {"arguments": p}}
            if not reply.get("omit_index"):
                d["index"] = i
            out.append(ev({"tool_calls": [d]}))
    out.append(ev({}, finish_of(reply)))
    if "usage" in reply:
        u = dict(base)
        u["choices"] = []
        u["usage"] = reply["usage"]
        out.append(u)
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, ctype="application/json", extra=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        # Logged too: nothing of agentfab GETs, so a GET in the log is
        # something that reached this server some other way (the network
        # test proves with it that the egress proxy let nothing through).
        log_request({"n": None, "method": "GET", "path": self.path,
                     "headers": {k.lower(): v for k, v in self.headers.items()}, "body": None})
        if self.path.split("?")[0].endswith("/models"):
            self.send(200, json.dumps({"object": "list", "data": [{"id": "test-model", "object": "model"}]}))
        else:
            self.send(404, json.dumps({"error": {"message": "not found"}}))

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length).decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        bpt = state.get("bytes_per_token") or 4.0
        limit = state.get("context_limit")
        over = limit is not None and length > limit and self.path.endswith("/chat/completions")
        if over and not state.get("context_truncate"):
            # Refused before the model sees it: it takes no entry.
            log_request({"n": None, "t": time.time(), "path": self.path,
                         "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body,
                         "bytes": length, "refused": "context"})
            max_tokens = (body or {}).get("max_tokens") or 0
            self.send(400, json.dumps(context_error(state.get("context_error"), int(limit / bpt),
                                                    int(length / bpt), max_tokens)))
            return
        n, e = take_entry(body)
        rec = {"n": n, "t": time.time(), "path": self.path,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "body": body, "bytes": length}
        if body is None:
            rec["raw"] = raw
        if over:
            rec["truncated"] = True
        log_request(rec)

        if not self.path.endswith("/chat/completions"):
            self.send(404, json.dumps({"error": {"message": "no such endpoint"}}))
            return

        if e.get("delay"):
            time.sleep(float(e["delay"]))
        if e.get("hold_while"):
            # Held as long as the file exists (at most 120 s): the test
            # decides when the model answers.
            for _ in range(1200):
                if not os.path.exists(e["hold_while"]):
                    break
                time.sleep(0.1)

        extra = dict(e.get("headers", {}))
        if "retry_after" in e:
            extra["Retry-After"] = e["retry_after"]
        model = (body or {}).get("model", "test-model")

        if "status" in e and e["status"] != 200:
            err = e.get("body", json.dumps({"error": {"message": "scripted error %d" % e["status"],
                                                      "type": "server_error"}}))
            self.send(e["status"], err, extra=extra)
            return
        if "body" in e:
            self.send(200, e["body"], ctype=e.get("content_type", "application/json"), extra=extra)
            return
        if e.get("garbage"):
            self.send(200, "<html>this is not JSON</html>\n", ctype="text/html", extra=extra)
            return

        reply = dict(e.get("reply", {"content": "done"}))
        if "huge" in e:
            reply = {"content": "x" * int(e["huge"])}
        if "usage" not in reply and (limit is not None or state.get("bytes_per_token")):
            # What the model took of the prompt: all of it, or past the
            # context only its end, as Ollama counts a prompt it cut.
            reply["usage"] = {"prompt_tokens": int(min(length, limit if over else length) / bpt),
                              "completion_tokens": 10}
        if e.get("text_calls") and reply.get("tool_calls"):
            # As a server without a parser for the model's format: the
            # calls are text, and the reply ends with "stop".
            reply["content"] = text_calls_content(reply, e["text_calls"])
            del reply["tool_calls"]
        if e.get("think"):
            reply["content"] = "<think>\n%s\n</think>\n\n" % e["think"] + (reply.get("content") or "")
        if e.get("reasoning"):
            reply["reasoning"] = e["reasoning"]
        stream = e.get("stream", bool((body or {}).get("stream")))

        if not stream:
            out = {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                   "model": model, "system_fingerprint": "test",
                   "choices": [{"index": 0, "message": message_of(reply), "logprobs": None,
                                "finish_reason": finish_of(reply)}]}
            if "usage" in reply:
                out["usage"] = reply["usage"]
            self.send(200, json.dumps(out), extra=extra)
            return

        # HTTP/1.0 without Content-Length: the body ends when we close, so a
        # cut stream looks complete to HTTP and only the events tell.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for k, v in extra.items():
            self.send_header(k, str(v))
        self.end_headers()
        events = stream_events(reply, model, int(e.get("chunk", 4)))
        cut = e.get("cut_stream_after")
        for i, ev in enumerate(events):
            if cut is not None and i >= cut:
                self.wfile.flush()
                return
            self.wfile.write(("data: " + json.dumps(ev) + "\n\n").encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # Twenty tasks that come back at once after a restart connect at once:
    # socketserver's backlog of 5 is smaller than any real model server's.
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # A client that gave up (timeout, reply too large) is a normal case
        # in these tests, not something to print a traceback for.
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description="Scripted OpenAI-compatible test server")
    ap.add_argument("--script", help="JSON file with the responses")
    ap.add_argument("--log", help="JSON-lines file to append each request to")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--by-step", action="store_true",
                    help="choose the entry by the number of assistant messages in the request")
    ap.add_argument("--review-scripted", action="store_true",
                    help="the script answers agentfabd's request to review the diff before finish")
    ap.add_argument("--context-limit", type=int, metavar="BYTES",
                    help="a request body longer than BYTES is more than the model's context")
    ap.add_argument("--context-error", choices=["openai", "vllm", "llamacpp", "ollama"], default="openai",
                    help="answer such a request with HTTP 400 in this server's words")
    ap.add_argument("--context-truncate", action="store_true",
                    help="answer it as scripted instead, counting only its last BYTES as prompt tokens (Ollama)")
    ap.add_argument("--bytes-per-token", type=float, metavar="R",
                    help="report usage.prompt_tokens as body bytes / R (default 4 with --context-limit)")
    args = ap.parse_args()
    state["by_step"] = args.by_step
    state["review_scripted"] = args.review_scripted
    state["context_limit"] = args.context_limit
    state["context_error"] = args.context_error
    state["context_truncate"] = args.context_truncate
    state["bytes_per_token"] = args.bytes_per_token

    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
        if isinstance(script, dict):
            state["review"] = script.get("review", [])
            script = script.get("responses", [])
        state["script"] = script
    state["log"] = args.log

    srv = Server(("127.0.0.1", args.port), Handler)
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
