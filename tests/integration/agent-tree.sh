# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What a command may leave in the workspace, and what each step's
# checkpoint makes of it (sourced by agent.sh, which boots the harness and
# provides model, submit, wait_state, task_prop, ledger_log, ok and fail):
# a FIFO and a socket (never opened, never committed), symlinks leading out
# (committed as links), a file replaced by a directory and by a symlink, a
# mode-only change, a file deleted and written again, a file rewritten with
# the same size and mtime, names with a space and a newline, and files and a
# directory the daemon may not read, names NTFS takes for .git. The model's file tools on the FIFO and
# the links leading out are refused, not hung.

# A repository whose files the steps below replace.
make_tree_repo() {
        hx_as alice bash -c "set -e; cd ~ && rm -rf tree && mkdir tree && cd tree && git init -q &&
                printf 'def add(a, b):\n    return a - b\n' > calc.py &&
                printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nif __name__ == \"__main__\":\n    unittest.main()\n' > test_calc.py &&
                echo data > data && echo other > other && echo gone > gone && printf aaaa > same &&
                touch -m -d '2020-01-01 00:00:00' same &&
                git add . && git -c user.name=alice -c user.email=alice@example.com commit -q -m tree && chmod -R a+rX ~/tree"
}

# tree_at ID STEP: the tree of the task's commit for that step, as
# "mode type name" lines (names quoted as git quotes them).
tree_at() {
        local c
        c=$(hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" log --format=%H --grep="^Agentfab-Step: $2\$" "agentfab/$1" | head -1)
        [ -n "$c" ] || return 1
        hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" ls-tree -r "$c" | awk -F'\t' '{ split($1, a, " "); print a[1], a[2], $2 }'
}

blob_at() {
        local c
        c=$(hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" log --format=%H --grep="^Agentfab-Step: $2\$" "agentfab/$1" | head -1)
        hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" cat-file -p "$c:$3"
}

t_tree_kinds() {
        echo "=== odd files in the workspace: FIFO, socket, links out, type changes, mode, racy rewrite, unreadable"
        local odd racy locked
        odd='mkfifo pipe && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")" &&
ln -s /etc/passwd passwd-link && ln -s ../../../.. up-link && rm data && mkdir data && echo inner > data/inner &&
rm other && ln -s calc.py other && chmod +x test_calc.py && rm gone && echo again > gone &&
echo spaced > "with space" && echo newline > "$(printf "new\nline")" && printf bbbb > same &&
touch -m -d "2020-01-01 00:00:00" same && printf "def add(a, b):\n    return a + b\n" > calc.py.new &&
mv calc.py.new calc.py && echo x > .git. && mkdir GIT~1 && echo y > GIT~1/config &&
echo latin1 > "$(printf "caf\351")" && printf "esc\033[31m" > "$(printf "esc\033[2Jname")" && echo fine; ls -la'
        racy='printf cccc > same && touch -m -d "2020-01-01 00:00:00" same && echo racy'
        locked='echo secret > locked && chmod 000 locked && mkdir closed && echo x > closed/f && chmod 000 closed && echo locked'
        python3 - "$WORK/tree.json" "$odd" "$racy" "$locked" <<'PY'
import json, sys
out, odd, racy, locked = sys.argv[1:]
def cmd(subject, c):
    return {"reply": {"content": subject, "tool_calls": [{"name": "run_command", "arguments": {"command": c}}]}}
script = [
    {"reply": {"content": "Plan: leave odd files around\u001b]0;title\u0007\u001b[2J, then finish."}},
    cmd("Odd files\u001b[2J\u009b2J", odd),
    {"reply": {"content": None, "tool_calls": [
        {"name": "read_file", "arguments": {"path": "pipe"}},
        {"name": "read_file", "arguments": {"path": "passwd-link"}},
        {"name": "read_file", "arguments": {"path": "up-link/etc/passwd"}},
        {"name": "write_file", "arguments": {"path": "up-link/escaped", "content": "x"}}]}},
    cmd("Racy rewrite", racy),
    cmd("Locked files", locked),
    {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "odd files left"}}]}},
]
json.dump(script, open(out, "w"))
PY
        model "$WORK/tree.json" --by-step || { fail "model server"; return; }
        make_tree_repo
        local id state tree
        id=$(submit tree) || { fail "submit: $id"; return; }
        wait_state "$id" succeeded failed
        state=$(task_prop "$id" State)
        echo "    task $id: $state ($(task_prop "$id" Reason)), step $(task_prop "$id" Step)"
        [ "$state" = succeeded ] && ok "a task that leaves a FIFO, a socket and unreadable files succeeds" ||
                fail "task ended $state: $(task_prop "$id" Reason)"
        ledger_log "$id" | grep '^    Agentfab-Step\|^    [A-Z][a-z]' | head -20 | sed 's/^/    | /'

        tree=$(tree_at "$id" 1) || { fail "no commit for step 1"; return; }
        echo "$tree" | sed 's/^/    step 1: /'
        ! grep -q ' pipe$\| sock$' <<<"$tree" && ok "the FIFO and the socket are not committed" || fail "FIFO or socket committed"
        ! grep -qi ' \.git\.$\| git~1/' <<<"$tree" && ok "names NTFS takes for .git are not committed" || fail "a .git alias committed"
        grep -qx '120000 blob passwd-link' <<<"$tree" && [ "$(blob_at "$id" 1 passwd-link)" = /etc/passwd ] &&
                ok "a link to /etc/passwd is committed as a link, not what it names" || fail "passwd-link"
        grep -qx '120000 blob up-link' <<<"$tree" && ok "a link leading up and out is a link" || fail "up-link"
        grep -qx '100644 blob data/inner' <<<"$tree" && ! grep -qx '100644 blob data' <<<"$tree" &&
                ok "a file replaced by a directory" || fail "data: $(grep data <<<"$tree")"
        grep -qx '120000 blob other' <<<"$tree" && [ "$(blob_at "$id" 1 other)" = calc.py ] &&
                ok "a file replaced by a symlink" || fail "other: $(grep other <<<"$tree")"
        grep -qx '100755 blob test_calc.py' <<<"$tree" && ok "a mode-only change" || fail "mode: $(grep test_calc <<<"$tree")"
        [ "$(blob_at "$id" 1 gone)" = again ] && ok "a file deleted and written again" || fail "gone"
        [ "$(blob_at "$id" 1 same)" = bbbb ] && ok "a rewrite keeping size and mtime (step 1)" || fail "same at step 1: $(blob_at "$id" 1 same)"
        grep -qx '100644 blob with space' <<<"$tree" && grep -qx '100644 blob "new\\nline"' <<<"$tree" &&
                ok "names with a space and a newline" || fail "odd names"
        blob_at "$id" 1 calc.py | grep -q 'a + b' && ok "a file replaced by rename" || fail "calc.py"
        grep -qx '100644 blob "caf\\351"' <<<"$tree" && grep -qx '100644 blob "esc\\033\[2Jname"' <<<"$tree" &&
                ok "names that are not UTF-8 or hold an escape sequence" || fail "odd bytes: $(grep 'caf\|esc' <<<"$tree")"

        # Such names reach the bus, the stream socket and a terminal: as
        # valid UTF-8, without the escape byte.
        local out
        out=$(hx busctl --json=short call org.agentfab.Factory1 "/org/agentfab/Factory1/task/$id" \
                org.freedesktop.DBus.Properties GetAll s org.agentfab.Task1 2>&1) &&
                ok "GetAll of the task answers ($(wc -c <<<"$out") bytes)" || fail "GetAll: $(head -c 300 <<<"$out")"
        for verb in status summary logs watch; do
                out=$(hx_as alice "${CTL[@]}" "$verb" "$id" 2>&1) && ok "agentfabctl $verb answers" ||
                        fail "agentfabctl $verb: $(head -c 300 <<<"$out")"
                ! grep -q $'\x1b\|\xc2\x9b' <<<"$out" && ok "agentfabctl $verb prints no escape sequence of a file name or the model" ||
                        fail "agentfabctl $verb prints an escape sequence: $(grep -a $'\x1b\|\xc2\x9b' <<<"$out" | head -3 | cat -v)"
        done
        hx_as alice "${CTL[@]}" summary "$id" | grep -q "AGENTFAB_TASK=$id AGENTFAB_EVENT=left-out" &&
                ok "the summary says files were left out, and where they are named" || fail "the summary says nothing of what was left out"
        # A diff is data: as it is into a pipe, escaped on a terminal.
        out=$(hx_as alice "${CTL[@]}" diff "$id" 2>&1)
        grep -q $'^+esc\x1b\[31m' <<<"$out" && ok "agentfabctl diff into a pipe is the patch as it is" ||
                fail "diff into a pipe: $(grep esc <<<"$out" | cat -v)"
        out=$(hx_as alice script -qec "${CTL[*]} diff $id" /dev/null 2>&1)
        grep -q '^+esc\\x1b\[31m' <<<"$out" && ! grep -q $'\x1b' <<<"$out" &&
                ok "agentfabctl diff on a terminal escapes it" || fail "diff on a terminal: $(grep esc <<<"$out" | cat -v)"
        out=$(hx_as alice "${CTL[@]}" watch "$id" --json 2>&1 | head -c 200000)
        python3 -c 'import json, sys
