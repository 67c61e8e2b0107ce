#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Clients that ask and never read, in the real harness (real systemd,
# dbus-daemon, journald; the scripted instant model):
#   1. the stream socket: a viewer follows a task's output and never reads
#      while the task prints for OUTPUT_SEC seconds (a follower is sent at
#      most 16 KiB every 50 ms, some 200 KiB a second here: some 40 s fill
#      its 8 MiB); it is dropped with a journal entry (client-dropped,
#      transport stream), the task goes on to success, the daemon's memory
#      grows by less than 8 MiB plus BOUND_SLACK_MB;
#   2. the bus: COUNT queued tasks; SLOW clients, each on its own bus
#      connection made by hand (tests/integration/slow-client.py: no D-Bus
#      library, which would read), send ListTasks() calls, BATCH every
#      50 ms for HOLD seconds, and never read a byte, while a probe times
#      another client's calls (GetAll of a task's properties every 20 ms):
#      agentfabd's memory (VmRSS sampled every 100 ms, and VmHWM) grows by
#      less than the stated bound (MaxQueuedBytes=, 16 MiB by default, plus
#      BOUND_SLACK_MB), each piling client is dropped with one journal
#      entry, and the other client is answered, at the median within
#      LATENCY_P50_MS (50 ms, the issue's figure) and at worst within
#      LATENCY_MAX_MS.
#
#   tests/integration/slow-clients.sh BUILDDIR        (CI: 1,500 tasks, 2 clients, 16 calls every 50 ms, 20 s)
#   UNBOUNDED=1 ...   the bus phase once more with the bounds raised out of
#                     reach (MaxQueuedBytesPerClient=MaxQueuedBytes=64G):
#                     what the daemon and the bus do without them, printed,
#                     not judged
#   PHASES="stream bus" (the default): one of them only
#   DEBUG=1 ...       the daemon's and dbus-daemon's syscall every 0.5 s
#                     during the bus phase, and the daemon's journal after
#
# The slowest answer is asserted under LATENCY_MAX_MS (250 ms), not 50 ms:
# on this shared 2-core machine dbus-daemon itself, busy with the calls
# the clients keep sending and refusing them, sets the tail (docs/PERFORMANCE.md
# has the figures). Figures are printed as "figure:" lines. Needs root.
# Ends with "N passed, N failed".
set -u

BUILDDIR=$(realpath "${1:?usage: slow-clients.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/lib/check.sh"

COUNT=${COUNT:-1500}
SLOW=${SLOW:-2}
CALLS=${CALLS:-100000}
HOLD=${HOLD:-20}
BATCH=${BATCH:-16}
OUTPUT_SEC=${OUTPUT_SEC:-60}
BOUND_SLACK_MB=${BOUND_SLACK_MB:-16}
LATENCY_MAX_MS=${LATENCY_MAX_MS:-250}
LATENCY_P50_MS=${LATENCY_P50_MS:-50}
DROPPED_ID=317925ab807e44f288194cff0654f4c9

[ "$(id -u)" = 0 ] || check_skip_all "slow-clients needs root"

figure() { echo "figure: $*"; }

WORK=$(mktemp -d /tmp/agentfab-slow.XXXXXX)
MODEL_PID=
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
        [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null && wait "$MODEL_PID" 2>/dev/null
        rm -rf "$WORK"
}
trap cleanup EXIT

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        install -m 0755 "$BUILDDIR/bench/latency-probe" "$R/usr/local/bin/latency-probe" || return 1
        install -m 0755 "$BUILDDIR/bench/agentfab-load" "$R/usr/local/bin/agentfab-load" || return 1
        install -m 0755 "$HERE/slow-client.py" "$R/usr/local/bin/slow-client" || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1 || return 1
        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-test.conf" <<EOF
[Daemon]
IdleTimeoutSec=600
MaxActiveTasks=4
MaxTasks=100000
MaxTasksPerUser=100000

[Model]
Name=default
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
TimeoutSec=120
MaxRetries=1
RetryBaseSec=100ms
EOF
        grep -q '^alice:' "$R/etc/passwd" || useradd --root "$R" -s /bin/bash alice || return 1
        local uid gid
        uid=$(awk -F: '$1 == "alice" {print $3}' "$R/etc/passwd")
        gid=$(awk -F: '$1 == "alice" {print $4}' "$R/etc/passwd")
        rm -rf "$R/home/alice"
        mkdir -p "$R/home/alice"
        chown "$uid:$gid" "$R/home/alice"
        chmod 755 "$R/home/alice"
}

