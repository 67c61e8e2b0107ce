# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What a task uses, accounted (sourced by agent.sh, which boots the harness
# and provides model, make_repo, submit, wait_state, task_prop, ledger_log,
# ok and fail): a task whose command spins the CPU and holds memory, under
# a model profile with prices, shows nonzero CPU time and memory, the
# tokens the scripted model server reported in its usage (cached ones
# too), and its cost, in status and its JSON, the Resources property, the
# summary, the end-of-task journal entry and the delivered tip's
# Agentfab-Resources: trailer.

# resources_prepare_root ROOT: a model profile with prices (agent.sh calls
# it while it prepares the harness's root). 2 and 10 per million tokens
# are 2 and 10 millionths a token: the cost is exact.
resources_prepare_root() {
        local R=$1
        printf '[Model]\nName=priced\nEndpoint=http://127.0.0.1:%s/v1\nModel=scripted-priced\nTimeoutSec=20\nMaxRetries=3\nRetryBaseSec=200ms\nPriceInputPerMTok=2\nPriceOutputPerMTok=10.000\n' \
                "$PORT" > "$R/etc/agentfab/agentfab.conf.d/60-resources.conf"
}

t_resources() {
        echo "=== what a task used: CPU, memory, tokens and money, shown everywhere"
        # 4000+3000+2000+1000 tokens in, 400+300+200+100 out; the diff
        # review's second finish (answered by the server) reports none.
        cat > "$WORK/resources.json" <<'EOF2'
[
 {"reply": {"content": "Plan: burn some CPU, fix add(), run the tests, finish.",
            "usage": {"prompt_tokens": 4000, "completion_tokens": 400, "prompt_tokens_details": {"cached_tokens": 1024}}}},
 {"reply": {"content": "Spin", "tool_calls": [{"name": "run_command", "arguments": {"command": "python3 -c 'import time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\nprint(\"spun\", len(b))'"}}],
            "usage": {"prompt_tokens": 3000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 2048}}}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}],
            "usage": {"prompt_tokens": 2000, "completion_tokens": 200}}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}}
]
EOF2
        model "$WORK/resources.json" --by-step || { fail "model server"; return; }
        make_repo resources
        local id status json summary log entry calls
        id=$(submit resources --model priced) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "the task succeeds"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi

        status=$(hx_as alice "${CTL[@]}" status "$id" 2>&1)
        echo "$status" | grep -E 'Step:|Used:' | sed 's/^/    | /'
        json=$(hx_as alice "${CTL[@]}" --json status "$id" 2>&1)
        calls=$(python3 -c 'import json, sys; print(sum(1 for l in open(sys.argv[1]) if l.strip() and (json.loads(l).get("body") or {}).get("messages")))' \
                "$WORK/requests.jsonl")
        python3 - "$json" "$calls" <<'PY' && ok "status --json: CPU and memory used, tokens in/out/cached as the server reported, 0.03 USD, $calls model calls, $(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["resources"]["processes"])' "$json") processes" || fail "status --json: $json"
import json, sys
r = json.loads(sys.argv[1])["resources"]
calls = int(sys.argv[2])
problems = []
if not (r.get("cpu_usec") or 0) >= 1000000: problems.append("cpu_usec below the 1.5 s spun")
if not (r.get("memory_peak") or 0) >= 64 << 20: problems.append("memory_peak below the 64 MiB held")
if r.get("tokens_in") != 10000 or r.get("tokens_out") != 1000: problems.append("tokens")
if r.get("tokens_cached") != 3072: problems.append("cached tokens")
if r.get("cost_micros") != 2 * 10000 + 10 * 1000 or r.get("currency") != "USD": problems.append("cost")
if r.get("model_calls") != calls: problems.append("model calls")
if not (r.get("wall_usec") or 0) > 0: problems.append("wall")
if r.get("net_up_bytes") != 0 or r.get("net_down_bytes") != 0: problems.append("network without a network")
# The sandbox's PID namespace: its own set-up, the baseline's and the
# commands' shells and Pythons, each run_tests' and finish's tests.
if not (r.get("processes") or 0) >= 6: problems.append("processes")
if problems:
    print(problems, r, file=sys.stderr)
    sys.exit(1)
PY
        [[ $status == *"Used: cpu "* && $status == *"tokens 10000/1000, 0.03 USD, wall "* && $status != *"cpu 0.0 s"* ]] &&
                ok "status shows what it used, with its cost" || fail "status: $status"
        [[ $(task_prop "$id" Resources) == *'"cost_micros" t 30000'* ]] &&
                ok "the Resources property has the cost in millionths" || fail "Resources: $(task_prop "$id" Resources)"

        summary=$(hx_as alice "${CTL[@]}" summary "$id" 2>&1)
        [[ $summary == *"- resources: cpu "*"0.03 USD"* && $summary == *"prompt tokens the server had cached: 3072"* ]] &&
                ok "the summary has the resources and the cost" || fail "summary: $(echo "$summary" | grep -A8 'Budget used')"

        log=$(ledger_log "$id")
        [[ $(echo "$log" | grep -m1 'Agentfab-Resources:') =~ Agentfab-Resources:\ cpu\ [0-9.]+\ s,\ memory\ [0-9.]+\ MiB,.*tokens\ 10000/1000,\ 0\.03\ USD,\ wall ]] &&
                ok "the delivered tip's trailer: $(echo "$log" | grep -m1 'Agentfab-Resources:' | sed 's/^ *//')" ||
                fail "trailer: $(echo "$log" | grep 'Agentfab-')"

        entry=$(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=resources)
        python3 - "$entry" <<'PY' && ok "one journal entry at the end, a field per counter" || fail "journal: $entry"
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
assert len(lines) == 1, len(lines)
e = lines[0]
assert e["MESSAGE_ID"] == "a82cbfc2b3e54b51b33a4b580095d5f7"
assert e["AGENTFAB_TOKENS_IN"] == "10000" and e["AGENTFAB_TOKENS_CACHED"] == "3072"
assert e["AGENTFAB_COST_MICROS"] == "30000" and e["AGENTFAB_CURRENCY"] == "USD"
assert int(e["AGENTFAB_CPU_USEC"]) >= 1000000 and int(e["AGENTFAB_MEMORY_PEAK"]) >= 64 << 20
assert int(e["AGENTFAB_PROCESSES"]) >= 6
PY
}
