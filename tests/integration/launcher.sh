#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The privileged sandbox launcher under the real systemd of the integration
# harness: socket activation, the agentfab user's requests, the scope and its
# limits, refusals, stale scopes, reap, and the daemon's asynchronous client.
#
#   tests/integration/launcher.sh BUILDDIR
set -u

BUILDDIR=$(realpath "${1:?usage: launcher.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
. "$HERE/lib/harness.sh"

. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "the launcher tests need root"

# On the real file system the harness gives /var/lib/agentfab: the
# sandbox mounts a workspace idmapped, which overlayfs cannot.
WS=/var/lib/agentfab/launcher-ws
CLIENT=/usr/local/lib/launcher-client.py

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf"
        systemctl --root="$R" enable agentfab-launcher.socket >/dev/null 2>&1
        grep -q '^alice:' "$R/etc/passwd" || useradd --root "$R" -M -s /bin/bash alice
        mkdir -p "$R$WS" "$R/srv/agentfab-launcher/alice"
        echo data > "$R$WS/file"
        chown -R "$(awk -F: '$1 == "agentfab" {print $3 ":" $4}' "$R/etc/passwd")" "$R$WS"
        chown "$(awk -F: '$1 == "alice" {print $3 ":" $4}' "$R/etc/passwd")" "$R/srv/agentfab-launcher/alice"
        chmod 0700 "$R/srv/agentfab-launcher/alice"
        install -m 0644 "$HERE/launcher-client.py" "$R$CLIENT"
        # The daemon's own state directory, as its unit makes it (0700), with a workspace.
        local ids
        ids=$(awk -F: '$1 == "agentfab" {print $3 ":" $4}' "$R/etc/passwd")
        mkdir -p "$R/var/lib/agentfab/tasks/0f0f0f0f0f01/workspace"
        chown -R "$ids" "$R/var/lib/agentfab"
        chmod 0700 "$R/var/lib/agentfab"
        # A sanitizer build: no leak checks in the launcher (its unit's filter
        # refuses the ptrace they need), reports to the journal.
        if meson introspect --buildoptions "$BUILDDIR" | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "b_sanitize" and o["value"] not in ("none", "") for o in json.load(sys.stdin)) else 1)'; then
                mkdir -p "$R/etc/systemd/system/agentfab-launcher@.service.d"
                printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1\n' \
                        > "$R/etc/systemd/system/agentfab-launcher@.service.d/sanitizer.conf"
        fi
        if [ -x "$BUILDDIR/tests/integration/session-probe" ]; then
                install -m 0755 "$BUILDDIR/tests/integration/session-probe" "$R/usr/local/bin/agentfab-session-probe"
        fi
}

# Collects "ok ..."/"FAIL ..." lines of a client run.
collect() {
        local name=$1 file=$2 line any=0
        while read -r line; do
                case "$line" in
                ok\ *) ok "$name: ${line#ok }"; any=1 ;;
                FAIL\ *) fail "$name: ${line#FAIL }"; any=1 ;;
                Traceback*) fail "$name: the client crashed"; echo "    $line" ;;
                *) echo "    $line" ;;
                esac
        done < "$file"
        [ "$any" = 1 ] || fail "$name: no result: $(head -c 600 "$file")"
}

# wait_for SECONDS COMMAND...: until the command succeeds inside.
wait_for() {
        local t=$1 i; shift
        for i in $(seq 1 $((t * 20))); do
                hx "$@" >/dev/null 2>&1 && return 0
                sleep 0.05
        done
        return 1
}

stale_scope() {
        hx bash -c "systemd-run --quiet --scope --slice=agentfab.slice --unit=agentfab-task-$1 sleep 1000 >/dev/null 2>&1 &"
        wait_for 5 bash -c "systemctl is-active --quiet agentfab-task-$1.scope"
}

