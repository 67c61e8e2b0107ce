#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# agentfabd under load, inside the integration harness (real systemd,
# dbus-daemon, polkitd, journald), with figures printed, not judged:
#
#  1. RATE D-Bus calls a second for DURATION seconds from CLIENTS clients at once
#     (a list of tasks, GetAll of a task's properties, SubmitTask, Cancel, and a
#     watch of a task's history on the stream socket) while two tasks are
#     at work: calls, errors, p50/p99/max latency per kind.
#  2. COUNT queued tasks: ListTasks latency against an empty daemon, the
#     daemon's memory growth per task (VmRSS), and the time from a stopped
#     daemon to its first answer with COUNT records against one with none.
#
#   bench/load.sh [BUILDDIR]        RATE=1000 DURATION=60 CLIENTS=8 COUNT=1000 LOOP=open LIST=filtered BUS=daemon
#
# LIST=filtered (the default): the list call is the one "agentfabctl list"
# makes, ListTasksFiltered() of the states that are not finished; LIST=full:
# ListTasks(), every task, which grows with each task submitted (the mix
# submits 50 a second: 3,000 by the end of a 60-s run).
#
# LOOP=open (the default): each client sends every call when it is due,
# answered or not, as many callers behind one connection would, so that the
# rate offered is the rate asked for and slowness shows as latency.
# LOOP=closed: each client waits for an answer before its next call, so the
# rate achieved falls as latency grows (CLIENTS / latency at most).
#
# BUS=broker: the harness's system bus is dbus-broker instead of
# dbus-daemon (Debian's dbus-broker package, its files taken from
# `apt-get download` into the harness only, so that the host's bus stays as
# it is; BROKER_DEB=FILE names the package file instead). dbus-daemon reads
# at most 2 KiB of a connection twice a turn of its main loop, which is
# what limits LIST=full: this measures the factory on a bus without that.
#
# PROFILE=DIR records, during the calls, `perf record -g` of agentfabd (or of
# PROFILE_PROCESS, e.g. dbus-daemon)
# (DIR/perf.data, with the report in DIR/perf.txt) and the daemon's
# syscalls slower than 1 ms (`strace -T`, DIR/strace.txt), one after the
# other, PROFILE_SECONDS (5) each; the figures of that run are not the
# daemon's own any more. PHASES=rate skips the queued tasks' phase,
# PHASES=queued the calls.
set -u
BUILDDIR=$(realpath "${1:-build}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/..")
. "$HERE/../tests/integration/lib/harness.sh"