CTL=(agentfabctl --no-ask-password)
task_prop() { hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$1" org.agentfab.Task1 "$2" 2>/dev/null | sed 's/^[a-z] "\{0,1\}\(.*\)"\{0,1\}$/\1/; s/"$//'; }
wait_state() {
        local id=$1 secs=$2 s i; shift 2
        for i in $(seq $((secs * 4))); do
                s=$(task_prop "$id" State)
                for want in "$@"; do [ "$s" = "$want" ] && return 0; done
                case $s in succeeded|failed|cancelled) [[ " $* " == *" $s "* ]] || return 1 ;; esac
                sleep 0.25
        done
        return 1
}

# The daemon's pid as the host sees it (its /proc/PID/status is read from
# here: no process started inside for each sample).
daemon_pid() { pgrep --ns "$HARNESS_PID" --nslist pid -x agentfabd | head -1; }
status_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# sample_rss PID SECONDS OUT: VmRSS every 100 ms; the largest, in KiB, in OUT.
sample_rss() {
        local pid=$1 end max=0 v
        end=$(( $(date +%s%N) + $2 * 1000000000 ))
        while [ "$(date +%s%N)" -lt "$end" ]; do
                v=$(status_kib "$pid" VmRSS)
                [ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
                sleep 0.1
        done
        echo "$max" > "$3"
}

dropped_entries() { # TRANSPORT: the journal's client-dropped entries of that transport, as JSON lines
        hx journalctl -q --no-pager -o json "MESSAGE_ID=$DROPPED_ID" "AGENTFAB_TRANSPORT=$1" 2>/dev/null
}

# ---------------------------------------------------------------- 1.
phase_stream() {
        echo "=== the stream socket: a viewer that never reads while a task prints for $OUTPUT_SEC s"
        cat > "$WORK/print.json" <<EOF
[{"reply": {"content": "plan"}},
 {"delay": 2.0, "reply": {"content": "print", "tool_calls": [{"name": "run_command", "arguments": {"command": "i=0; while [ \$i -lt $((OUTPUT_SEC * 15)) ]; do yes 'a line of output that a viewer is sent' | head -c 1M; sleep 0.05; i=\$((i + 1)); done"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "printed"}}]}}]
EOF
        python3 "$SRC/tests/model-server.py" --script "$WORK/print.json" --port "$PORT" --by-step \
                > "$WORK/model.out" 2>&1 &
        MODEL_PID=$!
        local i
        for i in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done
        local id pid rss0 hwm0 peak
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/proj --goal "print" --test true 2>&1) ||
                { fail "submit: $id"; return; }
        pid=$(daemon_pid)
        rss0=$(status_kib "$pid" VmRSS)
        hwm0=$(status_kib "$pid" VmHWM)
        # Following before the command runs (the model's reply waits 2 s).
        hx_as alice timeout 120 slow-client stream --task="$id" --hold=100 > "$WORK/viewer.out" 2>&1 &
        local viewer=$!
        if wait_state "$id" 180 succeeded; then ok "the task printed for $OUTPUT_SEC s and succeeded"; else
                fail "task: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        peak=$(status_kib "$pid" VmHWM)
        figure "stream: agentfabd VmRSS $(mib "$rss0") MiB before, VmHWM $(mib "$hwm0") -> $(mib "$peak") MiB while a viewer that never reads followed $OUTPUT_SEC s of output"
        # The per-viewer buffer (8 MiB) and what a step's output costs the daemon anyway.
        [ $(( peak - hwm0 )) -lt $(( (8 + BOUND_SLACK_MB) * 1024 )) ] &&
                ok "the daemon's peak grew by $(mib $((peak - hwm0))) MiB, under 8 MiB + $BOUND_SLACK_MB MiB" ||
                fail "the daemon's peak grew by $(mib $((peak - hwm0))) MiB"
        local e
        e=$(dropped_entries stream | head -1)
        if [ -n "$e" ]; then
                ok "the viewer was dropped with a journal entry: $(echo "$e" | python3 -c 'import json, sys; print(json.load(sys.stdin)["MESSAGE"])')"
                echo "$e" | python3 -c 'import json, sys; e = json.load(sys.stdin); sys.exit(not (e["AGENTFAB_EVENT"] == "client-dropped" and int(e["AGENTFAB_QUEUED_BYTES"]) > int(e["AGENTFAB_LIMIT_BYTES"])))' &&
                        ok "the entry has AGENTFAB_EVENT=client-dropped and the queued bytes past the bound" || fail "entry: $e"
        else
                fail "no client-dropped entry for the stream"
        fi
        kill "$viewer" 2>/dev/null; wait "$viewer" 2>/dev/null
        sed 's/^/  viewer: /' "$WORK/viewer.out"
        kill "$MODEL_PID" 2>/dev/null; wait "$MODEL_PID" 2>/dev/null; MODEL_PID=
}

