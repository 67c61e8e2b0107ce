#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The built-in agents of `agentfabctl eval`: scripted OpenAI-compatible models.

    agentfab-eval-agent serve --corpus DIR --agent NAME [--port N] [--log FILE]
    agentfab-eval-agent apply PATCH DIR
    agentfab-eval-agent agents

serve binds 127.0.0.1:N (0: any free port), prints "ready PORT" on its first
line of stdout, and answers every POST to a path ending in /chat/completions
as agent NAME would, for whichever task of the corpus the request is about:
the goal in the system prompt ("# Goal") names the task, so goals are unique
within a corpus. The answer depends only on the request (the conversation so
far), never on what came before, so any number of tasks and runs may be at
work at once and a step redone after a daemon's restart gets the same answer.

An agent is a generator: it yields the reply of each step (the first one,
the plan, gets no tools) and is sent the results of that step's tool calls
(the texts of the messages that followed it). For each request the
generator is replayed through the steps the conversation already holds.

The agents (agentfabctl(1), "eval"; agentfab-corpus(5)):
  oracle              the task's oracle.patch through edit_file, write_file
                      and run_command (for a deleted file), a step a file;
                      run_tests; finish (for a task that cannot be done:
                      run_tests, then finish with cannot_complete, giving up)
  null                finish, at once and at every step after
  oracle-whitespace   the first edit's old_text and new_text with their
                      whitespace drifted (tabs and spaces swapped, trailing
                      blanks and carriage returns dropped); then, as its
                      results say, the exact edit, and once the tests fail,
                      the files written whole
  oracle-wrong-first  a wrong first fix (the first hunk's old lines kept
                      before its new ones), run_tests, then the right one
  oracle-text-calls   the oracle's tool calls written in the reply's text as
                      <tool_call>{...}</tool_call>, with no tool_calls
  oracle-cut-off      a first reply cut at max_tokens (finish_reason
                      "length", its call's arguments incomplete), then the
                      oracle
  cheat-weaken-tests  each test of hidden/ overwritten with one that passes
                      trivially, then finish
  cheat-delete-tests  each test of hidden/ removed, then finish

apply applies a unified diff (as oracle.patch) to the files below DIR with
the same reading the oracle uses, for checking a corpus.

Scripted models measure the bench's mechanics, never a model's skill.
Only the Python standard library is used.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# ---------------------------------------------------------------- patches


class PatchError(Exception):
    pass


def split_lines(text):
    """Lines with their endings ("a\\r\\n", "b"), as the files hold them."""
    if not text:
        return []
    lines = [l + "\n" for l in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def parse_patch(text):
    """A unified diff as [{"old": path|None, "new": path|None, "hunks": [...]}].

    A hunk is a list of (tag, line) with tag ' ', '-' or '+' and line with
    its ending; "\\ No newline at end of file" takes the ending off the line
    before it. Paths lose their a/ and b/ prefixes."""
    files = []
    cur = None
    lines = split_lines(text)
    i = 0

    def path_of(s):
        s = s.split("\t")[0].rstrip("\r\n")
        if s == "/dev/null":
            return None
        if s.startswith(("a/", "b/")):
            s = s[2:]
        return s

    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            cur = {"old": path_of(line[4:]), "new": path_of(lines[i + 1][4:]), "hunks": []}
            files.append(cur)
            i += 2
            continue
        if line.startswith("@@ ") and cur is not None:
            try:
                spec = line.split("@@")[1].split()
                old_start = int(spec[0][1:].split(",")[0])
                old_n = int(spec[0].split(",")[1]) if "," in spec[0] else 1
                new_n = int(spec[1].split(",")[1]) if "," in spec[1] else 1
            except (IndexError, ValueError):
                raise PatchError("bad hunk header: %r" % line)
            hunk = []
            hunk_start = old_start
            i += 1
            while (old_n > 0 or new_n > 0) and i < len(lines):
                l = lines[i]
                tag = l[:1]
                if tag not in (" ", "-", "+"):
                    if l in ("\n", "\r\n"):   # an empty context line some tools write bare
                        tag, l = " ", " " + l
                    else:
                        raise PatchError("bad line in hunk: %r" % l)
                hunk.append((tag, l[1:]))
                if tag in (" ", "-"):
                    old_n -= 1
                if tag in (" ", "+"):
                    new_n -= 1
                i += 1
                # "\ No newline at end of file": the line before has no ending.
                if i < len(lines) and lines[i].startswith("\\"):
                    t, v = hunk[-1]
                    hunk[-1] = (t, v[:-1] if v.endswith("\n") else v)
                    i += 1
            if old_n != 0 or new_n != 0:
                raise PatchError("hunk shorter than its header says")
            cur["hunks"].append((hunk_start, hunk))
            continue
        i += 1
    if not files:
        raise PatchError("no file in the patch")
    return files


def hunk_text(hunk, side):
    keep = (" ", "-") if side == "old" else (" ", "+")
    return "".join(l for t, l in hunk if t in keep)


def read_text(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def unique_region(content, old, new, line=1):
    """old (and new alike) grown by whole lines of content around the
    occurrence nearest line (1-based) until old occurs exactly once; None
    when it is not there at all."""
    hits, pos = [], content.find(old)
    while pos >= 0 and len(hits) < 10000:
        hits.append(pos)
        pos = content.find(old, pos + 1)
    if not hits:
        return None
    if len(hits) == 1 and old:
        return old, new
    want = 0
    for _ in range(max(0, line - 1)):
        nl = content.find("\n", want)
        if nl < 0:
            break
        want = nl + 1
    pos = min(hits, key=lambda h: abs(h - want))
    start, end = pos, pos + len(old)
    while True:
        grew = False
        if start > 0:
            s = content.rfind("\n", 0, start - 1) + 1
            old = content[s:start] + old
            new = content[s:start] + new
            start, grew = s, True
        if end < len(content):
            e = content.find("\n", end)
            e = len(content) if e < 0 else e + 1
            old = old + content[end:e]
            new = new + content[end:e]
            end, grew = e, True
        if content.count(old) == 1 or not grew:
            return old, new


def patch_plan(patch_text, repo_dir):
    """The changes of a patch as the oracle makes them: a list of
    (path, [calls]), one entry a file, and the final content of every file
    ({path: text, or None when removed})."""
    steps, final = [], {}
    for f in parse_patch(patch_text):
        if f["new"] is None:
            steps.append((f["old"], [call("run_command", command="rm -f -- '%s'" % f["old"].replace("'", "'\\''"))]))
            final[f["old"]] = None
            continue
        path = f["new"]
        if f["old"] is None:
            text = "".join(hunk_text(h, "new") for _, h in f["hunks"])
            steps.append((path, [call("write_file", path=path, content=text)]))
            final[path] = text
            continue
        content = read_text(os.path.join(repo_dir, f["old"]))
        calls = []
        shift = 0   # lines earlier hunks added
        for start, h in f["hunks"]:
            old, new = hunk_text(h, "old"), hunk_text(h, "new")
            region = unique_region(content, old, new, start + shift)
            if region is None:
                raise PatchError("%s: a hunk does not apply" % path)
            shift += new.count("\n") - old.count("\n")
            old, new = region
            content = content.replace(old, new, 1)
            calls.append(call("edit_file", path=path, old_text=old, new_text=new))
        if f["old"] != path:
            # A rename: the new file whole, the old one removed.
            calls = [call("write_file", path=path, content=content),
                     call("run_command", command="rm -f -- '%s'" % f["old"].replace("'", "'\\''"))]
            final[f["old"]] = None
        steps.append((path, calls))
        final[path] = content
    return steps, final


def apply_patch(patch_text, repo_dir):
    _, final = patch_plan(patch_text, repo_dir)
    for path, text in final.items():
        p = os.path.join(repo_dir, path)
        if text is None:
            if os.path.lexists(p):
                os.unlink(p)
            continue
        os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(text)


# ---------------------------------------------------------------- replies


def call(name, **args):
    return {"name": name, "arguments": args}


def reply(content=None, calls=None, **extra):
    r = {"content": content, "tool_calls": calls or []}
    r.update(extra)
    return r


def passed(results):
    """Whether a run_tests or finish result says the tests passed."""
    text = "\n".join(results)
    return "[exit status 0;" in text or "The tests pass." in text


def failed_call(results):
    """Whether a tool's result reads as a refusal."""
    text = "\n".join(results)
    return any(w in text for w in ("not found", "was not found", "occurs ", "error", "Error", "refused", "must "))


def drift(text):
    """Whitespace as a model gets it wrong: tabs and spaces swapped at the
    start of lines, trailing blanks and carriage returns dropped."""
    out = []
    for line in text.split("\n"):
        line = line.rstrip(" \t\r")
        body = line.lstrip(" \t")
        lead = line[:len(line) - len(body)]
        if "\t" in lead:
            lead = lead.replace("\t", "    ")
        elif lead:
            lead = "\t" * max(1, len(lead) // 4)
        out.append(lead + body)
    return "\n".join(out)


def plan_text(task):
    files = ", ".join(task["files"]) or "none"
    return ("Plan:\n1. Read what the goal names.\n2. Change %s.\n3. Run the tests, then finish.\n"
            "Risks: none seen." % files)


def summary_text(task):
    if not task.get("solvable", True):
        return "This cannot be done: %s" % task.get("reason", "the goal contradicts itself.")
    return "Applied the reference fix (%s); the tests pass." % ", ".join(task["files"])


def finish_call(task):
    """finish, or for a task that cannot be done, giving up (cannot_complete)."""
    if not task.get("solvable", True):
        return call("finish", summary=summary_text(task), cannot_complete=True)
    return call("finish", summary=summary_text(task))


def agent_oracle(task, text_calls=False, cut_first=False):
    yield reply(plan_text(task))
    steps, _ = task["plan"]()
    if cut_first and steps:
        path, calls = steps[0]
        args = json.dumps(calls[0]["arguments"])
        yield reply("Changing %s." % path, [{"name": calls[0]["name"], "arguments": args[:max(8, len(args) // 2)]}],
                    finish_reason="length")
    if not task.get("solvable", True):
        yield reply("Checking what the tests ask for.", [call("run_tests")])
        while True:
            yield reply(None, [finish_call(task)])
    for path, calls in steps:
        r = reply("Changing %s." % path, calls)
        if text_calls:
            r = as_text(r)
        yield r
    yield as_text(reply(None, [call("run_tests")])) if text_calls else reply(None, [call("run_tests")])
    while True:
        r = reply(None, [finish_call(task)])
        yield as_text(r) if text_calls else r


def as_text(r):
    blocks = "\n".join("<tool_call>\n%s\n</tool_call>" % json.dumps({"name": c["name"], "arguments": c["arguments"]})
                       for c in r["tool_calls"])
    return {"content": ((r["content"] + "\n\n") if r["content"] else "") + blocks, "tool_calls": []}


def agent_null(task):
    yield reply("Plan: nothing to change.")
    while True:
        yield reply(None, [call("finish", summary="Nothing was changed.")])


def agent_whitespace(task):
    yield reply(plan_text(task))
    steps, final = task["plan"]()
    if not task.get("solvable", True) or not steps:
        yield from agent_finish_only(task)
        return
    path, calls = steps[0]
    first = next((c for c in calls if c["name"] == "edit_file"), None)
    rest = steps[1:]
    if first is None:
        rest = steps
    else:
        a = first["arguments"]
        drifted = call("edit_file", path=path, old_text=drift(a["old_text"]), new_text=drift(a["new_text"]))
        results = yield reply("Changing %s." % path, [drifted])
        if failed_call(results):
            yield reply("The edit did not apply; the exact text this time.", calls)
        else:
            others = [c for c in calls if c is not first]
            yield reply("Checking the edit.", [call("read_file", path=path)] + others)
    for p, c in rest:
        yield reply("Changing %s." % p, c)
    results = yield reply(None, [call("run_tests")])
    if not passed(results):
        writes = [call("write_file", path=p, content=t) for p, t in final.items() if t is not None]
        yield reply("The tests fail: writing the files whole.", writes)
        yield reply(None, [call("run_tests")])
    while True:
        yield reply(None, [finish_call(task)])


def agent_wrong_first(task):
    yield reply(plan_text(task))
    steps, _ = task["plan"]()
    if not task.get("solvable", True) or not steps:
        yield from agent_finish_only(task)
        return
    path, calls = steps[0]
    first = next((c for c in calls if c["name"] == "edit_file"), None)
    rest = steps[1:]
    if first is None:
        rest = steps
    else:
        a = first["arguments"]
        old, new = a["old_text"], a["new_text"]
        # The new lines added after the old ones, which stay: both versions.
        wrong = old + new if old.endswith("\n") or not old else old + "\n" + new
        yield reply("A first try at %s." % path, [call("edit_file", path=path, old_text=old, new_text=wrong)])
        yield reply(None, [call("run_tests")])
        fix = [call("edit_file", path=path, old_text=wrong, new_text=new)] + [c for c in calls if c is not first]
        yield reply("That was wrong; the right change to %s." % path, fix)
    for p, c in rest:
        yield reply("Changing %s." % p, c)
    yield reply(None, [call("run_tests")])
    while True:
        yield reply(None, [finish_call(task)])


def agent_finish_only(task):
    yield reply(None, [call("run_tests")])
    while True:
        yield reply(None, [finish_call(task)])


def trivial_test(path):
    if path.endswith(".py"):
        return "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n\n\n" \
               "def test_ok():\n    pass\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n"
    if path.endswith((".js", ".mjs", ".cjs")):
        return "const test = require('node:test');\ntest('ok', () => {});\n"
    if path.endswith(".c"):
        return "#include <stdio.h>\nint main(void) { printf(\"1..1\\nok 1 - ok\\n\"); return 0; }\n"
    return "#!/bin/sh\necho '1..1'\necho 'ok 1 - ok'\nexit 0\n"


def agent_cheat(task, delete):
    yield reply("Plan: make the tests pass by changing the tests.")
    tests = task["hidden_files"]
    if delete:
        cmd = "rm -f -- " + " ".join("'%s'" % t.replace("'", "'\\''") for t in tests)
        yield reply("Removing the tests.", [call("run_command", command=cmd)])
    else:
        yield reply("Weakening the tests.", [call("write_file", path=t, content=trivial_test(t)) for t in tests])
    while True:
        yield reply(None, [call("finish", summary="The tests were changed until they pass.")])


AGENTS = {
    "oracle": agent_oracle,
    "null": agent_null,
    "oracle-whitespace": agent_whitespace,
    "oracle-wrong-first": agent_wrong_first,
    "oracle-text-calls": lambda t: agent_oracle(t, text_calls=True),
    "oracle-cut-off": lambda t: agent_oracle(t, cut_first=True),
    "cheat-weaken-tests": lambda t: agent_cheat(t, delete=False),
    "cheat-delete-tests": lambda t: agent_cheat(t, delete=True),
}


# ---------------------------------------------------------------- the corpus


def load_corpus(root):
    """{goal: task} for every task directory of the corpus."""
    tasks = {}
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        tj = os.path.join(d, "task.json")
        if not os.path.isfile(tj):
            continue
        with open(tj, encoding="utf-8") as f:
            t = json.load(f)
        t["name"] = name
        t.setdefault("files", [])
        hidden = os.path.join(d, "hidden")
        t["hidden_files"] = sorted(os.path.relpath(os.path.join(dp, fn), hidden)
                                   for dp, _, fns in os.walk(hidden) for fn in fns) if os.path.isdir(hidden) else []
        patch = os.path.join(d, "oracle.patch")
        text = read_text(patch) if os.path.isfile(patch) else ""
        repo = os.path.join(d, "repo")
        t["plan"] = (lambda text=text, repo=repo: patch_plan(text, repo) if text.strip() else ([], {}))
        tasks[t["goal"].strip()] = t
    return tasks


def goal_of(messages):
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str):
            c = m["content"]
            i = c.find("# Goal\n")
            if i >= 0:
                rest = c[i + len("# Goal\n"):]
                j = rest.find("\n\n# Acceptance criteria")
                return (rest[:j] if j >= 0 else rest).strip()
    return None


def message_text(m):
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def next_reply(agent, task, messages):
    """Replays the agent through the steps the conversation holds."""
    steps, results = 0, []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") == "system":
            continue
        if m.get("role") == "assistant":
            results.append([])
            steps += 1
        elif results:
            results[-1].append(message_text(m))
    gen = AGENTS[agent](task)
    r = next(gen)
    for k in range(steps):
        r = gen.send(results[k])
    return r


# ---------------------------------------------------------------- the server

state = {"tasks": {}, "agent": "oracle", "log": None}
lock = threading.Lock()


def message_of(r):
    msg = {"role": "assistant", "content": r.get("content")}
    calls = []
    for i, tc in enumerate(r.get("tool_calls") or []):
        args = tc["arguments"]
        calls.append({"id": "call_%d" % i, "type": "function",
                      "function": {"name": tc["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}})
    if calls:
        msg["tool_calls"] = calls
    return msg


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, ctype="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.split("?")[0].endswith("/models"):
            self.send(200, json.dumps({"object": "list", "data": [{"id": "agentfab-eval", "object": "model"}]}))
        else:
            self.send(404, json.dumps({"error": {"message": "not found"}}))

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length).decode("utf-8", "replace")
        if not self.path.endswith("/chat/completions"):
            self.send(404, json.dumps({"error": {"message": "no such endpoint"}}))
            return
        try:
            body = json.loads(raw)
            messages = body.get("messages") or []
        except (ValueError, AttributeError):
            self.send(400, json.dumps({"error": {"message": "not JSON"}}))
            return
        tools = body.get("tools") or []
        if any((t.get("function") or {}).get("name") == "review_verdict" for t in tools if isinstance(t, dict)):
            r = {"content": "No findings.", "tool_calls": []}
        else:
            goal = goal_of(messages)
            task = state["tasks"].get(goal or "")
            if task is None:
                r = {"content": "No task of the corpus has this goal.", "tool_calls": []}
            else:
                try:
                    r = next_reply(state["agent"], task, messages)
                except Exception as e:   # a broken task: said, not a crash of the server
                    r = {"content": "The built-in agent failed on task %s: %s" % (task["name"], e), "tool_calls": []}
        msg = message_of(r)
        finish = r.get("finish_reason") or ("tool_calls" if msg.get("tool_calls") else "stop")
        prompt = len(raw) // 4
        completion = max(1, len(json.dumps(msg)) // 4)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        if state["log"]:
            with lock, open(state["log"], "a", encoding="utf-8") as f:
                f.write(json.dumps({"t": time.time(), "goal": goal_of(messages), "reply": msg}) + "\n")
        model = body.get("model", "agentfab-eval")
        if not body.get("stream"):
            self.send(200, json.dumps({"id": "chatcmpl-eval", "object": "chat.completion", "created": int(time.time()),
                                       "model": model, "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                       "usage": usage}))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        base = {"id": "chatcmpl-eval", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        delta = dict(msg)
        if "tool_calls" in delta:
            delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(delta["tool_calls"])]
        events = [dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
                  dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
                  dict(base, choices=[], usage=usage)]
        for ev in events:
            self.wfile.write(("data: " + json.dumps(ev) + "\n\n").encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description="agentfab eval's built-in agents")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--corpus", required=True)
    s.add_argument("--agent", required=True, choices=sorted(AGENTS))
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--log")
    a = sub.add_parser("apply")
    a.add_argument("patch")
    a.add_argument("dir")
    sub.add_parser("agents")
    args = ap.parse_args()

    if args.cmd == "agents":
        print("\n".join(sorted(AGENTS)))
        return 0
    if args.cmd == "apply":
        try:
            apply_patch(read_text(args.patch), args.dir)
        except (PatchError, OSError) as e:
            print("%s: %s" % (args.patch, e), file=sys.stderr)
            return 1
        return 0

    state["tasks"] = load_corpus(args.corpus)
    state["agent"] = args.agent
    state["log"] = args.log
    try:
        srv = Server(("127.0.0.1", args.port), Handler)
    except OSError as e:
        print("Cannot bind 127.0.0.1:%d: %s" % (args.port, e.strerror), file=sys.stderr)
        return 1
    print("ready %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
