# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Edits that land (sourced by agent.sh, which boots the harness and provides
# model, make_repo, submit, wait_state, task_prop, ok and fail): a model's
# edit_file whose old_text carries read_file's line prefixes and a drifted
# indentation and trailing spaces changes the file in that one step, in the
# file's own indentation; an apply_patch that does not apply changes
# nothing and says where, and the one after it changes two files and adds a
# third in one step's commit, each path journaled.

# ed_script FILE PYTHON-LIST: the scripted replies, written by python so
# that patches read as patches here.
ed_script() {
        python3 - "$1" "$2" <<'PY'
import json, sys
json.dump(eval(sys.argv[2]), open(sys.argv[1], "w"))
PY
}

# ed_tool_said TEXT...: some tool answer the model got holds every TEXT.
ed_tool_said() {
        python3 - "$WORK/requests.jsonl" "$@" <<'PY'
import json, sys
wanted = sys.argv[2:]
for line in open(sys.argv[1]):
    body = json.loads(line).get("body") or {}
    for m in body.get("messages", []):
        if m.get("role") == "tool" and all(w in (m.get("content") or "") for w in wanted):
            sys.exit(0)
sys.exit(1)
PY
}

# ed_step_files ID STEP: the files the commit of that step changes, on one line.
ed_step_files() {
        local git=(git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git") commit
        commit=$(hx "${git[@]}" log --format=%H --grep="^Agentfab-Step: $2\$" "agentfab/$1" | head -1)
        [ -n "$commit" ] || return 1
        hx "${git[@]}" diff-tree --no-commit-id --name-only -r "$commit" | sort | tr '\n' ' '
}

# ed_journaled ID TOOL: "STEP PATH" of each file-change entry of that tool.
ed_journaled() {
        hx journalctl -q -o json AGENTFAB_TASK="$1" AGENTFAB_EVENT=file-change AGENTFAB_TOOL="$2" |
                python3 -c 'import json, sys; print(" ".join(sorted(json.loads(l)["AGENTFAB_STEP"] + ":" + json.loads(l)["AGENTFAB_PATH"] for l in sys.stdin)))'
}

t_edit_drift() {
        echo "=== edit_file with read_file's prefixes, a drifted indentation and trailing spaces lands"
        ed_script "$WORK/drift.json" '[
 {"reply": {"content": "Plan: read calc.py, make add() add, run the tests, finish."}},
 {"reply": {"content": None, "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py",
   "old_text": "   1| def add(a, b):\n   2|   return a - b  ", "new_text": "   1| def add(a, b):\n   2|   return a + b"}}]}},
 {"reply": {"content": None, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}},
]' || { fail "script"; return; }
        model "$WORK/drift.json" --by-step || { fail "model server"; return; }
        make_repo drift
        local id content
        id=$(submit drift) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        content=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:calc.py" | od -c | head -5)
        [ "$content" = "$(printf 'def add(a, b):\n    return a + b\n' | od -c | head -5)" ] &&
                ok "calc.py holds the fix in the file's own four-space indentation" || fail "calc.py: $content"
        ed_tool_said "edited 'calc.py' (matched ignoring indentation" "read_file line numbers" "   2|     return a + b" &&
                ok "the model was told how it matched, and shown the changed lines" ||
                fail "no such answer to the edit in the requests"
        [ "$(ed_step_files "$id" 2)" = "calc.py " ] && ok "the edit's step (2) commits calc.py" ||
                fail "step 2 changes: '$(ed_step_files "$id" 2)'"
        [ "$(ed_journaled "$id" edit_file)" = "2:calc.py" ] && ok "the journal has the edit of step 2" ||
                fail "file-change entries: '$(ed_journaled "$id" edit_file)'"
}

t_patch_two_files() {
        echo "=== apply_patch: one that does not apply changes nothing; the next changes two files in one step"
        ed_script "$WORK/patch.json" '[
 {"reply": {"content": "Plan: fix add() and add a test in one patch, run the tests, finish."}},
 {"reply": {"content": "Patch", "tool_calls": [{"name": "apply_patch", "arguments": {"patch":
   "*** Begin Patch\n"
   "*** Update File: calc.py\n"
   "@@\n"
   " def add(a, b):\n"
   "-    return a - b\n"
   "+    return a + b\n"
   "*** Update File: test_calc.py\n"
   "@@\n"
   "         self.assertEqual(add(1, 1), 2)\n"
   "+        self.assertEqual(add(2, 2), 4)\n"
   "*** End Patch\n"}}]}},
 {"reply": {"content": "Patch again", "tool_calls": [{"name": "apply_patch", "arguments": {"patch":
   "*** Begin Patch\n"
   "*** Update File: calc.py\n"
   "@@\n"
   " def add(a, b):  \n"
   "-    return a - b\n"
   "+    return a + b\n"
   "*** Update File: test_calc.py\n"
   "@@ class T(unittest.TestCase):\n"
   "     def test_zero(self):\n"
   "         self.assertEqual(add(0, 0), 0)\n"
   "+\n"
   "+    def test_negative(self):\n"
   "+        self.assertEqual(add(-2, 3), 1)\n"
   "*** Add File: NEWS\n"
   "+add() adds.\n"
   "*** End Patch\n"}}]}},
 {"reply": {"content": None, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds; a test for negatives."}}]}},
]' || { fail "script"; return; }
        model "$WORK/patch.json" --by-step || { fail "model server"; return; }
        make_repo patch
        local id git
        id=$(submit patch) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        git=(git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git")

        ed_tool_said "apply_patch: nothing was changed" "'test_calc.py', hunk 1 (patch line 8)" \
                "where yours is '        self.assertEqual(add(1, 1), 2)'" &&
                ok "the patch that does not apply is refused, naming the hunk and the nearest lines" ||
                fail "no refusal of the first patch in the requests"
        ! hx "${git[@]}" log --format=%B "agentfab/$id" | grep -q '^Agentfab-Step: 1$' &&
                ok "and its step changed nothing: no commit for step 1" || fail "step 1 committed something"
        [ "$(ed_step_files "$id" 2)" = "NEWS calc.py test_calc.py " ] &&
                ok "step 2's one commit changes calc.py and test_calc.py and adds NEWS" ||
                fail "step 2 changes: '$(ed_step_files "$id" 2)'"
        hx "${git[@]}" show "agentfab/$id:calc.py" | grep -qx '    return a + b' &&
                hx "${git[@]}" show "agentfab/$id:test_calc.py" | grep -qx '        self.assertEqual(add(-2, 3), 1)' &&
                ok "the branch has both changes" || fail "the branch lacks a change"
        ed_tool_said "applied the Codex patch to 3 files" "updated 'calc.py': hunk 1 at line 1 (trailing whitespace)" \
                "added 'NEWS' (1 line)" && ok "the model was told what matched how" || fail "no answer to the patch"
        [ "$(ed_journaled "$id" apply_patch)" = "2:NEWS 2:calc.py 2:test_calc.py" ] &&
                ok "the journal has a file-change entry for each path" ||
                fail "file-change entries: '$(ed_journaled "$id" apply_patch)'"
}
