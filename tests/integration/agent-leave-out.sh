# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The branch carries the change and nothing else (sourced by agent.sh, which
# boots the harness and provides model, submit, wait_state, task_prop,
# ledger_log, ok and fail): three small repositories without a .gitignore,
# whose test commands build, cache and install into the tree (C with make
# building its test programs, Python with __pycache__ and .pytest_cache,
# JavaScript installing into node_modules/), each deliver a branch whose
# diff against the base is exactly the source change, with what was left
# out named in the summary; and a binary the agent keeps on purpose stops
# the task for a person, and once approved is committed, saying so.

# lo_repo NAME SCRIPT: alice's repository NAME, made by the bash SCRIPT in it.
lo_repo() {
        hx_as alice bash -c "set -e; cd ~ && rm -rf $1 && mkdir $1 && cd $1 && git init -q && $2 &&
                git add . && git -c user.name=alice -c user.email=alice@example.com commit -q -m base && chmod -R a+rX ~/$1"
}

# lo_script FILE EDIT-ARGS-JSON: plan, the fix, the tests, finish.
lo_script() {
        python3 - "$1" "$2" <<'PY'
import json, sys
out, edit = sys.argv[1], json.loads(sys.argv[2])
json.dump([
    {"reply": {"content": "Plan: fix the bug, run the tests, finish."}},
    {"reply": {"content": "Fix the bug", "tool_calls": [{"name": "edit_file", "arguments": edit}]}},
    {"reply": {"content": None, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
    {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed; the tests pass"}}]}},
], open(out, "w"))
PY
}

# lo_changed ID: the files the branch changes against its base, one a line.
lo_changed() {
        hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" diff --name-only refs/agentfab/base "agentfab/$1"
}

# lo_run NAME TEST-COMMAND EDIT-JSON SOURCE LEFT-OUT...: the task, and what its branch and summary say.
lo_run() {
        local name=$1 test=$2 edit=$3 source=$4 id state changed summary; shift 4
        lo_script "$WORK/lo-$name.json" "$edit"
        model "$WORK/lo-$name.json" --by-step || { fail "model server"; return; }
        id=$(hx_as alice "${CTL[@]}" submit --repo "/home/alice/$name" --goal "Fix the bug" \
                --acceptance "the tests pass" --test "$test" 2>&1) || { fail "submit: $id"; return; }
        wait_state "$id" succeeded failed
        state=$(task_prop "$id" State)
        [ "$state" = succeeded ] && ok "$name: the task succeeds" || { fail "$name: task ended $state: $(task_prop "$id" Reason)"; return; }
        changed=$(lo_changed "$id")
        [ "$changed" = "$source" ] && ok "$name: the branch changes exactly $source" ||
                fail "$name: the branch changes: $(tr '\n' ' ' <<<"$changed")"
        summary=$(hx_as alice "${CTL[@]}" summary "$id" 2>&1)
        grep -q '^## Left out of the branch' <<<"$summary" && ok "$name: the summary has what was left out" ||
                fail "$name: no left-out section in the summary"
        local what
        for what in "$@"; do
                grep -qF -- "$what" <<<"$(sed -n '/^## Left out of the branch/,$p' <<<"$summary")" &&
                        ok "$name: the summary names $what" || fail "$name: the summary does not name $what"
        done
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=left-out | grep -q "AGENTFAB_PATHS" &&
                ok "$name: the journal names them" || fail "$name: no left-out journal entry"
        grep -q 'Left out of step' "$WORK/requests.jsonl" && ok "$name: the model was told" ||
                fail "$name: the model never heard what was left out"
}

t_leave_out_c() {
        echo "=== C with make building its test programs in the tree, no .gitignore"
        lo_repo cproj "printf 'static inline int add(int a, int b) { return a - b; }\n' > calc.h &&
                mkdir test && printf '#include \"../calc.h\"\nint main(void) { return add(2, 3) == 5 ? 0 : 1; }\n' > test/test_add.c &&
                printf '#include \"../calc.h\"\nint main(void) { return add(0, 0); }\n' > test/test_zero.c &&
                printf 'test: test/test_add test/test_zero\n\t./test/test_add && ./test/test_zero\ntest/%%: test/%%.c calc.h\n\tcc -o \$@ \$<\n' > Makefile"
        lo_run cproj "make test" '{"path": "calc.h", "old_text": "a - b", "new_text": "a + b"}' calc.h \
                "test/test_add" "test/test_zero"
}

t_leave_out_python() {
        echo "=== Python with __pycache__ and .pytest_cache, no .gitignore"
        lo_repo pyproj "printf 'def add(a, b):\n    return a - b\n' > calc.py &&
                printf 'from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n' > test_calc.py"
        lo_run pyproj "python3 -m pytest -q" \
                '{"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}' calc.py "__pycache__/" ".pytest_cache/"
}

t_leave_out_js() {
        echo "=== JavaScript whose test installs into node_modules/, no .gitignore"
        # The package it installs, as a tarball in the repository: the
        # sandbox has no network.
        hx_as alice bash -c "set -e; rm -rf ~/lp && mkdir ~/lp && cd ~/lp &&
                printf '{\"name\":\"left-pad\",\"version\":\"1.0.0\",\"main\":\"index.js\"}\n' > package.json &&
                echo 'module.exports = (s, n) => String(s).padStart(n);' > index.js && HOME=/tmp npm pack --silent >/dev/null"
        lo_repo jsproj "printf '{\"name\":\"app\",\"version\":\"1.0.0\",\"private\":true}\n' > package.json &&
                mkdir vendor && cp ~/lp/left-pad-1.0.0.tgz vendor/ &&
                printf 'module.exports.add = (a, b) => a - b;\n' > index.js &&
                printf 'const pad = require(\"left-pad\");\nconst { add } = require(\"./index\");\nif (add(2, 3) !== 5 || pad(1, 2) !== \" 1\") process.exit(1);\n' > test.js"
        lo_run jsproj "HOME=/tmp npm install --offline --no-audit --no-fund --no-update-notifier --cache /tmp/npm-cache ./vendor/left-pad-1.0.0.tgz >/dev/null && node test.js" \
                '{"path": "index.js", "old_text": "a - b", "new_text": "a + b"}' index.js "node_modules/" "package-lock.json" \
                "package.json (made by the tests)"
}

t_keep_binary() {
        echo "=== a binary the agent keeps on purpose: the binary-file breaker, approved, committed"
        cat > "$WORK/keep.json" <<'EOF'
[
 {"reply": {"content": "Plan: ship the prebuilt helper the project expects, then finish."}},
 {"reply": {"content": "Add the helper", "tool_calls": [{"name": "run_command", "arguments": {"command": "cp /bin/true helper.bin && echo made"}}]}},
 {"reply": {"content": "Keep the helper", "tool_calls": [{"name": "keep_file", "arguments": {"path": "helper.bin", "reason": "the project runs this prebuilt helper"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "helper kept, add fixed"}}]}}
]
EOF
        model "$WORK/keep.json" --by-step || { fail "model server"; return; }
        make_repo keep
        local id reason commit size
        id=$(submit keep) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "keep_file of a binary stops the task for a person"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = binary-file ] && ok "Breaker is binary-file" || fail "breaker $(task_prop "$id" Breaker)"
        size=$(stat -c %s /bin/true)
        reason=$(task_prop "$id" Reason)
        [[ $reason == *"helper.bin"*"binary, $size bytes"*"prebuilt helper"* ]] && ok "Reason names the path, its size and why" ||
                fail "reason: $reason"
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" cat-file -e "agentfab/$id:helper.bin" 2>/dev/null &&
                ok "the step that keeps it commits it, and waits for the decision" || fail "helper.bin not in the step's commit"
        hx "${CTL[@]}" approve "$id" --comment "the helper is wanted" >/dev/null 2>&1 && ok "root approves" || fail "root approve"
        if wait_state "$id" succeeded; then ok "approved, the task goes on and succeeds"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        commit=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%H --diff-filter=A "agentfab/$id" -- helper.bin | tail -1)
        [ -n "$commit" ] && ok "the binary is on the branch" || { fail "helper.bin never committed"; return; }
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "$commit" |
                grep -q "Kept on purpose: 'helper.bin' (binary, $size bytes): the project runs this prebuilt helper; a person is asked to approve it (binary-file)" &&
                ok "the commit that adds it says so, and why" ||
                fail "commit message: $(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "$commit")"
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "agentfab/$id" |
                grep -q '^Agentfab-Approved: .*breaker binary-file, by root (uid 0)' &&
                ok "the delivered tip records the approval" ||
                fail "tip: $(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "agentfab/$id" | grep Agentfab)"

        echo "=== a binary kept on purpose, rejected: the step is undone"
        model "$WORK/keep.json" --by-step || { fail "model server"; return; }
        make_repo keep2
        id=$(submit keep2) || { fail "submit: $id"; return; }
        wait_state "$id" awaiting-approval || { fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; }
        hx "${CTL[@]}" reject "$id" --comment "no binaries in this repository" >/dev/null 2>&1 && ok "root rejects" || fail "root reject"
        if wait_state "$id" succeeded; then ok "rejected, the task goes on and succeeds"; else
                fail "after rejection: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        ! hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" cat-file -e "agentfab/$id:helper.bin" 2>/dev/null &&
                ok "the binary is not on the delivered branch" || fail "helper.bin delivered after a rejection"
}
