# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Open models that write their tool calls in the text of their replies
# (sourced by agent.sh, which boots the harness and provides model, submit,
# wait_state, task_prop, ledger_log, ok and fail): a task solved by a model
# whose every step writes its call in another family's format (Hermes with
# thinking, Qwen3-Coder, Llama 3.1's <function=>, Mistral, a bare object,
# a fenced block streamed in pieces, Llama 3's python_tag), and the
# conversation sent back carries them as proper tool calls; a model profile
# with ToolCalls=text, whose requests offer no tools but describe them; and
# replies cut at their token limit or without any call, which the model is
# told about and which count up to the malformed-output breaker.

# open_models_prepare_root ROOT: the model profile of the text mode (agent.sh
# calls it while it prepares the harness's root).
open_models_prepare_root() {
        local R=$1
        printf '[Model]\nName=textual\nEndpoint=http://127.0.0.1:%s/v1\nModel=scripted-text\nToolCalls=text\nTimeoutSec=20\nMaxRetries=3\nRetryBaseSec=200ms\n' \
                "$PORT" > "$R/etc/agentfab/agentfab.conf.d/60-open-models.conf"
}

# om_requests PYTHON: runs PYTHON with reqs, the bodies of the logged chat
# requests in order, and prints what it prints (nothing when all is well).
om_requests() {
        python3 - "$WORK/requests.jsonl" "$1" <<'PY'
import json, sys
reqs = [json.loads(l)["body"] for l in open(sys.argv[1]) if l.strip()]
reqs = [b for b in reqs if isinstance(b, dict) and "messages" in b]
def content(m):
    c = m.get("content")
    return c if isinstance(c, str) else ""
exec(sys.argv[2])
PY
}

