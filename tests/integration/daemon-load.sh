#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# agentfabd under load, in the real harness (real systemd, dbus-daemon,
# launcher, sandbox, journal) with the scripted instant model:
#   1. the daemon keeps answering: a probe times D-Bus calls and stream
#      socket requests while a task on a FILES-file repository is imported,
#      checkpoints, fails, is reset by hand and exported (diff, mbox,
#      bundle), resumes and is delivered; the same probe on the idle
#      daemon first is the baseline;
#   2. the output flood: FLOOD_MB MiB printed without a newline, as NUL
#      bytes and as terminal escape sequences, each into the task's log and
#      the same command into /dev/null in the same sandbox; the log has it
#      all, the model and the stream get it bounded and escaped, the
#      daemon's memory stays flat;
#   3. resume: TASKS tasks wait for their model, agentfabd is SIGKILLed and
#      activated again; the time until all are at work again; no step lost
#      or repeated (Agentfab-Step trailers);
#   4. (run first, phase "polkit") polkit's answers at a high rate: a burst
#      of 200 submissions on 200 connections is not refused; a yes to
#      org.agentfab.submit is kept for its connection only, and forgotten
#      after its time, a change of polkit's rules and a restart of polkitd;
#      a watch skips a torn line of a history it sends unparsed after.
#
#   tests/integration/daemon-load.sh BUILDDIR          (CI: 10,000 files, 64 MiB, 20 tasks)
#   FILES=100000 FLOOD_MB=1024 bench/daemon-bench.sh BUILDDIR   (the benchmark's sizes)
#
# Checks are functional, with generous bounds (BUS_MAX_MS); the figures are
# printed as "figure:" lines, and the probe's ten slowest answers of phase 1
# with their times. PROFILE=DIR: the daemon's main thread is traced with
# `strace -T -tt` during phase 1 (DIR/strace.txt; its figures are then not
# the daemon's own), to tell what the loop did at the slow moments;
# JOURNAL=FILE keeps the daemon's journal of phase 1 there;
# HOLD_PAGE_REPORTING=1 holds off the VM's free page reporting during the
# flood (see hold_page_reporting) so that phase 2 measures the design, not
# the host's first touch of the log's memory. Needs
# root. Ends with "N passed, N failed".
set -u

