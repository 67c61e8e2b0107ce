#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# harness-selftest.sh: checks that harness.sh boots a usable system (systemd, dbus-daemon,
# bus-activated polkitd, journald, enforced cgroup limits) and that teardown leaves no
# process, mount or cgroup behind: after a normal run, after a failing test command,
# after SIGTERM and a Ctrl-C style SIGINT in the middle of a test, and (through the
# harness's watchdog) after SIGKILL.
#
# Usage: harness-selftest.sh            (as root; skipped otherwise)
# The last line is "N passed, N failed".

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=harness.sh
. "$HERE/harness.sh"

# Writes what the parent needs to verify that nothing of this boot is left behind.
write_state() {
        local f=$1 d
        {
                echo "base=$HARNESS_BASE"
                echo "pid=$HARNESS_PID"
                echo "pidns=$(readlink "/proc/$HARNESS_PID/ns/pid")"
                echo "boot_ms=$HARNESS_BOOT_MS"
                for d in "${HARNESS_CGROUP_DIRS[@]}"; do
                        echo "cgroup=$d"
                done
        } > "$f.tmp"
        mv "$f.tmp" "$f"
}

# Child modes, run by the parent below in their own session, so that a signal to the
# process group is what Ctrl-C on a terminal would send.
if [[ ${1:-} == --child ]]; then
        mode=$2
        state=$3
        harness_boot
        echo "boot time: $HARNESS_BOOT_MS ms"
        write_state "$state"
        # The parent opens this boot's pid namespace before we go on: a mode
        # that ends at once would otherwise be gone before it could look.
        for _ in $(seq 100); do
                [[ -e $state.held ]] && break
                sleep 0.1
        done
        case $mode in
        errexit)
                # A failing test command under `set -e` ends the script.
                hx false
                echo "not reached" ;;
        exit1)
                # A test that notices a failure and exits 1.
                if ! hx sh -c 'exit 3'; then
                        echo "test command failed, exiting 1"
                        exit 1
                fi ;;
        signal)
                # Blocks until the parent's signal; the trap must tear down at once.
                hx sleep 300
                echo "not reached" ;;
        esac
        exit 0
fi

# shellcheck source=check.sh
. "$HERE/check.sh"

[[ $EUID == 0 ]] || check_skip_all "harness-selftest needs root"

boot_times=()
LOG=$(mktemp -d "${TMPDIR:-/tmp}/harness-selftest.XXXXXX")
trap 'rm -rf "$LOG"' EXIT   # harness_boot chains this trap and runs it first

# A failed check shows the output of the command behind it.
check_on_fail() {
        if [[ -s $LOG/out ]]; then
                sed 's/^/    # /' "$LOG/out"
        fi
}

# check NAME CMD...: CMD's output goes to $LOG/out, shown when it fails
# (check.sh's check, with the output kept and no standard input).
check() {
        local name=$1
        shift
        if "$@" > "$LOG/out" 2>&1 < /dev/null; then
                ok "$name"
        else
                fail "$name"
        fi
}

# Opens the pid namespace of the boot described by state file $1 on fd $nsfd. Holding it
# keeps the kernel from giving its inode number to a namespace created later (by another
# test run on this machine), so verify_clean can tell its processes by that number.
hold_pidns() {
        local pid pidns
        pid=$(sed -n 's/^pid=//p' "$1")
        pidns=$(sed -n 's/^pidns=//p' "$1")
        exec {nsfd}< "/proc/$pid/ns/pid" || return 1
        [[ $(readlink "/proc/$$/fd/$nsfd") == "$pidns" ]]
}

release_pidns() {
        [[ -n ${nsfd:-} ]] && exec {nsfd}<&-
        nsfd=
}

