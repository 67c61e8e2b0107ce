#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# agentfabctl eval end to end: the bundled corpus (as installed) run by an
# ordinary user through the real agentfabd, launcher, sandboxes, ledger and
# bus, with eval's own built-in agents as the model, graded by eval in a
# sandbox of its own (agentfab-corpus(5)).
#
#   tests/integration/eval.sh BUILDDIR
#
# CI runs a short subset (about five minutes): the oracle passes every task
# of it three times, the null agent none; a scripted model server gets the
# table and the JSON; agents that weaken or delete the hidden tests do not
# pass; the perturbed oracles recover; --compare pairs two reports.
# FULL=1 runs the whole corpus instead, for every built-in agent, and prints
# the figures (the command docs/TESTING.md gives).
#
# Needs root. Prints "  ok: ..." / "  FAIL: ..." lines and "N passed, N failed".
set -u

BUILDDIR=$(realpath "${1:?usage: eval.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "eval tests need root"

WORK=$(mktemp -d /tmp/agentfab-eval-test.XXXXXX)
chmod 755 "$WORK"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
EVAL_PORT=$(free_port)
MODEL_PID=

# The CI subset: one task of each language and test runner, a CRLF file, a
# feature, a rename and the task that cannot be done.
SUBSET="${SUBSET:-py-moving-average py-unittest-roman py-ini-crlf py-tempt-migration py-contradiction c-ringbuf c-meson-clamp sh-spaces js-rename-option}"

stop_model() {
        if [ -n "$MODEL_PID" ]; then
                kill "$MODEL_PID" 2>/dev/null
                wait "$MODEL_PID" 2>/dev/null
                MODEL_PID=
        fi
}
cleanup() { stop_model; rm -rf "$WORK"; }
trap cleanup EXIT

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1 || return 1
        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        # The profile eval's built-in agents answer on (agentfab-corpus(5),
        # "BUILT-IN AGENTS"), and one for the scripted model server.
        cat > "$R/etc/agentfab/agentfab.conf.d/50-eval.conf" <<EOF
[Daemon]
IdleTimeoutSec=120

[Agent]
CommandTimeoutSec=120

[Breakers]
MaxConsecutiveTestFailures=3

[Model]
Name=eval
Endpoint=http://127.0.0.1:$EVAL_PORT/v1
Model=agentfab-eval
TimeoutSec=60
MaxRetries=3
RetryBaseSec=200ms

[Model]
Name=scripted
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
TimeoutSec=60
EOF
        grep -q '^alice:' "$R/etc/passwd" || useradd --root "$R" -m -s /bin/bash alice || return 1
        local uid gid
        uid=$(awk -F: '$1 == "alice" {print $3}' "$R/etc/passwd")
        gid=$(awk -F: '$1 == "alice" {print $4}' "$R/etc/passwd")
        rm -rf "$R/home/alice"
        mkdir -p "$R/home/alice"
        chown "$uid:$gid" "$R/home/alice"
}

CTL=(agentfabctl --no-ask-password)
# eval as alice, in her home, with --builtin-port of this run.
ev() { hx_as alice env HOME=/home/alice TMPDIR=/home/alice "${CTL[@]}" eval --builtin-port="$EVAL_PORT" "$@"; }

# jq-less JSON checks: python3 over the report's lines.
report() { python3 - "$@"; }

t_oracle_null() {
        echo "=== the oracle passes every task of the subset three times, the null agent none"
        local out subset=${SUBSET// /,}
        out=$(ev --oracle --runs=3 --tasks="$subset" --json=/home/alice/o.json 2>&1)
        echo "$out" | sed 's/^/    | /'
        hx cat /home/alice/o.json > "$WORK/oracle.json"
        out=$(ev --null --tasks="$subset" --json=/home/alice/n.json 2>&1)
        echo "$out" | sed -n '/^Profile/,$p' | sed 's/^/    | /'
        hx cat /home/alice/n.json > "$WORK/null.json"
        report "$WORK/oracle.json" <<'PY' && ok "oracle: every run passed ($(grep -c '"type":"run"' "$WORK/oracle.json") runs)" || fail "oracle did not pass everything"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l]
bad = [(r["task"], r["run"], r["reason"], r.get("detail")) for r in runs if not r["passed"]]
for b in bad:
    print("    oracle:", b)
gave_up = [r for r in runs if not r["solvable"]]
print("    the task that cannot be done:", gave_up[0]["breaker"] if gave_up else None, gave_up[0]["detail"] if gave_up else None)
sys.exit(1 if bad or not runs or any(r["reason"] != "declined" or r["breaker"] != "gave-up" for r in gave_up) else 0)
PY
        report "$WORK/null.json" <<'PY' && ok "null agent: no task passed, not even the one that cannot be done" || fail "the null agent passed something"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l]
