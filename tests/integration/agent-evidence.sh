# SPDX-License-Identifier: LGPL-2.1-or-later
# Scenarios of agent.sh (sourced by it, not run alone): the evidence on the
# delivered commit, the requirement on the ledger (reference, Amend()),
# "agentfabctl audit --verify" against the journal, and journald's Forward
# Secure Sealing in the harness.

# commits_of ID: every commit of base..tip, oldest first.
commits_of() {
        local base
        base=$(hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" rev-parse refs/agentfab/base)
        hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" rev-list --reverse "$base..agentfab/$1"
}

# every_commit ID PATTERN: each commit of the branch has a line matching PATTERN.
every_commit() {
        local id=$1 pattern=$2 c n=0
        for c in $(commits_of "$id"); do
                hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log -1 --format=%B "$c" | grep -qE "$pattern" || return 1
                n=$((n + 1))
        done
        [ "$n" -gt 0 ]
}

t_evidence() {
        echo "=== evidence on the delivered commit: step 2 edits, step 3 tests, the tip says what verified its tree"
        cat > "$WORK/evidence.json" <<'EOJ'
[
 {"reply": {"content": "Plan:\n1. Read calc.py.\n2. Fix add().\n3. Run the tests, finish."}},
 {"reply": {"content": null, "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds; the tests pass."}}]}}
]
EOJ
        model "$WORK/evidence.json" --by-step || { fail "model server"; return; }
        make_repo evidence
        local id out T=/var/lib/agentfab/tasks L tip msg

        # Errors name what the user gave: a repository with no commit yet,
        # handed over as an fd, and (private to its owner) as a bundle.
        out=$(hx_as alice bash -c 'rm -rf ~/empty ~/private && git init -q ~/empty && chmod a+rX ~/empty &&
                git init -q ~/private && chmod 700 ~/private ~/private/.git &&
                cd ~/empty && agentfabctl --no-ask-password submit --repo=. --goal=x 2>&1')
        grep -q "Repository '/home/alice/empty' has no commit yet" <<<"$out" && ! grep -q "file descriptor" <<<"$out" &&
                ok "an empty repository by fd: the message names its path and says it has no commit yet" ||
                fail "empty repository: $out"
        out=$(hx_as alice bash -c 'cd ~/private && agentfabctl --no-ask-password submit --repo=. --goal=x 2>&1')
        grep -q "/home/alice/private' has no commit yet" <<<"$out" && ok "an empty private repository (the bundle path): the same" ||
                fail "empty private repository: $out"
        expect_refused "2:Key 'reference' must be a ticket id or URL" "a malformed reference refused at submission (InvalidSpec, exit 2)" \
                submit evidence --ref "PROJ 1"
        id=$(submit evidence --ref PROJ-123) || { fail "submit: $id"; return; }
        EVIDENCE_ID=$id
        if wait_state "$id" succeeded; then ok "task succeeded"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        L="$T/$id/ledger.git"
        tip=$(hx git --git-dir="$L" rev-parse "agentfab/$id")
        msg=$(hx git --git-dir="$L" log -1 --format=%B "$tip")
        echo "$msg" | sed 's/^/    | /'
        grep -q "^Agentfab-Tests: pass (python3 -m unittest -v, exit 0, 2 tests)$" <<<"$msg" &&
                ok "the delivered tip carries Agentfab-Tests: pass (CMD, exit 0, 2 tests)" || fail "tip's tests trailer"
        hx git --git-dir="$L" diff --quiet "$tip^" "$tip" && ok "the evidence commit changes no file: its tree is the one tested" ||
                fail "evidence commit changed the tree"
        [ "$(task_prop "$id" HeadCommit)" = "$tip" ] && ok "HeadCommit is the evidence commit" || fail "HeadCommit"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=verified _SYSTEMD_UNIT=agentfab.service |
                grep -q "\"AGENTFAB_COMMIT\":\"$tip\"" && ok "journal: a verified entry names the tip" || fail "no verified entry"
        # git log on the branch alone: who, why, what verified it.
        local log
        log=$(hx git --git-dir="$L" log --format=%B "agentfab/$id")
        grep -q "^Agentfab-Submitter: alice" <<<"$log" && grep -q "^Agentfab-Model: default/scripted" <<<"$log" &&
                grep -q "^Fix add" <<<"$log" && ok "git log says who (submitter, model) and why (the step's words)" ||
                fail "who/why missing"
        every_commit "$id" "^Agentfab-Ref: PROJ-123$" && ok "Agentfab-Ref: PROJ-123 on every commit" || fail "reference trailer missing"
        every_commit "$id" "^Agentfab-Requirement: v1$" && ok "Agentfab-Requirement: v1 on every commit" || fail "requirement trailer"
        [ "$(task_prop "$id" Reference)" = PROJ-123 ] && [ "$(task_prop "$id" RequirementVersion)" = 1 ] &&
                ok "Reference and RequirementVersion properties" || fail "properties: $(task_prop "$id" Reference) $(task_prop "$id" RequirementVersion)"
        out=$(hx_as alice "${CTL[@]}" summary "$id")
        grep -q "^Reference: PROJ-123" <<<"$out" && grep -q "run by agentfabd itself on the final tree" <<<"$out" &&
                ok "summary: the reference and the tests run at delivery" || fail "summary: $out"
        hx_as alice "${CTL[@]}" status "$id" | grep -q "Reference: PROJ-123" && ok "agentfabctl status shows the reference" ||
                fail "status reference"

        # The audit trail cross-checked with the branch.
        out=$(hx "${CTL[@]}" audit "$id" --verify 2>&1) && grep -q "no gaps" <<<"$out" &&
                ok "audit --verify: journal and branch agree ($(tail -1 <<<"$out"))" || fail "audit --verify: $out"
        expect_refused "1:only a task that is paused, waits for approval or has failed" "a delivered task cannot be amended (BadState, exit 1)" \
                hx_as alice "${CTL[@]}" amend "$id" --goal "Something else"

        # A commit added behind the daemon's back, with a forged journal
        # entry from outside agentfab.service: both are seen.
        local added
        added=$(hx bash -c "cd /tmp && T=\$(git --git-dir=$L rev-parse $tip^{tree}) &&
                C=\$(git -c safe.directory='*' -c user.name=m -c user.email=m@m --git-dir=$L commit-tree \$T -p $tip -m 'sneaky') &&
                git --git-dir=$L update-ref refs/heads/agentfab/$id \$C $tip && echo \$C")
        printf 'MESSAGE=forged\nAGENTFAB_TASK=%s\nAGENTFAB_EVENT=step\nAGENTFAB_STEP=9\nAGENTFAB_COMMIT=%s\n' "$id" "$added" |
                hx logger --journald
        local rc=0
        out=$(hx "${CTL[@]}" audit "$id" --verify 2>&1) || rc=$?
        echo "$out" | sed 's/^/    | /'
        [ "$rc" = 1 ] && grep -q "gap: branch: commit $added has no step or verified entry" <<<"$out" &&
                grep -q "gap: delivered: the journal says $tip was delivered, the branch's tip is $added" <<<"$out" &&
                ok "audit --verify: the added commit and the moved tip reported, exit 1 (a forged entry does not count)" ||
                fail "audit --verify after tampering (rc $rc)"
        out=$(hx "${CTL[@]}" --json audit "$id" --verify 2>&1)
        python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert len(d["gaps"]) == 2 and d["commits"] >= 3' "$out" &&
                ok "audit --verify --json lists the gaps" || fail "json: $out"
        hx git --git-dir="$L" update-ref "refs/heads/agentfab/$id" "$tip" "$added"
}

t_amend() {
        echo "=== Amend(): a person revises the requirement of a paused task; the model hears it; later commits say v2"
        cat > "$WORK/amend.json" <<'EOJ'
[
 {"reply": {"content": "Plan: write notes, run the tests until they pass."}},
 {"reply": {"content": "Notes first", "tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "calc\n"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": "Document add", "tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "add(a, b) returns a + b\n"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed and documented"}}]}}
]
EOJ
        model "$WORK/amend.json" --by-step || { fail "model server"; return; }
        make_repo amendme
        local id out rc T=/var/lib/agentfab/tasks step1 alice_uid
        id=$(submit amendme --ref https://tracker.example/PROJ-7) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "paused by the tests-failing breaker"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        step1=$(hx git --git-dir="$T/$id/ledger.git" log --format=%H --grep="^Agentfab-Step: 1$" "agentfab/$id" | head -1)

        # A journal that lost entries (here: its older files removed, as a
        # vacuum or an intruder would): the step 1 entry is gone.
        # What main() checks at the end must not go with them: the files
        # are checked for sanitizer reports and crashes here.
        hx journalctl --rotate >/dev/null 2>&1
        out=$(hx journalctl -q --no-pager --file='/run/log/journal/*/system@*.journal' -u agentfab.service -u 'agentfab-launcher@*')
        [ -n "$out" ] && ! grep -q 'AddressSanitizer\|runtime error:\|LeakSanitizer\|code=dumped\|status=6/ABRT\|status=11/SEGV' <<<"$out" &&
                ok "(before they go) no sanitizer report or crash in the older journal files ($(wc -l <<<"$out") lines)" ||
                fail "older journal files: empty or with a sanitizer report or crash"
        hx bash -c 'rm -f /run/log/journal/*/system@*.journal /var/log/journal/*/system@*.journal'

        expect_refused "2:needs --goal=TEXT, --acceptance=TEXT or both" "amend needs a change (usage, exit 2)" \
                hx_as alice "${CTL[@]}" amend "$id"
        expect_refused "2:changes nothing" "an amendment that changes nothing refused (InvalidArgs, exit 2)" \
                hx_as alice "${CTL[@]}" amend "$id" --goal "Make add() add"
        expect_refused "2:Key 'goal' contains control characters" "a goal with control characters refused (InvalidArgs, exit 2)" \
                hx_as alice "${CTL[@]}" amend "$id" --goal "$(printf 'x\001y')"
        rc=0; out=$(hx_as carol "${CTL[@]}" amend "$id" --goal "Carol's goal" 2>&1) || rc=$?
        [ "$rc" = 3 ] && [ "$(task_prop "$id" RequirementVersion)" = 1 ] &&
                ok "another user without an administrator's password cannot amend it" || fail "carol amended: $rc $out"

        out=$(hx_as alice "${CTL[@]}" amend "$id" --goal "Make add() add, and document it in NOTES.md" \
                --acceptance "test_calc passes; NOTES.md says what add() returns" 2>&1) &&
                ok "the owner amends goal and acceptance: $out" || { fail "amend: $out"; return; }
        [ "$(task_prop "$id" RequirementVersion)" = 2 ] && [[ $(task_prop "$id" Goal) == *"document it in NOTES.md"* ]] &&
                ok "RequirementVersion 2, Goal changed" || fail "properties after amend"
        [ "$(task_prop "$id" State)" = awaiting-approval ] && ok "still awaiting approval" || fail "state $(task_prop "$id" State)"
        alice_uid=$(hx id -u alice)
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=60a033f169e7438e806c919bbdc4577c _SYSTEMD_UNIT=agentfab.service |
                python3 -c 'import json,sys
e = [json.loads(l) for l in sys.stdin][-1]
assert e["AGENTFAB_UID"] == sys.argv[1] and e["AGENTFAB_REQUIREMENT"] == "v2", e
assert e["AGENTFAB_CHANGED"] == "goal,acceptance" and e["AGENTFAB_OLD_GOAL"] == "Make add() add", e
assert "NOTES.md" in e["AGENTFAB_GOAL"] and e["AGENTFAB_OLD_ACCEPTANCE"] == "test_calc passes", e' "$alice_uid" &&
                ok "journal: amended entry says who (uid $alice_uid) changed what (old and new texts)" || fail "amended entry"
        hx python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["progress"]["requirement"] == 2' "$T/$id/state.json" && ok "the state file keeps the requirement's version" || fail "state file"

        hx "${CTL[@]}" approve "$id" --comment "go on with the new requirement" >/dev/null 2>&1 || { fail "approve"; return; }
        if wait_state "$id" succeeded; then ok "approved, went on and succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        grep -q 'it is now version v2' "$WORK/requests.jsonl" && grep -q 'document it in NOTES.md' "$WORK/requests.jsonl" &&
                ok "the model was told what changed" || fail "model not told of the amendment"

        local c v1 v2 n=0
        for c in $(commits_of "$id"); do
                n=$((n + 1))
                v=$(hx git --git-dir="$T/$id/ledger.git" log -1 --format=%B "$c" | sed -n 's/^Agentfab-Requirement: //p')
                if [ "$c" = "$step1" ]; then v1=$v; else v2="${v2:-}$v "; fi
        done
        [ "$v1" = v1 ] && [ "$v2" = "$(printf 'v2 %.0s' $(seq $((n - 1))))" ] &&
                ok "step 1 says v1, each of the $((n - 1)) later commits Agentfab-Requirement: v2" || fail "requirement trailers: '$v1' / '$v2'"
        every_commit "$id" "^Agentfab-Ref: https://tracker.example/PROJ-7$" && ok "the URL reference on every commit" || fail "ref"
        hx_as alice "${CTL[@]}" summary "$id" | grep -q "Requirement: v2 (amended" && ok "the summary says the requirement was amended" ||
                fail "summary requirement"

        # The journal lost step 1's entry: audit --verify says exactly that.
        rc=0; out=$(hx "${CTL[@]}" audit "$id" --verify 2>&1) || rc=$?
        echo "$out" | sed 's/^/    | /'
        [ "$rc" = 1 ] && grep -q "gap: branch: commit $step1 has no step or verified entry" <<<"$out" &&
                [ "$(grep -c '^gap:' <<<"$out")" = 1 ] &&
                ok "audit --verify reports the missing journal entry, and only that" || fail "audit --verify (rc $rc)"
}

