# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The syntax check after an edit (sourced by agent.sh, which boots the
# harness and provides model, make_repo, submit, wait_state, task_prop, ok
# and fail): an edit that breaks Python gets the compiler's error with its
# result and the model mends it in the next step; a checker that the base's
# .agentfab.md names runs in the sandbox, where it can neither write outside
# /workspace nor reach the network, and a hostile file name is never run.

# sy_tool_said TEXT...: some tool answer the model got holds every TEXT.
sy_tool_said() {
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

# sy_tool_answer N: the content of the Nth tool answer (1-based) of the last request.
sy_tool_answer() {
        python3 - "$WORK/requests.jsonl" "$1" <<'PY'
import json, sys
last = None
for line in open(sys.argv[1]):
    body = json.loads(line).get("body") or {}
    if body.get("messages"):
        last = body["messages"]
tools = [m.get("content") or "" for m in last or [] if m.get("role") == "tool"]
n = int(sys.argv[2])
print(tools[n - 1] if len(tools) >= n else "")
PY
}

t_syntax_python() {
        echo "=== an edit that breaks Python gets the compiler's error with its result, and is mended"
        cat > "$WORK/syntax.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add(), run the tests, finish."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return (a + b"}}]}},
 {"reply": {"content": "Close the parenthesis", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return (a + b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}}
]
EOF
        model "$WORK/syntax.json" --by-step || { fail "model server"; return; }
        make_repo syntaxpy
        local id first second commands
        id=$(submit syntaxpy) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        first=$(sy_tool_answer 1)
        second=$(sy_tool_answer 2)
        echo "$first" | sed 's/^/    | /'
        [[ $first == *"edited 'calc.py'"* && $first == *"found errors"* && $first == *"./calc.py (python3 compile):"* &&
           $first == *"SyntaxError"* && $first == *"line 2"* ]] &&
                ok "the breaking edit's answer carries the compiler's error, by file and line" ||
                fail "first edit's answer: $first"
        [[ $second == *"edited 'calc.py'"* && $second != *"syntax check"* ]] &&
                ok "the mending edit's answer has nothing to add" || fail "second edit's answer: $second"
        # The checks are not the task's commands: only the baseline and run_tests and finish's tests count.
        commands=$(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command |
                python3 -c 'import json, sys; print(" ".join(json.loads(l).get("AGENTFAB_TOOL", "?") for l in sys.stdin))')
        [[ $commands == *"syntax-check syntax-check"* ]] && ok "both checks are journaled as syntax-check commands" ||
                fail "command entries: $commands"
        [ -z "$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" ls-tree -r --name-only "agentfab/$id" | grep pycache)" ] &&
                ok "the check left nothing in the change (no __pycache__)" || fail "a __pycache__ was committed"
}

t_syntax_checker_sandboxed() {
        echo "=== the base's .agentfab.md checker runs in the sandbox only; a hostile file name is not run"
        cat > "$WORK/sycheck.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add(), run the tests, finish."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": "A note", "tool_calls": [{"name": "write_file", "arguments": {"path": "$(touch pwned)';touch pwned2;'.py", "content": "x = 1\n"}}]}},
 {"reply": {"content": "Drop it", "tool_calls": [{"name": "run_command", "arguments": {"command": "rm -f -- ./\\$*.py; ls"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}}
]
EOF
        model "$WORK/sycheck.json" --by-step || { fail "model server"; return; }
        make_repo sycheck
        # The checker tries what a hostile repository would: write outside
        # the workspace, reach the model server on the host's loopback.
        cat > "$WORK/agentfab.md" <<EOF
# Project notes

\`\`\`agentfab
syntax-check: *.py sh -c 'echo "checker in \$(pwd) as \$(id -u)"; touch /etc/agentfab-syntax-pwned 2>&1; echo x > /var/lib/agentfab/syntax-pwned 2>&1; python3 -c "import socket; socket.create_connection((\\"127.0.0.1\\", $PORT), 3); print(\\"NETWORK REACHED\\")" 2>&1 | tail -1; echo "file: \$0"; exit 3' {file}
\`\`\`
EOF
        chmod a+r "$WORK/agentfab.md"
        cp "$WORK/agentfab.md" "$HARNESS_ROOT/home/alice/sycheck/.agentfab.md"
        hx_as alice bash -c 'set -e; cd ~/sycheck && git add .agentfab.md &&
                git -c user.name=alice -c user.email=alice@example.com commit -q -m "a checker"'
        local id first second gets
        id=$(submit sycheck) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        first=$(sy_tool_answer 1)
        second=$(sy_tool_answer 2)
        echo "$first" | sed 's/^/    | /'
        [[ $first == *"./calc.py (sh):"* && $first == *"checker in /workspace"* && $first == *"file: ./calc.py"* ]] &&
                ok "the repository's checker ran on ./calc.py in /workspace, and was told" || fail "answer: $first"
        [[ $first =~ (Read-only|Permission denied|No such file) ]] && ! hx test -e /etc/agentfab-syntax-pwned &&
                ! hx test -e /var/lib/agentfab/syntax-pwned &&
                ok "its writes outside the workspace failed, and nothing is there" ||
                fail "a write outside the workspace: $first"
        [[ $first != *"NETWORK REACHED"* ]] && ok "it did not reach the host's loopback" || fail "network: $first"
        [[ $second == *"file: ./\$(touch pwned)';touch pwned2;'.py"* ]] &&
                ok "a hostile file name reaches the checker as one word" || fail "second answer: $second"
        [[ $(sy_tool_answer 3) != *pwned* ]] && ok "and was never run as shell syntax (no pwned files)" ||
                fail "ls: $(sy_tool_answer 3)"
}