# ---------------------------------------------------------------- 2.
# bus_round NAME: SLOW clients that never read, the probe, the figures.
bus_round() {
        local name=$1 pid rss0 hwm0 hwm1 peak i probe
        pid=$(daemon_pid)
        [ -n "$pid" ] || { fail "$name: agentfabd is not running"; return; }
        # Warm: one list answered and read, so that what follows is the calls' own.
        hx_as alice agentfab-load list --count=5 --list=full > /dev/null
        rss0=$(status_kib "$pid" VmRSS)
        hwm0=$(status_kib "$pid" VmHWM)
        local dbus_pid dbus0
        dbus_pid=$(pgrep --ns "$HARNESS_PID" --nslist pid -x dbus-daemon | head -1)
        dbus0=$(status_kib "$dbus_pid" VmRSS)

        hx latency-probe --duration=$((HOLD - 2)) --interval-ms=20 --task="$TASK" --slowest=3 > "$WORK/probe-$name.out" 2>&1 &
        probe=$!
        sample_rss "$pid" "$HOLD" "$WORK/rss-$name" &
        local sampler=$! slow=()
        if [ -n "${DEBUG:-}" ]; then
                ( for i in $(seq $((HOLD * 2))); do
                        echo "$(date -u +%T.%N | cut -c1-12) agentfabd: $(cat /proc/$pid/syscall 2>/dev/null | cut -d' ' -f1-2) $(cat /proc/$pid/wchan 2>/dev/null) dbus-daemon: $(cat /proc/$dbus_pid/syscall 2>/dev/null | cut -d' ' -f1-2) $(awk '{print $14+$15}' /proc/$dbus_pid/stat)"
                        sleep 0.5; done ) > "$WORK/debug-$name" &
        fi
        for i in $(seq "$SLOW"); do
                hx_as alice timeout $((HOLD + 30)) slow-client bus --calls="$CALLS" --batch="$BATCH" --hold="$HOLD" > "$WORK/slow-$name-$i.out" 2>&1 &
                slow+=($!)
        done
        wait "$probe"
        wait "$sampler"
        hwm1=$(status_kib "$pid" VmHWM)
        peak=$(cat "$WORK/rss-$name")
        local dbus1
        dbus1=$(status_kib "$dbus_pid" VmRSS)
        for i in "${slow[@]}"; do wait "$i"; done
        sed "s/^/  $name: /" "$WORK/probe-$name.out"
        [ -n "${DEBUG:-}" ] && { sed "s/^/  debug: /" "$WORK/debug-$name"; hx journalctl -q --no-pager -o short-precise -n 30 -u agentfab.service | sed "s/^/  journal: /"; }
        figure "$name: $SLOW clients sent $(cat "$WORK"/slow-"$name"-*.out | awk '{ s += $2 } END { print s }') ListTasks() calls of $COUNT tasks and never read"
        figure "$name: agentfabd VmRSS $(mib "$rss0") MiB before, at most $(mib "$peak") MiB during (sampled every 100 ms); VmHWM $(mib "$hwm0") -> $(mib "$hwm1") MiB"
        figure "$name: dbus-daemon VmRSS $(mib "$dbus0") -> $(mib "$dbus1") MiB (what it holds for the clients, up to its max_outgoing_bytes each)"
        figure "$name: the other client's GetAll: median $(sed -n 's/^bus .* p50=\([0-9.]*\).*/\1/p' "$WORK/probe-$name.out") ms, p99 $(sed -n 's/^bus .* p99=\([0-9.]*\).*/\1/p' "$WORK/probe-$name.out") ms, worst $(sed -n 's/^bus .* max=\([0-9.]*\).*/\1/p' "$WORK/probe-$name.out") ms"
        ROUND_GROWTH=$(( (hwm1 > peak ? hwm1 : peak) - rss0 ))
}

