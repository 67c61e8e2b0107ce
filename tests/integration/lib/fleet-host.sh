# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# fleet-host.sh: one agentfab host of a fleet, booted by the harness, for
# tests/integration/fleet.sh. harness.sh boots one system per shell, so a
# second host is a second shell: this file, executed, boots a host and
# keeps it until told to stop; sourced, it gives the function that
# prepares a host's root (both hosts use it) and hx_on, which runs a
# command on a host the other shell booted.
#
#   bash fleet-host.sh BUILDDIR STATEDIR NAME CONNINFO MODELPORT CERT [EXTRA]
#       boots a host named NAME whose [Fleet] Database= is CONNINFO and
#       Remote= is file:///srv/agentfab-fleet/remote.git (fleet_share mounts
#       a shared directory there) (and
#       EXTRA appended to its configuration); when
#       it is up, writes STATEDIR/NAME.env (the harness's variables, for
#       hx_on) and then waits until STATEDIR/NAME.stop exists, or it is
#       signalled, and tears down. A failed boot writes STATEDIR/NAME.failed.

# fleet_prepare_root ROOT NAME CONNINFO MODELPORT CERT [EXTRA]
fleet_prepare_root() {
        local R=$1 name=$2 conninfo=$3 port=$4 cert=$5 extra=${6:-} u
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1 || return 1
        if meson introspect --buildoptions "$BUILDDIR" | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "b_sanitize" and o["value"] not in ("none", "") for o in json.load(sys.stdin)) else 1)'; then
                for u in agentfab.service agentfab-launcher@.service; do
                        mkdir -p "$R/etc/systemd/system/$u.d"
                        printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1\n' \
                                > "$R/etc/systemd/system/$u.d/sanitizer.conf"
                done
        fi
        # The hosts of a fleet share their users (agentfabd(8)).
        grep -q "^alice:" "$R/etc/passwd" || useradd --root "$R" -s /bin/bash alice || return 1
        mkdir -p "$R/usr/local/share/ca-certificates"
        cp "$cert" "$R/usr/local/share/ca-certificates/agentfab-fleet-test.crt"
        chroot "$R" update-ca-certificates >/dev/null 2>&1 || return 1

        # Remote=: a directory every host shares, mounted there once the
        # host is up (fleet_share); the daemon writes only its state
        # directory unless told (agentfab.conf(5), Remote=).
        mkdir -p "$R/srv/agentfab-fleet" "$R/etc/systemd/system/agentfab.service.d"
        printf '[Service]\nReadWritePaths=/srv/agentfab-fleet\n' > "$R/etc/systemd/system/agentfab.service.d/fleet-remote.conf"
        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-test.conf" <<EOC
[Agent]
CommandTimeoutSec=60

[Model]
Name=default
Endpoint=http://127.0.0.1:$port/v1
Model=scripted
TimeoutSec=20
MaxRetries=3
RetryBaseSec=200ms

[Fleet]
Database=$conninfo
Name=$name
Remote=file:///srv/agentfab-fleet/remote.git
LeaseSec=6s
Slots=1

$extra
EOC
}

# fleet_share PID DIR: DIR of this shell at /srv/agentfab-fleet in the host
# whose systemd is PID (every host sees the same repository there).
fleet_share() {
        python3 "$(dirname "${BASH_SOURCE[0]}")/fleet-share.py" "$1" "$2" /srv/agentfab-fleet
}

# hx_on NAME CMD...: hx on the host NAME that another shell booted.
hx_on() {
        local name=$1
        shift
        (
                # shellcheck source=/dev/null
                . "$FLEET_STATE/$name.env" || exit 125
                hx "$@"
        )
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
        set -u
        BUILDDIR=$1 FLEET_STATE=$2 FLEET_NAME=$3 FLEET_CONNINFO=$4 FLEET_PORT=$5 FLEET_CERT=$6 FLEET_EXTRA=${7:-}
        # shellcheck source=harness.sh
        . "$(dirname "$(realpath "$0")")/harness.sh"
        harness_prepare_root() {
                fleet_prepare_root "$1" "$FLEET_NAME" "$FLEET_CONNINFO" "$FLEET_PORT" "$FLEET_CERT" "$FLEET_EXTRA"
        }
        if ! harness_boot; then
                touch "$FLEET_STATE/$FLEET_NAME.failed"
                exit 1
        fi
        trap 'harness_teardown; exit 0' TERM INT HUP
        declare -p HARNESS_MODE HARNESS_BASE HARNESS_ROOT HARNESS_PID HARNESS_CGROUP_DIRS > "$FLEET_STATE/$FLEET_NAME.env.new"
        mv "$FLEET_STATE/$FLEET_NAME.env.new" "$FLEET_STATE/$FLEET_NAME.env"
        while [ ! -e "$FLEET_STATE/$FLEET_NAME.stop" ] && _harness_alive "$HARNESS_PID"; do
                sleep 0.2
        done
        harness_teardown
fi
