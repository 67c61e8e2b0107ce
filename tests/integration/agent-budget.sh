# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Budgets on what a task uses (sourced by agent.sh, which boots the harness
# and provides model, submit, wait_state, task_prop, ok and fail; the
# spinner and its helpers come from agent-pause.sh). A command spinning the
# CPU past max_cpu_sec= is stopped in its middle by the budget breaker,
# which names CPU time and its figures; only an administrator raises the
# limit with the approval (approve --limit=), garbage and values below what
# is used are refused, and the task goes on and is delivered with the
# approval and its limit on the tip. An owner past a daily quota has a new
# task queued with the reason in status, and it runs once the daemon's
# clock is moved a day on; usage sums what the tasks' state files say, and
# only an administrator sees another's.

# budget_spin_script [SECONDS]: plan, a spinner of SECONDS (default
# BUDGET_SPIN_CPU) s of CPU time, the fix, finish. By step: the step cut
# short by the breaker is asked again.
BUDGET_SPIN_CPU=6
budget_spin_script() {
        local cmd="python3 -c 'import time
t = time.process_time()
while time.process_time() - t < ${1:-$BUDGET_SPIN_CPU}: pass
print(\"agentfab-spin done\")'"
        {
                echo '['
                echo ' {"reply": {"content": "Plan: spin, then fix add().", "usage": {"prompt_tokens": 100, "completion_tokens": 20}}},'
                echo " {\"reply\": {\"content\": \"Spin\", \"tool_calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$cmd")}}]}},"
                echo ' {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},'
                echo ' {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "spun and fixed"}}]}}'
                echo ']'
        } > "$WORK/budget-spin.json"
}

