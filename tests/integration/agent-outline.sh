# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The symbol outline of the first prompt (sourced by agent.sh, which boots
# the harness and provides model, submit, wait_state, task_prop, ok and
# fail): ctags runs in the task's sandbox on the files the goal and the
# failed tests point to, and the first request the model gets names their
# symbols. A repository made to be hostile to ctags (a huge line, a name of
# 6,000 characters, escape sequences, an option file of its own, a file
# named like an option) does not break the task, and a sandbox image
# without ctags makes no outline and fails nothing.

make_outline_repo() {
        local prog
        prog=$(cat <<'PY'
import os, subprocess
home = os.path.expanduser("~/outline")
subprocess.run(["rm", "-rf", home], check=True)
files = {
    "src/__init__.py": "",
    "src/textkit/__init__.py": "",
    "src/textkit/headers.py":
        "class HeaderParser:\n    def feed_header_line(self, line):\n        return line.split(':', 1)\n\n"
        "def parse_header_block(text):\n    return [l for l in text.splitlines() if l]\n\n"
        "def count_headers(text):\n    return len(parse_header_block(text)) - 1\n",
    "tests/__init__.py": "",
    "tests/test_headers.py":
        "import unittest\nfrom src.textkit.headers import count_headers\n\nclass T(unittest.TestCase):\n"
        "    def test_count(self):\n        self.assertEqual(count_headers('a: 1\\nb: 2\\n'), 2)\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n",
    # Hostile to ctags: a line of 400,000 characters, a name of 6,000,
    # an escape sequence in a macro, an option file of the repository's
    # own, a file named like an option.
    "src/textkit/huge.py": "BIG = '" + "x" * 400000 + "'\ndef after_the_huge_line():\n    pass\n",
    "src/textkit/odd.c": "int " + "n" * 6000 + "(void) { return 0; }\n#define ESC_\\\n  \"\x1b[2J\"\n"
        "static int plain_helper(int x) { return x; }\n",
    ".ctags.d/evil.ctags": "--output-format=xref\n-f\nstolen-tags\n",
    "--version.py": "x = 1\n",
}
for path, text in files.items():
    full = os.path.join(home, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)
git = ["git", "-C", home, "-c", "user.name=alice", "-c", "user.email=alice@example.com"]
subprocess.run(git[:3] + ["init", "-q"], check=True)
subprocess.run(git + ["add", "-A"], check=True)
subprocess.run(git + ["commit", "-q", "-m", "headers with a bug"], check=True)
subprocess.run(["chmod", "-R", "a+rX", home], check=True)
PY
)
        hx_as alice bash -c 'cd ~ && python3 -c "$1"' _ "$prog"
}

t_outline() {
        # (A second finish: the first may be answered with the diff to review.)
        echo "=== the first prompt's symbol outline: ctags in the sandbox, on the files the task names"
        cat > "$WORK/outline.json" <<'JSON'
[
 {"reply": {"content": "Plan: count_headers subtracts one; fix it, run the tests, finish."}},
 {"reply": {"content": "Fix count_headers", "tool_calls": [{"name": "edit_file", "arguments": {"path": "src/textkit/headers.py", "old_text": "len(parse_header_block(text)) - 1", "new_text": "len(parse_header_block(text))"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "count_headers counts every header"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "count_headers counts every header"}}]}}
]
JSON
        model "$WORK/outline.json" --by-step || { fail "model server"; return; }
        make_outline_repo || { fail "outline fixture"; return; }
        local id out
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/outline \
                --goal "count_headers in src/textkit/headers.py is off by one. Also look at huge.py, odd.c and --version.py." \
                --acceptance "tests/test_headers.py passes" --test "python3 -m unittest -v" 2>&1) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "a task on a repository hostile to ctags succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi

        out=$(python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
first = json.loads(open(sys.argv[1]).readline())["body"]["messages"][0]["content"]
section = first.split("# Symbols of the files the task points to", 1)
print("section:" + str(len(section) == 2))
outline = section[1].split("\n# ", 1)[0] if len(section) == 2 else ""
for l in outline.splitlines()[:40]:
    print("    | " + l[:150])
print("headers:" + str("src/textkit/headers.py:\n" in outline))
print("function:" + str("  function count_headers(text) (line 8)\n" in outline))
print("nested:" + str("    member feed_header_line(self, line) (line 2)\n" in outline))
print("test:" + str("tests/test_headers.py:\n" in outline))
print("huge:" + str("function after_the_huge_line() (line 2)" in outline))
print("cut:" + str(any(l.startswith("  function nnnn") and "n…(void) (line 1)" in l and len(l) < 160 for l in outline.splitlines())))
print("plain:" + str("function plain_helper(int x) (line 4)" in outline))
print("escape:" + str("\x1b" in first))
print("option:" + str("--version.py" in outline))
PY
)
        echo "$out" | grep '^    |'
        grep -qx 'section:True' <<<"$out" && grep -qx 'headers:True' <<<"$out" && grep -qx 'function:True' <<<"$out" &&
                ok "the first request holds the outline of the file the goal names, with its functions and lines" ||
                fail "no outline of headers.py: $out"
        grep -qx 'nested:True' <<<"$out" && ok "a method is nested under its class" || fail "nesting: $out"
        grep -qx 'test:True' <<<"$out" && ok "the test file the acceptance criteria name is outlined too" || fail "test file: $out"
        grep -qx 'huge:True' <<<"$out" && ok "a file with a 400,000-character line is outlined past it" || fail "huge line: $out"
        grep -qx 'cut:True' <<<"$out" && grep -qx 'plain:True' <<<"$out" &&
                ok "a 6,000-character name is cut, and the file's other symbols are kept" || fail "long name: $out"
        grep -qx 'escape:False' <<<"$out" && ok "no escape character reaches the prompt" || fail "an escape in the prompt"
        grep -qx 'option:False' <<<"$out" && ok "a file named like an option is never given to ctags" || fail "--version.py: $out"
        [ -z "$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" ls-tree -r --name-only "agentfab/$id" | grep -x 'stolen-tags\|tags')" ] &&
                ok "the repository's .ctags.d/ did not make ctags write into the workspace" || fail "a tags file was written"
        hx journalctl -q -o json AGENTFAB_TASK="$id" | grep '"AGENTFAB_TOOL":"outline"' | grep -q '"AGENTFAB_EXIT_STATUS":"0"' &&
                ok "the journal has ctags' run as a command of the task" || fail "no journal entry for ctags"

        echo "=== a sandbox image without ctags: no outline, nothing fails"
        cat > "$WORK/outline2.json" <<'JSON'
[
 {"reply": {"content": "Plan: look, finish."}},
 {"reply": {"content": "Look", "tool_calls": [{"name": "run_command", "arguments": {"command": "cat README"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "looked"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "looked"}}]}}
]
JSON
        model "$WORK/outline2.json" --by-step || { fail "model server"; return; }
        make_plain_repo alice outline-tiny
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/outline-tiny --goal "Read README and say hello." \
                --environment=tiny --test "grep -q hello README" 2>&1) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "a task naming a file in an image without ctags succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        python3 - "$WORK/requests.jsonl" <<'PY' && ok "its first request has no outline" || fail "an outline without ctags"
import json, sys
first = json.loads(open(sys.argv[1]).readline())["body"]["messages"][0]["content"]
assert "# Files" in first and "# Symbols" not in first
PY
}