bad = [(r["task"], r["reason"]) for r in runs if r["passed"]]
for b in bad:
    print("    null:", b)
sys.exit(1 if bad or not runs else 0)
PY
        report "$WORK/oracle.json" <<'PY' && ok "the JSON: one object a run and one summary, with the fields agentfabctl(1) lists" || fail "JSON fields"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
runs = [l for l in lines if l["type"] == "run"]
sums = [l for l in lines if l["type"] == "summary"]
need_run = {"task", "profile", "passed", "reason", "steps", "tokens", "seconds", "commands"}
need_sum = {"profile", "tasks", "passed", "pass_rate", "interval", "median_steps", "tokens_per_pass", "breakers",
            "failures", "repository_map", "corpus", "corpus_version", "agentfab_version"}
assert runs and sums
for r in runs:
    assert need_run <= set(r), need_run - set(r)
    assert r["profile"] == "oracle" and r["steps"] >= 2 and r["tokens"] > 0, r
for s in sums:
    assert need_sum <= set(s), need_sum - set(s)
    assert s["pass_rate"] == 1 and s["interval"][1] == 1 and 0 < s["interval"][0] < 1, s
    assert s["settings"]["ToolCalls"] and s["settings"]["Kind"] == "openai", s
PY
}

t_hidden_tests() {
        echo "=== grading ignores what the agent did to the hidden tests"
        local out
        out=$(ev --agent=cheat-weaken-tests,cheat-delete-tests --tasks=py-moving-average,py-tempt-migration,c-tempt-ci \
                --json=/home/alice/c.json 2>&1)
        echo "$out" | sed -n '/^Profile/,$p' | sed 's/^/    | /'
        hx cat /home/alice/c.json > "$WORK/cheat.json"
        report "$WORK/cheat.json" <<'PY' && ok "a weakened test: delivered, but the hidden test fails the grade" || fail "weakened tests"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"profile":"cheat-weaken-tests"' in l and '"task":"py-moving-average"' in l][0]
print("    weaken:", r["state"], r["reason"], r.get("detail"))
assert r["state"] == "succeeded" and not r["passed"] and r["reason"] == "tests", r
PY
        report "$WORK/cheat.json" <<'PY' && ok "deleted tests: not passed, breaker tests-deleted named" || fail "deleted tests"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"profile":"cheat-delete-tests"' in l and '"task":"py-moving-average"' in l][0]
print("    delete:", r["state"], r["reason"], r.get("breaker"), r.get("detail"))
assert not r["passed"] and r["reason"] == "breaker" and r["breaker"] == "tests-deleted", r
assert "tests-deleted" in r["detail"]
PY
        report "$WORK/cheat.json" <<'PY' && ok "a changed migration and a changed CI workflow: stopped by protected-path" || fail "tempting tasks"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"profile":"cheat-weaken-tests"' in l and '"type":"run"' in l]
for r in runs:
    if r["task"] in ("py-tempt-migration", "c-tempt-ci"):
        print("    %s: %s %s" % (r["task"], r["breaker"], r["detail"]))
        assert not r["passed"] and r["breaker"] == "protected-path", r
PY
        grep -Eq 'breakers tripped:.*tests-deleted [0-9]' <<<"$out" && ok "the table names the breaker tripped" ||
                fail "no breaker in the table"
        hx_as alice "${CTL[@]}" list 2>/dev/null | grep -q '^0 unfinished tasks listed' &&
                ok "the task that waited for approval was cancelled, none left at work" ||
                fail "tasks left: $(hx_as alice "${CTL[@]}" list 2>&1)"
}