t_budget_cpu() {
        echo "=== a command spinning the CPU past max_cpu_sec=2: the budget breaker, approve --limit="
        local id out rc t0 t1 reason used i
        make_repo budgetcpu
        rc=0; out=$(submit budgetcpu --limit max_cpu_secs=2) || rc=$?
        [ "$rc" != 0 ] && [[ $out == *"Unknown limit 'max_cpu_secs'"*"max_cpu_sec"*"max_network_bytes"*"max_cost"* ]] &&
                ok "a misspelt limit is refused with the known ones: ${out##*known limits: }" || fail "max_cpu_secs: $rc $out"
        rc=0; out=$(submit budgetcpu --limit max_cost=0.1234567) || rc=$?
        [ "$rc" != 0 ] && [[ $out == *"six decimals"* ]] && ok "max_cost finer than a millionth is refused" ||
                fail "max_cost=0.1234567: $rc $out"

        budget_spin_script
        model "$WORK/budget-spin.json" --by-step || { fail "model server"; return; }
        id=$(submit budgetcpu --limit max_cpu_sec=2) || { fail "submit: $id"; return; }
        ok "submitted $id with max_cpu_sec=2"
        wait_spinning "$id" || { fail "the spinner did not start"; return; }
        t0=$(date +%s%N)
        for i in $(seq 400); do
                [ "$(task_prop "$id" State)" = awaiting-approval ] && break
                sleep 0.05
        done
        t1=$(date +%s%N)
        [ "$(task_prop "$id" State)" = awaiting-approval ] ||
                { fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; }
        echo "    stopped $(( (t1 - t0) / 1000000 )) ms after the spinner was seen using CPU"
        [ $(( (t1 - t0) / 1000000 )) -lt 15000 ] && ok "the spinner is stopped within a few seconds ($(( (t1 - t0) / 1000000 )) ms)" ||
                fail "stopped only after $(( (t1 - t0) / 1000000 )) ms"
        [ "$(task_prop "$id" Breaker)" = budget ] && ok "Breaker is budget" || fail "breaker $(task_prop "$id" Breaker)"
        reason=$(task_prop "$id" Reason)
        echo "    Reason: $reason"
        [[ $reason == *"CPU time "*" s of max_cpu_sec=2"* ]] && ok "Reason names CPU time and its figures" || fail "reason: $reason"
        used=$(sed -n 's/.*CPU time \([0-9.]*\) s of.*/\1/p' <<<"$reason")
        python3 -c "import sys; sys.exit(0 if 2 <= float('$used') < 4 else 1)" 2>/dev/null &&
                ok "the CPU time used ($used s) is past 2 s and well below the spinner's $BUDGET_SPIN_CPU s" ||
                fail "CPU time used: '$used'"
        ! hx pgrep -f agentfab-spin >/dev/null 2>&1 && ok "the spinner no longer runs" || fail "the spinner still runs"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=721e187c39954be5bc87afe6ce82154c |
                grep -q '"AGENTFAB_BREAKER":"budget"' && ok "the budget breaker is journaled" || fail "no breaker entry"

        # Only an administrator raises it, and only to something sensible.
        rc=0; out=$(hx_as alice "${CTL[@]}" approve "$id" --limit=max_cpu_sec=600 2>&1) || rc=$?
        [ "$rc" = 3 ] && ok "the owner may not raise the limit (denied)" || fail "approve by alice: $rc $out"
        rc=0; out=$(hx "${CTL[@]}" approve "$id" --limit=max_cpu_sec=1 2>&1) || rc=$?
        [ "$rc" != 0 ] && [[ $out == *"max_cpu_sec=1 is not above what the task has used (CPU time"* ]] &&
                ok "a limit below what is used is refused: $out" || fail "max_cpu_sec=1: $rc $out"
        rc=0; out=$(hx "${CTL[@]}" approve "$id" --limit=memory_max=99999999 2>&1) || rc=$?
        [ "$rc" != 0 ] && [[ $out == *"memory_max"*"cannot change it"* ]] && ok "a sandbox limit cannot be set by an approval" ||
                fail "memory_max: $rc $out"
        rc=0; out=$(hx "${CTL[@]}" approve "$id" --limit=cpu_seconds=600 2>&1) || rc=$?
        [ "$rc" != 0 ] && [[ $out == *"Unknown limit 'cpu_seconds'"*"max_cpu_sec"* ]] && ok "an unknown name is refused with the list" ||
                fail "cpu_seconds: $rc $out"
        rc=0; out=$(hx "${CTL[@]}" approve "$id" --limit=max_cpu_sec=lots 2>&1) || rc=$?
        [ "$rc" != 0 ] && [[ $out == *"Invalid --limit 'max_cpu_sec=lots'"* ]] && ok "a value that is no number is refused" ||
                fail "max_cpu_sec=lots: $rc $out"
        rc=0; out=$(hx "${CTL[@]}" reject "$id" --limit=max_cpu_sec=600 2>&1) || rc=$?
        [ "$rc" != 0 ] && ok "--limit= does not go with reject" || fail "reject --limit: $rc $out"
        [ "$(task_prop "$id" State)" = awaiting-approval ] && ok "nothing of that changed the task" || fail "state $(task_prop "$id" State)"

        hx "${CTL[@]}" approve "$id" --limit=max_cpu_sec=600 --comment "spin on" >/dev/null 2>&1 &&
                ok "root approves with --limit=max_cpu_sec=600" || { fail "approve: $(hx "${CTL[@]}" approve "$id" --limit=max_cpu_sec=600 2>&1)"; return; }
        hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$id" org.agentfab.Task1 Limits |
                grep -q '"max_cpu_sec" 600' && ok "Limits shows max_cpu_sec 600" ||
                fail "Limits: $(hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$id" org.agentfab.Task1 Limits)"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=31c8cfec97e449d3b32a6b20caf06cb0 |
                grep -q '"AGENTFAB_LIMITS":"max_cpu_sec=600"' && ok "the limit set is journaled with the approver" ||
                fail "no limit entry in the journal"
        if wait_state "$id" succeeded; then ok "the task went on, spun its $BUDGET_SPIN_CPU s and succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        ledger_log "$id" | grep -q "Agentfab-Approved: step [0-9]*, breaker budget, limits max_cpu_sec=600, by root (uid 0)" &&
                ok "the tip lists the approval with its limit" ||
                fail "tip: $(ledger_log "$id" | grep Agentfab-Approved)"
}

