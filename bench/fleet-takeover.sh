#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# How long after a host's death its task is another host's, at the database
# (bench/fleet-takeover.c), in a private PostgreSQL 15 cluster
# (tests/fleet/pg.sh): median, best and worst of RUNS deaths (default 20)
# with LEASE seconds of lease (default 3). Prints figures; does not judge.
#   bench/fleet-takeover.sh [BUILDDIR]      RUNS=N LEASE=N
set -u
cd "$(dirname "$0")/.."
BUILDDIR=${1:-build}
exec bash tests/fleet/pg.sh "$BUILDDIR/bench/fleet-takeover" "${RUNS:-20}" "${LEASE:-3}"