RATE=${RATE:-1000} DURATION=${DURATION:-60} CLIENTS=${CLIENTS:-8} COUNT=${COUNT:-1000} BUS=${BUS:-daemon}
WORK=$(mktemp -d /tmp/agentfab-load.XXXXXX)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MODEL_PID=
cleanup() { [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        install -m 0755 "$BUILDDIR/bench/agentfab-load" "$R/usr/local/bin/agentfab-load"
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf"
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1
        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-load.conf" <<CONF
[Daemon]
IdleTimeoutSec=600
MaxActiveTasks=2
MaxTasksPerUser=1000000
MaxStreamClients=256

[Model]
Name=default
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
CONF
        grep -q '^alice:' "$R/etc/passwd" || useradd --root "$R" -m -s /bin/bash alice
        if [ "$BUS" = broker ]; then
                # Its two programs and its unit only: the package's own
                # directories would replace the root's /lib symlink.
                local x="$WORK/broker"
                rm -rf "$x" && dpkg-deb -x "$BROKER_DEB" "$x" || return 1
                install -m 0755 "$x/usr/bin/dbus-broker" "$x/usr/bin/dbus-broker-launch" "$R/usr/bin/" || return 1
                install -m 0644 "$x/lib/systemd/system/dbus-broker.service" "$R/etc/systemd/system/dbus.service" || return 1
        fi
}

BUS_PROCESS=dbus-daemon
[ "$BUS" = broker ] && BUS_PROCESS=dbus-broker
if [ "$BUS" = broker ] && [ -z "${BROKER_DEB:-}" ]; then
        (cd "$WORK" && apt-get download dbus-broker >/dev/null 2>&1) || { echo "BUS=broker: apt-get download dbus-broker failed" >&2; exit 1; }
        BROKER_DEB=$(ls "$WORK"/dbus-broker_*.deb)
fi

# Two long tasks at work during the calls: a step a second, for long enough.
python3 - "$((DURATION + 30))" > "$WORK/model.json" <<'PY'
import json, sys
n = int(sys.argv[1])
s = [{"reply": {"content": "Plan: many small steps."}}]
for i in range(1, n + 1):
    s.append({"delay": 1.0, "reply": {"content": "Step %d" % i, "tool_calls": [
        {"name": "write_file", "arguments": {"path": "progress.txt", "content": "step %d\n" % i}}]}})
print(json.dumps(s))
PY
python3 "$SRC/tests/model-server.py" --script "$WORK/model.json" --port "$PORT" --by-step > "$WORK/model.out" 2>&1 &
MODEL_PID=$!

harness_boot || exit 1
hx systemctl start agentfab-launcher.socket
hx_as alice bash -c 'cd ~ && git init -q proj && cd proj && echo hello > README && git add README &&
        git -c user.name=a -c user.email=a@a commit -q -m init && chmod -R a+rX ~'
rss() { hx awk '/^VmRSS/ {print $2 * 1024}' "/proc/$(hx systemctl show -p MainPID --value agentfab.service)/status"; }
rc=0

if [ "${PHASES:-all}" != queued ]; then
echo "=== $RATE D-Bus calls a second for $DURATION s from $CLIENTS clients, two tasks at work, list: ${LIST:-filtered}"
        for i in 1 2; do
                hx_as alice agentfabctl submit --repo /home/alice/proj --goal "work" --test true >/dev/null || rc=1
        done
        sleep 3
        echo "active tasks: $(hx busctl get-property org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ActiveTasks)"
        if [ -n "${PROFILE:-}" ]; then
                # The daemon's pid as the host sees it: ours is the one in the booted system's pid namespace.
                mkdir -p "$PROFILE"
                (
                        sleep 3
                        pid=$(pgrep --ns "$HARNESS_PID" --nslist pid -x "${PROFILE_PROCESS:-agentfabd}" | head -1)
                        [ -n "$pid" ] || exit 0
                        timeout "${PROFILE_SECONDS:-5}" perf record -q --call-graph "${PROFILE_CALLGRAPH:-fp}" -o "$PROFILE/perf.data" -p "$pid" >/dev/null 2>&1
                        perf report -i "$PROFILE/perf.data" --no-children --stdio --sort symbol 2>/dev/null > "$PROFILE/perf.txt"
                        timeout "${PROFILE_SECONDS:-5}" strace -f -T -tt -qq -p "$pid" -o "$PROFILE/strace.all" 2>/dev/null
                        awk -F'<' '{ d = $NF; sub(/>.*/, "", d); if (d + 0 >= 0.001) print }' "$PROFILE/strace.all" > "$PROFILE/strace.txt"
                ) &
                PROFILE_PID=$!
        fi
        if [ -n "${MONITOR:-}" ]; then
                # Every message on the bus for MONITOR_SECONDS during the calls, counted by kind, sender's
                # well-known role, interface and member: what a call costs dbus-daemon (signals included).
                mkdir -p "$MONITOR"
                (
                        sleep 3
                        hx timeout "${MONITOR_SECONDS:-5}" dbus-monitor --system --profile > "$MONITOR/profile.txt" 2>/dev/null
                        hx busctl --system --no-legend list --unique | awk '{ print $1, $3 }' > "$MONITOR/names.txt" 2>/dev/null
                ) &
                MONITOR_PID=$!
        fi
        # CPU time of the daemon and of the bus and polkit around it, for the figures.
        cpu_ticks() {
                local p
                for p in $(pgrep --ns "$HARNESS_PID" --nslist pid -x "$1"); do
                        awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null
                done | awk '{ s += $1 } END { print s + 0 }'
        }
        declare -A cpu0
        for c in agentfabd $BUS_PROCESS polkitd; do cpu0[$c]=$(cpu_ticks "$c"); done
        # The load average every 5 s during the calls (the machine is shared), and the daemon's memory.
        ( while sleep 5; do cut -d' ' -f1 /proc/loadavg; done ) > "$WORK/loadavg" &
        LOADAVG_PID=$!
        rss_calls0=$(rss)
        t0=$(date +%s%N)
        hx_as alice agentfab-load rate --clients="$CLIENTS" --rate="$RATE" --seconds="$DURATION" --repo=/home/alice/proj \
                --list="${LIST:-filtered}" $([ "${LOOP:-open}" = closed ] && echo --closed) || rc=1
        t1=$(date +%s%N)
        kill "$LOADAVG_PID" 2>/dev/null; wait "$LOADAVG_PID" 2>/dev/null
        echo "load average during the calls (every 5 s): $(sort -n "$WORK/loadavg" | sed -n '1p;$p' | paste -sd- -) (median $(sort -n "$WORK/loadavg" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'))"
        echo "daemon VmRSS: $rss_calls0 bytes before the calls, $(rss) after"
        echo "tasks after the calls, by state: $(hx busctl --json=short call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks |
                python3 -c 'import collections, json, sys; c = collections.Counter(t[1] for t in json.load(sys.stdin)["data"][0]); print(sum(c.values()), dict(c))')"
        echo "CPU during the calls (share of one core): $(for c in agentfabd $BUS_PROCESS polkitd; do
                awk -v a="${cpu0[$c]}" -v b="$(cpu_ticks "$c")" -v hz="$(getconf CLK_TCK)" -v ns=$((t1 - t0)) -v c="$c" \
                    'BEGIN { printf "%s %.0f %%  ", c, (b - a) / hz / (ns / 1e9) * 100 }'; done)load average: $(cut -d' ' -f1-3 /proc/loadavg)"
        [ -n "${PROFILE_PID:-}" ] && wait "$PROFILE_PID"
        if [ -n "${MONITOR_PID:-}" ]; then
                wait "$MONITOR_PID"
                echo "bus messages in ${MONITOR_SECONDS:-5} s (dbus-monitor --profile; type, interface, member):"
                awk '$1 != "#" && NF >= 5 { k = $1 " " ($7 == "" ? "-" : $7) " " ($8 == "" ? "-" : $8); n[k]++; t++ }
                     END { for (k in n) printf "%8d  %s\n", n[k], k; printf "%8d  all\n", t }' "$MONITOR/profile.txt" | sort -rn | head -30
        fi
        echo "active tasks after: $(hx busctl get-property org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ActiveTasks)"
        # What one list costs among the tasks the calls left (most of them
        # cancelled), the whole list against the unfinished tasks, one call
        # at a time: latency, and the CPU time of the daemon and dbus-daemon.
        for l in full filtered; do
                for c in agentfabd $BUS_PROCESS; do cpu0[$c]=$(cpu_ticks "$c"); done
                out=$(hx_as alice agentfab-load list --count="${LIST_CALLS:-1000}" --list="$l")
                echo "$out; CPU a call: $(for c in agentfabd $BUS_PROCESS; do
                        awk -v a="${cpu0[$c]}" -v b="$(cpu_ticks "$c")" -v hz="$(getconf CLK_TCK)" -v n="${LIST_CALLS:-1000}" -v c="$c" \
                            'BEGIN { printf "%s %.0f us  ", c, (b - a) / hz / n * 1e6 }'; done)"
        done
        
