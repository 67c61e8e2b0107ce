#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# How long after a host stops its task is at work on another host, end to
# end: tests/integration/fleet.sh (two booted hosts, a private PostgreSQL,
# LeaseSec=6s) with its stopped-host takeover done RUNS times (default
# 20). Prints the time to the other host's claim in the database and to
# its first model call, median, best and worst, against LeaseSec. Needs
# root, like the integration tests; about 15 s a run. Does not judge.
#   bench/fleet-hosts.sh [BUILDDIR]        RUNS=N
set -u
cd "$(dirname "$0")/.."
BUILDDIR=${1:-build}
FLEET_TAKEOVER_RUNS=${RUNS:-20} bash tests/integration/fleet.sh "$BUILDDIR" | tee /dev/stderr | grep '^bench:'
