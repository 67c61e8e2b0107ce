# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A context that never fails the task (sourced by agent.sh, which boots the
# harness and provides model, submit, task_prop, make_repo, hx, ok and
# fail). The scripted model server keeps a model's context of N bytes
# (tests/model-server.py --context-limit) the way real servers do: it
# refuses a longer request with HTTP 400 in their words, or takes only its
# end as Ollama does past num_ctx. A long task whose outputs and written
# files are large succeeds within it: with ContextBudget= right, every
# request is under N; with ContextBudget= four times too large, the
# refusals are journaled and each step is asked again, shorter; a server
# that cuts the prompt is noticed, journaled, and given what it takes; and
# a server whose context cannot hold even the system prompt fails the task
# with a reason that says what to set.

CTX_REFUSED_ID=ea78f8080f6147ed811b4a830a56e998
CTX_TRUNCATED_ID=4090d4161f364dbdbc09921682b2251d

# context_prepare_root ROOT: the profiles (agent.sh calls it while it
# prepares the root). MaxTokens= is small, so that the reply's share of the
# budget leaves room for the conversation.
context_prepare_root() {
        cat > "$1/etc/agentfab/agentfab.conf.d/60-context.conf" <<EOF
# ContextBudget= as the server's context of 48000 bytes (4 bytes a token).
[Model]
Name=ctx-fit
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted-context
ContextBudget=12000
MaxTokens=1000
TimeoutSec=20

# Four times too large.
[Model]
Name=ctx-big
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted-context
ContextBudget=48000
MaxTokens=1000
TimeoutSec=20
EOF
}

