#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs dependencies, builds, and runs every test: unit tests (also under
# ASan/UBSan) and the integration tests against a real systemd, dbus-daemon,
# polkitd and journald. Ends with one line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh || exit 1

fail_early() { echo "$1"; echo "0 passed, 1 failed"; exit 1; }

# Count TAP results of every unit test that meson ran: passed, failed and
# skipped ("ok N # SKIP ...", or a whole test's "1..0 # SKIP ...").
count_unit() {
        python3 - "$1/meson-logs/testlog.json" <<'PY'
import json, re, sys
p = f = s = 0
for line in open(sys.argv[1]):
    t = json.loads(line)
    out = t.get("stdout") or ""
    tp = len(re.findall(r"^ok \d+", out, re.M))
    ts = len(re.findall(r"^ok \d+[^#\n]*#\s*SKIP\b", out, re.M | re.I))
    tf = len(re.findall(r"^not ok \d+", out, re.M))
    if t.get("result") not in ("OK", "SKIP") and tf == 0:
        tf = 1  # crashed or timed out before saying why
    if t.get("result") == "SKIP" and tp == 0:
        ts = 1  # skipped whole
    p += tp - min(ts, tp); f += tf; s += ts
print(p, f, s)
PY
}

passed=0 failed=0 skipped=0

meson setup --wipe build -Dwerror=true >/dev/null 2>&1 || meson setup build -Dwerror=true >/dev/null || fail_early "meson setup failed"
ninja -C build || fail_early "build failed"
meson test -C build --suite unit --print-errorlogs
read -r p f k < <(count_unit build)
echo "unit tests: $p passed, $f failed, $k skipped"
passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))

# The same unit tests under AddressSanitizer and UndefinedBehaviorSanitizer.
if meson setup --wipe build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null 2>&1 ||
   meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null; then
        ninja -C build-asan >/dev/null || fail_early "sanitizer build failed"
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 meson test -C build-asan --suite unit --print-errorlogs
        read -r p f k < <(count_unit build-asan)
        echo "unit tests under ASan/UBSan: $p passed, $f failed, $k skipped"
        passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))
fi