BUILDDIR=$(realpath "${1:?usage: daemon-load.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"

FILES=${FILES:-10000}
FLOOD_MB=${FLOOD_MB:-64}
TASKS=${TASKS:-20}
BUS_MAX_MS=${BUS_MAX_MS:-1000}
PHASES=${PHASES:-"polkit latency flood resume"}

. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "daemon-load needs root"

figure() { echo "figure: $*"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

WORK=$(mktemp -d /tmp/agentfab-load.XXXXXX)
MODEL_PID=
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# This project's VMs give memory back to their host: the balloon reports
# free pages (virtio-balloon free page reporting, blocks of order 9 free
# for about two seconds), and the first write to such a page waits for the
# host to back it again, about 2.3 s a GiB: `dd` of 2 GiB into a file
# takes 2.9 s after `drop_caches` and 0.26 s right after a file as large
# was written and removed. The log's page cache is such memory; a host in
# use recycles its page cache instead. HOLD_PAGE_REPORTING=1 measures the
# design rather than the VM: during the flood no free page is reported
# (page_reporting_order above the largest order), and memory as large as
# the log will need is written once first; the setting is put back after.
PAGE_REPORTING_ORDER=/sys/module/page_reporting/parameters/page_reporting_order
PAGE_REPORTING_HELD=
hold_page_reporting() {
        if [ "${HOLD_PAGE_REPORTING:-0}" != 1 ]; then
                [ -r "$PAGE_REPORTING_ORDER" ] &&
                        figure "output: free page reporting to the VM's host as it is (order $(cat "$PAGE_REPORTING_ORDER")): the log's memory comes cold"
                return 0
        fi
        if [ ! -w "$PAGE_REPORTING_ORDER" ]; then
                figure "output: HOLD_PAGE_REPORTING=1, but this kernel reports no free pages (no $PAGE_REPORTING_ORDER)"
                return 0
        fi
        PAGE_REPORTING_HELD=$(cat "$PAGE_REPORTING_ORDER")
        echo 11 > "$PAGE_REPORTING_ORDER" || { PAGE_REPORTING_HELD=; return 0; }
        hx dd if=/dev/zero of=/var/lib/agentfab/.warm bs=1M count=$((4 * FLOOD_MB + 1024)) status=none
        hx rm -f /var/lib/agentfab/.warm
        figure "output: free page reporting held off during the flood (order $PAGE_REPORTING_HELD -> 11), $((4 * FLOOD_MB + 1024)) MiB written and freed first"
}
release_page_reporting() {
        [ -n "${PAGE_REPORTING_HELD:-}" ] && echo "$PAGE_REPORTING_HELD" > "$PAGE_REPORTING_ORDER"
        PAGE_REPORTING_HELD=
}

stop_model() {
        if [ -n "$MODEL_PID" ]; then
                kill "$MODEL_PID" 2>/dev/null
                wait "$MODEL_PID" 2>/dev/null
                MODEL_PID=
        fi
}
cleanup() { stop_model; release_page_reporting; rm -rf "$WORK"; }
trap cleanup EXIT

model() {
        local script=$1; shift
        stop_model
        : > "$WORK/requests.jsonl"
        python3 "$SRC/tests/model-server.py" --script "$script" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
                > "$WORK/model.out" 2> "$WORK/model.err" &
        MODEL_PID=$!
        local i
        for i in $(seq 100); do
                [ -s "$WORK/model.out" ] && return 0
                sleep 0.05
        done
        return 1
}

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        install -m 0755 "$BUILDDIR/bench/latency-probe" "$R/usr/local/bin/latency-probe" || return 1
        install -m 0755 "$BUILDDIR/bench/agentfab-load" "$R/usr/local/bin/agentfab-load" || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1 || return 1
        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-test.conf" <<EOF
[Daemon]
IdleTimeoutSec=300
MaxActiveTasks=64
MaxTasksPerUser=64

[Agent]
CommandTimeoutSec=600
MaxRepositorySize=4G

[Breakers]
MaxFilesChanged=1000000
MaxLinesChanged=100000000

[Model]
Name=default
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
TimeoutSec=120
MaxRetries=1
RetryBaseSec=100ms
EOF
        # AGENTFAB_TRACE=1 in the test's environment reaches the daemon's:
        # its phases in the journal.
        mkdir -p "$R/etc/systemd/system/agentfab.service.d"
        printf '[Service]\nEnvironment=AGENTFAB_TRACE=%s\n' "${AGENTFAB_TRACE:-0}" \
                > "$R/etc/systemd/system/agentfab.service.d/50-test-env.conf"
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

# wait_state ID SECONDS STATE...
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

# make_repo NAME FILES: a repository of FILES small files, 100 to a
# directory, one commit on main, made by git fast-import (no checkout: the
# daemon takes the history, not the work tree).
make_repo() {
        hx_as alice bash -c "set -e; cd ~ && rm -rf $1 && mkdir $1 && cd $1 && git init -q -b main &&
                python3 -c 'import sys
n = $2
w = sys.stdout.write
for i in range(n):
    d = b\"line %d\\n\" % i
    w(\"blob\\nmark :%d\\ndata %d\\n\" % (i + 1, len(d)))
    w(d.decode() + \"\\n\")
w(\"commit refs/heads/main\\ncommitter alice <alice@example.com> 1700000000 +0000\\ndata 5\\nbase\\n\")
for i in range(n):
    w(\"M 100644 :%d d%04d/f%06d.txt\\n\" % (i + 1, i // 100, i))
w(\"\\n\")' | git fast-import --quiet && chmod -R a+rX ~/$1"
}

submit() {
        hx_as alice "${CTL[@]}" submit --repo "/home/alice/$1" --goal "$2" "${@:3}" 2>&1
}

steps_of() {
        hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" log --format=%B "agentfab/$1" |
                sed -n 's/^Agentfab-Step: //p' | sort -n | tr '\n' ' '
}

# probe_start NAME ARGS...: the latency probe in the background, until probe_stop.
probe_start() {
        local name=$1; shift
        hx latency-probe --duration=3600 --interval-ms=20 "$@" > "$WORK/probe-$name.out" 2>&1 &
        eval "PROBE_$name=$!"
}
probe_stop() {
        local pid
        eval "pid=\$PROBE_$1"
        hx pkill -INT -x latency-probe >/dev/null 2>&1
        wait "$pid" 2>/dev/null
}
# field FILE KIND KEY
field() { sed -n "s/^$2 .* $3=\([0-9.]*\).*/\1/p" "$1"; }

# ---------------------------------------------------------------- 1.
phase_latency() {
        echo "=== the daemon answers while a task works on a $FILES-file repository"
        printf '[{"reply": {"content": "plan"}},
 {"reply": {"content": "done", "tool_calls": [{"name": "finish", "arguments": {"summary": "nothing"}}]}}]' > "$WORK/small.json"
        model "$WORK/small.json" || { fail "model server"; return; }
        make_repo small 10
        local small
        small=$(submit small "Nothing") || { fail "submit small: $small"; return; }
        wait_state "$small" 60 succeeded || { fail "small task: $(task_prop "$small" State)"; return; }

        # The baseline: the same calls to the idle daemon.
        hx latency-probe --duration=5 --interval-ms=20 --task="$small" > "$WORK/probe-idle.out" 2>&1
        cat "$WORK/probe-idle.out" | sed 's/^/  idle: /'

        local t0 t1
        t0=$(date +%s.%N)
        make_repo big "$FILES"
        t1=$(date +%s.%N)
        figure "generating the $FILES-file repository (git fast-import by alice) took $(elapsed "$t0" "$t1") s"

        # Three steps that each write one file, one whose command touches
        # nothing, one that rewrites 1000 files; then the endpoint fails:
        # the task fails with four checkpoints.
        cat > "$WORK/big.json" <<'EOF'
[{"reply": {"content": "plan"}},
 {"reply": {"content": "one", "tool_calls": [{"name": "write_file", "arguments": {"path": "new1.txt", "content": "1\n"}}]}},
 {"reply": {"content": "two", "tool_calls": [{"name": "write_file", "arguments": {"path": "new2.txt", "content": "2\n"}}]}},
 {"reply": {"content": "nothing", "tool_calls": [{"name": "run_command", "arguments": {"command": "true"}}]}},
 {"reply": {"content": "many", "tool_calls": [{"name": "run_command", "arguments": {"command": "for f in d000[0-9]/*.txt; do echo x >> $f; done"}}]}},
 {"reply": {"content": "three", "tool_calls": [{"name": "write_file", "arguments": {"path": "new3.txt", "content": "3\n"}}]}},
 {"status": 500}, {"status": 500}, {"status": 500}, {"status": 500}]
EOF
        model "$WORK/big.json" || { fail "model server"; return; }
        probe_start load --task="$small" --slowest=10
        local trace_pid=
        if [ -n "${PROFILE:-}" ]; then
                mkdir -p "$PROFILE"
                # The main thread only (no -f): the worker threads run untraced.
                strace -T -tt -qq -o "$PROFILE/strace.txt" \
                        -p "$(pgrep --ns "$HARNESS_PID" --nslist pid -x agentfabd | head -1)" 2>/dev/null &
                trace_pid=$!
        fi
        t0=$(date +%s.%N)
        local id
        id=$(submit big "Work on a big tree") || { fail "submit big: $id"; probe_stop load; return; }
        t1=$(date +%s.%N)
        figure "import of $FILES files (SubmitTask answered) $(elapsed "$t0" "$t1") s"
        if wait_state "$id" 600 failed; then ok "the task worked on the big tree and failed when the model did"; else
                fail "big task: $(task_prop "$id" State): $(task_prop "$id" Reason)"; probe_stop load; return; fi
        t1=$(date +%s.%N)
        figure "$FILES files: submit to failed after 5 steps (import, 5 checkpoints, breakers) $(elapsed "$t0" "$t1") s"
        local steps
        steps=$(steps_of "$id")
        [ "$steps" = "1 2 4 5 " ] && ok "checkpoints of steps 1 2 4 5 (step 3 changed nothing)" || fail "steps: $steps"

        # Exports and a reset by hand, on the big tree.
        local f
        for f in diff mbox bundle; do
                t0=$(date +%s.%N)
                hx_as alice "${CTL[@]}" export "$id" --format=$f > "$WORK/export.$f" 2>&1 &&
                        ok "export --format=$f answered" || fail "export $f: $(head -c 300 "$WORK/export.$f")"
                t1=$(date +%s.%N)
                figure "export --format=$f of $FILES files: $(elapsed "$t0" "$t1") s, $(stat -c %s "$WORK/export.$f") bytes"
        done
        local first
        first=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%H --reverse "agentfab/$id" | sed -n 2p)
        t0=$(date +%s.%N)
        out=$(hx_as alice "${CTL[@]}" reset "$id" "$first" 2>&1) && ok "reset to step 1 answered" || fail "reset: $out"
        t1=$(date +%s.%N)
        figure "ResetTo over $FILES files: $(elapsed "$t0" "$t1") s"
        [ "$(steps_of "$id")" = "1 " ] && ok "the branch is back at step 1" || fail "after reset: $(steps_of "$id")"
        hx test ! -e "/var/lib/agentfab/tasks/$id/workspace/new2.txt" && ok "the workspace is back at step 1" ||
                fail "new2.txt still in the workspace"

        # Resumed: the model finishes, the task is delivered.
        printf '[{"reply": {"content": "plan"}}, {"reply": {"content": "one"}}, {"reply": {"content": "two"}}, {"reply": {"content": "nothing"}}, {"reply": {"content": "many"}}, {"reply": {"content": "three"}},
 {"reply": {"content": "again", "tool_calls": [{"name": "write_file", "arguments": {"path": "again.txt", "content": "a\\n"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}}]' > "$WORK/big2.json"
        model "$WORK/big2.json" || { fail "model server"; return; }
        t0=$(date +%s.%N)
        out=$(hx_as alice "${CTL[@]}" resume "$id" 2>&1) || fail "resume: $out"
        if wait_state "$id" 600 succeeded; then ok "resumed and delivered"; else
                fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        t1=$(date +%s.%N)
        figure "resume, reset to the checkpoint, 2 steps and the delivery over $FILES files: $(elapsed "$t0" "$t1") s"
        hx test -s "/var/lib/agentfab/tasks/$id/summary.md" && ok "summary written" || fail "no summary"
        probe_stop load
        [ -n "$trace_pid" ] && kill "$trace_pid" 2>/dev/null && wait "$trace_pid" 2>/dev/null
        cat "$WORK/probe-load.out" | sed 's/^/  load: /'
        # JOURNAL=FILE: the daemon's journal with microseconds, to set next
        # to the probe's slowest answers (with AGENTFAB_TRACE=1, each step's
        # phases are in it).
        [ -n "${JOURNAL:-}" ] && hx journalctl -q --no-pager -o short-precise -u agentfab.service > "$JOURNAL"

        local kind max p99 idle99
        for kind in bus stream; do
                max=$(field "$WORK/probe-load.out" $kind max)
                p99=$(field "$WORK/probe-load.out" $kind p99)
                idle99=$(field "$WORK/probe-idle.out" $kind p99)
                figure "$kind answers while working on $FILES files: p50 $(field "$WORK/probe-load.out" $kind p50) ms, p99 $p99 ms, max $max ms (idle: p50 $(field "$WORK/probe-idle.out" $kind p50) ms, p99 $idle99 ms, max $(field "$WORK/probe-idle.out" $kind max) ms)"
                [ -n "$max" ] && awk -v m="$max" -v b="$BUS_MAX_MS" 'BEGIN { exit !(m < b) }' &&
                        ok "every $kind answer within $BUS_MAX_MS ms (max $max ms)" || fail "$kind: max ${max:-none} ms"
                grep -q "^$kind .*failed=0 " "$WORK/probe-load.out" && ok "no $kind request failed" ||
                        fail "$kind requests failed: $(grep "^$kind" "$WORK/probe-load.out")"
        done
}

# ---------------------------------------------------------------- 2.
phase_flood() {
        echo "=== output flood: $FLOOD_MB MiB into the log and into /dev/null"
        local n=$((FLOOD_MB * 1024 * 1024))
        # Each producer writes n bytes: text without a newline and terminal
        # escape sequences (a colour, a window title, a bell, a NUL) in
        # 1 MiB writes, NUL bytes in head's 8 KiB writes, and bytes a
        # producer computes (SHA-256 over its buffer before each 1 MiB
        # write: any byte values, and slower than 1 GB/s here).
        python3 - "$WORK/flood.json" "$FLOOD_MB" <<'EOF'
import json, sys
out, mb = sys.argv[1], int(sys.argv[2])
cmds = [
    "python3 -c 'import sys; b = b\"x\" * 1048576; [sys.stdout.buffer.write(b) for _ in range(%d)]'" % mb,
    "head -c %d /dev/zero" % (mb * 1048576),
    "python3 -c 'import sys; b = (b\"\\x1b[31m\\x1b]0;\" + bytes([112, 119, 110, 101, 100]) + b\"\\x07\\x00\") * 65536; "
    "[sys.stdout.buffer.write(b) for _ in range(%d)]'" % mb,
    "python3 -c 'import sys, hashlib\nb = bytearray(1048576)\nfor i in range(%d):\n"
    "    b[i * 32 %% 1048544:i * 32 %% 1048544 + 32] = hashlib.sha256(b).digest()\n    sys.stdout.buffer.write(b)'" % mb,
]
# The floor: the same command into a pipe whose reader keeps nothing
# (splice() to /dev/null), what the producer pays for writing into a pipe
# at all. Python's start-up is in it, as in the other two.
drain = (" | python3 -c 'import fcntl, os\nfcntl.fcntl(0, fcntl.F_SETPIPE_SZ, 1 << 20)\n"
         "n = os.open(\"/dev/null\", os.O_WRONLY)\nwhile os.splice(0, n, 1 << 20): pass'")
script = [{"reply": {"content": "plan"}}]
for c in cmds:
    # sync first: each triple starts with no dirty pages (see the figures).
    for target in (None, " > /dev/null", drain, ""):
        if target is None:
            script.append({"reply": {"content": "sync", "tool_calls": [{"name": "run_command", "arguments": {"command": "sync"}}]}})
            continue
        script.append({"reply": {"content": "flood", "tool_calls": [{"name": "run_command", "arguments": {"command": c + target}}]}})
script.append({"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "flooded"}}]}})
json.dump(script, open(out, "w"))
EOF
        model "$WORK/flood.json" || { fail "model server"; return; }
        make_repo flood 3
        hold_page_reporting
        local pid hwm0 id
        hx busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks >/dev/null 2>&1
        pid=$(hx systemctl show -P MainPID agentfab.service)
        hwm0=$(hx sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$pid/status")
        # The daemon's CPU time (its mover threads included), in clock ticks.
        local cpu0
        cpu0=$(hx awk '{ print $14 + $15 }' "/proc/$pid/stat")
        local t_flood0
        t_flood0=$(date +%s.%N)
        id=$(submit flood "Flood") || { fail "submit: $id"; return; }
        # A follower of the output, as agentfabctl logs -f is.
        timeout 600 nsenter -t "$HARNESS_PID" -a runuser -u alice -- agentfabctl logs "$id" -f > "$WORK/follow.out" 2>&1 &
        local follow=$!
        # The follower ends with the task: waiting for it rather than
        # asking the bus four times a second keeps the test's own processes
        # (an nsenter and a busctl each time, 10-15 % of the two cores here)
        # from competing with the commands whose speed it measures.
        wait $follow 2>/dev/null
        if wait_state "$id" 900 succeeded; then ok "the flood task finished"; else
                fail "flood task: $(task_prop "$id" State): $(task_prop "$id" Reason)"; kill $follow 2>/dev/null
                release_page_reporting; return; fi
        release_page_reporting
        wait $follow 2>/dev/null
        local flood_s
        flood_s=$(elapsed "$t_flood0" "$(date +%s.%N)")
        local hwm cpu1
        hwm=$(hx sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$pid/status")
        cpu1=$(hx awk '{ print $14 + $15 }' "/proc/$pid/stat")
        figure "agentfabd CPU time during the flood ($((4 * FLOOD_MB)) MiB into the log): $(awk -v a="$cpu0" -v b="$cpu1" -v t="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / t }') s"
        figure "agentfabd memory: peak $((hwm0 / 1024)) MiB before, peak $((hwm / 1024)) MiB after $((4 * FLOOD_MB)) MiB of output"
        [ "$hwm" -lt $((hwm0 + 64 * 1024)) ] && ok "daemon memory flat (peak $((hwm / 1024)) MiB)" || fail "daemon peak $hwm kB from $hwm0 kB"

        local size
        size=$(hx stat -c %s "/var/lib/agentfab/tasks/$id/output.log")
        [ "$size" -ge $((4 * n)) ] && ok "output.log holds all $((4 * n)) bytes ($size with the banners)" || fail "output.log: $size bytes"
        # Each command's bytes follow its banner in the log, compared piece by
        # piece (mapped, not read into memory: 4 x FLOOD_MB).
        hx python3 - "/var/lib/agentfab/tasks/$id/output.log" "$FLOOD_MB" "$(cat "$WORK/flood.json")" > "$WORK/logcheck" <<'EOF' &&
import hashlib, json, mmap, sys
path, mb, script = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
cmds = [c["arguments"]["command"] for e in script for c in e["reply"].get("tool_calls") or []
        if c["name"] == "run_command" and c["arguments"]["command"] != "sync" and
        not c["arguments"]["command"].endswith(" > /dev/null") and "os.splice" not in c["arguments"]["command"]]
def text():
    for _ in range(mb): yield b"x" * 1048576
def nul():
    for _ in range(mb): yield bytes(1048576)
def escapes():
    for _ in range(mb): yield (b"\x1b[31m\x1b]0;pwned\x07\x00") * 65536
def computed():
    b = bytearray(1048576)
    for i in range(mb):
        b[i * 32 % 1048544:i * 32 % 1048544 + 32] = hashlib.sha256(b).digest()
        yield bytes(b)
f = open(path, "rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
for cmd, gen in zip(cmds, (text, nul, escapes, computed)):
    banner = ("\n$ %s\n" % cmd).encode()
    off = m.find(banner)
    if off < 0:
        print("no banner for", cmd[:40]); sys.exit(1)
    off += len(banner)
    for chunk in gen():
        if m[off:off + len(chunk)] != chunk:
            print("%s: differs at %d" % (gen.__name__, off)); sys.exit(1)
        off += len(chunk)
print("ok")
EOF
                ok "the log has the bytes as written: x, NUL, escapes, computed" || fail "log content: $(cat "$WORK/logcheck")"
        # The model got head and tail, escaped; so did the follower.
        python3 - "$WORK/requests.jsonl" > "$WORK/modelcheck" <<'EOF' && ok "what the model got is bounded and escaped" || fail "model: $(cat "$WORK/modelcheck")"
import json, sys
worst = 0
for line in open(sys.argv[1]):
    body = json.loads(line).get("body") or {}
    for m in body.get("messages", []):
        if m.get("role") == "tool":
            c = m.get("content") or ""
            worst = max(worst, len(c))
            if "\x1b" in c or "\x00" in c or "\x07" in c:
                print("raw control character in a tool result"); sys.exit(1)
print("longest tool result", worst)
sys.exit(0 if worst < 200000 else 1)
EOF
        # A follower gets at most 16 KiB of the newest bytes per 50 ms,
        # escaped (at most 4 bytes each): its share grows with the time the
        # flood takes, never with its size.
        local fsize flimit
        fsize=$(stat -c %s "$WORK/follow.out")
        flimit=$(awk -v s="$flood_s" 'BEGIN { printf "%d", 2 * 1048576 + (s + 1) * 20 * 65536 }')
        ! grep -q $'\x1b' "$WORK/follow.out" && [ "$fsize" -lt "$flimit" ] &&
                ok "the follower got $fsize bytes in $flood_s s (bound $flimit), escaped" ||
                fail "follower: $fsize bytes in $flood_s s (bound $flimit), raw escapes: $(grep -c $'\x1b' "$WORK/follow.out")"
        ! hx journalctl -q -o cat AGENTFAB_TASK="$id" | grep -q 'pwned' && ok "no output in the journal" || fail "output in the journal"

        # The figures: each command's duration as the sandbox measured it
        # (the command ends when its last byte is in the pipe, at most 1 MiB
        # before it is in the log). The target (issue 9), per producer: into
        # the log at 1 GB/s at least, or, where the producer itself is
        # slower than 1.25 GB/s, at no less than its /dev/null rate / 1.25.
        # (Against a producer faster than that, /dev/null copies nothing
        # and the log copies every byte into the page cache once: no design
        # reaches 1.25x /dev/null there, so 1 GB/s is the bound.) Beside
        # them, the floor: the same command into a pipe that something
        # drains without keeping a byte, what writing into any pipe costs
        # the producer itself; no design that reads a pipe gets more. (The
        # drain runs in the sandbox, under its CPUQuota= of one CPU with the
        # producer: 10-15 % slower for it here than with no quota.) Each
        # triple comes after a `sync`: past about 2.2 GB of dirty pages (10 % of
        # this machine's memory) the kernel holds every writer to the disk's
        # writeback rate, whatever the design (seen: 50-90 MB/s with other
        # sessions' I/O), so without it the fourth GiB measured the disk.
        # That bound is the disk's, and the figures say nothing of it.
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | python3 -c '
import json, sys
rows = [r for r in (json.loads(l) for l in sys.stdin) if r.get("AGENTFAB_COMMAND") != "sync"]
names = ["text without newline", "NUL bytes", "escape sequences", "computed bytes"]
for i in range(0, len(rows) - 2, 3):
    null, pipe, log = rows[i], rows[i + 1], rows[i + 2]
    dn = int(null["AGENTFAB_DURATION_USEC"]) / 1e6
    dp = int(pipe["AGENTFAB_DURATION_USEC"]) / 1e6
    dl = int(log["AGENTFAB_DURATION_USEC"]) / 1e6
    b = int(log["AGENTFAB_OUTPUT_BYTES"])
    rl, rn, rp = b / dl / 1e6, b / dn / 1e6, b / dp / 1e6
    bound = min(1000.0, rn / 1.25)
    print("figure: output %s: %d MiB into the log in %.3f s = %.0f MB/s; into /dev/null %.3f s = %.0f MB/s; ratio %.2fx; "
          "into a pipe drained of it %.3f s = %.0f MB/s (the log %.0f %% of that); "
          "bound min(1 GB/s, /dev/null / 1.25) = %.0f MB/s: %s" %
          (names[i // 3] if i // 3 < len(names) else "?", b >> 20, dl, rl, dn, rn, dl / dn, dp, rp, 100 * rl / rp, bound,
           "met" if rl >= bound else "not met"))
'
}

# ---------------------------------------------------------------- 4.
# Calls at a high rate: a burst of submissions from many connections is
# queued for polkit, not denied for the bus's limit of pending calls (128
# a connection); a yes to org.agentfab.submit is kept a moment for the
# connection that got it (AGENTFAB_POLKIT_KEEP_SEC=6 here, 1 s by default),
# never for another, and forgotten when its time is over, when polkitd's
# rules change or when polkitd restarts; a watch of a history with a torn
# line in it, sent from what was checked before, is what it was.
watch_events() {
        hx_as alice python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect("/run/agentfab/agentfab.sock")
s.sendall(("{\"task\":\"%s\",\"follow\":false}\n" % sys.argv[1]).encode())
d = b""
while True:
    k = s.recv(65536)
    if not k:
        break
    d += k
sys.stdout.write(d.decode())' "$1"
}

phase_polkit() {
        local out id script t0 took i got rules=/etc/polkit-1/rules.d/40-agentfab-test-flag.rules
        local denied=org.freedesktop.DBus.Error.AccessDenied
        make_repo small 10
        hx rm -f /tmp/agentfab-flag /tmp/agentfab-step1 /tmp/agentfab-step2 /tmp/agentfab-go1 /tmp/agentfab-go2
        # Every task held queued; as many as the burst makes.
        printf '[Daemon]\nMaxActiveTasks=0\nMaxTasksPerUser=100000\n' | hx tee /etc/agentfab/agentfab.conf.d/70-polkit.conf >/dev/null
        hx mkdir -p /run/systemd/system/agentfab.service.d
        printf '[Service]\nEnvironment=AGENTFAB_POLKIT_KEEP_SEC=6\n' |
                hx tee /run/systemd/system/agentfab.service.d/70-polkit.conf >/dev/null
        hx systemctl daemon-reload
        hx systemctl restart agentfab.service
        # alice's submissions are refused while /tmp/agentfab-flag says "no".
        printf '%s\n' 'polkit.addRule(function(action, subject) {' \
                '        if (action.id == "org.agentfab.submit" && subject.user == "alice") {' \
                '                try {' \
                '                        if (polkit.spawn(["/bin/cat", "/tmp/agentfab-flag"]).trim() == "no")' \
                '                                return polkit.Result.NO;' \
                '                } catch (e) {}' \
                '        }' \
                '});' | hx tee "$rules" >/dev/null
        sleep 1

        out=$(hx_as alice agentfab-load burst --count=200 --repo=/home/alice/small 2>&1) &&
                ok "200 submissions at once on 200 connections, none refused (${out#burst: })" || fail "burst: $out"

        printf '%s\n' "write /tmp/agentfab-flag yes" "submit 0" \
                "write /tmp/agentfab-flag no" "submit 0" "submit 1" "sleep 6.5" "submit 0" \
                "write /tmp/agentfab-flag yes" "submit 0" "write /tmp/agentfab-flag no" "submit 0" \
                "write /tmp/agentfab-step1 x" "wait /tmp/agentfab-go1" "submit 0" \
                "write /tmp/agentfab-flag yes" "submit 0" "write /tmp/agentfab-flag no" \
                "write /tmp/agentfab-step2 x" "wait /tmp/agentfab-go2" "submit 0" |
                hx_as alice agentfab-load script --repo=/home/alice/small > "$WORK/keep.out" 2>&1 &
        script=$!
        for i in $(seq 300); do hx test -e /tmp/agentfab-step1 && break; sleep 0.1; done
        t0=$(date +%s.%N)
        # New rules: polkitd reloads them and says Changed.
        echo '/* nothing */' | hx tee /etc/polkit-1/rules.d/41-agentfab-test-touch.rules >/dev/null
        sleep 0.5
        hx touch /tmp/agentfab-go1
        took=$(elapsed "$t0" "$(date +%s.%N)")
        for i in $(seq 300); do hx test -e /tmp/agentfab-step2 && break; sleep 0.1; done
        t0=$(date +%s.%N)
        hx systemctl restart polkit.service
        hx touch /tmp/agentfab-go2
        took="$took s and $(elapsed "$t0" "$(date +%s.%N)") s"
        wait "$script"
        mapfile -t got < "$WORK/keep.out"
        [ "${got[0]:-}" = "submit 0 ok" ] && ok "polkit says yes: submitted" || fail "first: ${got[0]:-}"
        [ "${got[1]:-}" = "submit 0 ok" ] && ok "the yes is kept for that connection after the rule turned to no" ||
                fail "kept: ${got[1]:-}"
        [ "${got[2]:-}" = "submit 1 $denied" ] && ok "not for another connection of the same user: denied" ||
                fail "other connection: ${got[2]:-}"
        [ "${got[3]:-}" = "submit 0 $denied" ] && ok "not after its time: denied" || fail "after its time: ${got[3]:-}"
        [ "${got[4]:-} ${got[5]:-}" = "submit 0 ok submit 0 ok" ] || fail "kept again: ${got[4]:-} ${got[5]:-}"
        [ "${got[6]:-}" = "submit 0 $denied" ] && ok "not after polkit's rules changed: denied" ||
                fail "after Changed: ${got[6]:-}"
        [ "${got[7]:-}" = "submit 0 ok" ] || fail "kept a third time: ${got[7]:-}"
        [ "${got[8]:-}" = "submit 0 $denied" ] && ok "not after polkitd restarted: denied" ||
                fail "after the restart: ${got[8]:-}"
        [ "${#got[@]}" = 9 ] || fail "the script said: $(cat "$WORK/keep.out")"
        figure "the rules change and polkitd's restart took $took (within the 6 s a yes is kept)"

        # A torn line in a history, then more events after it.
        id=$(hx sh -c 'ls /var/lib/agentfab/tasks | head -1')
        local ev=/var/lib/agentfab/tasks/$id/events.jsonl
        watch_events "$id" > "$WORK/watch0"
        printf '{"type":"torn\n{"type":"note","task":"%s","n":1}\n' "$id" | hx tee -a "$ev" >/dev/null
        watch_events "$id" > "$WORK/watch1"
        watch_events "$id" > "$WORK/watch2"
        printf '{"type":"note","task":"%s","n":2}\n' "$id" | hx tee -a "$ev" >/dev/null
        watch_events "$id" > "$WORK/watch3"
        if [ -n "$id" ] && [ "$(wc -l < "$WORK/watch0")" -ge 2 ] && cmp -s "$WORK/watch1" "$WORK/watch2" &&
           ! grep -q torn "$WORK/watch1" && grep -q '"n":1' "$WORK/watch1" &&
           [ "$(grep -c '"type":"note"' "$WORK/watch3")" = 2 ] &&
           [ "$(head -n -1 "$WORK/watch0")" = "$(head -n -2 "$WORK/watch1")" ] &&
           tail -1 "$WORK/watch3" | grep -q '"type":"end"'; then
                ok "a watch skips a torn line, sends what follows it, and every new event"
        else
                fail "watch of '$id': $(tail -c 600 "$WORK/watch1"; echo; tail -c 300 "$WORK/watch3")"
        fi

        hx rm -f "$rules" /etc/polkit-1/rules.d/41-agentfab-test-touch.rules /etc/agentfab/agentfab.conf.d/70-polkit.conf \
                /run/systemd/system/agentfab.service.d/70-polkit.conf /tmp/agentfab-flag
        hx systemctl daemon-reload
        hx systemctl stop agentfab.service 2>/dev/null
        hx sh -c 'rm -rf /var/lib/agentfab/tasks/*'
        hx systemctl start agentfab.service
}

# ---------------------------------------------------------------- 3.
# daemon_env NO_REATTACH: the daemon's environment from its next start on
# (AGENTFAB_TRACE as the test's); a daemon with nothing at work is
# restarted now, so that the instance the round kills has it too.
daemon_env() {
        hx mkdir -p /run/systemd/system/agentfab.service.d
        printf '[Service]\nEnvironment=AGENTFAB_TRACE=%s AGENTFAB_NO_REATTACH=%s\n' "${AGENTFAB_TRACE:-0}" "$1" |
                hx tee /run/systemd/system/agentfab.service.d/60-resume.conf >/dev/null
        hx systemctl daemon-reload
        hx systemctl restart agentfab.service
}

# The resume, measured with reattaching (the daemon takes the running
# sandboxes up again from systemd's fd store) and, with RESUME_BASELINE=1,
# first without it (AGENTFAB_NO_REATTACH=1: every sandbox made anew, as
# before), in the same run.
phase_resume() {
        if [ "${RESUME_BASELINE:-0}" = 1 ]; then
                daemon_env 1
                resume_round baseline
        fi
        daemon_env 0
        resume_round reattach
}

resume_round() {
        local mode=$1
        echo "=== resume ($mode): $TASKS tasks at work, agentfabd SIGKILLed (load: $(cut -d' ' -f1-3 /proc/loadavg))"
        # Step 2's answer is held until the daemon has been killed.
        # Step 3's (finish) until the scopes were looked at after it.
        touch "$WORK/hold" "$WORK/hold3"
        python3 - "$WORK/resume.json" "$WORK/hold" "$WORK/hold3" <<'PY'
import json, sys
def write(path, text):
    return {"name": "write_file", "arguments": {"path": path, "content": text}}
json.dump([{"reply": {"content": "plan"}},
           {"reply": {"content": "one", "tool_calls": [write("one.txt", "1\n")]}},
           {"hold_while": sys.argv[2], "reply": {"content": "two", "tool_calls": [write("two.txt", "2\n")]}},
           {"hold_while": sys.argv[3],
            "reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}}],
          open(sys.argv[1], "w"))
PY
        model "$WORK/resume.json" || { fail "model server"; return; }
        local i ids=() id
        for i in $(seq "$TASKS"); do
                make_repo "r$i" 20
                id=$(submit "r$i" "Resume $i") || { fail "submit r$i: $id"; return; }
                ids+=("$id")
        done
        # At work: each has asked for its second step.
        local waiting=0
        for i in $(seq 480); do
                waiting=$(python3 -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) if sum(1 for m in (json.loads(l).get("body") or {}).get("messages", []) if m.get("role") == "assistant") == 2))' "$WORK/requests.jsonl")
                [ "$waiting" -ge "$TASKS" ] && break
                sleep 0.25
        done
        [ "$waiting" -ge "$TASKS" ] && ok "$TASKS tasks wait for their model" || { fail "only $waiting tasks at work"; rm -f "$WORK/hold" "$WORK/hold3"; return; }
        # Each sandbox's scope, by its invocation: the same after the kill
        # if the sandbox was taken up again, a new one if it was made anew.
        local inv_before=() before cursor
        for id in "${ids[@]}"; do
                inv_before+=("$(hx systemctl show -P InvocationID "agentfab-task-$id.scope")")
        done
        cursor=$(hx journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p')
        before=$(wc -l < "$WORK/requests.jsonl")
        hx systemctl kill -s KILL agentfab.service
        # What the killed daemon asked is answered now; it is gone.
        rm -f "$WORK/hold"
        # systemd restarts it (Restart=on-failure); a call would activate it too.
        hx busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks >/dev/null 2>&1
        for i in $(seq 400); do
                [ "$(tail -n +$((before + 1)) "$WORK/requests.jsonl" | wc -l)" -ge "$TASKS" ] && break
                sleep 0.05
        done
        # From the new daemon's start (systemd's "Starting" entry) to the
        # last of the tasks' model requests, on the same clock.
        local t0 started took
        # journald may lag behind a busy system: its entries of the start
        # first (bounded).
        for i in $(seq 100); do
                hx journalctl -q --after-cursor="$cursor" -o cat | grep -q "agentfabd started with" && break
                sleep 0.1
        done
        t0=$(hx journalctl -q --after-cursor="$cursor" -o json | python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if str(j.get("MESSAGE", "")).startswith("Starting agentfab.service"):
        print(int(j["__REALTIME_TIMESTAMP"]) / 1e6); break')
        started=$(hx journalctl -q --after-cursor="$cursor" -o json | python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if "agentfabd started with" in str(j.get("MESSAGE", "")):
        print(int(j["__REALTIME_TIMESTAMP"]) / 1e6); break')
        took=$(tail -n +$((before + 1)) "$WORK/requests.jsonl" | python3 -c '
import json, sys
t0, n = float(sys.argv[1]), int(sys.argv[2])
ts = sorted(json.loads(l)["t"] for l in sys.stdin)
print("%.3f %.3f %d" % ((ts[n - 1] - t0) if len(ts) >= n else -1, ts[0] - t0 if ts else -1, len(ts)))' "${t0:-0}" "$TASKS")
        figure "resume ($mode) of $TASKS tasks: all at work again $(echo "$took" | cut -d' ' -f1) s after agentfab.service was started again (the first after $(echo "$took" | cut -d' ' -f2) s; the daemon itself ready after $(elapsed "${t0:-0}" "${started:-0}") s)"
        [ "$(echo "$took" | cut -d' ' -f3)" -ge "$TASKS" ] && ok "all $TASKS at work again" || fail "at work again: $took"
        # Where the time went: the tasks' sandboxes ready (journal), then
        # their model calls (the model server's clock, the same).
        hx journalctl -q --after-cursor="$cursor" -o json | python3 -c '
import json, sys
t0 = float(sys.argv[1])
ts = sorted(int(j["__REALTIME_TIMESTAMP"]) / 1e6 - t0 for j in map(json.loads, sys.stdin) if j.get("AGENTFAB_EVENT") == "sandbox")
if ts:
    print("figure: resume: the %d sandboxes ready from %.3f s to %.3f s (median %.3f s) after the start" % (len(ts), ts[0], ts[-1], ts[len(ts) // 2]))' "${t0:-0}"
        # The timeline of each task's way back, medians over the tasks:
        # the launcher's instance started (systemd), the stale scope
        # stopped, the new scope started, the sandbox ready (launcher), its
        # model request (model server), all from the daemon's start.
        hx journalctl -q --after-cursor="$cursor" -o json | python3 -c '
import json, re, sys
t0 = float(sys.argv[1]); reqs = [json.loads(l) for l in open(sys.argv[2]).readlines()[int(sys.argv[3]):]]
ev = {}
unit_start, unit_task = {}, {}
for l in sys.stdin:
    j = json.loads(l); t = int(j["__REALTIME_TIMESTAMP"]) / 1e6 - t0; msg = str(j.get("MESSAGE", ""))
    u = j.get("UNIT") or j.get("USER_UNIT") or ""
    if u.startswith("agentfab-launcher@") and msg.startswith("Started "):
        unit_start[u] = t
    m = re.search(r"task .?([0-9a-f]{12})", msg)
    if m and j.get("_SYSTEMD_UNIT", "").startswith("agentfab-launcher@"):
        unit_task[j["_SYSTEMD_UNIT"]] = m.group(1)
        if "ready in" in msg: ev.setdefault(m.group(1), {})["ready"] = t
        if msg.startswith("Stopped stale scope"): ev.setdefault(m.group(1), {})["stale"] = t
    m = re.match(r"agentfab-task-([0-9a-f]{12})\.scope$", u)
    if m and msg.startswith("Started "): ev.setdefault(m.group(1), {})["scope"] = t
    if j.get("_SYSTEMD_UNIT") == "agentfab.service" and t >= 0:
        if "tasks from" in msg and msg.startswith("Loaded "): ev.setdefault("daemon", {}).setdefault("loaded", t)
        if "agentfabd started with" in msg: ev.setdefault("daemon", {}).setdefault("started", t)
    if j.get("AGENTFAB_EVENT") == "sandbox-reattached" and j.get("AGENTFAB_TASK"):
        ev.setdefault(j["AGENTFAB_TASK"], {})["reattached"] = t
for u, tid in unit_task.items():
    if u in unit_start: ev.setdefault(tid, {})["launcher"] = unit_start[u]
med = lambda v: sorted(v)[len(v) // 2] if v else None
d = ev.pop("daemon", {})
out = ["daemon: tasks loaded %.3f, ready %.3f" % (d.get("loaded", -1), d.get("started", -1))]
for k in ("launcher", "stale", "scope", "ready", "reattached"):
    v = [e[k] for e in ev.values() if k in e]
    if v: out.append("%s %d: %.3f-%.3f (median %.3f)" % (k, len(v), min(v), max(v), med(v)))
if reqs: out.append("model requests: %.3f-%.3f" % (min(r["t"] for r in reqs) - t0, max(r["t"] for r in reqs) - t0))
print("figure: resume timeline (s after the start): " + "; ".join(out))' "${t0:-0}" "$WORK/requests.jsonl" "$before"
        if [ "${AGENTFAB_TRACE:-0}" = 1 ]; then
                hx journalctl -q --after-cursor="$cursor" -o json | python3 -c '
import json, re, sys
ms = []
for j in map(json.loads, sys.stdin):
    if j.get("_SYSTEMD_UNIT") != "agentfab.service": continue
    m = str(j.get("MESSAGE", ""))
    if m.startswith("Start-up (trace)"): print("figure: resume (%s): agentfabd start-up: %s" % (sys.argv[1], m.split(": ", 1)[1]))
    r = re.search(r"first model call ([0-9.]+) ms after its agent started", m)
    if r: ms.append(float(r.group(1)))
ms.sort()
if ms: print("figure: resume (%s): from an agent start to its first model call: %.0f-%.0f ms (median %.0f) over %d tasks" % (sys.argv[1], ms[0], ms[-1], ms[len(ms) // 2], len(ms)))' "$mode"
        fi
        # Looked at while every task waits for step 3's answer: each has
        # its sandbox, taken up again or made anew.
        local reattached same=0 k=0
        for i in $(seq 400); do
                [ "$(tail -n +$((before + 1)) "$WORK/requests.jsonl" | wc -l)" -ge $((TASKS * 2)) ] && break
                sleep 0.05
        done
        # (Filtered here, not by a match: journalctl 252 with a match and
        # --after-cursor leaves out the first entry that matches.)
        reattached=$(hx journalctl -q --after-cursor="$cursor" -o json | grep -c '"AGENTFAB_EVENT":"sandbox-reattached"')
        for id in "${ids[@]}"; do
                [ -n "${inv_before[$k]}" ] &&
                        [ "$(hx systemctl show -P InvocationID "agentfab-task-$id.scope")" = "${inv_before[$k]}" ] &&
                        same=$((same + 1))
                k=$((k + 1))
        done
        echo "  $reattached sandboxes taken up again, $same of $TASKS scopes the same invocation as before the kill"
        rm -f "$WORK/hold3"
        if [ "$mode" = reattach ]; then
                [ "$reattached" = "$TASKS" ] && [ "$same" = "$TASKS" ] &&
                        ok "every sandbox was taken up again: its scope is the one from before the kill" ||
                        { fail "taken up again: $reattached, scopes the same: $same of $TASKS"
                          hx journalctl -q --after-cursor="$cursor" --no-pager |
                                grep -v 'step [0-9]\|write_file\|reviewed at\|tests not-run\|delivered branch' | head -60; }
        else
                [ "$reattached" = 0 ] && [ "$same" = 0 ] && ok "baseline: every sandbox made anew" ||
                        fail "baseline: taken up again $reattached, scopes the same $same"
        fi
        local bad=0
        for id in "${ids[@]}"; do
                wait_state "$id" 120 succeeded || { bad=$((bad + 1)); echo "  $id: $(task_prop "$id" State): $(task_prop "$id" Reason)"; continue; }
                [ "$(steps_of "$id")" = "1 2 " ] || { bad=$((bad + 1)); echo "  $id: steps $(steps_of "$id")"; }
        done
        [ "$bad" = 0 ] && ok "all $TASKS succeeded with Agentfab-Step 1 2: none lost or repeated" || fail "$bad tasks wrong"
        # Nothing left behind: with every task done, no task scope and no
        # launcher instance is left (bounded wait: they end as the
        # sandboxes see their connections close).
        local left=
        for i in $(seq 100); do
                left=$(hx systemctl list-units --plain --no-legend 'agentfab-task-*.scope' 'agentfab-launcher@*.service' | wc -l)
                [ "$left" = 0 ] && break
                sleep 0.1
        done
        [ "$left" = 0 ] && ok "no sandbox scope or launcher instance left" || fail "$left units left"
}

harness_boot || { fail "harness_boot"; check_summary; exit 1; }
hx systemctl start agentfab-launcher.socket >/dev/null 2>&1
for p in $PHASES; do "phase_$p"; done
! hx journalctl -q -u agentfab.service --no-pager | grep -q 'code=dumped\|status=6/ABRT\|status=11/SEGV' &&
        ok "agentfabd never crashed (only the test's SIGKILL)" || fail "agentfabd crashed"
if [ "$FAILED" != 0 ]; then
        echo "--- journal (last 40 lines)"
        hx journalctl -q --no-pager | tail -40
fi
stop_model
harness_teardown
check_summary
