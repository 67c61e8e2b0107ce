# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Budgets on what a task uses (sourced by agent.sh, which boots the harness
# and provides model, submit, wait_state, task_prop, ok and fail; the
# spinner and its helpers come from agent-pause.sh). A command spinning the
# CPU past max_cpu_sec= is stopped in its middle by the budget breaker,
# which names CPU time and its figures; only an administrator raises the
# limit with the approval (approve --limit=), garbage and values below what
# is used are refused, and the task goes on and is delivered with the
# approval and its limit on the tip.

# budget_spin_script: plan, a spinner of BUDGET_SPIN_CPU s of CPU time, the
# fix, finish. By step: the step cut short by the breaker is asked again.
BUDGET_SPIN_CPU=6
budget_spin_script() {
        local cmd="python3 -c 'import time
t = time.process_time()
while time.process_time() - t < $BUDGET_SPIN_CPU: pass
print(\"agentfab-spin done\")'"
        {
                echo '['
                echo ' {"reply": {"content": "Plan: spin, then fix add()."}},'
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