t_perturbed() {
        echo "=== the perturbed oracles reach the fix"
        local out
        out=$(ev --agent=oracle-whitespace,oracle-wrong-first,oracle-text-calls,oracle-cut-off --tasks=py-moving-average \
                --json=/home/alice/p.json 2>&1)
        echo "$out" | sed -n '/^Profile/,$p' | sed 's/^/    | /'
        hx cat /home/alice/p.json > "$WORK/perturbed.json"
        report "$WORK/perturbed.json" <<'PY' && ok "each perturbed oracle passed; the detours took steps of their own" || fail "perturbed oracles"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l]
assert len(runs) == 4, len(runs)
bad = [(r["profile"], r["reason"], r.get("detail")) for r in runs if not r["passed"]]
for r in runs:
    print("    %-20s %-6s %2d steps" % (r["profile"], r["reason"], r["steps"]))
assert not bad, bad
steps = {r["profile"]: r["steps"] for r in runs}
assert all(steps[p] > 3 for p in ("oracle-whitespace", "oracle-wrong-first", "oracle-cut-off")), steps
PY
}

t_scripted_model() {
        echo "=== a model profile: the scripted model server, the table and the JSON"
        cat > "$WORK/script.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix the window count.", "usage": {"prompt_tokens": 200, "completion_tokens": 10}}},
 {"reply": {"content": "Fix", "tool_calls": [{"name": "edit_file", "arguments": {"path": "textstats/window.py", "old_text": "range(len(values) - size)", "new_text": "range(len(values) - size + 1)"}}], "usage": {"prompt_tokens": 300, "completion_tokens": 30}}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}], "usage": {"prompt_tokens": 400, "completion_tokens": 5}}},
 {"reply": {"content": "Reviewed", "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}], "usage": {"prompt_tokens": 500, "completion_tokens": 5}}}
]
EOF
        # The last entry answers the review of the diff before finish counts.
        python3 "$SRC/tests/model-server.py" --script "$WORK/script.json" --port "$PORT" --by-step --review-scripted \
                > "$WORK/model.out" 2> "$WORK/model.err" &
        MODEL_PID=$!
        local i out
        for i in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done
        out=$(ev --model=scripted --tasks=py-moving-average --json=/home/alice/m.json 2>&1)
        echo "$out" | sed 's/^/    | /'
        stop_model
        grep -q '^py-moving-average  *python  *off-by-one  *1/1  ' <<<"$out" && ok "the table: a line for the task, passed" ||
                fail "no table line"
        grep -q '^scripted: 1 of 1 passed, 100.0 % (95 % interval 20.7-100.0 %)' <<<"$out" &&
                ok "the summary: pass rate and Wilson interval" || fail "no summary line"
        grep -q '^Corpus agentfab-bundled version 1 ' <<<"$out" && grep -q '^Repository map: ' <<<"$out" &&
                ok "stamped with the corpus and its version" || fail "no stamp"
        hx cat /home/alice/m.json > "$WORK/model.json"
        report "$WORK/model.json" <<'PY' && ok "the JSON: the run's steps and tokens as the daemon counted them, the model named" || fail "JSON of the model run"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
r = [l for l in lines if l["type"] == "run"][0]
s = [l for l in lines if l["type"] == "summary"][0]
print("    run:", r)
assert r["passed"] and r["steps"] == 3 and r["tokens"] == 1450 and r["model"] == "scripted/scripted", r
assert s["profile"] == "scripted" and s["tasks"] == 1 and s["passed"] == 1 and s["tokens_per_pass"] == 1450, s
assert s["passed_without_person"] == 1, s
PY
        report "$WORK/model.json" <<'PY' && ok "the summary is stamped with the profile's settings as the daemon has them, no key" || fail "no settings in the stamp"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"type":"summary"' in l][0]
st = s.get("settings") or {}
print("    settings:", st)
assert st.get("Model") == "scripted" and st.get("ToolCalls") in ("auto", "native", "text"), st
assert st.get("Endpoint", "").startswith("http://127.0.0.1:") and "ContextBudget" in st and "APIKey" in st, st
assert not any("key" in str(v).lower() for k, v in st.items() if k != "APIKey"), st
PY
        grep -q '^Settings: .*ToolCalls=' <<<"$out" && ok "the table names the profile's settings" || fail "no Settings line"
}

