#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The egress proxy under the real systemd of the integration harness: its
# socket-activated hardened unit, tasks registered over the control socket
# by the agentfab user (the client library agentfabd uses), real sandboxes
# (agentfab-sandbox --proxy-fd) whose commands reach HTTP servers on the
# harness's loopback through it, or are refused: loopback written in every
# form, IPv4-mapped IPv6, the metadata address, a name resolving to
# 127.0.0.1. The refused target's own log proves that nothing reached it;
# the journal has an entry for every connection.
#
#   tests/integration/proxy.sh BUILDDIR
set -u

BUILDDIR=$(realpath "${1:?usage: proxy.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
. "$HERE/lib/harness.sh"

. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "the proxy tests need root"

WS=/var/lib/agentfab/proxy-ws
LIB=/usr/local/lib/agentfab-proxy-test
MSG=e1724f7f803240d2a256a216468e59e9
# The allowed destination and the one nothing may reach: both on the
# harness's loopback. 127.0.0.2, because 127.0.0.1 is in NO_PROXY (in the
# sandbox it is the sandbox's own loopback).
ALLOWED=127.0.0.2:8081
REFUSED_PORT=8082

scenario() { cat > "$1"; }

harness_prepare_root() {
        local R=$1 ids
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf"
        systemctl --root="$R" enable agentfab-proxy.socket >/dev/null 2>&1
        grep -q '^alice:' "$R/etc/passwd" || useradd --root "$R" -M -s /bin/bash alice
        # Names the proxy resolves itself: one to the allowed address, one
        # to the loopback address nothing may reach.
        printf '127.0.0.1 rebind.test\n127.0.0.2 registry.test\n' >> "$R/etc/hosts"

        mkdir -p "$R$LIB" "$R$WS"
        install -m 0755 "$BUILDDIR/tests/integration/proxy-probe" "$R/usr/local/bin/agentfab-proxy-probe"
        install -m 0644 "$HERE/proxy-target.py" "$HERE/proxy-fetch.py" "$R$LIB/"

        local F="python3 $LIB/proxy-fetch.py"
        scenario "$R$WS/allowed.sh" <<EOF
env | grep -qx 'HTTP_PROXY=http://127.0.0.1:3128' && env | grep -qx 'no_proxy=localhost,127.0.0.1' && echo "result env ok"
echo "result curl-plain \$(curl -sS -m 10 -o /dev/null -w '%{http_code}' http://$ALLOWED/curl-plain)"
echo "result curl-tunnel \$(curl -sS -m 10 -p -o /dev/null -w '%{http_code}' http://$ALLOWED/curl-tunnel)"
$F host-differs 'GET http://$ALLOWED/host-differs HTTP/1.1\r\nHost: 127.0.0.1:$REFUSED_PORT\r\n\r\n'
EOF
        scenario "$R$WS/refused.sh" <<EOF
$F loopback 'GET http://127.0.0.1:$REFUSED_PORT/a HTTP/1.1\r\n\r\n'
$F loopback-connect 'CONNECT 127.0.0.1:$REFUSED_PORT HTTP/1.1\r\n\r\n'
$F decimal 'GET http://2130706433:$REFUSED_PORT/c HTTP/1.1\r\n\r\n'
$F octal 'GET http://0177.0.0.1:$REFUSED_PORT/d HTTP/1.1\r\n\r\n'
$F hex 'CONNECT 0x7f.0.0.1:$REFUSED_PORT HTTP/1.1\r\n\r\n'
$F short 'GET http://127.1:$REFUSED_PORT/f HTTP/1.1\r\n\r\n'
$F mapped 'GET http://[::ffff:127.0.0.1]:$REFUSED_PORT/g HTTP/1.1\r\n\r\n'
$F mapped-connect 'CONNECT [::ffff:7f00:1]:$REFUSED_PORT HTTP/1.1\r\n\r\n'
$F rebind 'GET http://rebind.test:$REFUSED_PORT/h HTTP/1.1\r\n\r\n'
$F metadata 'GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n'
$F uri-differs 'GET http://2130706433:$REFUSED_PORT/i HTTP/1.1\r\nHost: $ALLOWED\r\n\r\n'
$F smuggle 'POST http://$ALLOWED/j HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n'
$F fold 'GET http://$ALLOWED/k HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n'
$F origin-form 'GET /l HTTP/1.1\r\nHost: 127.0.0.1:$REFUSED_PORT\r\n\r\n'
EOF
        scenario "$R$WS/by-name.sh" <<EOF
$F by-name 'GET http://registry.test:8081/by-name HTTP/1.1\r\n\r\n'
EOF
        scenario "$R$WS/bytes.sh" <<EOF
$F big 'GET http://$ALLOWED/big HTTP/1.1\r\n\r\n'
$F after-limit 'GET http://$ALLOWED/plain HTTP/1.1\r\n\r\n'
EOF
        scenario "$R$WS/conns.sh" <<EOF
$F --hold second 'GET http://$ALLOWED/plain HTTP/1.1\r\n\r\n'
EOF
        scenario "$R$WS/idle.sh" <<EOF
$F --idle tunnel 3 'CONNECT $ALLOWED HTTP/1.1\r\n\r\n'
EOF
        ids=$(awk -F: '$1 == "agentfab" {print $3 ":" $4}' "$R/etc/passwd")
        chown -R "$ids" "$R/var/lib/agentfab"

        # A sanitizer build: no leak checks in the proxy (its filter refuses
        # the ptrace they need), reports to the journal.
        if meson introspect --buildoptions "$BUILDDIR" | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "b_sanitize" and o["value"] not in ("none", "") for o in json.load(sys.stdin)) else 1)'; then
                mkdir -p "$R/etc/systemd/system/agentfab-proxy.service.d"
                printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1\nMemoryDenyWriteExecute=no\nMemoryMax=infinity\n' \
                        > "$R/etc/systemd/system/agentfab-proxy.service.d/sanitizer.conf"
        fi
}

