# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Planning may look (sourced by agent.sh, which boots the harness and
# provides model, submit, wait_state, task_prop, ok and fail): before its
# plan the model may call read_file, list_files and search, which run and
# answer without counting as a step; anything else is refused until the
# plan is written.

t_plan_looks() {
        echo "=== planning may look: read-only tools before the plan"
        cat > "$WORK/plan.json" <<'JSON'
[
 {"reply": {"content": null, "tool_calls": [
   {"name": "read_file", "arguments": {"path": "calc.py"}},
   {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a * b"}}]}},
 {"reply": {"content": "Plan: add() subtracts (calc.py line 2); make it add, run the tests, finish."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}}
]
JSON
        model "$WORK/plan.json" --by-step || { fail "model server"; return; }
        make_repo planrepo
        local id out
        id=$(submit planrepo) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "a model that looks before its plan succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Step)" = 3 ] &&
                ok "looking is not a step (3 steps: the fix, finish, finish after the review of the diff)" ||
                fail "steps: $(task_prop "$id" Step)"
        [[ $(task_prop "$id" Plan) == "Plan: add() subtracts"* ]] && ok "the plan is the reply after the look" ||
                fail "plan: $(task_prop "$id" Plan)"
        out=$(python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
reqs = [json.loads(l).get("body") or {} for l in open(sys.argv[1])]
first = reqs[0]
names = sorted(t["function"]["name"] for t in first.get("tools", []))
print("first-tools:" + ",".join(names))
second = reqs[1]
tool_msgs = [m for m in second.get("messages", []) if m.get("role") == "tool"]
print("read:" + str(any("return a - b" in (m.get("content") or "") for m in tool_msgs)))
print("refused:" + str(any("before the plan" in (m.get("content") or "") for m in tool_msgs)))
PY
)
        grep -qx 'first-tools:list_files,read_file,search' <<<"$out" && ok "the plan's request offers the read-only tools only" ||
                fail "tools offered: $out"
        grep -qx 'read:True' <<<"$out" && ok "read_file answered before the plan" || fail "no read before the plan: $out"
        grep -qx 'refused:True' <<<"$out" && ok "edit_file before the plan is refused, saying why" || fail "edit not refused: $out"
        [ "$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:calc.py" | grep -c 'a \* b')" = 0 ] &&
                ok "what was refused changed nothing" || fail "the refused edit landed"
}