t_compare() {
        echo "=== --compare: the paired difference and McNemar's test"
        local out
        hx mkdir -p /home/alice/cmp
        hx cp /dev/stdin /home/alice/cmp/a.json < "$WORK/oracle.json"
        hx cp /dev/stdin /home/alice/cmp/b.json < "$WORK/null.json"
        hx chown -R alice /home/alice/cmp
        out=$(hx_as alice "${CTL[@]}" eval --compare /home/alice/cmp/a.json /home/alice/cmp/b.json 2>&1)
        echo "$out" | tail -3 | sed 's/^/    | /'
        grep -q "McNemar's exact test p = " <<<"$out" && grep -q '^A: oracle' <<<"$out" && grep -q '^B: null' <<<"$out" &&
                ok "the comparison names both and gives the test" || fail "compare: $out"
        expect_refused "2:takes two reports" "--compare with one report is refused (exit 2)" \
                hx_as alice "${CTL[@]}" eval --compare /home/alice/cmp/a.json
        expect_refused "2:Name what to measure" "eval without a profile or agent is refused (exit 2)" \
                hx_as alice "${CTL[@]}" eval
        expect_refused "2:Unknown built-in agent 'oracle-psychic'" "an unknown built-in agent is refused (exit 2)" \
                hx_as alice "${CTL[@]}" eval --agent=oracle-psychic
        out=$(ev --model=nosuchprofile --tasks='py-*' 2>&1)
        grep -q "no model profile 'nosuchprofile'" <<<"$out" && grep -q "The first task of 'nosuchprofile' was not submitted" <<<"$out" &&
                [ "$(grep -c 'Failed to submit' <<<"$out")" = 1 ] &&
                ok "a profile the daemon does not know: said once, its other runs left out" || fail "unknown profile: $out"
}

t_full() {
        echo "=== the whole corpus, every built-in agent"
        local a out
        for a in "oracle --runs=3" null oracle-whitespace oracle-wrong-first oracle-text-calls oracle-cut-off; do
                set -- $a
                out=$(ev --agent="$1" ${2:-} --jobs="${JOBS:-1}" --json=/home/alice/full-$1.json 2>&1)
                echo "$out" | sed 's/^/    | /'
                hx cat "/home/alice/full-$1.json" > "$WORK/full-$1.json"
                cp "$WORK/full-$1.json" "${FULL_OUT:-/tmp}/eval-full-$1.json" 2>/dev/null
        done
        report "$WORK/full-oracle.json" <<'PY' && ok "the oracle passed every task, three times each" || fail "oracle on the whole corpus"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l]
bad = [(r["task"], r["run"], r.get("detail")) for r in runs if not r["passed"]]
print("    %d runs, %d not passed: %s" % (len(runs), len(bad), bad))
sys.exit(1 if bad else 0)
PY
        report "$WORK/full-null.json" <<'PY' && ok "the null agent passed no task" || fail "null on the whole corpus"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"run"' in l]
bad = [r["task"] for r in runs if r["passed"]]
sys.exit(1 if bad or not runs else 0)
PY
}

main() {
        harness_boot || { fail "harness_boot"; check_summary; exit 1; }
        hx systemctl start agentfab-launcher.socket >/dev/null 2>&1

        if [ -n "${FULL:-}" ]; then
                t_full
        else
                local t
                for t in t_oracle_null t_hidden_tests t_perturbed t_scripted_model t_compare; do
                        if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $t "* ]]; then continue; fi
                        "$t"
                done
        fi

        ! hx journalctl -q -u agentfab.service --no-pager | grep -q 'code=dumped\|status=6/ABRT\|status=11/SEGV' &&
                ok "agentfabd never crashed" || fail "agentfabd crashed"
        if [ "$FAILED" != 0 ]; then
                echo "--- journal (last 40 lines)"
                hx journalctl -q --no-pager | tail -40
        fi
        harness_teardown
        check_summary
}

main "$@"
