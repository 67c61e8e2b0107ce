#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The fleet's claim benchmark (bench/fleet-claims.c) in a private PostgreSQL
# 15 cluster (tests/fleet/pg.sh): claims per second and the database's CPU
# time with TASKS queued tasks (default 1,000) and three hosts claiming
# BATCH at a time (default 1), against naive FOR UPDATE and a single host
# measured in the same run. Prints figures; does not judge them.
#   bench/fleet-claims.sh [BUILDDIR]        TASKS=N BATCH=N
set -u
cd "$(dirname "$0")/.."
BUILDDIR=${1:-build}
exec bash tests/fleet/pg.sh "$BUILDDIR/bench/fleet-claims" "${TASKS:-1000}" "${BATCH:-1}"
