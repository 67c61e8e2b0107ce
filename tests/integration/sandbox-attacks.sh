#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The adversarial suite of the task sandbox: attacks run inside a real
# agentfab-sandbox, under the real systemd of the integration harness (so
# the transient scope and its limits are real). Each attack must fail
# inside AND have no effect outside.
#
#   tests/integration/sandbox-attacks.sh BUILDDIR
set -u

BUILDDIR=$(realpath "${1:?usage: sandbox-attacks.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
. "$HERE/lib/harness.sh"

. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "the sandbox suite needs root"

WS=/srv/agentfab-test/ws1

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf"
        grep -q '^sbx:' "$R/etc/passwd" || useradd --root "$R" -M -s /bin/bash sbx
        mkdir -p "$R/srv/agentfab-test/ws1" "$R/srv/agentfab-test/ws2" "$R/srv/agentfab-test/full"
        echo "other task's secret" > "$R/srv/agentfab-test/ws2/secret"
        chmod 600 "$R/srv/agentfab-test/ws2/secret"
        cp "$HERE/sandbox-probe.py" "$HERE/data/docker-blocked-syscalls.txt" "$R/srv/agentfab-test/ws1/"
        install -m 0644 "$HERE/exec-service-client.py" "$R/usr/local/lib/exec-service-client.py"
        mkdir -p "$R/var/lib/agentfab/tasks/0123456789ab"
        echo '{"secret":"state"}' > "$R/var/lib/agentfab/tasks/0123456789ab/state.json"
        mkdir -p "$R/etc/agentfab/credstore"
        echo "model-api-key" > "$R/etc/agentfab/credstore/key"
        local ids
        ids=$(awk -F: '$1 == "sbx" {print $3 ":" $4}' "$R/etc/passwd")
        chown -R "$ids" "$R/srv/agentfab-test/ws1" "$R/srv/agentfab-test/ws2" "$R/srv/agentfab-test/full"
}

# sb [SANDBOX OPTIONS] -- COMMAND...: run in a sandbox on workspace 1.
sb() { hx agentfab-sandbox --workspace "$WS" --timeout 60 "$@"; }
probe() { sb -- python3 /workspace/sandbox-probe.py "$@"; }

# result NAME OK DETAIL: one counted check (lib/check.sh's check_flag).
result() { check_flag "$@"; }

# attack NAME OUTSIDE-CHECK PROBE-ARGS...: the probe must report only
# "denied" lines and exit 0, and OUTSIDE-CHECK (a shell snippet run on the
# booted host) must succeed afterwards.
attack() {
        local name=$1 outside=$2 out rc
        shift 2
        out=$(probe "$@" 2>&1); rc=$?
        if [ "$rc" != 0 ] || grep -q ESCAPED <<<"$out" || ! grep -q '^denied' <<<"$out"; then
                result "$name" 0 "inside: rc=$rc $(grep -v '^denied' <<<"$out" | head -5 | tr '\n' ' ')"
                return
        fi
        if [ -n "$outside" ] && ! hx bash -c "$outside" >/dev/null 2>&1; then
                result "$name" 0 "outside check failed: $outside"
                return
        fi
        result "$name" 1 "$(grep -c '^denied' <<<"$out") denied, outside unchanged"
}