# probe USER < requests: the probe, connected as USER, its sandboxes made by
# root (as agentfab-launcher makes them), with a bound.
probe() { hx timeout 120 agentfab-proxy-probe --as="$1"; }

# result OUTPUT NAME: the fields after "result NAME " in OUTPUT.
result() { sed -n "s/^result $2 //p" <<<"$1" | head -1; }

# status_is OUTPUT NAME STATUS...: the result's first field is one of them.
status_is() {
        local out=$1 name=$2 got; shift 2
        got=$(result "$out" "$name" | cut -d' ' -f1)
        for s in "$@"; do [ "$got" = "$s" ] && return 0; done
        return 1
}

start_target() {
        hx systemd-run --quiet --unit="$1" --property=DynamicUser=yes --property=RuntimeDirectory="$1" \
                --property=RuntimeDirectoryMode=0755 \
                python3 $LIB/proxy-target.py "$2" "$3" "/run/$1/log" >/dev/null 2>&1
        local i
        for i in $(seq 1 100); do
                hx python3 -c "import socket; socket.create_connection(('$2', $3), timeout=1).close()" >/dev/null 2>&1 && {
                        return 0; }
                sleep 0.05
        done
        return 1
}

# The journal's network entries of a task as "VERDICT HOST PORT ADDRESS REASON" lines.
journal_of() {
        hx journalctl --sync >/dev/null 2>&1
        hx journalctl -q -o json --no-pager MESSAGE_ID=$MSG AGENTFAB_TASK="$1" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    print(e.get("AGENTFAB_VERDICT"), e.get("AGENTFAB_HOST"), e.get("AGENTFAB_PORT"), e.get("AGENTFAB_ADDRESS") or "-",
          e.get("AGENTFAB_BYTES_UP"), e.get("AGENTFAB_BYTES_DOWN"), e.get("AGENTFAB_REASON") or "-")
'
}

SB="agentfab-sandbox --workspace=$WS --timeout=60 --proxy-fd=3 --"