# Everything below the base directory, the processes of that boot and its cgroups must be
# gone. Call hold_pidns before the teardown.
verify_clean() {
        local state=$1 line base="" pid="" pidns="" p left=0
        local -a cgroups=()
        while IFS= read -r line; do
                case $line in
                base=*) base=${line#base=} ;;
                pid=*) pid=${line#pid=} ;;
                pidns=*) pidns=${line#pidns=} ;;
                cgroup=*) cgroups+=("${line#cgroup=}") ;;
                esac
        done < "$state"
        if [[ -z $base || -z $pidns || ${#cgroups[@]} == 0 ]]; then
                echo "incomplete state file $state"
                return 1
        fi
        if [[ -z ${nsfd:-} ]]; then
                echo "the pid namespace was not held; cannot check for processes"
                return 1
        fi
        if grep -qF "$base" /proc/self/mountinfo; then
                echo "mounts left:"
                grep -F "$base" /proc/self/mountinfo
                left=1
        fi
        for p in /proc/[0-9]*; do
                if [[ $(readlink "$p/ns/pid" 2>/dev/null) == "$pidns" ]]; then
                        echo "process left: ${p#/proc/} $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)"
                        left=1
                fi
        done
        if [[ -d /proc/$pid ]] && grep -q '^Name:.*systemd' "/proc/$pid/status" 2>/dev/null; then
                echo "systemd (pid $pid) still there"
                left=1
        fi
        for p in "${cgroups[@]}"; do
                if [[ -e $p ]]; then
                        echo "cgroup left: $p"
                        left=1
                fi
        done
        if [[ -e $base ]]; then
                echo "base directory left: $base"
                left=1
        fi
        return "$left"
}

# ---- a normal run, in this process -------------------------------------------------------

if ! harness_boot; then
        fail "harness_boot"
        check_summary
        exit 1
fi
ok "harness_boot"
echo "boot time: $HARNESS_BOOT_MS ms"
boot_times+=("$HARNESS_BOOT_MS")

system_running() {
        local state
        state=$(hx systemctl is-system-running) || true
        echo "state: $state"
        [[ $state == running ]]
}
check "systemctl is-system-running says running" system_running

bus_names() {
        local names
        names=$(hx busctl list --no-legend) || return 1
        echo "$names"
        grep -q '^org\.freedesktop\.DBus ' <<< "$names"
}
check "busctl list shows org.freedesktop.DBus" bus_names

polkit_backend() {
        local out
        out=$(hx busctl call org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
                org.freedesktop.DBus.Properties Get ss org.freedesktop.PolicyKit1.Authority BackendName)
        echo "$out"
        [[ $out == 'v s "'* ]] && hx systemctl is-active --quiet polkit.service
}
check "polkit is bus-activated and answers (BackendName)" polkit_backend

check "systemd-run --scope -p MemoryMax=50M true" \
        hx systemd-run --quiet --scope -p MemoryMax=50M true

# The limits must be enforced, not only accepted: 200 MB in a 50 MB scope is OOM-killed.
memory_enforced() {
        local rc=0
        hx systemd-run --quiet --scope -p MemoryMax=50M -p MemorySwapMax=0 \
                sh -c 'head -c 200M /dev/zero | tail > /dev/null' || rc=$?
        echo "exit status $rc"
        (( rc == 137 ))
}
check "MemoryMax=50M is enforced (200 MB allocation killed)" memory_enforced

tasks_enforced() {
        local rc=0
        hx systemd-run --quiet --scope -p TasksMax=5 \
                sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1 & done; wait' || rc=$?
        echo "exit status $rc"
        (( rc != 0 ))
}
check "TasksMax=5 is enforced (forks refused)" tasks_enforced

as_alice() {
        # The overlay shows the host's users: a host that has an alice must not fail this.
        if hx getent passwd alice > /dev/null; then
                hx userdel -r alice || return 1
        fi
        hx useradd -m alice || return 1
        # shellcheck disable=SC2016 # $HOME is alice's, expanded inside
        [[ $(hx_as alice id -un) == alice ]] && [[ $(hx_as alice sh -c 'echo $HOME') == /home/alice ]]
}
check "useradd -m alice && hx_as alice id" as_alice

check "an unprivileged user can create a user namespace (pivot_root, no chroot)" \
        hx_as alice unshare -Ur true

journal_roundtrip() {
        local i
        hx logger -t x hello || return 1
        for i in $(seq 50); do
                hx journalctl -q -t x -o cat | grep -qx hello && return 0
                sleep 0.1
        done
        hx journalctl -q -t x
        return 1
}
check "logger -t x hello; journalctl -t x shows it" journal_roundtrip

transient_service() {
        hx systemd-run --quiet --unit=foo.service sleep infinity || return 1
        [[ $(hx systemctl is-active foo.service) == active ]] || return 1
        [[ $(hx systemctl show -P Transient foo.service) == yes ]] || return 1
        hx systemctl stop foo.service || return 1
        # --wait gives the unit's exit status back.
        hx systemd-run --quiet --wait --unit=foo-wait.service sh -c 'exit 0' || return 1
        ! hx systemd-run --quiet --wait --unit=foo-fail.service sh -c 'exit 4'
}
check "transient unit with systemd-run --unit=foo.service" transient_service

stdin_through() {
        [[ $(echo through | hx cat) == through ]]
}
check "hx passes stdin through" stdin_through

exit_status() {
        local rc=0
        hx sh -c 'exit 7' || rc=$?
        echo "exit status $rc"
        (( rc == 7 ))
}
check "hx returns the command's exit status" exit_status

clean_env() {
        local FOO=leak
        export FOO
        [[ -z $(hx printenv FOO) && $(hx printenv LANG) == C.UTF-8 ]]
}
check "hx runs with a clean environment" clean_env

# A process left running by a test must not survive the teardown either.
hx sleep 600 < /dev/null > /dev/null 2>&1 &
hx_bg=$!
sleep 0.3

write_state "$LOG/state.main"
hold_pidns "$LOG/state.main" || fail "hold the pid namespace"
t0=$(_harness_now_ms)
if harness_teardown > "$LOG/out" 2>&1; then
        ok "harness_teardown ($(( $(_harness_now_ms) - t0 )) ms)"
else
        fail "harness_teardown"
fi
check "harness_teardown is idempotent" harness_teardown
check "nothing left after a normal run" verify_clean "$LOG/state.main"
release_pidns
wait "$hx_bg" 2> /dev/null || true
bg_gone() {
        ! kill -0 "$hx_bg" 2> /dev/null
}
check "a backgrounded hx did not survive the teardown" bg_gone

# ---- runs that end badly, in a child process ---------------------------------------------

# run_child MODE SIGNAL EXPECTED_STATUS
run_child() {
        local mode=$1 sig=$2 expected=$3 state=$LOG/state.$1.$2 pid rc=0 i bt
        rm -f "$state" "$state.held"
        # Own session and process group; SIGINT and SIGTERM at their defaults (a background
        # job of a script would otherwise start with SIGINT ignored, and bash cannot trap it).
        env --default-signal=INT,TERM setsid "$SELF" --child "$mode" "$state" \
                < /dev/null > "$LOG/child.$mode.$sig" 2>&1 &
        pid=$!
        for i in $(seq 600); do
                [[ -e $state ]] && break
                _harness_alive "$pid" || break
                sleep 0.1
        done
        [[ -e $state ]] && ! hold_pidns "$state" && echo "cannot hold the pid namespace" >> "$LOG/child.$mode.$sig"
        touch "$state.held"
        if [[ ! -e $state ]]; then
                kill -KILL -- "-$pid" 2> /dev/null || true
                wait "$pid" 2> /dev/null || true
                cp "$LOG/child.$mode.$sig" "$LOG/out"
                fail "$mode/$sig: child booted"
                return
        fi
        case $sig in
        TERM)
                # As `kill` or a CI runner's timeout would: the script's shell only.
                sleep 0.5
                kill -TERM "$pid" ;;
        INT)
                # As Ctrl-C would: the whole foreground process group.
                sleep 0.5
                kill -INT -- "-$pid" ;;
        KILL)
                # As a hard CI timeout would: no trap runs, the watchdog must clean up.
                sleep 0.5
                kill -KILL -- "-$pid" ;;
        esac
        for i in $(seq 600); do
                _harness_alive "$pid" || break
                sleep 0.05
        done
        if _harness_alive "$pid"; then
                kill -KILL -- "-$pid" 2> /dev/null || true
                cp "$LOG/child.$mode.$sig" "$LOG/out"
                fail "$mode/$sig: child exited within 30 s"
        fi
        wait "$pid" 2> /dev/null || rc=$?
        bt=$(sed -n 's/^boot time: \([0-9]*\) ms$/\1/p' "$LOG/child.$mode.$sig")
        [[ -n $bt ]] && boot_times+=("$bt") && echo "boot time: $bt ms"
        cp "$LOG/child.$mode.$sig" "$LOG/out"
        if (( rc == expected )); then
                ok "$mode/$sig: exit status $rc"
        else
                echo "expected exit status $expected, got $rc" >> "$LOG/out"
                fail "$mode/$sig: exit status $rc"
        fi
        if [[ $sig == KILL ]]; then
                # The watchdog polls twice a second, then tears down.
                for i in $(seq 100); do
                        verify_clean "$state" > /dev/null && break
                        sleep 0.1
                done
        fi
        check "$mode/$sig: nothing left behind" verify_clean "$state"
        release_pidns
}

run_child errexit none 1
run_child exit1 none 1
run_child signal TERM 143
run_child signal INT 130
run_child signal KILL 137

min=${boot_times[0]}
max=${boot_times[0]}
for t in "${boot_times[@]}"; do
        (( t < min )) && min=$t
        (( t > max )) && max=$t
done
echo "boot times: ${boot_times[*]} ms (min $min, max $max)"
check_summary
