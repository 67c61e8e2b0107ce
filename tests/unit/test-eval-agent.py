#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The built-in agents' reading of patches and their replies, without a
daemon (eval/eval-agent.py): the oracle must reproduce a reference fix
exactly, whatever its line endings, and the agents must answer from the
conversation alone. Prints TAP."""

import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("eval_agent", os.path.join(HERE, "..", "..", "eval", "eval-agent.py"))
ea = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ea)

n = 0
failed = 0


def check(cond, what):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what))
    failed += not cond


def with_repo(files):
    d = tempfile.mkdtemp()
    for p, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, p)) or d, exist_ok=True)
        with open(os.path.join(d, p), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return d


def read(d, p):
    with open(os.path.join(d, p), encoding="utf-8", newline="") as f:
        return f.read()


# A CRLF file keeps its carriage returns: the oracle's edits carry them.
d = with_repo({"a.py": "x = 1\r\ny = 2\r\nz = 3\r\n"})
ea.apply_patch("--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n x = 1\r\n-y = 2\r\n+y = 20\r\n z = 3\r\n", d)
check(read(d, "a.py") == "x = 1\r\ny = 20\r\nz = 3\r\n", "a CRLF file is patched with its line endings")

# "\ No newline at end of file" on both sides.
d = with_repo({"b.txt": "one\ntwo"})
ea.apply_patch("--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+three\n"
               "\\ No newline at end of file\n", d)
check(read(d, "b.txt") == "one\nthree", "a last line without a newline stays without one")

# A hunk whose text occurs twice is grown by context until it is unique.
d = with_repo({"c.py": "a\nx = 0\nb\nx = 0\nc\n"})
steps, final = ea.patch_plan("--- a/c.py\n+++ b/c.py\n@@ -4 +4 @@\n-x = 0\n+x = 1\n", d)
old = steps[0][1][0]["arguments"]["old_text"]
check(final["c.py"] == "a\nx = 0\nb\nx = 1\nc\n" and "b\n" in old and old.count("x = 0") == 1,
      "an ambiguous hunk is made unique with the lines around it")

# New and removed files: write_file and run_command.
d = with_repo({"old.txt": "bye\n"})
steps, final = ea.patch_plan("--- /dev/null\n+++ b/new/n.txt\n@@ -0,0 +1 @@\n+hi\n"
                             "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n", d)
names = [c["name"] for _, calls in steps for c in calls]
check(names == ["write_file", "run_command"] and final == {"new/n.txt": "hi\n", "old.txt": None},
      "a new file is written whole, a removed one removed")

# A hunk that does not apply is refused, not guessed.
try:
    ea.patch_plan("--- a/c.py\n+++ b/c.py\n@@ -1 +1 @@\n-nothing like it\n+x\n", with_repo({"c.py": "a\n"}))
    check(False, "a hunk that does not apply is refused")
except ea.PatchError:
    check(True, "a hunk that does not apply is refused")

# The agents answer from the conversation alone: the plan first, then a
# step per file, the tests and finish; the null agent finishes at once.
repo = with_repo({"m.py": "def f():\n    return 1\n"})
task = {"name": "t", "goal": "g", "files": ["m.py"], "hidden_files": ["test_m.py"],
        "plan": lambda: ea.patch_plan("--- a/m.py\n+++ b/m.py\n@@ -2 +2 @@\n-    return 1\n+    return 2\n", repo)}


def converse(agent, results):
    msgs = [{"role": "system", "content": "# Goal\ng\n\n# Acceptance criteria\nx"}]
    names = []
    for res in results:
        r = ea.next_reply(agent, task, msgs)
        names.append([c["name"] for c in r["tool_calls"]] or ("text" if "<tool_call>" in (r["content"] or "") else "plan"))
        msgs.append({"role": "assistant", "content": r["content"]})
        msgs.append({"role": "tool", "content": res})
    return names


ok_res = "done\n[exit status 0; 0.1 s]"
check(converse("oracle", [ok_res] * 4) == ["plan", ["edit_file"], ["run_tests"], ["finish"]], "oracle: plan, edit, tests, finish")
check(converse("null", [ok_res] * 3) == ["plan", ["finish"], ["finish"]], "null: plan, then finish at every step")
check(converse("oracle-whitespace", ["", "edit_file: old_text was not found in m.py", ok_res, ok_res, ok_res])
      == ["plan", ["edit_file"], ["edit_file"], ["run_tests"], ["finish"]],
      "whitespace: a refused drifted edit is followed by the exact one")
check(converse("oracle-wrong-first", [ok_res] * 6)
      == ["plan", ["edit_file"], ["run_tests"], ["edit_file"], ["run_tests"], ["finish"]],
      "wrong first: a wrong edit, the tests, the right edit")
check(converse("oracle-text-calls", [ok_res] * 3) == ["plan", "text", "text"], "text calls: no tool_calls, blocks in the text")
check(converse("cheat-delete-tests", [ok_res] * 3) == ["plan", ["run_command"], ["finish"]], "cheat: removes the hidden tests")
check(ea.drift("\tif x:\n\t\treturn 1  \r") == "    if x:\n        return 1", "drift: tabs to spaces, trailing blanks gone")

print("1..%d" % n)
sys.exit(1 if failed else 0)