main() {
        local out tmp
        tmp=$(mktemp)
        harness_boot || { fail "harness_boot"; check_summary; exit 1; }
        echo "harness: systemd booted in ${HARNESS_BOOT_MS} ms"

        # --- the units as installed
        out=$(hx stat -c '%a %U %G' /run/agentfab/launcher.sock 2>&1)
        check_flag socket "$([ "$out" = "660 root agentfab" ] && echo 1)" "launcher.sock is $out"
        out=$(hx systemd-analyze verify agentfab-launcher.socket agentfab-launcher@0.service 2>&1)
        check_flag units-verify "$([ -z "$out" ] && echo 1)" "systemd-analyze verify: ${out:-clean}"
        out=$(hx systemd-analyze security agentfab-launcher@0.service 2>/dev/null | tail -1)
        echo "  info: $out"

        # --- a live sandbox, driven by the agentfab user
        hx_as agentfab timeout 120 python3 "$CLIENT" main "$WS" > "$tmp" 2>&1
        collect sandbox "$tmp"

        # --- only root and agentfab may ask
        out=$(hx_as alice timeout 20 python3 "$CLIENT" raw '{"type":"reap","keep":[]}' 2>&1)
        check_flag other-user "$(grep -q '"oserror": 13' <<<"$out" && echo 1)" "alice cannot connect: $out"
        out=$(hx timeout 20 python3 "$CLIENT" raw '{"type":"sandbox","task":"0b0b0b0b0b01"}
' /srv/agentfab-launcher/alice 2>&1)
        check_flag root-peer-alice-dir "$(grep -q 'not owned' <<<"$out" && echo 1)" "root may ask, but not for another user's directory: $out"

        # --- a stale scope of the same task is stopped first
        if stale_scope 0c0c0c0c0c01; then
                local since
                since=$(hx date '+%Y-%m-%d %H:%M:%S')
                hx_as agentfab timeout 30 python3 "$CLIENT" open 0c0c0c0c0c01 "$WS" < /dev/null > "$tmp" 2>&1
                out=$(cat "$tmp")
                check_flag stale-scope "$(grep -q '"type": "ready"' <<<"$out" && ! hx pgrep -f 'sleep 1000' >/dev/null && echo 1)" \
                        "new sandbox ready, the stale scope's process is gone: $out"
                hx journalctl --sync >/dev/null 2>&1
                out=$(hx journalctl --since "$since" -q -o cat --no-pager 2>&1 | grep -m1 'Stopped stale')
                check_flag stale-scope-logged "$([ -n "$out" ] && echo 1)" "${out:-not logged}"
                wait_for 10 bash -c "systemctl show -p LoadState --value agentfab-task-0c0c0c0c0c01.scope | grep -qx not-found" ||
                        fail stale-scope-gone "the new scope outlived its connection"
        else
                fail stale-scope "could not start a stale scope by hand"
        fi

        # --- reap: every task scope not kept goes
        if stale_scope 0d0d0d0d0d01 && stale_scope 0d0d0d0d0d02; then
                out=$(hx_as agentfab timeout 30 python3 "$CLIENT" reap 0d0d0d0d0d02 2>&1)
                local a b
                a=$(hx systemctl show -p LoadState --value agentfab-task-0d0d0d0d0d01.scope)
                b=$(hx systemctl is-active agentfab-task-0d0d0d0d0d02.scope)
                check_flag reap "$(grep -q '"units": \["agentfab-task-0d0d0d0d0d01.scope"\]' <<<"$out" && [ "$a" = not-found ] && [ "$b" = active ] && echo 1)" \
                        "reaped the one not kept, kept the other: $out ($a, $b)"
                out=$(hx_as agentfab timeout 30 python3 "$CLIENT" reap 2>&1)
                b=$(hx systemctl show -p LoadState --value agentfab-task-0d0d0d0d0d02.scope)
                check_flag reap-all "$(grep -q 'agentfab-task-0d0d0d0d0d02.scope' <<<"$out" && [ "$b" = not-found ] && echo 1)" \
                        "an empty keep list reaps all: $out ($b)"
        else
                fail reap "could not start stale scopes by hand"
        fi

        # --- the daemon's asynchronous client (sd-event)
        if hx test -x /usr/local/bin/agentfab-session-probe; then
                hx_as agentfab timeout 120 agentfab-session-probe "$WS" > "$tmp" 2>&1
                collect session "$tmp"
        fi

        # --- the same client inside a unit hardened like agentfab.service (its
        # mount namespace, no capabilities, RestrictNamespaces=, the syscall
        # filter), on a workspace below its 0700 state directory
        if hx test -x /usr/local/bin/agentfab-session-probe; then
                hx timeout 120 systemd-run --quiet --wait --pipe --collect --unit=agentfab-probe-hardened \
                        -p User=agentfab -p Group=agentfab -p StateDirectory=agentfab -p StateDirectoryMode=0700 \
                        -p NoNewPrivileges=yes -p CapabilityBoundingSet= -p PrivateTmp=yes -p PrivateDevices=yes \
                        -p ProtectSystem=strict -p ProtectHome=read-only -p ProtectKernelTunables=yes \
                        -p ProtectKernelModules=yes -p ProtectControlGroups=yes -p RestrictNamespaces=yes \
                        -p MemoryDenyWriteExecute=yes -p RestrictSUIDSGID=yes -p LockPersonality=yes \
                        -p "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" -p SystemCallArchitectures=native \
                        -p SystemCallFilter=@system-service -p "SystemCallFilter=~@privileged @resources" \
                        -p SystemCallErrorNumber=EPERM -p Environment=ASAN_OPTIONS=detect_leaks=0 \
                        /usr/local/bin/agentfab-session-probe /var/lib/agentfab/tasks/0f0f0f0f0f01/workspace < /dev/null > "$tmp" 2>&1
                collect hardened "$tmp"
        fi

        # --- agentfab.service's syscall filter: of @resources, setpriority()
        # alone, which the daemon's worker threads use to go below the event
        # loop (worker.c); without capabilities it can only lower priority.
        out=$(hx systemctl show -p SystemCallFilter --value agentfab.service 2>&1)
        check_flag unit-filter-setpriority "$(grep -qw setpriority <<<"$out" && ! grep -qwE 'setrlimit|sched_setattr|sched_setscheduler' <<<"$out" && echo 1)" \
                "setpriority allowed, the rest of @resources not"
        out=$(hx timeout 60 systemd-run --quiet --wait --pipe --collect --unit=agentfab-probe-nice \
                -p User=agentfab -p NoNewPrivileges=yes -p CapabilityBoundingSet= -p SystemCallArchitectures=native \
                -p SystemCallFilter=@system-service -p "SystemCallFilter=~@privileged @resources" \
                -p SystemCallFilter=setpriority -p SystemCallErrorNumber=EPERM \
                python3 -c 'import os
before = os.getpriority(os.PRIO_PROCESS, 0)
os.setpriority(os.PRIO_PROCESS, 0, min(before + 5, 19))
try:
    os.setpriority(os.PRIO_PROCESS, 0, before)
    print("raised back")
except PermissionError:
    print("lowered" if os.getpriority(os.PRIO_PROCESS, 0) == min(before + 5, 19) else "unchanged")' < /dev/null 2>&1)
        check_flag filter-setpriority-lowers-only "$([ "$out" = lowered ] && echo 1)" "under the unit's filter: ${out:-nothing}"

        # --- nothing left behind
        out=$(hx systemctl list-units --all --no-legend --plain 'agentfab-task-*' 'agentfab-launcher@*' 2>&1)
        check_flag clean "$([ -z "$out" ] && echo 1)" "no task scope or launcher instance left: ${out:-none}"
        out=$(hx journalctl -q -o cat --no-pager 2>&1 | grep -E 'AddressSanitizer|LeakSanitizer|runtime error:' | head -5)
        check_flag no-sanitizer-reports "$([ -z "$out" ] && echo 1)" "${out:-none in the journal}"
        out=$(hx journalctl -q -o cat -u 'agentfab-launcher@*' --no-pager -p warning 2>&1 | grep -v 'Refus' | head -20)
        [ -n "$out" ] && echo "  info: launcher warnings: $out"

        rm -f "$tmp"
        harness_teardown
        echo "launcher tests failed: ${FAILED_NAMES[*]:-none}"
        check_summary
}

main "$@"