# ctx_script FILE STEPS: a plan, STEPS steps that run commands with long
# outputs, write files of ~6 KB and read them back, then the fix, the
# tests and finish.
ctx_script() {
        python3 - "$1" "$2" <<'PY'
import json, sys
out, steps = sys.argv[1], int(sys.argv[2])
entries = [{"reply": {"content": "Plan: produce and read large files, then fix add() and run the tests."}}]
for i in range(steps):
    f = "gen/data%d.txt" % (i % 3)
    kind = i % 3
    if kind == 0:
        call = {"name": "run_command", "arguments": {"command": "seq 1 1400"}}
    elif kind == 1:
        text = "".join("step %d line %d: %s\n" % (i, l, "generated data " * 64) for l in range(6))
        call = {"name": "write_file", "arguments": {"path": f, "content": text}}
    else:
        call = {"name": "read_file", "arguments": {"path": "gen/data%d.txt" % ((i - 1) % 3)}}
    entries.append({"reply": {"content": "Step %d" % (i + 1), "tool_calls": [call]}})
entries.append({"reply": {"content": "Fix add()", "tool_calls": [{"name": "edit_file", "arguments":
                {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}})
entries.append({"reply": {"content": None, "tool_calls": [{"name": "run_tests", "arguments": {}}]}})
entries.append({"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}})
json.dump(entries, open(out, "w"))
PY
}

# ctx_wait ID: until the task is final (at most 400 s): a long task on a
# loaded machine.
ctx_wait() {
        local i s
        for i in $(seq 1600); do
                s=$(task_prop "$1" State)
                case $s in succeeded|failed|cancelled|awaiting-approval|paused) echo "$s"; return 0 ;; esac
                sleep 0.25
        done
        echo "$s"
}

# ctx_requests: the chat requests the server logged, as
# "bytes refused truncated" lines.
ctx_requests() {
        python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("path", "").endswith("/chat/completions"):
        print(r.get("bytes", 0), 1 if r.get("refused") else 0, 1 if r.get("truncated") else 0)
PY
}

t_context_refused() {
        local N=48000 id state reqs n over refused
        echo "=== context: a 60-step task with large outputs within a server's context of $N bytes"
        ctx_script "$WORK/ctx-fit.json" 57
        model "$WORK/ctx-fit.json" --context-limit $N --context-error vllm || { fail "model server"; return; }
        make_repo ctxfit
        id=$(submit ctxfit --model ctx-fit --limit max_steps=80) || { fail "submit: $id"; return; }
        state=$(ctx_wait "$id")
        [ "$state" = succeeded ] && ok "the task succeeded" ||
                { fail "task ended $state: $(task_prop "$id" Reason)"; return; }
        reqs=$(ctx_requests)
        n=$(wc -l <<<"$reqs")
        over=$(awk -v n=$N '$1 > n' <<<"$reqs" | wc -l)
        [ "$n" -ge 60 ] && [ "$over" = 0 ] && ok "all $n requests were under $N bytes (largest $(sort -n <<<"$reqs" | tail -1 | cut -d' ' -f1))" ||
                fail "$over of $n requests over $N bytes"
        python3 - "$WORK/requests.jsonl" <<'PY' && ok "old outputs and written files were shrunk, old steps condensed; the prompt and the goal stayed first" || fail "no compaction seen"
import json, sys
reqs = [json.loads(l)["body"] for l in open(sys.argv[1]) if "completions" in l]
last = reqs[-1]["messages"]
# Shrinking comes before condensing: some request shrank old outputs or
# arguments, whichever the last one still shows.
assert any("elided to fit the context budget" in json.dumps(r["messages"]) for r in reqs), "nothing shrunk"
assert last[0]["role"] == "system" and "Make add() add" in last[0]["content"], "the system prompt is not first"
assert last[1]["role"] == "user" and "plan" in last[1]["content"], "the first user message is not second"
assert last[2]["role"] == "user" and last[2]["content"].startswith("[agentfab]"), "no digest"
assert "gen/data" in last[2]["content"], "the digest names no file"
assert reqs[0]["messages"][0] == last[0], "the system prompt changed"
PY

        echo "=== context: ContextBudget= four times too large, the server refuses (Ollama's words)"
        ctx_script "$WORK/ctx-big.json" 24
        model "$WORK/ctx-big.json" --context-limit $N --context-error ollama || { fail "model server"; return; }
        make_repo ctxbig
        id=$(submit ctxbig --model ctx-big --limit max_steps=40) || { fail "submit: $id"; return; }
        state=$(ctx_wait "$id")
        [ "$state" = succeeded ] && ok "the task succeeded all the same" ||
                { fail "task ended $state: $(task_prop "$id" Reason)"; return; }
        reqs=$(ctx_requests)
        refused=$(awk '$2 == 1' <<<"$reqs" | wc -l)
        over=$(awk -v n=$N '$2 == 0 && $1 > n' <<<"$reqs" | wc -l)
        [ "$refused" -ge 1 ] && [ "$refused" -le 4 ] && [ "$over" = 0 ] &&
                ok "$refused requests refused, every one answered under $N bytes" ||
                fail "$refused refused, $over answered over $N bytes"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=$CTX_REFUSED_ID | python3 -c '
import json, sys
e = [json.loads(l) for l in sys.stdin]
assert e, "no entry"
assert e[0]["AGENTFAB_CONTEXT_BUDGET_BEFORE"] == "48000" and int(e[0]["AGENTFAB_CONTEXT_BUDGET"]) <= 24000, e[0]
assert "input length exceeds the context length" in e[0]["AGENTFAB_ERROR"], e[0]["AGENTFAB_ERROR"]
assert all(int(x["AGENTFAB_REQUEST_BYTES"]) > 40000 for x in e)
' && ok "journal: each refusal, the budget halved at least (from 48000 first) and the server's words" ||
                fail "no context-refused journal entry as expected"
        hx grep -q '"cause":"refused"' "/var/lib/agentfab/tasks/$id/context.jsonl" &&
                ok "context.jsonl records it for a restart" || fail "no refusal in context.jsonl"
}

t_context_truncated() {
        local N=40000 id state reqs truncated tail_over
        echo "=== context: a server that silently drops the front of long prompts (as Ollama past num_ctx)"
        ctx_script "$WORK/ctx-cut.json" 30
        model "$WORK/ctx-cut.json" --context-limit $N --context-truncate || { fail "model server"; return; }
        make_repo ctxcut
        id=$(submit ctxcut --model ctx-big --limit max_steps=50) || { fail "submit: $id"; return; }
        state=$(ctx_wait "$id")
        [ "$state" = succeeded ] && ok "the task succeeded" ||
                { fail "task ended $state: $(task_prop "$id" Reason)"; return; }
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=$CTX_TRUNCATED_ID | python3 -c '
import json, sys
e = [json.loads(l) for l in sys.stdin]
assert len(e) == 1, "%d entries" % len(e)
e = e[0]
assert e["AGENTFAB_PROMPT_TOKENS"] == "10000" and e["AGENTFAB_PROFILE_BUDGET"] == "48000", e
assert e["AGENTFAB_CONTEXT_BUDGET"] == "10000" and int(e["AGENTFAB_ESTIMATED_TOKENS"]) > 16000, e
assert e["PRIORITY"] == "4" and "cut the prompt" in e["MESSAGE"], e["MESSAGE"]
' && ok "journal: the server cut the prompt, with the figures; the budget is now what it took" ||
                fail "no context-truncated journal entry as expected: $(hx journalctl -q -o cat AGENTFAB_TASK="$id" MESSAGE_ID=$CTX_TRUNCATED_ID)"
        reqs=$(ctx_requests)
        truncated=$(awk '$3 == 1' <<<"$reqs" | wc -l)
        tail_over=$(tail -15 <<<"$reqs" | awk -v n=$N '$1 > n' | wc -l)
        [ "$truncated" -le 8 ] && [ "$tail_over" = 0 ] && ok "$truncated prompts cut, none after it was noticed" ||
                fail "$truncated prompts cut, $tail_over of the last 15 over $N bytes"
        hx grep -q '"cause":"truncated"' "/var/lib/agentfab/tasks/$id/context.jsonl" &&
                ok "context.jsonl records it for a restart" || fail "no truncation in context.jsonl"
}

t_context_hopeless() {
        local id state reason
        echo "=== context: a server whose context cannot hold the system prompt and the tools"
        ctx_script "$WORK/ctx-small.json" 3
        model "$WORK/ctx-small.json" --context-limit 3000 --context-error llamacpp || { fail "model server"; return; }
        make_repo ctxsmall
        id=$(submit ctxsmall --model ctx-fit) || { fail "submit: $id"; return; }
        state=$(ctx_wait "$id")
        reason=$(task_prop "$id" Reason)
        [ "$state" = failed ] && [[ $reason == *"longer than the model"*"context"* && $reason == *"ContextBudget="* ]] &&
                ok "the task failed, saying why and what to set: $reason" || fail "task ended $state: $reason"
        [ "$(ctx_requests | awk '$2 == 1' | wc -l)" -le 4 ] && ok "after at most 4 refused requests" ||
                fail "$(ctx_requests | awk '$2 == 1' | wc -l) requests refused"
}

t_context_restart() {
        local N=48000 id i running= reqs
        echo "=== context: a step redone after a SIGKILL sends the same compacted request"
        ctx_script "$WORK/ctx-restart.json" 16
        # Entry 17, after the plan and 16 steps, sleeps: the daemon is
        # killed while it does, with step 17 asked and not acknowledged.
        python3 - "$WORK/ctx-restart.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
e.insert(17, {"reply": {"content": "Slow step", "tool_calls": [{"name": "run_command", "arguments": {"command": "seq 1 1400; sleep 4"}}]}})
json.dump(e, open(sys.argv[1], "w"))
PY
        model "$WORK/ctx-restart.json" --context-limit $N || { fail "model server"; return; }
        make_repo ctxrestart
        id=$(submit ctxrestart --model ctx-fit --limit max_steps=40) || { fail "submit: $id"; return; }
        for i in $(seq 600); do
                hx pgrep -f 'slee[p] 4' >/dev/null && { running=1; break; }
                sleep 0.1
        done
        [ -n "$running" ] || { fail "step 17 never ran: $(task_prop "$id" State) $(task_prop "$id" Reason)"; return; }
        hx systemctl kill -s KILL agentfab.service
        sleep 1
        hx busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks >/dev/null 2>&1
        [ "$(ctx_wait "$id")" = succeeded ] && ok "the task resumed and succeeded" ||
                { fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; }
        python3 - "$WORK/requests.jsonl" <<'PY' && ok "step 17 asked again after the restart: the same request, compacted alike" || fail "the redone step's request differs"
import json, sys
reqs = {r["n"]: r["body"] for r in map(json.loads, open(sys.argv[1])) if r.get("n") is not None}
first, again = reqs[17]["messages"], reqs[18]["messages"]
assert "elided to fit the context budget" in json.dumps(first), "step 17 was not compacted"
assert first == again, "%d and %d messages, first difference at %s" % (len(first), len(again),
        next((i for i, (a, b) in enumerate(zip(first, again)) if a != b), None))
PY
}