phase_bus() {
        echo "=== the bus: $SLOW clients that never read, $COUNT tasks"
        # Every further task held queued (no model asked): a restart reads the setting.
        hx sh -c 'printf "[Daemon]\nMaxActiveTasks=0\n" > /etc/agentfab/agentfab.conf.d/60-queued.conf'
        hx systemctl restart agentfab.service
        local t0 t1
        t0=$(date +%s.%N)
        hx_as alice agentfab-load submit --count="$COUNT" --repo=/home/alice/proj > "$WORK/submit.out" 2>&1 ||
                { fail "submitting $COUNT tasks: $(tail -3 "$WORK/submit.out")"; return; }
        t1=$(date +%s.%N)
        figure "submitting $COUNT tasks took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
        TASK=$(hx busctl --json=short call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks |
                python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0][0][0])')
        local bytes
        bytes=$(hx busctl --json=short call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks | wc -c)
        figure "one ListTasks() answer of $COUNT tasks: about $((bytes / 1024)) KiB as JSON"

        # A client that reads: one list after the other, 100 of them (some
        # 10 MiB, ten times its share), each read and the daemon's Ping()
        # after it answered, as any main loop does; never dropped.
        local out
        out=$(hx_as alice agentfab-load list --count=100 --list=full 2>&1) &&
                ok "a client that reads each answer is answered 100 lists: $out" || fail "a client that reads: $out"
        [ "$(dropped_entries bus | wc -l)" = 0 ] && ok "and is not dropped" || fail "a client that reads was dropped"

        bus_round bounded
        local bound_kib=$(( (16 + BOUND_SLACK_MB) * 1024 ))
        [ "$ROUND_GROWTH" -lt "$bound_kib" ] &&
                ok "agentfabd's memory grew by $(mib "$ROUND_GROWTH") MiB, under MaxQueuedBytes=16M + $BOUND_SLACK_MB MiB" ||
                fail "agentfabd's memory grew by $(mib "$ROUND_GROWTH") MiB, past $(mib "$bound_kib") MiB"
        local p50 max
        p50=$(sed -n 's/^bus .* p50=\([0-9.]*\).*/\1/p' "$WORK/probe-bounded.out")
        max=$(sed -n 's/^bus .* max=\([0-9.]*\).*/\1/p' "$WORK/probe-bounded.out")
        grep -q '^bus .*failed=0 ' "$WORK/probe-bounded.out" && ok "every call of the other client was answered" ||
                fail "the other client's calls failed: $(grep '^bus' "$WORK/probe-bounded.out")"
        [ -n "$p50" ] && awk -v v="$p50" -v b="$LATENCY_P50_MS" 'BEGIN { exit !(v < b) }' &&
                ok "the other client's median answer in $p50 ms, under $LATENCY_P50_MS ms" || fail "median ${p50:-none} ms"
        [ -n "$max" ] && awk -v v="$max" -v b="$LATENCY_MAX_MS" 'BEGIN { exit !(v < b) }' &&
                ok "its slowest answer in $max ms, under $LATENCY_MAX_MS ms" || fail "slowest ${max:-none} ms"

        local n peers
        n=$(dropped_entries bus | grep -c '"AGENTFAB_LIMIT":"MaxQueuedBytesPerClient"')
        peers=$(dropped_entries bus | python3 -c 'import json, sys; print(len({json.loads(l)["AGENTFAB_PEER"] for l in sys.stdin if json.loads(l)["AGENTFAB_LIMIT"] == "MaxQueuedBytesPerClient"}))')
        [ "$n" -ge 1 ] && [ "$n" -le "$SLOW" ] && [ "$n" = "$peers" ] &&
                ok "$n of the $SLOW clients dropped, with one journal entry each" ||
                fail "$n client-dropped entries for the bus, for $peers clients"
        figure "bounded: $(dropped_entries bus | grep -c '"AGENTFAB_LIMIT":"MaxQueuedBytes"') entries for the whole bound (MaxQueuedBytes=, at most one in 10 s)"
        local alice
        alice=$(hx id -u alice)
        dropped_entries bus | python3 -c '
