# SPDX-License-Identifier: LGPL-2.1-or-later
#
# git answers in the sandbox (sourced by agent.sh, which boots the harness
# and provides model, submit, wait_state, task_prop, ok and fail): git
# status, diff, log, show and blame in /workspace tell the task's history
# (its base and checkpoints), read-only: commits, config, hooks, refs and
# object writes through git or by hand change nothing of the ledger.

t_git_in_sandbox() {
        echo "=== git in the sandbox: the task's history, read-only"
        local look attack
        look='git status --short; echo "--- diff"; git diff; echo "--- log"; git log --format="%s"; echo "--- show"; git show --stat --format="%s" HEAD | head -5; echo "--- blame"; git blame -s calc.py | head -2'
        attack='echo "git commit:"; git commit -qam evil 2>&1 | tail -1; echo "git config:"; git config user.name evil 2>&1 | tail -1;
echo "hook:"; echo "touch /tmp/pwned" > "$GIT_DIR/hooks/pre-commit" 2>&1; echo "ref:"; git update-ref refs/heads/evil HEAD 2>&1 | tail -1;
echo "object:"; echo "evil object content" | git hash-object -w --stdin 2>&1 | tail -1; echo "by hand:"; touch "$GIT_DIR/objects/evil" 2>&1;
echo "gc:"; git gc -q 2>&1 | tail -1; echo "mount:"; grep " /history.git " /proc/self/mounts; echo done'
        python3 - "$WORK/git.json" "$look" "$attack" <<'PY'
import json, sys
out, look, attack = sys.argv[1:]
def cmd(subject, c):
    return {"reply": {"content": subject, "tool_calls": [{"name": "run_command", "arguments": {"command": c}}]}}
json.dump([
    {"reply": {"content": "Plan: fix add(), look at it with git, finish."}},
    {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
    cmd("Look with git", look),
    cmd("Try to change the history", attack),
    {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add fixed"}}]}},
], open(out, "w"))
PY
        model "$WORK/git.json" --by-step || { fail "model server"; return; }
        make_repo gitrepo
        local id L before after out
        id=$(submit gitrepo) || { fail "submit: $id"; return; }
        L="/var/lib/agentfab/tasks/$id/ledger.git"
        if wait_state "$id" succeeded; then ok "a task whose commands use git succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi

        # What the model saw of git: the change since the last checkpoint,
        # the base's history, blame on the file.
        out=$(python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    b = json.loads(line).get("body") or {}
    for m in b.get("messages", []):
        if m.get("role") == "tool" and "--- blame" in (m.get("content") or ""):
            print(m["content"])
            sys.exit(0)
PY
)
        grep -q '^--- log' <<<"$out" && ok "git log answers in /workspace" || fail "no git output seen by the model: $(head -c 400 <<<"$out")"
        grep -q 'Fix add\|tree' <<<"$(sed -n '/^--- log/,/^--- show/p' <<<"$out")" &&
                ok "git log shows the task's history (base and checkpoints)" || fail "git log: $(sed -n '/^--- log/,/^--- show/p' <<<"$out")"
        grep -q 'a + b' <<<"$(sed -n '/^--- show/,$p' <<<"$out")" &&
                ok "git show and blame see the checkpointed change" || fail "show/blame: $(sed -n '/^--- show/,$p' <<<"$out")"

        # Nothing of the ledger changed through git in the sandbox.
        out=$(python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    b = json.loads(line).get("body") or {}
    for m in b.get("messages", []):
        if m.get("role") == "tool" and "git commit:" in (m.get("content") or ""):
            print(m["content"])
            sys.exit(0)
PY
)
        echo "$out" | head -20 | sed 's/^/    | /'
        grep -q ' /history.git .*\bro\b' <<<"$out" && ok "the history is mounted read-only" || fail "mount line: $(grep history <<<"$out")"
        ! hx git --git-dir="$L" show-ref | grep -q 'refs/heads/evil' && ok "no ref made through git" || fail "a ref was made"
        ! hx git config --file "$L/config" user.name >/dev/null 2>&1 && ok "the ledger's config is untouched" || fail "config changed"
        ! hx test -e "$L/hooks/pre-commit" && ok "no hook written" || fail "a hook was written"
        ! hx test -e "$L/objects/evil" && ok "no file written into the objects by hand" || fail "objects written"
        local evil
        evil=$(echo "evil object content" | git hash-object --stdin)
        ! hx git --git-dir="$L" cat-file -e "$evil" 2>/dev/null && ok "no object written through git" || fail "object $evil written"
        ! hx git --git-dir="$L" log --format=%s "agentfab/$id" | grep -qx evil && ok "no commit of the sandbox's on the branch" ||
                fail "the sandbox committed"
        [ "$(hx git --git-dir="$L" symbolic-ref HEAD)" = "refs/heads/agentfab/$id" ] && ok "the ledger's HEAD names the task's branch" ||
                fail "HEAD: $(hx git --git-dir="$L" symbolic-ref HEAD)"
}