# Static checks of what is not C: the man pages and the SELinux module. (The
# units are verified inside the booted system by the integration tests.)
static_check() {
        local what=$1; shift
        if "$@" >/tmp/agentfab-check.$$ 2>&1; then
                echo "ok: $what"; passed=$((passed + 1))
        else
                echo "FAIL: $what"; cat /tmp/agentfab-check.$$; failed=$((failed + 1))
        fi
        rm -f /tmp/agentfab-check.$$
}
man_clean() { local out; out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$1" 2>&1 >/dev/null); [ -z "$out" ] || { echo "$out"; return 1; }; }
for page in man/*.[0-9]; do
        static_check "man page $page renders without warnings" man_clean "$page"
done
selinux_build() { local d; d=$(mktemp -d); cp selinux/agentfab.te selinux/agentfab.fc selinux/agentfab.if "$d"/ &&
        make -C "$d" -f /usr/share/selinux/devel/Makefile agentfab.pp; local r=$?; rm -rf "$d"; return $r; }
static_check "SELinux module compiles against the reference policy" selinux_build

# Runs a test script that ends with "N passed, N failed" and adds its counts,
# and those of its "N skipped" line (tests/integration/lib/check.sh).
run_counted() {
        local name=$1 out line p f k
        shift
        out=$(mktemp)
        "$@" 2>&1 | tee "$out"
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
        k=$(grep -E '^[0-9]+ skipped$' "$out" | tail -1)
        k=${k%% skipped}
        rm -f "$out"
        if [ -n "$line" ]; then
                p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
                [[ $line =~ ,\ ([0-9]+)\ skipped ]] && k=${BASH_REMATCH[1]}
        else
                p=0 f=1   # it died before it could say
        fi
        echo "$name: $p passed, $f failed, ${k:-0} skipped"
        passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${k:-0}))
}

# The fleet's database layer against a real PostgreSQL 15: a private cluster
# under /tmp per run (tests/fleet/pg.sh), about 10 s; the same under
# ASan/UBSan.
run_counted "fleet database" bash tests/fleet/run.sh build
[ -d build-asan ] && run_counted "fleet database (ASan/UBSan)" bash tests/fleet/run.sh build-asan

# Every parser of untrusted input under libFuzzer (tests/fuzz, clang, ASan +
# UBSan): the inputs that once crashed a target are replayed, then each target
# runs 30 s on its corpus; a crash fails it. With the clang build, about 12
# minutes on 2 cores for the 18 targets. Long runs: tools/fuzz.sh;
# FUZZ_SECONDS=8 for a quicker pass.
run_counted "fuzzing" bash tools/fuzz.sh "${FUZZ_SECONDS:-30}"

# The harness itself: boots, real daemons, enforced cgroup limits, clean
# teardown also after failures and signals. Then the integration tests:
# real systemd as PID 1 in namespaces over an overlay of /, once with the
# normal build and once with the daemon under ASan/UBSan.
run_counted "harness self-test" bash tests/integration/lib/harness-selftest.sh
run_counted "integration tests" bash tests/integration/run.sh build
run_counted "sandbox attacks" bash tests/integration/sandbox-attacks.sh build
run_counted "launcher" bash tests/integration/launcher.sh build
run_counted "agent end to end" bash tests/integration/agent.sh build
# agentfabctl eval on a subset of the bundled corpus (about five minutes):
# the oracle passes each task three times, the null agent none. The whole
# corpus and every built-in agent: FULL=1 bash tests/integration/eval.sh build.
run_counted "eval" bash tests/integration/eval.sh build
# The README's first command, so that it cannot rot: it checks its breaker,
# polkit prompt, review findings and the tip's evidence (35–59 s on a loaded machine).
run_counted "demo" bash tools/demo.sh
run_counted "egress proxy" bash tests/integration/proxy.sh build
# Two hosts of a fleet (two booted systems, a private PostgreSQL cluster, a
# repository over https): tasks submitted on one are claimed by either, each
# by one host and worked on once; list --fleet the same on both; diff and
# fetch from the other host; a host without its database fences itself and
# goes on after; a host stopped past its lease and one killed whole: the
# other takes their task over (about two minutes). Its takeover's figures
# are bench/fleet-hosts.sh's short form (1 run; the full one: 20).
run_counted "fleet of hosts" bash tests/integration/fleet.sh build
# A host of a fleet whose Remote= is an ssh server (sshd on loopback): its
# steps pushed with its own key, a server with another host key refused
# (about 30 s).
run_counted "fleet: an ssh Remote=" bash tests/integration/fleet-ssh-remote.sh build
# Three hosts of a fleet: 200 small tasks spread over them all succeed, each
# worked on once by one host; the database restarted twice under tasks at
# work on every host, once with steps' acknowledgments on the wire: every
# host reconnects, nothing lost or done twice; a claim's answer lost with
# its connection: the host finds the task (about 1.5 minutes; SCALE=N
# tasks).
run_counted "fleet: 200 tasks, a database restart" bash tests/integration/fleet-scale.sh build
# Both hosts' journals uploaded to one systemd-journal-remote; audit --verify
# on that central journal, for tasks of either host and two taken over (a
# host stopped, a host killed), forged copies of it reported (30-70 s).
run_counted "fleet: one audit" bash tests/integration/fleet-audit.sh build
# People on any host of the fleet: status, logs and summary of a task
# host-a holds, read on host-b; approve (and a late approval for an
# earlier stop, dropped), amend, pause, resume and cancel from host-b;
# polkit on host-b refusing others: about 60 s.
run_counted "fleet: people on any host" bash tests/integration/fleet-people.sh build
# Broken surroundings: CI runs the scenarios that take a few minutes; the
# whole set (a full disk, dbus-daemon restarted, 20 SIGKILLs across 20
# tasks) is "bash tests/integration/faults.sh build".
ONLY="${FAULTS_ONLY:-t_polkit_stopped t_journald_stopped t_sandbox_killed t_sigkill_reattach t_step_durable t_reboot}" \
        run_counted "faults" bash tests/integration/faults.sh build
# Power cuts: a task's steps and delivery on a disk that records every write
# and flush, then crash points of that record mounted and checked, none
# losing an acknowledged step (1-2 minutes; the long form, some 1,300
# crash points in about 11 minutes: bash tests/crash/run.sh build).
run_counted "crash consistency" bash tests/crash/run.sh build --short
run_counted "tasks with a network" bash tests/integration/network.sh build
run_counted "daemon under load" bash tests/integration/daemon-load.sh build
# Clients that never read: the daemon's memory bounded, others answered (about 3.5 minutes,
# a minute of it a task's output that a stream socket viewer does not read).
run_counted "clients that do not read" bash tests/integration/slow-clients.sh build
[ -d build-asan ] && run_counted "integration tests (ASan/UBSan)" bash tests/integration/run.sh build-asan
[ -d build-asan ] && run_counted "launcher (ASan/UBSan)" bash tests/integration/launcher.sh build-asan
[ -d build-asan ] && run_counted "agent end to end (ASan/UBSan)" bash tests/integration/agent.sh build-asan
[ -d build-asan ] && run_counted "egress proxy (ASan/UBSan)" bash tests/integration/proxy.sh build-asan
# Tasks with a network under ASan/UBSan: the scenarios with the most C
# behind them (a refusal, the breaker and approve --allow-host, every
# refused form, the proxy restarted, no proxy), about two minutes; the
# whole set is "bash tests/integration/network.sh build-asan".
[ -d build-asan ] && ONLY="t_breaker_allow_host t_audited_refusals t_proxy_restart t_no_proxy" \
        run_counted "tasks with a network (ASan/UBSan)" bash tests/integration/network.sh build-asan

# The sandbox benchmark: figures and ratios against bwrap and fork+exec,
# measured in this run. It prints; it does not judge (targets are in
# docs/PERFORMANCE.md, not in a timed test). Counted only as having run.
if RUNS=30 bash bench/run.sh build; then
        echo "ok: sandbox benchmark ran"; passed=$((passed + 1))
else
        echo "FAIL: sandbox benchmark did not run"; failed=$((failed + 1))
fi

# What a step costs the daemon on repositories of 1,000 and 10,000 files
# (the full run with 100,000: bash bench/step-cost.sh). Prints, does not
# judge; counted only as having run.
if bash bench/step-cost.sh build --short; then
        echo "ok: step cost benchmark ran"; passed=$((passed + 1))
else
        echo "FAIL: step cost benchmark did not run"; failed=$((failed + 1))
fi

# The load benchmark, short (bench/load.sh's defaults are the full run):
# figures only, counted as having run.
if RATE=200 DURATION=10 CLIENTS=4 COUNT=200 bash bench/load.sh build; then
        echo "ok: load benchmark ran"; passed=$((passed + 1))
else
        echo "FAIL: load benchmark did not run"; failed=$((failed + 1))
fi

# The fleet's claims: 1,000 queued tasks, three hosts claiming at once,
# against naive FOR UPDATE and one host, in a private PostgreSQL cluster
# (a few seconds). Figures only, counted as having run.
if bash bench/fleet-claims.sh build; then
        echo "ok: fleet claim benchmark ran"; passed=$((passed + 1))
else
        echo "FAIL: fleet claim benchmark did not run"; failed=$((failed + 1))
fi

# A host's death to its task reaped elsewhere, at the database, LeaseSec=3
# (the full run: 20 deaths, bash bench/fleet-takeover.sh): about 20 s.
# Figures only, counted as having run.
if RUNS=5 bash bench/fleet-takeover.sh build; then
        echo "ok: fleet takeover benchmark ran"; passed=$((passed + 1))
else
        echo "FAIL: fleet takeover benchmark did not run"; failed=$((failed + 1))
fi

# The daemon's benchmark (bash bench/daemon-bench.sh) is not run here: its
# short form takes about 3 minutes, and "daemon under load" above prints the
# same figures at 10,000 files, 64 MiB and 20 tasks.

# The checks not made here (no root, no npm, ...), then the closing line.
[ "$skipped" = 0 ] || echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
