# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The review stage between the last step and delivery (sourced by agent.sh,
# which boots the harness and provides model, submit, wait_state,
# task_prop, ok and fail). Each scenario is a task whose finished work the
# review stops with its breaker: a secret (whose value must appear in no
# journal entry, summary, finding or request to the model), a checker's
# error on a changed line (and none for an unchanged one), a dependency
# into a critical advisory of a small OSV database, a coverage drop.

# review_prepare_root ROOT: the review's configuration (agent.sh calls it
# while it prepares the harness's root).
review_prepare_root() {
        local R=$1
        mkdir -p "$R/etc/agentfab/review-osv/PyPI"
        cp "$SRC/tests/osv-db/PyPI/"*.json "$R/etc/agentfab/review-osv/PyPI/"
        printf '[Review]\nVulnerabilityDatabase=/etc/agentfab/review-osv\nCoverageTolerance=1\n\n[Model]\nName=reviewer\nEndpoint=http://127.0.0.1:%s/v1\nModel=scripted-reviewer\nTimeoutSec=20\n' \
                "$PORT" > "$R/etc/agentfab/agentfab.conf.d/60-review.conf"
}

# The key of the secret scenario, in two halves so that this file itself is
# not what a scan of the repository finds.
REVIEW_KEY_HEAD=AKIA
REVIEW_KEY_TAIL=Q7RZ3K5M2XWP4TLN

