# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Pausing that frees the machine (sourced by agent.sh, which boots the
# harness and provides model, submit, wait_state, task_prop, ok and fail).
# A command that spins the CPU is frozen in the middle: its scope's CPU
# usage stands still while the task is paused, across a restart of the
# daemon too; after a resume the command finishes within its timeout and
# the step completes. A task that waits for approval is frozen the same
# way; MaxPausedSec= tears a frozen sandbox down. A pause right after the
# submission holds. A cancel during the delivery stands.

# The spinner: uses SPIN_CPU seconds of CPU time (not wall-clock time, so a
# freeze cannot shorten it), then exits 0.
SPIN_CPU=6
SPIN_CMD="python3 -c 'import time
t = time.process_time()
while time.process_time() - t < $SPIN_CPU: pass
print(\"agentfab-spin done\")'"

# scope_cpu_usec ID: the CPU time (us) used by the task's scope so far: the
# v1 cpuacct controller where there is one, else the unified cpu.stat.
scope_cpu_usec() {
        local u=agentfab.slice/agentfab-task-$1.scope v
        if v=$(hx cat "/sys/fs/cgroup/cpuacct/$u/cpuacct.usage" 2>/dev/null) && [ -n "$v" ]; then
                echo $((v / 1000)); return 0
        fi
        for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do
                v=$(hx sed -n 's/^usage_usec //p' "$d/$u/cpu.stat" 2>/dev/null) && [ -n "$v" ] && { echo "$v"; return 0; }
        done
        echo -1
}

scope_events() {
        local u=agentfab.slice/agentfab-task-$1.scope
        hx cat "/sys/fs/cgroup/unified/$u/cgroup.events" 2>/dev/null || hx cat "/sys/fs/cgroup/$u/cgroup.events" 2>/dev/null
}

scope_active() { hx systemctl is-active --quiet "agentfab-task-$1.scope"; }

# wait_spinning ID: until the spinner runs in the task's sandbox (90 s: the
# task prepares, runs its baseline tests and asks the model twice first,
# which took over 30 s on a CI machine at load 12). On a timeout, says where
# the task was.
wait_spinning() {
        local i before
        before=$(scope_cpu_usec "$1")
        for i in $(seq 900); do
                hx pgrep -f 'agentfab-spin' >/dev/null 2>&1 && [ "$(scope_cpu_usec "$1")" -gt $((before + 200000)) ] && return 0
                sleep 0.1
        done
        echo "    task $1: $(task_prop "$1" State) ($(task_prop "$1" Reason)), step $(task_prop "$1" Step)," \
                "scope CPU $before -> $(scope_cpu_usec "$1") us, spinner $(hx pgrep -f agentfab-spin >/dev/null 2>&1 && echo running || echo absent)"
        return 1
}

# spin_script [sleeper]: plan, (with "sleeper": a step that runs "sleep 8"
# with a timeout of 12 s,) the spinner, a fix, finish.
spin_script() {
        local sleeper=
        [ "${1:-}" = sleeper ] &&
                sleeper=' {"reply": {"content": "Sleep", "tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 8; echo agentfab-sleeper done", "timeout_sec": 12}}]}},'
        {
                echo '['
                echo ' {"reply": {"content": "Plan: spin, then fix add()."}},'
                [ -n "$sleeper" ] && echo "$sleeper"
                echo " {\"reply\": {\"content\": \"Spin\", \"tool_calls\": [{\"name\": \"run_command\", \"arguments\": {\"command\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$SPIN_CMD")}}]}},"
                echo ' {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},'
                echo ' {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "spun and fixed"}}]}}'
                echo ']'
        } > "$WORK/spin.json"
}

# frozen_cpu_check ID WHAT: the scope's CPU usage does not move in 3 s.
frozen_cpu_check() {
        local a b
        a=$(scope_cpu_usec "$1"); sleep 3; b=$(scope_cpu_usec "$1")
        echo "    scope CPU while frozen ($2): $a us -> $b us over 3 s"
        [ "$a" -ge 0 ] && [ "$b" = "$a" ] && ok "$2: no CPU time while frozen (+$((b - a)) us in 3 s)" ||
                fail "$2: CPU usage moved while frozen: $a -> $b"
}

