#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The daemon's benchmark, in the integration harness (real systemd, bus,
# launcher, sandboxes) with the scripted instant model; the scenarios of
# tests/integration/daemon-load.sh at the sizes of docs/PERFORMANCE.md's targets:
#   - D-Bus and stream socket latency (p50/p99/max) while a task imports,
#     checkpoints, fails, is reset, exported (diff, mbox, bundle), resumed
#     and delivered on a FILES-file repository; baseline: the same calls
#     to the idle daemon, in the same run;
#   - output capture: FLOOD_MB MiB (text without newline, NUL bytes,
#     escape sequences) into the task's log vs the same command into
#     /dev/null in the same sandbox;
#   - resume: TASKS tasks at work, agentfabd SIGKILLed, time until all are
#     at work again after activation; first without reattaching
#     (AGENTFAB_NO_REATTACH=1: every sandbox made anew) as the baseline,
#     then with it (the running sandboxes taken up again from systemd's
#     fd store), in the same run, with the ratio.
#
#   bench/daemon-bench.sh [BUILDDIR]          FILES=100000 FLOOD_MB=1024 TASKS=20
#   FILES=2000 FLOOD_MB=128 bench/daemon-bench.sh build    (the short form CI runs)
#   HOLD_PAGE_REPORTING=1 bench/daemon-bench.sh build      (the output capture on memory the
#       VM's host has backed: free page reporting held off during it, put back after)
#
# Prints "figure:" lines; asserts nothing (exit status 0 when it ran).
set -u
BUILDDIR=$(realpath "${1:-build}")
HERE=$(dirname "$(realpath "$0")")
export FILES=${FILES:-100000} FLOOD_MB=${FLOOD_MB:-1024} TASKS=${TASKS:-20}
# Functional bounds stay generous; the figures are what this is for.
export BUS_MAX_MS=${BUS_MAX_MS:-60000}
export RESUME_BASELINE=${RESUME_BASELINE:-1}
out=$(mktemp)
bash "$HERE/../tests/integration/daemon-load.sh" "$BUILDDIR" 2>&1 | tee "$out"
echo "--- figures"
grep '^figure:' "$out" | sed 's/^figure: //'
# The resume against its baseline of the same run.
base=$(sed -n 's/^figure: resume (baseline) of [0-9]* tasks: all at work again \([0-9.]*\) s.*/\1/p' "$out")
with=$(sed -n 's/^figure: resume (reattach) of [0-9]* tasks: all at work again \([0-9.]*\) s.*/\1/p' "$out")
if [ -n "$base" ] && [ -n "$with" ]; then
        awk -v b="$base" -v w="$with" 'BEGIN { if (w > 0) printf "resume: %.3f s with reattaching against %.3f s without (%.1fx faster)\n", w, b, b / w }'
fi
n=$(grep -c '^figure:' "$out")
rm -f "$out"
[ "$n" -gt 0 ]