t_review_secret() {
        echo "=== review: a secret the task added stops it; the value is nowhere"
        local key=$REVIEW_KEY_HEAD$REVIEW_KEY_TAIL
        cat > "$WORK/secret.json" <<EOF
[
 {"reply": {"content": "Plan: fix add(), configure the uploader."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": "Uploader settings", "tool_calls": [{"name": "write_file", "arguments": {"path": "upload.py", "content": "# uploader\nREGION = 'eu-west-1'\nACCESS_KEY_ID = '$key'\n"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed, uploader configured"}}]}},
 {"reply": {"content": "Read the key from the environment", "tool_calls": [{"name": "write_file", "arguments": {"path": "upload.py", "content": "import os\n# uploader\nREGION = 'eu-west-1'\nACCESS_KEY_ID = os.environ.get('UPLOAD_KEY_ID')\n"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed; the key comes from the environment"}}]}}
]
EOF
        model "$WORK/secret.json" --by-step || { fail "model server"; return; }
        make_repo rsecret
        local id out
        id=$(submit rsecret) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "the review stopped the finished task"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = secret ] && ok "Breaker is secret" || fail "breaker $(task_prop "$id" Breaker)"
        [[ $(task_prop "$id" Reason) == *"upload.py:3"* ]] && ok "Reason names file and line" || fail "reason $(task_prop "$id" Reason)"
        out=$(hx_as alice "${CTL[@]}" review "$id" 2>&1)
        echo "$out" | sed 's/^/    | /'
        grep -q "^error *secret *upload.py:3" <<<"$out" && ok "agentfabctl review lists the finding" || fail "review: $out"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=7e66bd30ae2441dd9ea0c0c40bc93103 |
                grep -q '"AGENTFAB_FINDING_KIND":"secret"' && ok "finding journaled with its MESSAGE_ID" || fail "no review-finding entry"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=breaker | grep -q '"AGENTFAB_BREAKER":"secret"' &&
                ok "breaker secret journaled" || fail "no breaker entry"
        hx test -s "/var/lib/agentfab/tasks/$id/review.json" && ok "findings kept in the task directory" || fail "no review.json"

        hx "${CTL[@]}" reject "$id" --comment "no keys in the code" >/dev/null 2>&1 && ok "root rejects" || fail "reject"
        if wait_state "$id" succeeded; then ok "the model fixed it; the second review passed"; else
                fail "after rejection: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        grep -q 'Review findings to fix' "$WORK/requests.jsonl" && ok "the model got the findings" || fail "findings not sent"
        out=$(hx_as alice "${CTL[@]}" summary "$id")
        grep -q '^## Review' <<<"$out" && ok "summary has a Review section" || fail "no Review section: $out"
        [ "$(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=reviewed | wc -l)" = 2 ] &&
                ok "the stage ran twice (after each finish)" || fail "reviewed entries"

        # The value: in no journal entry, summary, finding, state file, or
        # message the daemon sent the model (the model's own tool call, which
        # it sent us, is the only place).
        ! hx journalctl -q --no-pager -o json | grep -q "$REVIEW_KEY_TAIL" && ok "the secret is not in the journal" ||
                fail "secret in the journal"
        ! hx_as alice "${CTL[@]}" summary "$id" | grep -q "$REVIEW_KEY_TAIL" && ok "nor in the summary" || fail "secret in the summary"
        ! hx grep -rq "$REVIEW_KEY_TAIL" "/var/lib/agentfab/tasks/$id/review.json" "/var/lib/agentfab/tasks/$id/state.json" &&
                ok "nor in review.json or the state file" || fail "secret in the task's files"
        python3 - "$WORK/requests.jsonl" "$REVIEW_KEY_TAIL" <<'PY' && ok "nor in anything the daemon told the model" || fail "secret in a request"
import json, sys
tail = sys.argv[2]
for line in open(sys.argv[1]):
    body = json.loads(line).get("body") or {}
    for m in body.get("messages", []):
        if m.get("role") == "assistant":
            continue        # the model's own words and tool calls, echoed back
        if tail in json.dumps(m):
            sys.exit(1)
PY
}

t_review_checker() {
        echo "=== review: a checker of the base's .agentfab.md; only changed lines count"
        cat > "$WORK/checker.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add(), list files in the deploy script."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": "Deploy script", "tool_calls": [{"name": "write_file", "arguments": {"path": "deploy.sh", "content": "#!/bin/sh\nfor f in \"$(ls)\"; do echo \"$f\"; done\nfor g in \"$(ls /tmp)\"; do echo \"$g\"; done\n"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed, deploy script"}}]}}
]
EOF
        model "$WORK/checker.json" --by-step || { fail "model server"; return; }
        make_repo rcheck
        # The base: a checker, and a script with an error (shellcheck's
        # SC2066) on a line the task does not touch.
        cat > "$WORK/agentfab.md" <<'EOF'
# Project notes

```agentfab
checker: shellcheck -f gcc {files}
```
EOF
        cat > "$WORK/deploy.sh" <<'EOF'
#!/bin/sh
for f in "$(ls)"; do echo "$f"; done
EOF
        chmod a+r "$WORK/agentfab.md" "$WORK/deploy.sh"
        cp "$WORK/agentfab.md" "$HARNESS_ROOT/home/alice/rcheck/.agentfab.md"
        cp "$WORK/deploy.sh" "$HARNESS_ROOT/home/alice/rcheck/deploy.sh"
        hx_as alice bash -c 'set -e; cd ~/rcheck && git add .agentfab.md deploy.sh &&
                git -c user.name=alice -c user.email=alice@example.com commit -q -m checker'
        local id out
        id=$(submit rcheck) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "the checker's error stopped the task"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = review ] && ok "Breaker is review" || fail "breaker $(task_prop "$id" Breaker)"
        [[ $(task_prop "$id" Reason) == *"deploy.sh:3"* ]] && ok "Reason names deploy.sh:3" || fail "reason $(task_prop "$id" Reason)"
        out=$(hx_as alice "${CTL[@]}" review "$id" 2>&1)
        echo "$out" | sed 's/^/    | /'
        grep -q "static-check *deploy.sh:3" <<<"$out" && ok "the error on the changed line is listed" || fail "review: $out"
        ! grep -q "deploy.sh:2" <<<"$out" && ok "the one on the unchanged line is not" || fail "line 2 counted: $out"
        echo "    review stage (one shellcheck in the sandbox, then the analysis): $(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=reviewed |
                python3 -c 'import json, sys; print(" ".join("%.1f ms" % (int(json.loads(l).get("AGENTFAB_DURATION_USEC", 0)) / 1000) for l in sys.stdin))')"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep -q 'shellcheck -f gcc' &&
                ok "the checker ran in the sandbox, journaled" || fail "checker not journaled"
        hx "${CTL[@]}" approve "$id" --comment "acceptable" >/dev/null 2>&1 && ok "root approves" || fail "approve"
        if wait_state "$id" succeeded; then ok "approved: delivered"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=reviewed | wc -l)" = 1 ] &&
                ok "approval did not review again" || fail "reviewed again"
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "agentfab/$id" |
                grep -q "^Agentfab-Review: 1 error, 0 warnings (approved by a person)$" &&
                ok "the tip says a person approved the review's error" || fail "tip's Agentfab-Review:"
}

t_review_vulnerable() {
        echo "=== review: a dependency into a critical advisory of the local OSV database"
        cat > "$WORK/vuln.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add(), pin PyYAML."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": "Pin PyYAML", "tool_calls": [{"name": "edit_file", "arguments": {"path": "requirements.txt", "old_text": "PyYAML==5.4.1", "new_text": "PyYAML==5.3.1"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}}
]
EOF
        model "$WORK/vuln.json" --by-step || { fail "model server"; return; }
        make_repo rvuln
        hx_as alice bash -c 'set -e; cd ~/rvuln && printf "PyYAML==5.4.1\nrequests==2.31.0\n" > requirements.txt &&
                git add requirements.txt && git -c user.name=alice -c user.email=alice@example.com commit -q -m deps'
        local id
        # The manifest breaker would stop the step first; this task may change them.
        id=$(submit rvuln) || { fail "submit: $id"; return; }
        wait_state "$id" awaiting-approval || { fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; }
        if [ "$(task_prop "$id" Breaker)" = dependency-manifest ]; then
                hx "${CTL[@]}" approve "$id" >/dev/null 2>&1
                sleep 1
                wait_state "$id" awaiting-approval || { fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; }
        fi
        [ "$(task_prop "$id" Breaker)" = vulnerable-dependency ] && ok "Breaker is vulnerable-dependency" ||
                fail "breaker $(task_prop "$id" Breaker): $(task_prop "$id" Reason)"
        [[ $(task_prop "$id" Reason) == *"TEST-PYPI-0001"* ]] && ok "Reason names the advisory" || fail "reason $(task_prop "$id" Reason)"
        hx "${CTL[@]}" cancel "$id" >/dev/null 2>&1
}

t_review_coverage() {
        echo "=== review: coverage dropped against the base's report"
        cat > "$WORK/cov.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add(), lower the coverage."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": "Report", "tool_calls": [{"name": "edit_file", "arguments": {"path": "cov.sh", "old_text": "DA:2,1", "new_text": "DA:2,0"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}}
]
EOF
        model "$WORK/cov.json" --by-step || { fail "model server"; return; }
        make_repo rcov
        # The test command writes an lcov report (a fixed one: what it says
        # is up to cov.sh, which the task changes).
        cat > "$WORK/cov.sh" <<'EOF'
#!/bin/sh
printf 'SF:calc.py\nDA:1,1\nDA:2,1\nend_of_record\n' > coverage.info
EOF
        chmod a+r "$WORK/cov.sh"
        cp "$WORK/cov.sh" "$HARNESS_ROOT/home/alice/rcov/cov.sh"
        echo coverage.info > "$HARNESS_ROOT/home/alice/rcov/.gitignore"
        hx_as alice bash -c 'set -e; cd ~/rcov && git add cov.sh .gitignore &&
                git -c user.name=alice -c user.email=alice@example.com commit -q -m cov'
        local id
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/rcov --goal "Make add() add" --acceptance "test_calc passes" \
                --test "sh cov.sh && python3 -m unittest -v" --coverage-report=coverage.info 2>&1) || { fail "submit: $id"; return; }
        wait_state "$id" awaiting-approval || { fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; }
        [ "$(task_prop "$id" Breaker)" = coverage-dropped ] && ok "Breaker is coverage-dropped" ||
                fail "breaker $(task_prop "$id" Breaker): $(task_prop "$id" Reason)"
        hx test -s "/var/lib/agentfab/tasks/$id/coverage-base" && ok "the base's report was kept at the baseline" || fail "no coverage-base"
        hx "${CTL[@]}" cancel "$id" >/dev/null 2>&1
}