# status_sums UID SINCE_USEC: tasks, CPU µs and tokens in of the owner's
# tasks submitted since then, each as its status --json says.
status_sums() {
        local id n=0 cpu=0 tin=0 c t
        for id in $(hx bash -c 'cat /var/lib/agentfab/tasks/*/state.json' | python3 -c '
import json, sys
uid, since = int(sys.argv[1]), int(sys.argv[2])
dec = json.JSONDecoder(); text = sys.stdin.read().strip(); i = 0
while i < len(text):
    j, i = dec.raw_decode(text, i)
    while i < len(text) and text[i].isspace(): i += 1
    if j.get("owner") == uid and j.get("created_usec", 0) >= since: print(j["id"])' "$1" "$2"); do
                read -r c t < <(hx "${CTL[@]}" status "$id" --json | python3 -c '
import json, sys
r = json.load(sys.stdin).get("resources", {})
print(r.get("cpu_usec") or 0, r.get("tokens_in") or 0)')
                n=$((n + 1)); cpu=$((cpu + c)); tin=$((tin + t))
        done
        echo "$n $cpu $tin"
}

t_budget_quota() {
        echo "=== a daily quota: past MaxCPUSecPerUserPerDay=, a new task waits queued until the next day; usage"
        local id1 id2 out rc reason day0 alice_uid i
        alice_uid=$(hx id -u alice)
        day0=$(( $(date +%s) / 86400 * 86400 ))
        # What alice's earlier tasks of today used, and one second more.
        local quota
        quota=$(hx "${CTL[@]}" usage --json | python3 -c '
import json, sys
print(sum(u["cpu_usec"] for u in json.load(sys.stdin) if u["uid"] == int(sys.argv[1])) // 1000000 + 1)' "$alice_uid") ||
                { fail "usage before: $quota"; return; }
        echo "    MaxCPUSecPerUserPerDay=$quota"
        hx bash -c "printf '[Daemon]\\nMaxCPUSecPerUserPerDay=$quota\\n' > /etc/agentfab/agentfab.conf.d/60-quota.conf"
        hx systemctl restart agentfab.service || { fail "restart with the quota"; return; }
        budget_spin_script 2
        model "$WORK/budget-spin.json" --by-step || { fail "model server"; return; }
        make_repo quota
        id1=$(submit quota) || { fail "submit: $id1"; return; }
        if wait_state "$id1" succeeded; then ok "a first task spins 2 s of CPU and succeeds"; else
                fail "first task: $(task_prop "$id1" State): $(task_prop "$id1" Reason)"; return; fi

        id2=$(submit quota) || { fail "submit: $id2"; return; }
        ok "a second task is accepted: $id2"
        for i in $(seq 40); do [[ $(task_prop "$id2" Reason) == waiting:* ]] && break; sleep 0.1; done
        sleep 2
        [ "$(task_prop "$id2" State)" = queued ] && ok "it stays queued" || fail "state $(task_prop "$id2" State)"
        reason=$(task_prop "$id2" Reason)
        echo "    Reason: $reason"
        [[ $reason == "waiting: alice used "*" s CPU of MaxCPUSecPerUserPerDay=$quota today (UTC); new tasks start after 00:00 UTC" ]] &&
                ok "Reason names the owner, the figure and the quota" || fail "reason: $reason"
        hx_as alice "${CTL[@]}" status "$id2" | grep -q "waiting: alice used" && ok "status shows it" ||
                fail "status: $(hx_as alice "${CTL[@]}" status "$id2" 2>&1 | head -5)"

        # usage: alice's own without asking; another's only for an administrator.
        out=$(hx_as alice "${CTL[@]}" usage --user=alice --since="$(date -u +%F)" --json 2>&1) &&
                [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["user"])' <<<"$out" 2>/dev/null)" = alice ] &&
                ok "alice sees her own usage" || fail "alice usage: $out"
        rc=0; out=$(hx_as carol "${CTL[@]}" usage --user=alice 2>&1) || rc=$?
        [ "$rc" = 3 ] && ok "carol may not see alice's usage (denied)" || fail "carol usage --user=alice: $rc $out"
        rc=0; out=$(hx_as carol "${CTL[@]}" usage 2>&1) || rc=$?
        [ "$rc" = 0 ] && [[ $out == *"Only your own usage"* ]] && [[ $out != *alice* ]] &&
                ok "carol's usage without --user shows only her own, and says so" || fail "carol usage: $rc $out"
        local sums usage_line
        sums=$(status_sums "$alice_uid" $((day0 * 1000000)))
        usage_line=$(hx "${CTL[@]}" usage --since="$(date -u +%F)" --json | python3 -c '
import json, sys
for u in json.load(sys.stdin):
    if u["uid"] == int(sys.argv[1]): print(u["tasks"], u["cpu_usec"], u["tokens_in"])' "$alice_uid")
        echo "    alice today: her tasks' status $sums, usage $usage_line (tasks, CPU us, tokens in)"
        [ -n "$usage_line" ] && [ "$sums" = "$usage_line" ] && ok "usage's sums match her tasks' figures ($usage_line)" ||
                fail "usage $usage_line, the tasks' status $sums"

        # The next day: the daemon's clock moved on, the task starts.
        hx bash -c 'mkdir -p /etc/systemd/system/agentfab.service.d &&
                printf "[Service]\nEnvironment=AGENTFAB_TEST_CLOCK_OFFSET_SEC=86400\n" > /etc/systemd/system/agentfab.service.d/60-clock.conf &&
                systemctl daemon-reload && systemctl restart agentfab.service' || { fail "move the clock"; return; }
        if wait_state "$id2" succeeded; then ok "the next day the queued task ran and succeeded"; else
                fail "second task: $(task_prop "$id2" State): $(task_prop "$id2" Reason)"; fi
        hx journalctl -q -u agentfab.service | grep -q "AGENTFAB_TEST_CLOCK_OFFSET_SEC=86400: the daily quotas run on a clock" &&
                ok "the daemon says in the log that a test clock is set" || fail "no warning of the test clock"

        hx rm -f /etc/agentfab/agentfab.conf.d/60-quota.conf /etc/systemd/system/agentfab.service.d/60-clock.conf
        hx bash -c 'systemctl daemon-reload && systemctl restart agentfab.service'
}

t_budget_cost() {
        echo "=== a task past max_cost= (a profile with prices): the budget breaker names the cost; approve --limit=max_cost="
        local id reason out rc
        # The plan costs 100000 tokens in at 2/MTok and 10000 out at 10/MTok: 0.30.
        cat > "$WORK/budget-cost.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add().", "usage": {"prompt_tokens": 100000, "completion_tokens": 10000}}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}}
]
EOF
        model "$WORK/budget-cost.json" --by-step || { fail "model server"; return; }
        make_repo budgetcost
        id=$(submit budgetcost --model priced --limit max_cost=0.25) || { fail "submit: $id"; return; }
        hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$id" org.agentfab.Task1 Limits |
                grep -q '"max_cost" 250000' && ok "max_cost=0.25 is 250000 millionths on the bus" ||
                fail "Limits: $(hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$id" org.agentfab.Task1 Limits)"
        if wait_state "$id" awaiting-approval; then ok "stopped"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = budget ] && ok "Breaker is budget" || fail "breaker $(task_prop "$id" Breaker)"
        reason=$(task_prop "$id" Reason)
        echo "    Reason: $reason"
        [[ $reason == *"cost 0.30"*" of max_cost=0.25"* ]] && ok "Reason names the cost and its figures" || fail "reason: $reason"
        [ "$(task_prop "$id" Step)" = 0 ] && ok "before any step" || fail "step $(task_prop "$id" Step)"
        rc=0; out=$(hx "${CTL[@]}" approve "$id" --limit=max_cost=0.2 2>&1) || rc=$?
        [ "$rc" != 0 ] && [[ $out == *"max_cost=0.20 is not above what the task has used (cost 0.30"* ]] &&
                ok "max_cost below the cost is refused: $out" || fail "max_cost=0.2: $rc $out"
        hx "${CTL[@]}" approve "$id" --limit=max_cost=1 >/dev/null 2>&1 && ok "approved with --limit=max_cost=1" ||
                { fail "approve: $(hx "${CTL[@]}" approve "$id" --limit=max_cost=1 2>&1)"; return; }
        if wait_state "$id" succeeded; then ok "the task went on and succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        ledger_log "$id" | grep -q "Agentfab-Approved: step 0, breaker budget, limits max_cost=1.00, by root (uid 0)" &&
                ok "the tip lists the approval with max_cost as an amount" || fail "tip: $(ledger_log "$id" | grep Agentfab-Approved)"
}
