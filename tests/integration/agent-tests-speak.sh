# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Tests that speak, and a model that knows when to stop (sourced by
# agent.sh, which boots the harness and provides model, submit, wait_state,
# task_prop, ok and fail): a repository whose suite is red at the start for
# a reason of its own, where the agent fixes the test the task names and
# finish delivers; a model that gives up, which stops the task for a person
# who amends the requirement and lets it go on; and a model that repeats
# one call, warned at the third time and stopped by the stuck breaker at
# the fifth, told on the way that its step budget runs out.

# ts_repo NAME: calc.py with add() subtracting, its tests in test_calc.py,
# and test_other.py, whose test fails for a reason no change can mend. The
# fixes below change calc.py's size: a scripted model edits it within the
# second its tests were first run, and Python would take its cached
# bytecode, which it checks by the source's size and mtime in seconds.
ts_repo() {
        hx_as alice bash -c "set -e; cd ~ && rm -rf $1 && mkdir $1 && cd $1 && git init -q &&
                printf 'def add(a, b):\n    return a - b\n' > calc.py &&
                printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n' > test_calc.py &&
                printf 'import unittest\n\nclass O(unittest.TestCase):\n    def test_net(self):\n        self.fail(\"needs the network: example.org is unreachable\")\n' > test_other.py &&
                git add . && git -c user.name=alice -c user.email=alice@example.com commit -q -m 'calc with a bug' &&
                chmod -R a+rX ~/$1"
}

# ts_requests PYTHON: runs the Python check over the requests the model
# server got (reqs: their bodies, in order; tools(req): the tool messages).
ts_requests() {
        python3 - "$WORK/requests.jsonl" <<PY
import json, sys
reqs = [json.loads(l)["body"] for l in open(sys.argv[1])]
def tools(req):
    return [m.get("content") or "" for m in req["messages"] if m.get("role") == "tool"]
def text(req):
    return json.dumps(req["messages"])
$1
PY
}

t_tests_speak_unrelated() {
        echo "=== red at the start for another reason: the task's test fixed, finish accepted and delivered"
        cat > "$WORK/speak.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add(); test_other fails at the start and is not mine."}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "too early"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return (a + b)"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds; test_other fails as it did, for want of the network"}}]}}
]
EOF
        model "$WORK/speak.json" --by-step || { fail "model server"; return; }
        ts_repo speak
        local id log
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/speak --goal "Make add() add" \
                --acceptance "test_calc passes" --test "python3 -m unittest -v" 2>&1) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds though test_other fails"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi

        ts_requests '
system = reqs[0]["messages"][0]["content"]
assert "# Tests at the start" in system, "no baseline section"
assert "Failing then: test_calc.T.test_add, test_other.O.test_net." in system, system
assert "name test_calc.T.test_add: finish needs these to pass" in system, system
' && ok "the first prompt names what failed at the start, and which test is the task's" ||
                fail "the first prompt: $(head -c 3000 "$WORK/requests.jsonl")"

        ts_requests '
results = [t for r in reqs for t in tools(r)]
refused = [t for t in results if "finish refused" in t]
assert refused, "finish was never refused"
assert refused[0].startswith("Tests: exit status 1; 1 passed, 2 failed (unittest). Against the start: still failing (failed at the start too): test_calc.T.test_add, test_other.O.test_net."), refused[0]
assert "the tests the goal and acceptance criteria name still fail: test_calc.T.test_add" in refused[0], refused[0]
assert "AssertionError: -1 != 5" in refused[0], "the failure is not shown"
' && ok "finish before the fix: refused, naming the task's test, with its failure" ||
                fail "finish before the fix: $(grep -o 'finish refused[^"]*' "$WORK/requests.jsonl" | head -2)"

        ts_requests '
results = [t for r in reqs for t in tools(r)]
run = [t for t in results if t.startswith("Tests:") and "finish" not in t.split("\n")[0] and "fixed:" in t]
assert run, "no run_tests result with a fix"
first = run[0].split("\n")[0]
assert first == "Tests: exit status 1; 2 passed, 1 failed (unittest). Against the start: fixed: test_calc.T.test_add; still failing (failed at the start too): test_other.O.test_net.", first
assert "finish would accept this" in run[0], run[0]
assert "needs the network: example.org is unreachable" in run[0], "the failure is not shown"
' && ok "run_tests: one line with exit status, counts, fixed and still failing by name" ||
                fail "run_tests result: $(grep -o 'Tests: exit status 1; 2 passed[^"]*' "$WORK/requests.jsonl" | head -1)"

        # The last word of the conversation, which no request carries.
        hx cat "/var/lib/agentfab/tasks/$id/conversation.jsonl" | python3 -c '