for l in sys.stdin:
    if l.strip():
        json.loads(l)' <<<"$out" && ok "the stream socket's events are JSON" || fail "stream events: $(head -c 300 <<<"$out")"

        python3 - "$WORK/requests.jsonl" <<'PY' && ok "file tools on the FIFO and on links out are refused, nothing hangs" || fail "file tools on odd files"
import json, sys
last = None
for l in open(sys.argv[1]):
    last = json.loads(l)["body"]["messages"]
tool = [m.get("content") or "" for m in last if m.get("role") == "tool"]
for c in tool:
    print("    tool:", c[:160].replace("\n", " | "))
assert not [c for c in tool if "root:x:0:0" in c]
assert len([c for c in tool if "escapes the workspace" in c]) == 3
assert [c for c in tool if c.startswith("read_file") and "'pipe'" in c]
PY
        # (The build output the tests leave, __pycache__/, has an entry of its own.)
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=left-out | python3 -c '
import json, sys
special = sorted(["\x27pipe\x27", "\x27sock\x27", "\x27.git.\x27", "\x27GIT~1\x27"])
paths = [json.loads(l)["AGENTFAB_PATHS"] for l in sys.stdin]
named = [sorted(p.split(", ")) for p in paths if set(p.split(", ")) & set(special)]
assert named == [special], paths' &&
                ok "the journal names the special files left out" || fail "no left-out entry: $(hx journalctl -q AGENTFAB_TASK="$id" AGENTFAB_EVENT=left-out)"
        hx test ! -e /escaped && hx test ! -e /var/lib/agentfab/escaped && ok "nothing was written through the link" ||
                fail "a write went through up-link"

        tree=$(tree_at "$id" 3) || { fail "no commit for step 3"; return; }
        [ "$(blob_at "$id" 3 same)" = cccc ] && ok "a second rewrite keeping size and mtime (step 3)" ||
                fail "same at step 3: $(blob_at "$id" 3 same)"
        tree=$(tree_at "$id" 4) || { fail "no commit for step 4"; return; }
        echo "$tree" | grep 'locked\|closed' | sed 's/^/    step 4: /'
        grep -q ' locked$' <<<"$tree" && grep -q ' closed/f$' <<<"$tree" &&
                ok "files the command made unreadable are committed all the same" || fail "locked files: $(grep 'locked\|closed' <<<"$tree")"
        hx systemctl is-active agentfab.service >/dev/null && ok "the daemon is fine" || fail "daemon not active"
}