t_pause_spin() {
        echo "=== pause in the middle of commands (a sleeper, a CPU-bound spinner), resume"
        spin_script sleeper
        model "$WORK/spin.json" --by-step || { fail "model server"; return; }
        make_repo spin
        local id out rc a b i
        id=$(submit spin) || { fail "submit: $id"; return; }

        # "sleep 8" has a timeout of 12 s: paused for 14 s in the middle, it
        # finishes only if frozen time does not count. (A sleeper, not the
        # spinner: how long that takes depends on the machine's load.)
        for i in $(seq 300); do hx pgrep -f agentfab-sleeper >/dev/null 2>&1 && break; sleep 0.1; done
        hx_as alice "${CTL[@]}" pause "$id" >/dev/null 2>&1 && ok "the owner pauses in the middle of 'sleep 8' (timeout 12 s)" ||
                { fail "pause: $(hx_as alice "${CTL[@]}" pause "$id" 2>&1)"; return; }
        rc=0; out=$(hx_as carol "${CTL[@]}" resume "$id" 2>&1) || rc=$?
        [ "$rc" = 3 ] && ok "another user may not resume it" || fail "resume by carol: $rc $out"
        [ "$(task_prop "$id" State)" = paused ] && ok "State is paused" || fail "state $(task_prop "$id" State)"
        [ "$(task_prop "$id" FreezerState)" = frozen ] && ok "FreezerState is frozen" || fail "FreezerState $(task_prop "$id" FreezerState)"
        hx_as alice "${CTL[@]}" status "$id" | grep -q 'Sandbox: frozen' && ok "status shows the frozen sandbox" || fail "status: no Sandbox line"
        hx_as alice "${CTL[@]}" list | grep "$id" | grep -q paused && ok "list shows paused" || fail "list"
        scope_events "$id" | grep -q 'frozen 1' && ok "cgroup.events: frozen 1" || fail "events: $(scope_events "$id")"
        hx cat "/var/lib/agentfab/tasks/$id/state.json" | python3 -c '
import json, sys
j = json.load(sys.stdin)
sys.exit(0 if j.get("state") == "paused" and j.get("progress", {}).get("paused_from") == "running" else 1)' &&
                ok "the state file records the pause" || fail "state file: $(hx cat "/var/lib/agentfab/tasks/$id/state.json" | tr -d '\n' | head -c 400)"
        sleep 12
        hx_as alice "${CTL[@]}" resume "$id" >/dev/null 2>&1 && ok "resume" || fail "resume: $(hx_as alice "${CTL[@]}" resume "$id" 2>&1)"

        # The spinner: no CPU time while frozen.
        wait_spinning "$id" && ok "the spinner runs in the sandbox" || { fail "spinner did not start"; return; }
        a=$(scope_cpu_usec "$id"); sleep 0.5; b=$(scope_cpu_usec "$id")
        echo "    scope CPU while running: +$((b - a)) us in 0.5 s"
        [ $((b - a)) -gt 50000 ] && ok "the scope's CPU usage is measurable (+$((b - a)) us in 0.5 s)" || fail "no CPU use measured: $a -> $b"
        hx_as alice "${CTL[@]}" pause "$id" >/dev/null 2>&1 && ok "paused in the middle of the spinner" ||
                { fail "second pause: $(hx_as alice "${CTL[@]}" pause "$id" 2>&1)"; return; }
        local usec
        usec=$(hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=c38d2a16bd42427580aa407670a9d84a |
                python3 -c 'import json,sys; e=[json.loads(l) for l in sys.stdin]; print(e[-1]["AGENTFAB_FREEZER"], e[-1]["AGENTFAB_FREEZE_USEC"]) if e else print("")')
        echo "    freeze: $usec us"
        [ -n "$usec" ] && ok "journal: frozen entry ($usec us)" || fail "no frozen journal entry"
        frozen_cpu_check "$id" "paused"
        hx_as alice "${CTL[@]}" resume "$id" >/dev/null 2>&1 && ok "resume again" || fail "second resume"
        if wait_state "$id" succeeded; then ok "the task finished after the resumes"; else
                fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep 'agentfab-sleeper' | grep -q '"AGENTFAB_TIMED_OUT":"no"' &&
                ok "'sleep 8' paused for 14 s was not timed out at 12 s (frozen time did not count)" ||
                fail "sleeper: $(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep agentfab-sleeper | head -c 400)"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep 'agentfab-spin' | grep -q '"AGENTFAB_EXIT_STATUS":"0"' &&
                ok "the spinner exited 0" || fail "spinner did not exit 0"
        hx cat "/var/lib/agentfab/tasks/$id/output.log" 2>/dev/null | grep -qx 'agentfab-spin done' &&
                ok "the spinner ran to its end" || fail "no 'agentfab-spin done' line in the output"
        hx cat "/var/lib/agentfab/tasks/$id/output.log" 2>/dev/null | grep -qx 'agentfab-sleeper done' &&
                ok "the sleeper ran to its end" || fail "no 'agentfab-sleeper done' line in the output"
        [ "$(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep -c 'agentfab-spin\|agentfab-sleeper')" = 2 ] &&
                ok "each ran once, not again" || fail "a command ran more than once"
        [ "$(hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=6c2655dbd0654cf585ed42f7915f41b2 | grep -c thawed)" = 2 ] &&
                ok "journal: two thawed entries" || fail "thawed journal entries"
}