t_review_model() {
        echo "=== review: a reviewer model requests changes once, then approves"
        cat > "$WORK/reviewer.json" <<'EOF'
{"responses": [
 {"reply": {"content": "Plan: fix add()."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}},
 {"reply": {"content": "Document add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "def add(a, b):\n", "new_text": "def add(a, b):\n    \"\"\"The sum of a and b.\"\"\"\n"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed and documented"}}]}}
],
"review": [
 {"reply": {"content": null, "tool_calls": [{"name": "review_verdict", "arguments": {"verdict": "request_changes", "summary": "Correct, but undocumented.", "comments": [{"file": "calc.py", "line": 1, "comment": "add() needs a docstring"}]}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "review_verdict", "arguments": {"verdict": "approve", "summary": "Good now."}}]}}
]}
EOF
        model "$WORK/reviewer.json" --by-step || { fail "model server"; return; }
        printf '[Review]\nModel=reviewer\nMaxReviewRounds=2\n' > "$HARNESS_ROOT/etc/agentfab/agentfab.conf.d/70-reviewer.conf"
        hx systemctl restart agentfab.service || fail "restart with a reviewer model"
        make_repo rmodel
        local id log
        id=$(submit rmodel) || { fail "submit: $id"; rm -f "$HARNESS_ROOT/etc/agentfab/agentfab.conf.d/70-reviewer.conf"; return; }
        if wait_state "$id" succeeded; then ok "reviewed, changed, reviewed again, delivered"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        rm -f "$HARNESS_ROOT/etc/agentfab/agentfab.conf.d/70-reviewer.conf"
        hx systemctl restart agentfab.service || fail "restart without the reviewer model"
        [ "$(grep -c review_verdict "$WORK/requests.jsonl")" -ge 2 ] && ok "the reviewer model was asked twice" || fail "reviewer requests"
        grep -q 'add() needs a docstring' "$WORK/requests.jsonl" && ok "the worker got the reviewer's comments" || fail "comments not sent"
        [ "$(hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=169e04b08a414cb7918d3297d47270b3 | wc -l)" = 2 ] &&
                ok "both verdicts journaled" || fail "review-verdict entries"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=review-verdict | grep -q '"AGENTFAB_VERDICT":"approve"' &&
                ok "the approval is journaled" || fail "no approve entry"
        hx_as alice "${CTL[@]}" summary "$id" | grep -q 'reviewer/scripted-reviewer (round 2): \*\*approved' &&
                ok "the summary names the reviewer and its verdict" || fail "summary: $(hx_as alice "${CTL[@]}" summary "$id")"
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:calc.py" | grep -q 'The sum of a and b' &&
                ok "the requested change is on the branch" || fail "change not on the branch"
        # The delivered tip (delivery's own record of the tests) says who reviewed it.
        log=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "agentfab/$id")
        grep -q "^Agentfab-Reviewed-By: reviewer/scripted-reviewer$" <<<"$log" && ok "the tip names the reviewer" ||
                fail "no Agentfab-Reviewed-By: $log"
        grep -q "^Agentfab-Review: 0 errors, 0 warnings$" <<<"$log" && ok "the tip carries the review's result" ||
                fail "no Agentfab-Review: $log"
}