import json, sys
last = [json.loads(l) for l in sys.stdin][-1]
assert last["role"] == "tool", last
assert "finish accepted: nothing fails that passed before you started" in last["content"], last["content"]
assert "not the task'"'"'s: test_other.O.test_net" in last["content"], last["content"]
' && ok "finish accepted, saying which failure was left and why that is allowed" || fail "no accepted finish in the conversation"

        log=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "agentfab/$id")
        [[ $log == "Verified: the task's tests pass, others fail as at the start"* &&
           $log == *"Not all of them pass: nothing fails that passed before you started"* ]] &&
                ok "the delivered tip says the tree is red as it was, and why it was delivered" ||
                fail "delivered tip: $log"
}

t_tests_speak_give_up() {
        echo "=== a model that gives up: a person reads why, amends the requirement, lets it go on"
        cat > "$WORK/giveup.json" <<'EOF'
[
 {"reply": {"content": "Plan: the acceptance criteria name no test, and test_other cannot pass here."}},
 {"reply": {"content": "Give up", "tool_calls": [{"name": "finish", "arguments": {"summary": "test_other.O.test_net needs the network,\nwhich the sandbox does not have; no change in the workspace can make it pass.", "cannot_complete": true}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return (a + b)"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds, as amended"}}]}}
]
EOF
        model "$WORK/giveup.json" --by-step || { fail "model server"; return; }
        ts_repo giveup
        local id reason
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/giveup --goal "Make add() add" \
                --acceptance "the tests pass" --test "python3 -m unittest -v" 2>&1) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "giving up stops the task for a person"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = gave-up ] && ok "Breaker is gave-up" || fail "breaker $(task_prop "$id" Breaker)"
        reason=$(task_prop "$id" Reason)
        [ "$reason" = "the agent gave up: test_other.O.test_net needs the network, which the sandbox does not have; no change in the workspace can make it pass." ] &&
                ok "Reason is the model's own, on one line" || fail "reason: $reason"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=721e187c39954be5bc87afe6ce82154c |
                grep -q '"AGENTFAB_BREAKER":"gave-up"' && ok "journaled as a breaker" || fail "no gave-up breaker entry"
        ts_requests '
system = reqs[0]["messages"][0]["content"]
assert "name none of them, so finish needs all of them to pass" in system, system
assert "cannot_complete" in system, system
' && ok "the first prompt said that all failures were the task's, and how to give up" || fail "first prompt"

        hx "${CTL[@]}" amend "$id" --acceptance "test_calc passes" >/dev/null 2>&1 &&
                ok "root amends the acceptance criteria" || fail "amend"
        hx "${CTL[@]}" approve "$id" --comment "go on with the amended criteria" >/dev/null 2>&1 && ok "root lets it go on" ||
                fail "approve"
        if wait_state "$id" succeeded; then ok "the model goes on and its finish is accepted under the amended criteria"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        ts_requests '
last = text(reqs[-1])
assert "read why you gave up" in last and "go on with the amended criteria" in last, "no word of the decision"
assert "amended the requirement" in last, "no word of the amendment"
' && ok "the model heard the amendment and the decision" || fail "the model was not told"
}

t_tests_speak_stuck() {
        echo "=== a model that repeats a call: warned at the third time, stuck at the fifth; told of its budget"
        python3 - "$WORK/stuck-call.json" <<'PY'
import json, sys
call = {"reply": {"content": None, "tool_calls": [{"name": "run_command", "arguments": {"command": "cat calc.py"}}]}}
json.dump([{"reply": {"content": "Plan: read calc.py until it makes sense."}}] + [call] * 7, open(sys.argv[1], "w"))
PY
        model "$WORK/stuck-call.json" --by-step || { fail "model server"; return; }
        make_repo stuckcall
        local id reason
        id=$(submit stuckcall --limit max_steps=5) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "the repeated call stops the task"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = stuck ] && ok "Breaker is stuck" || fail "breaker $(task_prop "$id" Breaker)"
        reason=$(task_prop "$id" Reason)
        [[ $reason == "the model made the same call with the same result 5 times: run_command "*"cat calc.py"* ]] &&
                ok "Reason names the call and how often" || fail "reason: $reason"
        [ "$(task_prop "$id" Step)" = 5 ] && ok "stopped at the end of step 5" || fail "step $(task_prop "$id" Step)"
        ts_requests '
n = [sum("warning: you made this same call with the same result" in t for t in tools(r)) for r in reqs]
first = next(i for i, k in enumerate(n) if k > 0)
assert "with the same result 3 times" in text(reqs[first]), "the warning is not at the third time"
assert all(k == 0 for k in n[:first]) and first == 4, n
' && ok "the model was warned after the third same call (requests.jsonl)" || fail "no warning in the requests"
        ts_requests '
told = [i for i, r in enumerate(reqs) if "80 % or more of a budget of this task is spent: 1 of 5 steps left." in text(r)]
assert told and told[0] == 5, told
assert sum(text(r).count("80 % or more of a budget") for r in reqs[-1:]) == 1, "told more than once"
' && ok "at 80 % of the step budget the model was told what is left, once" || fail "no budget note in the requests"
        hx "${CTL[@]}" cancel "$id" >/dev/null 2>&1 && wait_state "$id" cancelled && ok "cancelled" || fail "cancel"
}