t_pause_restart() {
        echo "=== paused across a restart of the daemon"
        spin_script
        model "$WORK/spin.json" --by-step || { fail "model server"; return; }
        make_repo spinr
        local id
        id=$(submit spinr) || { fail "submit: $id"; return; }
        wait_spinning "$id" || { fail "spinner did not start"; return; }
        hx_as alice "${CTL[@]}" pause "$id" >/dev/null 2>&1 || { fail "pause"; return; }
        hx systemctl restart agentfab.service
        sleep 1
        [ "$(task_prop "$id" State)" = paused ] && ok "after the restart: still paused" || fail "state $(task_prop "$id" State)"
        [ "$(task_prop "$id" FreezerState)" = frozen ] && ok "after the restart: FreezerState frozen" ||
                fail "FreezerState $(task_prop "$id" FreezerState)"
        scope_active "$id" && ok "the sandbox's scope outlived the daemon" || fail "scope gone"
        frozen_cpu_check "$id" "after the restart"
        # What the sandbox used before the pause is banked with the pause,
        # in the state file the restarted daemon read.
        local frozen used
        frozen=$(scope_cpu_usec "$id")
        used=$(hx_as alice "${CTL[@]}" --json status "$id" 2>/dev/null |
                python3 -c 'import json, sys; print(json.load(sys.stdin)["resources"]["cpu_usec"] or 0)')
        [ "${used:-0}" -ge $((frozen - 1000)) ] && [ "$frozen" -ge 200000 ] &&
                ok "after the restart, its CPU time has the spin before the pause: $used us (the frozen scope: $frozen us)" ||
                fail "after the restart, CPU time $used us, the frozen scope had $frozen us"
        hx_as alice "${CTL[@]}" resume "$id" >/dev/null 2>&1 && ok "resume after the restart" || fail "resume"
        if wait_state "$id" succeeded; then ok "the task finished after the restart and resume"; else
                fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        local final
        final=$(hx_as alice "${CTL[@]}" --json status "$id" 2>/dev/null |
                python3 -c 'import json, sys; print(json.load(sys.stdin)["resources"]["cpu_usec"] or 0)')
        [ "${final:-0}" -gt "${used:-0}" ] && ok "and the spin after it adds to that: $final us" ||
                fail "final CPU time $final us, $used us before the resume"
}

t_pause_at_start() {
        echo "=== a pause right after the submission holds, and the task goes on from there"
        cat > "$WORK/quick.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add()."}, "delay": 3},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}}
]
EOF
        model "$WORK/quick.json" --by-step || { fail "model server"; return; }
        make_repo pstart
        local id i from paused=
        id=$(submit pstart) || { fail "submit: $id"; return; }
        # Pause() is refused while the task is queued (the agent's move to
        # preparing is written in a thread): tried until it is taken. The
        # plan takes the model 3 s, so a slow machine has its chance too.
        for i in $(seq 300); do
                hx_as alice "${CTL[@]}" pause "$id" >/dev/null 2>&1 && { paused=1; break; }
                case $(task_prop "$id" State) in succeeded|failed|cancelled) break ;; esac
                sleep 0.02
        done
        [ -n "$paused" ] || { fail "the pause was never taken: $(task_prop "$id" State)"; return; }
        from=$(hx python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["progress"].get("paused_from"))' \
                "/var/lib/agentfab/tasks/$id/state.json" 2>/dev/null)
        ok "paused at its start (paused from $from)"
        sleep 2
        [ "$(task_prop "$id" State)" = paused ] &&
                hx python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["state"] != "paused")' \
                        "/var/lib/agentfab/tasks/$id/state.json" &&
                ok "still paused 2 s later, in memory and in the state file" ||
                fail "the pause did not hold: $(task_prop "$id" State)"
        hx_as alice "${CTL[@]}" resume "$id" >/dev/null 2>&1 || { fail "resume"; return; }
        if wait_state "$id" succeeded; then ok "resumed, it went on and succeeded"; else
                fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
}