import json, sys
ok = True
for l in sys.stdin:
    e = json.loads(l)
    ok &= e["AGENTFAB_EVENT"] == "client-dropped" and e["AGENTFAB_UID"] == sys.argv[1] and e["AGENTFAB_PEER"].startswith(":")
    ok &= int(e["AGENTFAB_QUEUED_BYTES"]) >= int(e["AGENTFAB_LIMIT_BYTES"]) and e["AGENTFAB_LIMIT"].startswith("MaxQueuedBytes")
sys.exit(not ok)' "$alice" && ok "the entries name alice's uid, the bus name, the bytes and the bound" ||
                fail "entries: $(dropped_entries bus | head -2)"
        out=$(hx_as alice "${CTL[@]}" list 2>&1 | wc -l)
        [ "$out" -gt 1 ] && ok "after them, alice's own list is answered ($out lines)" || fail "list after: $out"

        if [ "${UNBOUNDED:-0}" = 1 ]; then
                hx sh -c 'printf "[Daemon]\nMaxQueuedBytesPerClient=64G\nMaxQueuedBytes=64G\n" > /etc/agentfab/agentfab.conf.d/70-unbounded.conf'
                hx systemctl restart agentfab.service
                hx_as alice agentfab-load first > /dev/null
                bus_round unbounded
                figure "unbounded: agentfabd's memory grew by $(mib "$ROUND_GROWTH") MiB"
                hx rm -f /etc/agentfab/agentfab.conf.d/70-unbounded.conf
        fi
}

harness_boot || { fail "harness_boot"; check_summary; exit 1; }
hx systemctl start agentfab-launcher.socket >/dev/null 2>&1
hx_as alice bash -c 'cd ~ && git init -q -b main proj && cd proj && echo hello > README && git add README &&
        git -c user.name=a -c user.email=a@a commit -q -m init && chmod -R a+rX ~'

for p in ${PHASES:-stream bus}; do
        "phase_$p"
done
! hx journalctl -q -u agentfab.service --no-pager | grep -q 'code=dumped\|status=6/ABRT\|status=11/SEGV' &&
        ok "agentfabd never crashed" || fail "agentfabd crashed"
if [ "$FAILED" != 0 ]; then
        echo "--- journal (last 40 lines)"
        hx journalctl -q --no-pager | tail -40
fi
harness_teardown
check_summary