main() {
        harness_boot || { fail "harness_boot"; check_summary; exit 1; }
        echo "harness: systemd booted in ${HARNESS_BOOT_MS} ms"

        # --- files
        attack read-shadow "" read /etc/shadow
        attack read-service-state "" read /var/lib/agentfab/tasks/0123456789ab/state.json
        attack service-state-absent "" absent /var/lib/agentfab
        attack read-credentials "" read /etc/agentfab/credstore/key
        attack run-credentials-absent "" absent /run/credentials
        attack read-other-workspace "" read /srv/agentfab-test/ws2/secret
        attack home-absent "" absent /home
        attack root-absent "" absent /root
        attack write-usr "test ! -e /usr/bin/agentfab-evil" write /usr/bin/agentfab-evil
        attack write-etc "test ! -e /etc/agentfab-evil" write /etc/agentfab-evil
        attack write-root "test ! -e /agentfab-evil" write /agentfab-evil
        attack mkdir-root "test ! -e /evil-dir" mkdir /evil-dir
        attack symlink-escape "" symlink-escape /srv/agentfab-test/ws2/secret
        attack hardlink-escape "test ! -e $WS/escape-hardlink" hardlink-escape /etc/shadow
        attack dotdot-escape "" dotdot /srv/agentfab-test/ws2/secret
        attack journal-socket-absent "" absent /run/systemd/journal/socket
        attack dbus-socket-absent "" connect-unix /run/dbus/system_bus_socket
        attack agentfab-socket-absent "" absent /run/agentfab
        # --- network
        hx bash -c 'python3 -c "
import socket, os
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"127.0.0.1\", 18080)); s.listen()
a = socket.socket(socket.AF_UNIX); a.bind(\"\0agentfab-test-abstract\"); a.listen()
open(\"/run/listener-ready\", \"w\").close()
import select
while True:
    r, _, _ = select.select([s, a], [], [], 60)
    if not r: break
    for x in r:
        c, _ = x.accept(); open(\"/run/listener-hits\", \"a\").write(\"hit\\n\")
" &' >/dev/null 2>&1
        for _ in $(seq 1 50); do hx test -e /run/listener-ready && break; sleep 0.1; done
        attack host-loopback-tcp "test ! -e /run/listener-hits" connect-tcp 127.0.0.1 18080
        attack host-abstract-socket "test ! -e /run/listener-hits" connect-abstract agentfab-test-abstract
        attack outside-address "" connect-tcp 192.0.2.1 80
        attack dns "" dns example.com
        attack udp-out "" udp-out 192.0.2.1 53
        attack packet-socket "" socket-family 17
        attack alg-socket "" socket-family 38
        attack vsock-socket "" socket-family 40
        # The kernel reads the family as an int: junk in the upper 32 bits of
        # the register must not slip a refused family past the filter.
        attack alg-socket-high-bits "" syscall socket 0x100000026 5 0
        attack vsock-socket-high-bits "" syscall socket 0x100000028 1 0
        # --- syscalls
        attack docker-blocked-list "" docker-list /workspace/docker-blocked-syscalls.txt
        attack mount "" syscall mount
        attack unshare "" syscall unshare 0x10000000
        attack setns "" syscall setns 0 0
        attack clone-newuser "" clone-newuser
        attack ptrace "" syscall ptrace 16 1
        attack process-vm-readv "" syscall process_vm_readv 1 0 0 0 0 0
        attack process-vm-writev "" syscall process_vm_writev 1 0 0 0 0 0
        attack io-uring "" syscall io_uring_setup 8 0
        attack userfaultfd "" syscall userfaultfd 0
        attack bpf "" syscall bpf 0 0 0
        attack perf-event-open "" syscall perf_event_open 0 0 -1 -1 0
        attack keyctl "" syscall keyctl 0
        attack add-key "" syscall add_key 0 0 0 0 0
        attack request-key "" syscall request_key 0 0 0 0
        attack kexec "" syscall kexec_load 0 0 0 0
        attack init-module "" syscall finit_module 0 0 0
        attack new-mount-api "" syscall fsopen 0 0
        attack open-tree "" syscall open_tree 0 0 0
        attack pivot-root "" syscall pivot_root 0 0
        attack chroot "" syscall chroot 0
        attack kcmp "" syscall kcmp 1 1 0 0 0
        attack pidfd-getfd "" syscall pidfd_getfd 0 0 0
        attack settimeofday "" syscall settimeofday 0 0
        attack reboot "" syscall reboot 0xfee1dead 672274793 0x1234567 0
        attack swapon "" syscall swapon 0 0
        attack x32-abi "" x32
        attack tiocsti "" tiocsti
        attack tioclinux "" tioclinux
        attack unsafe-personality "" personality
        attack sethostname "test \"\$(hostname)\" != evil" sethostname
        # --- privileges, devices, kernel interfaces
        attack not-root "" not-root
        attack no-capabilities "" no-caps
        attack setuid-binary "test ! -e $WS/su-ran" setuid-binary
        attack mknod-device "test ! -e $WS/sda" mknod
        attack device-nodes "" dev-nodes
        attack sysrq-trigger "" write /proc/sysrq-trigger
        attack proc-sys-write "test \"\$(cat /proc/sys/kernel/hostname)\" != x" write /proc/sys/kernel/hostname
        attack sys-write "" write /sys/kernel/uevent_helper
        attack sys-absent "" absent /sys/fs
        attack dev-mem "" read /dev/mem
        # --- processes outside, fds, environment
        hx bash -c 'setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo $! > /run/victim.pid'
        sleep 0.3
        local victim
        victim=$(hx cat /run/victim.pid)
        attack kill-outside "kill -0 $victim" kill "$victim"
        local out rc
        out=$(sb -- sh -c 'kill -9 -1; echo survived' 2>&1)
        hx kill -0 "$victim" && result kill-all-outside 1 "kill -9 -1 inside left the host's process alive" ||
                result kill-all-outside 0 "host process gone: $out"
        out=$(hx bash -c "exec 7</etc/hostname 8>/run/fd-leak; agentfab-sandbox --workspace $WS -- python3 /workspace/sandbox-probe.py fds" 2>&1); rc=$?
        [ "$rc" = 0 ] && grep -q '^denied' <<<"$out" && result inherited-fds 1 "$out" || result inherited-fds 0 "rc=$rc $out"
        out=$(hx env AGENTFAB_SECRET_TOKEN=hunter2 agentfab-sandbox --workspace "$WS" -- python3 /workspace/sandbox-probe.py env AGENTFAB_SECRET_TOKEN 2>&1); rc=$?
        [ "$rc" = 0 ] && grep -q '^denied' <<<"$out" && result environment 1 "caller's environment not passed" || result environment 0 "rc=$rc $out"

        # --- resources: each ends as a clear failure of that command, the host carries on
        local start end
        start=$(date +%s%N)
        out=$(sb --tasks-max=64 -- sh -c 'bomb() { bomb | bomb & }; bomb; sleep 2' 2>&1); rc=$?
        end=$(date +%s%N)
        hx true && grep -qi 'resource temporarily unavailable\|cannot fork' <<<"$out" &&
                result fork-bomb 1 "forks refused at TasksMax=64 ('$(grep -m1 -i 'unavailable\|fork' <<<"$out")'), over after $(( (end - start) / 1000000 )) ms, host responsive" ||
                result fork-bomb 0 "exit $rc: $(head -3 <<<"$out")"
        out=$(sb --memory-max=64M -- python3 -c 'b = []
while True: b.append(bytearray(16 << 20))' 2>&1); rc=$?
        [ "$rc" = 137 ] && result memory-bomb 1 "killed (exit 137) at MemoryMax=64M" || result memory-bomb 0 "exit $rc: $out"
        start=$(date +%s%N)
        out=$(hx agentfab-sandbox --workspace "$WS" --timeout 2 -- sh -c 'while :; do :; done' 2>&1); rc=$?
        end=$(date +%s%N)
        [ "$rc" = 137 ] && [ $(( (end - start) / 1000000 )) -lt 6000 ] && grep -q 'timed out' <<<"$out" &&
                result cpu-spin-timeout 1 "killed after $(( (end - start) / 1000000 )) ms: $out" || result cpu-spin-timeout 0 "exit $rc: $out"
        hx mount -t tmpfs -o size=8m,mode=0755 tmpfs /srv/agentfab-test/full
        hx chown sbx:sbx /srv/agentfab-test/full
        out=$(hx agentfab-sandbox --workspace /srv/agentfab-test/full -- sh -c 'dd if=/dev/zero of=/workspace/fill bs=1M count=64' 2>&1); rc=$?
        [ "$rc" != 0 ] && grep -q 'No space left' <<<"$out" && hx test -d /var/lib && result disk-fill 1 "workspace full: dd failed with ENOSPC" ||
                result disk-fill 0 "exit $rc: $out"
        out=$(sb --tmp-size=4M -- sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=64' 2>&1); rc=$?
        [ "$rc" != 0 ] && grep -q 'No space left' <<<"$out" && result tmp-fill 1 "/tmp is size-limited" || result tmp-fill 0 "exit $rc: $out"
        out=$(sb -- sh -c '(setsid sh -c "sleep 600" &); (nohup sleep 601 >/dev/null 2>&1 &); exit 0' 2>&1); rc=$?
        sleep 0.5
        ! hx pgrep -u sbx sleep >/dev/null && result double-fork 1 "nothing outlived the command" ||
                result double-fork 0 "left: $(hx pgrep -a -u sbx sleep)"

        # --- the scope exists, with its limits, before the first command runs
        hx bash -c "agentfab-sandbox --workspace $WS --unit=agentfab-test-probe.scope --memory-max=100M --tasks-max=50 -- sh -c 'cat /proc/self/cgroup > /workspace/cgroup; sleep 3' &" >/dev/null 2>&1
        sleep 1.5
        local show
        show=$(hx systemctl show -p Slice -p MemoryMax -p TasksMax -p ActiveState agentfab-test-probe.scope)
        grep -q 'Slice=agentfab.slice' <<<"$show" && grep -q 'MemoryMax=104857600' <<<"$show" && grep -q 'TasksMax=50' <<<"$show" &&
                grep -q 'ActiveState=active' <<<"$show" && result scope-limits 1 "$(tr '\n' ' ' <<<"$show")" || result scope-limits 0 "$show"
        sleep 2.5

        # --- a live sandbox serving several commands (the exec service)
        hx python3 /usr/local/lib/exec-service-client.py "$WS" agentfab-test-served.scope > /tmp/agentfab-exec.$$ 2>&1
        while read -r line; do
                case "$line" in
                ok\ *) result "exec-service" 1 "${line#ok }" ;;
                FAIL\ *) result "exec-service" 0 "${line#FAIL }" ;;
                esac
        done < /tmp/agentfab-exec.$$
        grep -q '^ok' /tmp/agentfab-exec.$$ || result exec-service 0 "$(head -5 /tmp/agentfab-exec.$$)"
        rm -f /tmp/agentfab-exec.$$

        harness_teardown
        echo "sandbox attacks failed: ${FAILED_NAMES[*]:-none}"
        check_summary
}

main "$@"