t_cancel_delivery() {
        echo "=== a cancel during the delivery stands, in memory and in the state file"
        cat > "$WORK/cdeliver.json" <<'EOF'
[
 {"reply": {"content": "Plan: fix add()."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}}
]
EOF
        local id i delay st file want taken=0 T=/var/lib/agentfab/tasks
        # The delivery's own test run takes a second: its records and its
        # last word come before and after it. A cancel at another moment
        # of it each time.
        for delay in 0 0.5 1.05; do
                model "$WORK/cdeliver.json" --by-step || { fail "model server"; return; }
                make_repo cdeliver
                id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/cdeliver --goal "Make add() add" \
                        --test "sleep 1; python3 -m unittest -v" 2>&1) || { fail "submit: $id"; return; }
                for i in $(seq 3000); do
                        st=$(task_prop "$id" State)
                        case $st in delivering|succeeded|failed|cancelled) break ;; esac
                        sleep 0.01
                done
                [ "$st" = delivering ] || { fail "delivery not seen ($delay s): $st: $(task_prop "$id" Reason)"; continue; }
                sleep "$delay"
                hx_as alice "${CTL[@]}" cancel "$id" >/dev/null 2>&1 && taken=$((taken + 1)) && want=cancelled || want=succeeded
                sleep 1.5
                for i in $(seq 100); do scope_active "$id" || break; sleep 0.1; done
                st=$(task_prop "$id" State)
                file=$(hx python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"])' "$T/$id/state.json")
                [ "$st" = "$want" ] && [ "$file" = "$want" ] && ! scope_active "$id" &&
                        ok "delivery + $delay s: $want, in memory and in the state file, no sandbox left" ||
                        fail "delivery + $delay s: want $want, memory $st, file $file, scope $(scope_active "$id" && echo left || echo gone)"
        done
        [ "$taken" -ge 1 ] && ok "$taken of 3 cancels came during the delivery" || fail "no cancel came during the delivery"
        hx systemctl is-active --quiet agentfab.service && ok "the daemon is fine" || fail "agentfabd died"
}

t_pause_cancel() {
        echo "=== cancel of a paused task"
        spin_script
        model "$WORK/spin.json" --by-step || { fail "model server"; return; }
        make_repo spinc
        local id i
        id=$(submit spinc) || { fail "submit: $id"; return; }
        wait_spinning "$id" || { fail "spinner did not start"; return; }
        hx_as alice "${CTL[@]}" pause "$id" >/dev/null 2>&1 || { fail "pause"; return; }
        hx_as alice "${CTL[@]}" cancel "$id" >/dev/null 2>&1 && ok "cancel of a paused task" || fail "cancel"
        [ "$(task_prop "$id" State)" = cancelled ] && ok "State is cancelled" || fail "state $(task_prop "$id" State)"
        for i in $(seq 100); do scope_active "$id" || break; sleep 0.1; done
        ! scope_active "$id" && ok "its frozen sandbox ended (scope gone)" || fail "scope still there"
        ! hx pgrep -f agentfab-spin >/dev/null && ok "no spinner left" || fail "spinner left running"
}