t_journal_seal() {
        echo "=== journald's Forward Secure Sealing, turned on as agentfabd(8), \"Sealing the journal\", says"
        local key out rc mid f copy=/var/log/journal/tampered.journal off
        mid=$(hx cat /etc/machine-id)
        # The journal made persistent first (the harness's is volatile), so
        # that no older entries are flushed into a file already sealed.
        hx mkdir -p "/var/log/journal/$mid" /etc/systemd/journald.conf.d
        printf '[Journal]\nStorage=persistent\nSeal=yes\n' | hx tee /etc/systemd/journald.conf.d/zz-seal.conf >/dev/null
        hx systemctl restart systemd-journald && hx journalctl --flush >/dev/null 2>&1 &&
                ok "journald restarted with Storage=persistent, Seal=yes" || { fail "journald restart"; return; }
        # A short sealing interval, so that the test sees a sealed stretch.
        key=$(hx journalctl --setup-keys --interval=5s 2>/dev/null | tail -1)
        [[ $key =~ ^[0-9a-f-]+/[0-9a-f]+-[0-9a-f]+$ ]] && hx test -s "/var/log/journal/$mid/fss" &&
                ok "journalctl --setup-keys: sealing key in /var/log/journal, verification key printed" ||
                { fail "setup-keys: '$key'"; return; }
        hx systemctl restart systemd-journald && hx journalctl --rotate >/dev/null 2>&1 || { fail "rotate"; return; }
        hx logger -t agentfab-seal-test "one"
        sleep 6
        hx logger -t agentfab-seal-test "two"
        sleep 6
        hx logger -t agentfab-seal-test "three"
        hx journalctl --rotate >/dev/null 2>&1
        rc=0; out=$(hx journalctl --verify --verify-key="$key" --directory="/var/log/journal/$mid" 2>&1) || rc=$?
        echo "$out" | sed 's/^/    | /' | tail -6
        [ "$rc" = 0 ] && grep -q "Validated from" <<<"$out" && ok "journalctl --verify --verify-key= passes, a sealed stretch validated" ||
                fail "verify: rc $rc"

        # One entry changed in a copy of the sealed file: the check fails.
        f=$(hx bash -c "ls -t /var/log/journal/$mid/system@*.journal 2>/dev/null | head -1")
        if [ -n "$f" ] && hx cp "$f" "$copy"; then
                off=$(hx bash -c "grep -a -b -o 'MESSAGE=two' $copy | head -1 | cut -d: -f1")
                if [ -n "$off" ]; then
                        hx python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); f.write(b"MESSAGE=tw0")' "$copy" "$off"
                        expect_refused "1:FAIL: $copy" "an entry changed in a sealed file fails verification (exit 1, FAIL: $copy)" \
                                hx journalctl --verify --verify-key="$key" --file="$copy"
                else
                        fail "the sealed file does not hold the test's entry"
                fi
                hx rm -f "$copy"
        else
                fail "no archived sealed journal file"
        fi
}
