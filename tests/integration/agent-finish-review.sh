# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The model reviews its whole change before its finish counts (sourced by
# agent.sh, which boots the harness and provides model, make_repo, submit,
# wait_state, task_prop, ok and fail): the first finish whose tests pass is
# answered with the diff against the base; a change made after that review
# shows the new diff at the next finish; a finish on the tip it was shown
# is accepted. The model server answers the reviews from the script here
# (--review-scripted).

# fr_reviews: the diff reviews of the last request, one JSON string a line.
fr_reviews() {
        python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
last = None
for line in open(sys.argv[1]):
    body = json.loads(line).get("body") or {}
    if body.get("messages"):
        last = body["messages"]
for m in last or []:
    c = m.get("content")
    if m.get("role") == "user" and isinstance(c, str) and c.startswith("Before your work is delivered, review"):
        print(json.dumps(c))
PY
}

t_finish_review() {
        echo "=== finish first shows the whole diff to review; a change after it shows it again; then finish is accepted"
        cat > "$WORK/review.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add(), finish, review."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}},
 {"reply": {"content": "The review shows no note; adding one", "tool_calls": [{"name": "write_file", "arguments": {"path": "NEWS", "content": "add() adds.\n"}}, {"name": "finish", "arguments": {"summary": "add() adds; NEWS says so."}}]}},
 {"reply": {"content": "Reviewed: it is right", "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds; NEWS says so."}}]}}
]
EOF
        model "$WORK/review.json" --by-step --review-scripted || { fail "model server"; return; }
        make_repo freview
        local id reviews first second shown tip
        id=$(submit freview) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        reviews=$(fr_reviews)
        [ "$(wc -l <<<"$reviews")" = 2 ] && ok "two reviews were asked for, one per tip" ||
                fail "reviews: $(wc -l <<<"$reviews"): $reviews"
        first=$(head -1 <<<"$reviews")
        second=$(sed -n 2p <<<"$reviews")
        [[ $first == *'diff --git a/calc.py b/calc.py'* && $first == *'\n-    return a - b\n+    return a + b\n'* &&
           $first != *NEWS* && $first == *"call finish again"* ]] &&
                ok "the first finish was answered with the diff against the base" || fail "first review: ${first:0:600}"
        [[ $second == *'diff --git a/NEWS b/NEWS'* && $second == *'+add() adds.'* && $second == *'calc.py'* ]] &&
                ok "the finish after a change showed the whole new diff" || fail "second review: ${second:0:600}"
        hx cat "/var/lib/agentfab/tasks/$id/state.json" > "$WORK/freview-state.json"
        shown=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["progress"].get("diff_shown") or "")' \
                "$WORK/freview-state.json")
        [ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["progress"].get("summary"))' \
                "$WORK/freview-state.json")" = "add() adds; NEWS says so." ] &&
                ok "the accepted finish's summary is the task's" || fail "summary in the state file"
        tip=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%H --grep='^Agentfab-Step: 4$' "agentfab/$id" | head -1)
        [ -n "$shown" ] && hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" merge-base --is-ancestor "$shown" "agentfab/$id" &&
                [ -z "$tip" ] && ok "the state file keeps the tip shown ($shown); the accepting step changed nothing" ||
                fail "diff_shown '$shown', step 4's commit '$tip'"
}