main() {
        local out j tmp
        tmp=$(mktemp)
        harness_boot || { fail "harness_boot"; check_summary; exit 1; }
        echo "harness: systemd booted in ${HARNESS_BOOT_MS} ms"

        # --- the units as installed
        out=$(hx stat -c '%a %U %G' /run/agentfab-proxy/control 2>&1)
        check_flag socket "$([ "$out" = "660 root agentfab" ] && echo 1)" "control socket is $out"
        out=$(hx systemd-analyze verify agentfab-proxy.socket agentfab-proxy.service 2>&1)
        check_flag units-verify "$([ -z "$out" ] && echo 1)" "systemd-analyze verify: ${out:-clean}"

        start_target proxy-target-allowed 127.0.0.2 8081 || fail target "the allowed target did not start"
        start_target proxy-target-refused 127.0.0.1 $REFUSED_PORT || fail target "the refused target did not start"
        # The harness's own check connection is the only one either log may
        # hold before the tests; start afresh.
        hx sh -c ': > /run/proxy-target-allowed/log; : > /run/proxy-target-refused/log'

        # --- allowed: plain HTTP and CONNECT, by curl through the variables
        out=$(probe agentfab <<EOF
register ta allowlist $ALLOWED rebind.test
run ta $SB sh /workspace/allowed.sh
EOF
)
        echo "$out" | sed 's/^/    /'
        check_flag registered "$(grep -qx registered <<<"$out" && echo 1)" "the agentfab user registers a task"
        check_flag environment "$(grep -qx 'result env ok' <<<"$out" && echo 1)" "commands see HTTP_PROXY=http://127.0.0.1:3128 and no_proxy"
        check_flag allowed-plain "$(status_is "$out" curl-plain 200 && echo 1)" "curl, plain HTTP to the allowed address: $(result "$out" curl-plain)"
        check_flag allowed-connect "$(status_is "$out" curl-tunnel 200 && echo 1)" "curl, CONNECT tunnel to it: $(result "$out" curl-tunnel)"
        check_flag host-rewritten "$(status_is "$out" host-differs 200 && hx grep -q 'request /host-differs host=127.0.0.2:8081' /run/proxy-target-allowed/log && echo 1)" \
                "a request whose Host names another destination goes to its URI's, with the URI's Host"
        j=$(journal_of ta)
        check_flag journal-allowed "$(grep -E -c "^allowed 127.0.0.2 8081 127.0.0.2 [1-9][0-9]* [1-9][0-9]* " <<<"$j" | grep -qx 3 && echo 1)" \
                "three allowed entries with address and bytes both ways: $(head -3 <<<"$j" | tr '\n' ';')"

        # --- refused in allowlist mode, with the loopback address not allowed
        out=$(probe agentfab <<EOF
register ta allowlist $ALLOWED rebind.test
run ta $SB sh /workspace/refused.sh
EOF
)
        echo "$out" | sed 's/^/    /'
        local name
        for name in loopback loopback-connect decimal octal hex short mapped mapped-connect rebind metadata uri-differs; do
                check_flag "allowlist-$name" "$(status_is "$out" $name 403 && echo 1)" "refused: $(result "$out" $name)"
        done
        for name in smuggle fold origin-form; do
                check_flag "allowlist-$name" "$(status_is "$out" $name 400 && echo 1)" "bad request: $(result "$out" $name)"
        done
        j=$(journal_of ta)
        check_flag journal-decimal "$(grep -q '^refused 2130706433 8082 127.0.0.1 ' <<<"$j" && echo 1)" "2130706433 journaled as 127.0.0.1"
        check_flag journal-octal "$(grep -q '^refused 0177.0.0.1 8082 127.0.0.1 ' <<<"$j" && echo 1)" "0177.0.0.1 journaled as 127.0.0.1"
        check_flag journal-mapped "$(grep -q '^refused \[::ffff:127.0.0.1\] 8082 ::ffff:127.0.0.1 ' <<<"$j" && echo 1)" "mapped IPv6 journaled"
        check_flag journal-rebind "$(grep -q "^refused rebind.test 8082 127.0.0.1 .* 'rebind.test' resolves to loopback address 127.0.0.1" <<<"$j" && echo 1)" \
                "a name resolving to 127.0.0.1 journaled with the address"
        check_flag journal-metadata "$(grep -q '^refused 169.254.169.254 80 169.254.169.254 .*link-local' <<<"$j" && echo 1)" "169.254.169.254 journaled"
        check_flag journal-count "$(grep -c '^refused ' <<<"$j" | grep -qx 14 && echo 1)" "one refused entry per attempt: $(grep -c '^refused ' <<<"$j")"
        check_flag events "$(grep -c '^event ta allowlist ' <<<"$out" | grep -qx 14 && grep -q '^event ta allowlist address rebind.test 8082 127.0.0.1 ' <<<"$out" && echo 1)" \
                "the control connection was told of each refusal: $(grep -c '^event ' <<<"$out")"

        # --- refused in audited mode: every public destination, no private one
        out=$(probe agentfab <<EOF
register tb audited
run tb $SB sh /workspace/refused.sh
run tb $SB sh /workspace/allowed.sh
EOF
)
        for name in loopback loopback-connect decimal octal hex short mapped mapped-connect rebind metadata uri-differs; do
                check_flag "audited-$name" "$(status_is "$out" $name 403 && echo 1)" "refused: $(result "$out" $name)"
        done
        check_flag audited-loopback-allowed-elsewhere "$(status_is "$out" curl-plain 403 && echo 1)" \
                "the address another task may reach is refused to an audited one: $(result "$out" curl-plain)"

        out=$(hx cat /run/proxy-target-refused/log 2>&1)
        check_flag nothing-arrived "$([ -z "$out" ] && echo 1)" "the refused target's own log is empty: ${out:-empty}"

        # --- a host not allowed, then allowed (what approve --allow-host does)
        out=$(probe agentfab <<EOF
register tc allowlist $ALLOWED
run tc $SB sh /workspace/by-name.sh
allow tc registry.test:8081
run tc $SB sh /workspace/by-name.sh
allow tc bad:0
EOF
)
        echo "$out" | sed 's/^/    /'
        check_flag not-allowed "$(grep -q '^result by-name 403' <<<"$out" && grep -q '^event tc allowlist not-allowed registry.test 8081 - ' <<<"$out" && echo 1)" \
                "a name not listed is refused without being resolved, and named in the event"
        check_flag allow-host "$(sed -n '/^allowed$/,$p' <<<"$out" | grep -q '^result by-name 200' && echo 1)" "allowed after 'allow': $(grep '^result by-name' <<<"$out" | tr '\n' ';')"
        check_flag allow-bad "$(grep -q "^error 22 invalid allow entry 'bad:0'" <<<"$out" && echo 1)" "a bad entry is refused and named"

        # --- limits: bytes, connections at once, idle
        out=$(probe agentfab <<EOF
limits 0 1000 0
register td allowlist $ALLOWED
run td $SB sh /workspace/bytes.sh
limits 1 0 0
register te allowlist $ALLOWED
run te $SB sh /workspace/conns.sh
limits 0 0 1
register tf allowlist $ALLOWED
run tf $SB sh /workspace/idle.sh
EOF
)
        echo "$out" | sed 's/^/    /'
        local big
        big=$(result "$out" big)
        check_flag byte-limit-cut "$(set -- $big; [ "${1:-}" = 200 ] && [ "${2:-0}" -lt 4000 ] && echo 1)" "a reply past the byte limit is cut: $big"
        check_flag byte-limit-refused "$(status_is "$out" after-limit 403 && echo 1)" "then refused: $(result "$out" after-limit)"
        check_flag conn-limit "$(status_is "$out" second 429 && echo 1)" "a second connection at once past a limit of 1: $(result "$out" second)"
        check_flag idle-timeout "$(result "$out" tunnel | grep -qx '200 closed' && echo 1)" "an idle tunnel is closed: $(result "$out" tunnel)"
        j=$(journal_of tf)
        check_flag journal-idle "$(grep -q '^allowed .* idle timeout$' <<<"$j" && echo 1)" "journaled: $j"
        j=$(journal_of td)
        check_flag journal-bytes "$(grep -q 'byte limit of the task reached' <<<"$j" && echo 1)" "journaled: $(tr '\n' ';' <<<"$j")"

        # --- a task's state ends with its sandbox and its registration
        out=$(probe agentfab <<EOF
register tg allowlist $ALLOWED
run tg $SB true
close tg
sleep 300
allow tg example.org
register th allowlist $ALLOWED
unregister th
allow th example.org
register ti allowlist
register ti allowlist
EOF
)
        check_flag channel-closed "$(sed -n '/^closed$/,$p' <<<"$out" | grep -m1 '^error' | grep -q '^error 2 ' && echo 1)" \
                "once the sandbox and our copy closed the channel, the task is gone: $(sed -n '/^slept$/{n;p}' <<<"$out")"
        check_flag unregistered "$(sed -n '/^unregistered$/{n;p}' <<<"$out" | grep -q '^error 2 ' && echo 1)" "an unregistered task is gone"
        check_flag duplicate "$(grep -q '^error 17 ' <<<"$out" && echo 1)" "a task registered twice is refused"

        # --- who may register
        out=$(printf 'register tj audited\n' | hx_as alice timeout 30 agentfab-proxy-probe 2>&1)
        check_flag other-user "$(grep -q '^error 13 ' <<<"$out" && echo 1)" "alice cannot connect: $out"
        out=$(printf 'register tk audited\n' | hx timeout 30 agentfab-proxy-probe 2>&1)
        check_flag root "$(grep -qx registered <<<"$out" && echo 1)" "root may: $(tr '\n' ' ' <<<"$out")"

        # --- the proxy itself: unprivileged, and nothing left of the tasks
        local pid uid
        pid=$(hx systemctl show -p MainPID --value agentfab-proxy.service)
        uid=$(hx awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
        check_flag unprivileged "$([ -n "$uid" ] && [ "$uid" != 0 ] && echo 1)" "agentfab-proxy runs as uid ${uid:-?} (a dynamic user)"
        out=$(hx systemd-analyze security agentfab-proxy.service 2>/dev/null | tail -1)
        echo "  info: $out"
        out=$(hx journalctl -q -o cat --no-pager 2>&1 | grep -E 'AddressSanitizer|LeakSanitizer|runtime error:' | head -5)
        check_flag no-sanitizer-reports "$([ -z "$out" ] && echo 1)" "${out:-none in the journal}"
        out=$(hx systemctl is-active agentfab-proxy.service)
        check_flag still-running "$([ "$out" = active ] && echo 1)" "the proxy survived all of it: $out"

        rm -f "$tmp"
        harness_teardown
        echo "proxy tests failed: ${FAILED_NAMES[*]:-none}"
        check_summary
}

main "$@"