t_pause_approval() {
        echo "=== a task waiting for approval is frozen; approvers by a rules file"
        cat > "$WORK/stuck2.json" <<'EOF'
[
 {"reply": {"content": "Plan: run the tests until they pass."}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": "Fix it", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}}
]
EOF
        model "$WORK/stuck2.json" --by-step || { fail "model server"; return; }
        make_repo stuck2
        local id rc out
        id=$(submit stuck2) || { fail "submit: $id"; return; }
        wait_state "$id" awaiting-approval || { fail "state $(task_prop "$id" State)"; return; }
        local i
        for i in $(seq 50); do [ "$(task_prop "$id" FreezerState)" = frozen ] && break; sleep 0.1; done
        [ "$(task_prop "$id" FreezerState)" = frozen ] && ok "awaiting approval: FreezerState frozen" ||
                fail "FreezerState $(task_prop "$id" FreezerState)"
        scope_events "$id" | grep -q 'frozen 1' && ok "awaiting approval: cgroup.events frozen 1" || fail "events: $(scope_events "$id")"

        # The example rules file: members of agentfab-approvers approve without a password.
        hx install -D -m 644 /usr/share/doc/agentfab/examples/50-agentfab-approvers.rules \
                /etc/polkit-1/rules.d/50-agentfab-approvers.rules || fail "rules file not installed"
        hx bash -c 'getent group agentfab-approvers >/dev/null || groupadd --system agentfab-approvers;
                id dave >/dev/null 2>&1 || useradd -m -G agentfab-approvers dave'
        # A fresh polkitd: it reads the rules and knows the new group.
        hx systemctl restart polkit.service
        expect_refused "3:Interactive authentication required" \
                "a user outside the group is still asked for a password (InteractiveAuthorizationRequired, exit 3)" \
                hx_as carol "${CTL[@]}" approve "$id"
        rc=0; out=$(hx_as dave "${CTL[@]}" approve "$id" --comment "ok from the approvers" 2>&1) || rc=$?
        [ "$rc" = 0 ] && ok "a member of agentfab-approvers approves without a password" ||
                { fail "dave: $rc $out"; hx journalctl -q -u polkit --no-pager | tail -8; hx id dave; }
        if wait_state "$id" succeeded; then ok "approved task went on and succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        [ "$(hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=7cd77351a1e646dfbad9a225edc80ac3 | grep -c '"AGENTFAB_EVENT":"sandbox"')" = 1 ] &&
                ok "approved: the same sandbox went on (thawed, no second one made)" || fail "a new sandbox after approval"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=c38d2a16bd42427580aa407670a9d84a | grep -q '"AGENTFAB_FREEZE_REASON":"approval"' &&
                ok "journal: frozen for approval" || fail "no frozen-for-approval entry"
        hx rm -f /etc/polkit-1/rules.d/50-agentfab-approvers.rules
}

t_pause_release() {
        echo "=== MaxPausedSec= tears a frozen sandbox down; resume makes a new one"
        hx bash -c 'printf "[Sandbox]\nMaxPausedSec=3\n" > /etc/agentfab/agentfab.conf.d/60-pause-test.conf'
        hx systemctl restart agentfab.service
        cat > "$WORK/slow.json" <<'EOF'
[
 {"reply": {"content": "Plan: write, then fix."}},
 {"reply": {"content": "Write", "tool_calls": [{"name": "run_command", "arguments": {"command": "echo scratch > /tmp/scratch && echo one > one.txt"}}]}},
 {"delay": 6, "reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "done after a long pause"}}]}}
]
EOF
        model "$WORK/slow.json" --by-step || { fail "model server"; return; }
        make_repo slow
        local id i
        id=$(submit slow) || { fail "submit: $id"; return; }
        for i in $(seq 200); do [ "$(task_prop "$id" Step)" = 1 ] && break; sleep 0.1; done
        sleep 0.5   # the slow model call of step 2 is in flight
        hx_as alice "${CTL[@]}" pause "$id" >/dev/null 2>&1 && ok "paused between commands" || { fail "pause"; return; }
        [ "$(task_prop "$id" FreezerState)" = frozen ] && ok "frozen" || fail "FreezerState $(task_prop "$id" FreezerState)"
        for i in $(seq 100); do [ "$(task_prop "$id" FreezerState)" = none ] && break; sleep 0.1; done
        [ "$(task_prop "$id" FreezerState)" = none ] && ok "after MaxPausedSec=3: no sandbox" || fail "FreezerState $(task_prop "$id" FreezerState)"
        for i in $(seq 50); do scope_active "$id" || break; sleep 0.1; done
        ! scope_active "$id" && ok "its scope ended (memory and /tmp released)" || fail "scope still active"
        [ "$(task_prop "$id" State)" = paused ] && ok "the task is still paused" || fail "state $(task_prop "$id" State)"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=3f2a959617584d41a99995ef4070ab0d | grep -q sandbox-released &&
                ok "journal: sandbox-released entry" || fail "no released journal entry"
        hx_as alice "${CTL[@]}" status "$id" | grep -q 'Sandbox: none' && ok "status says the sandbox is gone" || fail "status"
        hx_as alice "${CTL[@]}" resume "$id" >/dev/null 2>&1 && ok "resume" || fail "resume"
        if wait_state "$id" succeeded; then ok "resumed from the checkpoint in a new sandbox and succeeded"; else
                fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:one.txt" >/dev/null 2>&1 &&
                ok "step 1's work survived the teardown" || fail "one.txt missing"
        hx rm -f /etc/agentfab/agentfab.conf.d/60-pause-test.conf
        hx systemctl restart agentfab.service
}

t_malformed_count() {
        echo "=== malformed replies are counted in the state file, across a SIGKILL, up to the breaker"
        # MaxMalformedReplies=5 (the harness's configuration): two before the
        # kill, three after; the fifth pauses the task only if the first two
        # were written down.
        cat > "$WORK/malformed.json" <<EOF
[
 {"reply": {"content": "Plan: fix add()."}},
 {"garbage": true},
 {"garbage": true},
 {"reply": {"content": "never heard"}, "hold_while": "$WORK/malformed.hold"},
 {"garbage": true},
 {"garbage": true},
 {"garbage": true},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}}
]
EOF
        touch "$WORK/malformed.hold"
        model "$WORK/malformed.json" || { fail "model server"; return; }
        make_repo malformed
        local id i count
        id=$(submit malformed) || { rm -f "$WORK/malformed.hold"; fail "submit: $id"; return; }
        for i in $(seq 400); do
                [ "$(grep -c '' "$WORK/requests.jsonl")" -ge 4 ] && break
                sleep 0.05
        done
        count=$(hx python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["progress"].get("malformed"))' \
                "/var/lib/agentfab/tasks/$id/state.json" 2>/dev/null)
        [ "$count" = 2 ] && ok "two malformed replies: the state file counts 2" || fail "state file's malformed count: $count"
        hx systemctl kill -s KILL agentfab.service
        rm -f "$WORK/malformed.hold"
        sleep 1
        hx busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks >/dev/null 2>&1
        if wait_state "$id" awaiting-approval; then
                ok "after the restart, three more pause it: the fifth in a row"
                [[ $(task_prop "$id" Reason) == *"5 malformed replies in a row"* ]] && ok "the reason counts 5" ||
                        fail "reason: $(task_prop "$id" Reason)"
                expect_refused "1:has no summary: it is awaiting-approval" "no summary yet, and the error says why (BadState, exit 1)" \
                        hx_as alice "${CTL[@]}" summary "$id"
        else
                fail "not paused by the breaker: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return
        fi
        hx "${CTL[@]}" approve "$id" --comment "go on" >/dev/null 2>&1 || { fail "approve"; return; }
        if wait_state "$id" succeeded; then ok "approved, it went on and succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
}

