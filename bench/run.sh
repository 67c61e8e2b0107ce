#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs the sandbox benchmark inside the integration harness, where a real
# systemd is PID 1, so agentfab-sandbox's cold start includes its transient
# scope. On a host where systemd is PID 1: HARNESS_HOST_SYSTEMD=1.
#   bench/run.sh [BUILDDIR]
set -u
BUILDDIR=$(realpath "${1:-build}")
HERE=$(dirname "$(realpath "$0")")
. "$HERE/../tests/integration/lib/harness.sh"

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        install -m 0755 "$BUILDDIR/bench/sandbox-bench" "$R/usr/local/bin/sandbox-bench"
        mkdir -p "$R/srv/bench-workspace"
        chown 65534:65534 "$R/srv/bench-workspace"
}

harness_boot || exit 1
hx sandbox-bench --workspace=/srv/bench-workspace --runs="${RUNS:-50}"
harness_teardown
