#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks a corpus of agentfabctl eval (agentfab-corpus(5)) without a daemon.

    check-corpus.py CORPUS [TASK...]

For every task (or those named): task.json is complete and its goal unique,
repo/ is under 2,000 lines (but for kind "large-file"), the files the
oracle's patch touches are task.json's "files"; the grading command fails
on repo/ with hidden/ laid over it, and passes once oracle.patch is applied
(through the built-in agents' own patch reading, eval-agent.py), or, for a
task that cannot be done, still fails. The commands run here directly, not
in a sandbox: the corpus is the project's own. Prints TAP.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("eval_agent", os.path.join(HERE, "eval-agent.py"))
agent = importlib.util.module_from_spec(spec)
spec.loader.exec_module(agent)

KEYS = {"goal", "acceptance", "test", "grade", "language", "kind", "files", "environment", "limits", "solvable",
        "reason", "timeout"}
LANGUAGES = {"python", "c", "shell", "javascript", "go", "rust"}
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


def count_lines(d):
    n = 0
    for dp, _, fns in os.walk(d):
        for fn in fns:
            with open(os.path.join(dp, fn), "rb") as f:
                n += f.read().count(b"\n")
    return n


def grade(task_dir, t, patch):
    with tempfile.TemporaryDirectory() as w:
        ws = os.path.join(w, "ws")
        shutil.copytree(os.path.join(task_dir, "repo"), ws, symlinks=True)
        if patch:
            agent.apply_patch(agent.read_text(os.path.join(task_dir, "oracle.patch")), ws)
        hidden = os.path.join(task_dir, "hidden")
        if os.path.isdir(hidden):
            shutil.copytree(hidden, ws, symlinks=True, dirs_exist_ok=True)
        try:
            p = subprocess.run(["/bin/sh", "-c", t.get("grade") or t["test"]], cwd=ws, env=ENV, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=t.get("timeout", 300))
            return p.returncode, p.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            return 124, "timed out"


def check(task_dir, goals):
    problems = []
    with open(os.path.join(task_dir, "task.json"), encoding="utf-8") as f:
        t = json.load(f)
    unknown = set(t) - KEYS
    if unknown:
        problems.append("unknown keys %s" % sorted(unknown))
    for k in ("goal", "test", "language", "kind", "files"):
        if not t.get(k) and not (k == "files" and t.get("solvable") is False):
            problems.append("'%s' missing" % k)
    if t.get("language") not in LANGUAGES:
        problems.append("language %r" % t.get("language"))
    if t.get("goal") in goals:
        problems.append("goal also of %s" % goals[t["goal"]])
    goals[t.get("goal")] = os.path.basename(task_dir)
    if not os.path.isdir(os.path.join(task_dir, "repo")):
        return problems + ["no repo/"]
    lines = count_lines(os.path.join(task_dir, "repo"))
    if lines >= 2000 and t.get("kind") != "large-file":
        problems.append("repo/ has %d lines" % lines)
    solvable = t.get("solvable", True)
    patch = os.path.join(task_dir, "oracle.patch")
    text = agent.read_text(patch) if os.path.isfile(patch) else ""
    if solvable:
        try:
            touched = set()
            for f in agent.parse_patch(text):
                touched.update(p for p in (f["old"], f["new"]) if p)
            if touched != set(t.get("files", [])):
                problems.append("oracle.patch touches %s, task.json says %s" % (sorted(touched), sorted(t["files"])))
        except agent.PatchError as e:
            return problems + ["oracle.patch: %s" % e]
    elif text.strip():
        problems.append("a task that cannot be done has an oracle.patch")
    rc, out = grade(task_dir, t, False)
    if rc == 0:
        problems.append("the grade passes without the fix")
    if solvable:
        rc, out = grade(task_dir, t, True)
        if rc != 0:
            problems.append("the grade fails with the fix (exit %d): %s" % (rc, out[-1500:]))
    return problems


def main():
    root = sys.argv[1]
    names = sys.argv[2:] or sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "task.json")))
    print("1..%d" % len(names))
    goals, bad = {}, 0
    for i, name in enumerate(names, 1):
        problems = check(os.path.join(root, name), goals)
        if problems:
            bad += 1
            print("not ok %d - %s" % (i, name))
            for p in problems:
                print("# " + p.replace("\n", "\n# "))
        else:
            print("ok %d - %s" % (i, name))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