t_fail_many() {
        echo "=== many tasks fail at once (the model endpoint refuses): each failure written, each resumable"
        python3 - "$WORK/failmany.json" <<'EOF'
import json, sys
script = [{"status": 400, "body": json.dumps({"error": {"message": "scripted refusal"}})} for _ in range(8)]
script += [
    {"reply": {"content": "Plan: fix add()."}},
    {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
    {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}},
]
json.dump(script, open(sys.argv[1], "w"))
EOF
        model "$WORK/failmany.json" || { fail "model server"; return; }
        make_repo failmany
        local ids=() id i n=0 bad=
        for i in $(seq 8); do
                id=$(submit failmany) || { fail "submit: $id"; return; }
                ids+=("$id")
        done
        for id in "${ids[@]}"; do
                if wait_state "$id" failed; then
                        [[ $(task_prop "$id" Reason) == *"The model endpoint failed"* ]] &&
                                hx python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); sys.exit(d["state"] != "failed" or "model endpoint failed" not in d["reason"])' \
                                        "/var/lib/agentfab/tasks/$id/state.json" && n=$((n + 1)) || bad="$bad $id"
                else
                        bad="$bad $id:$(task_prop "$id" State)"
                fi
        done
        [ "$n" = 8 ] && ok "all 8 failed, the reason in memory and in each state file" || fail "not failed as expected:$bad"
        hx_as alice "${CTL[@]}" resume "${ids[0]}" >/dev/null 2>&1 || { fail "resume"; return; }
        if wait_state "${ids[0]}" succeeded; then ok "one resumed and succeeded"; else
                fail "after resume: $(task_prop "${ids[0]}" State): $(task_prop "${ids[0]}" Reason)"; fi
}