t_open_models_formats() {
        echo "=== open models: each step's call written in another family's format, none as tool_calls"
        python3 - "$WORK/om-formats.json" <<'PY'
import json, sys
E = lambda name, args, content=None: {"content": content, "tool_calls": [{"name": name, "arguments": args}]}
json.dump([
    {"think": "The tests say add() subtracts.", "reasoning": "a secret chain of thought",
     "reply": {"content": "Plan:\n1. Read calc.py.\n2. Fix add().\n3. Run the tests and finish.\nRisks: none."}},
    {"text_calls": "hermes", "think": "First read the file.", "reply": E("read_file", {"path": "calc.py"}, "Reading calc.py.")},
    {"text_calls": "xml", "reply": E("list_files", {})},
    {"text_calls": "function", "reply": E("edit_file", {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}, "Fix add")},
    {"text_calls": "mistral", "reply": E("run_command", {"command": "python3 -c 'import calc; print(calc.add(2, 3))'"})},
    {"text_calls": "bare", "reply": E("search", {"pattern": "a + b"})},
    {"text_calls": "fenced", "stream": True, "chunk": 5, "reply": E("run_tests", {})},
    {"text_calls": "llama3", "reply": E("finish", {"summary": "add() adds; the tests pass."})},
], open(sys.argv[1], "w"))
PY
        model "$WORK/om-formats.json" --by-step || { fail "model server"; return; }
        make_repo omformats
        local id out
        id=$(submit omformats) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds, every call written as text"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"
                hx journalctl -q -u agentfab.service --no-pager | tail -20
                return
        fi
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:calc.py" | grep -q 'return a + b' &&
                ok "the branch has the fix (edit_file written as <function=edit_file>)" || fail "fix not on the branch"
        ledger_log "$id" | grep -q "Tool calls: edit_file" && ok "the step's commit names the call" ||
                fail "no 'Tool calls: edit_file' in the branch's log"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep -q 'python3 -m unittest' &&
                ok "run_tests (a streamed, fenced JSON block) ran the tests" || fail "the tests never ran"

        out=$(om_requests '
last = max(reqs, key=lambda b: len(b["messages"]))
msgs = last["messages"]
if not last.get("tools"): print("the requests offer no tools")
calls = [m for m in msgs if m.get("role") == "assistant" and m.get("tool_calls")]
names = [c["function"]["name"] for m in calls for c in m["tool_calls"]]
want = ["read_file", "list_files", "edit_file", "run_command", "search", "run_tests", "finish"]
if names != want: print("calls in the conversation:", names)
for i, m in enumerate(msgs):
    if m.get("role") != "assistant": continue
    for bad in ("<tool_call>", "<think>", "[TOOL_CALLS]", "<|python_tag|>", "<function=", "```json", "chain of thought", "First read"):
        if bad in content(m): print("assistant message %d holds %r: %r" % (i, bad, content(m)[:120]))
    if "reasoning_content" in m: print("assistant message %d has reasoning_content" % i)
    ids = [c.get("id") for c in m.get("tool_calls", [])]
    if any(not x or not x.startswith("call_") for x in ids): print("ids:", ids)
    results = [r.get("tool_call_id") for r in msgs[i + 1:i + 1 + len(ids)] if r.get("role") == "tool"]
    if results != ids: print("message %d: calls %s, results %s" % (i, ids, results))
plan = [m for m in msgs if m.get("role") == "assistant"][0]
if not content(plan).startswith("Plan:"): print("the plan as kept:", content(plan)[:80])
if any("Use the tools" in content(m) for m in msgs if m.get("role") == "user"): print("a step was nudged")
')
        [ -z "$out" ] && ok "the conversation sent back: tool_calls with ids, each followed by its result; no call text, thinking or reasoning; no nudge" ||
                fail "conversation: $out"
}

t_open_models_text_mode() {
        echo "=== ToolCalls=text: no tools in the request, their description in the system prompt, the history as text"
        python3 - "$WORK/om-text.json" <<'PY'
import json, sys
json.dump([
    {"reply": {"content": "Plan: read calc.py, fix add(), run the tests, finish."}},
    {"text_calls": "hermes", "reply": {"content": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}},
    {"text_calls": "hermes", "think": "Subtraction; make it addition.", "stream": True, "chunk": 9,
     "reply": {"content": None, "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
    {"text_calls": "hermes", "reply": {"content": "Test, then finish.", "tool_calls": [
        {"name": "run_tests", "arguments": {}}, {"name": "finish", "arguments": {"summary": "add() adds."}}]}},
], open(sys.argv[1], "w"))
PY
        model "$WORK/om-text.json" --by-step || { fail "model server"; return; }
        make_repo omtext
        local id out
        id=$(submit omtext --model textual) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds through a profile with ToolCalls=text"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:calc.py" | grep -q 'return a + b' &&
                ok "the branch has the fix" || fail "fix not on the branch"
        out=$(om_requests '
if len(reqs) < 4: print("only %d requests" % len(reqs))
for n, b in enumerate(reqs):
    if "tools" in b or "tool_choice" in b: print("request %d has tools or tool_choice" % n)
    if b.get("model") != "scripted-text": print("request %d went to model %r" % (n, b.get("model")))
    if any(m.get("role") == "tool" or "tool_calls" in m for m in b["messages"]): print("request %d has tool messages" % n)
steps = [b for b in reqs if any(m.get("role") == "assistant" for m in b["messages"])]
for b in steps:
    sys_ = content(b["messages"][0])
    for want in ("You are agentfab", "<tool_call>{\"name\": \"TOOL\", \"arguments\": {...}}</tool_call>", "## edit_file", "## finish", "\"required\":[\"path\",\"old_text\",\"new_text\"]"):
        if want not in sys_: print("the system prompt lacks %r" % want); break
last = steps[-1]["messages"]
text = "\n".join(content(m) for m in last)
for want in ("<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\":\"calc.py\"}}</tool_call>", "<tool_response name=\"read_file\">", "<tool_response name=\"edit_file\">"):
    if want not in text: print("the history lacks %r" % want)
if "<think>" in text or "Subtraction; make" in text: print("thinking sent back")
roles = [m.get("role") for m in last]
if any(a == b for a, b in zip(roles, roles[1:])): print("roles do not alternate:", roles)
')
        [ -z "$out" ] && ok "no tools in any request; the system prompt gives the schemas and the call format; calls and results as text, roles alternating" ||
                fail "requests: $out"
}

t_open_models_cut_and_nudge() {
        echo "=== replies cut at their token limit or without a call: told what they are, counted up to the breaker"
        # MaxMalformedReplies=5 (the harness's configuration): a cut call,
        # a whole text call and a cut one, prose, an unknown tool, prose:
        # the fifth pauses.
        python3 - "$WORK/om-cut.json" <<'PY'
import json, sys
cut = '{"path": "calc.py", "old_text": "return a - b", "new_text": "return a +'
json.dump([
    {"reply": {"content": "Plan: fix add() in one go."}},
    {"reply": {"content": None, "finish_reason": "length", "usage": {"prompt_tokens": 900, "completion_tokens": 4096},
               "tool_calls": [{"name": "edit_file", "arguments": cut}]}},
    {"text_calls": "hermes", "reply": {"content": "Again.", "finish_reason": "length", "usage": {"prompt_tokens": 990, "completion_tokens": 4096},
                                       "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}},
                                                      {"name": "edit_file", "arguments": cut}]}},
    {"reply": {"content": "I believe add() is fine now."}},
    {"reply": {"content": "<tool_call>{\"name\": \"patch_everything\", \"arguments\": {}}</tool_call>"}},
    {"reply": {"content": "Done, I think."}},
    {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
    {"text_calls": "hermes", "reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}},
], open(sys.argv[1], "w"))
PY
        model "$WORK/om-cut.json" --by-step || { fail "model server"; return; }
        make_repo omcut
        local id reason out
        id=$(submit omcut) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "five replies without a usable call pause the task"; else
                fail "not paused by the breaker: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = malformed-output ] && ok "Breaker is malformed-output" ||
                fail "breaker $(task_prop "$id" Breaker)"
        reason=$(task_prop "$id" Reason)
        [[ $reason == *"5 replies in a row without a usable tool call"* ]] && ok "the reason counts 5" || fail "reason: $reason"
        hx "${CTL[@]}" approve "$id" --comment "go on" >/dev/null 2>&1 || { fail "approve"; return; }
        if wait_state "$id" succeeded; then ok "approved, it goes on and succeeds"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        out=$(om_requests '
last = max(reqs, key=lambda b: len(b["messages"]))["messages"]
tool = [content(m) for m in last if m.get("role") == "tool"]
user = [content(m) for m in last if m.get("role") == "user"][2:]
if not tool or "Your reply was cut at 4096 tokens (MaxTokens=4096): the arguments of edit_file are incomplete" not in tool[0]: print("the cut call was answered:", tool[:1])
if len(tool) < 2 or "1| def add(a, b):" not in tool[1]: print("the whole call before the cut one did not run:", tool[1:2])
if any("not valid JSON" in t for t in tool): print("a cut call was called invalid JSON")
want = ["Your reply was cut at 4096 tokens (MaxTokens=4096): its last tool call was incomplete and did not run; the others did.",
        "Use the tools to work towards the goal",
        "None of the 1 tool calls written in your reply could be read",
        "Use the tools to work towards the goal"]
if len(user) < 4 or any(not u.startswith(w) for u, w in zip(user, want)): print("the nudges:", [u[:60] for u in user])
if not any("several edit_file calls" in t for t in tool + user): print("no advice to write smaller pieces")
')
        [ -z "$out" ] && ok "the cut call and the cut text are told as cut at 4096 tokens, not invalid JSON; replies without a call are nudged" ||
                fail "what the model was told: $out"
}