fi
if [ "${PHASES:-all}" = rate ]; then
        harness_teardown
        exit $rc
fi
echo "=== $COUNT queued tasks"
# A fresh state, and every task held queued.
hx systemctl stop agentfab.service 2>/dev/null
hx sh -c 'rm -rf /var/lib/agentfab/tasks/* && printf "[Daemon]\nMaxActiveTasks=0\n" > /etc/agentfab/agentfab.conf.d/60-queued.conf'
echo "from a stopped daemon to its first answer, 0 records: $(hx_as alice agentfab-load first)"
hx_as alice agentfab-load list --count=200 | sed 's/^/baseline: /'
rss0=$(rss)
hx_as alice agentfab-load submit --count="$COUNT" --repo=/home/alice/proj || rc=1
rss1=$(rss)
echo "daemon VmRSS: $rss0 bytes with 0 tasks, $rss1 with $COUNT: $(( (rss1 - rss0) / COUNT )) bytes a task"
hx_as alice agentfab-load list --count=200
for i in 1 2 3; do
        hx systemctl stop agentfab.service 2>/dev/null
        echo "from a stopped daemon to its first answer, $COUNT records: $(hx_as alice agentfab-load first)"
done
echo "daemon VmRSS after the restart with $COUNT records: $(rss) bytes"
harness_teardown
exit $rc
