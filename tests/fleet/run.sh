#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs the fleet database suite (test-fleet-db from BUILD, default build) in
# a private PostgreSQL cluster and ends with "N passed, N failed, N skipped"
# for tools/test.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
bin=$build/tests/fleet/test-fleet-db
if [ ! -x "$bin" ]; then
        echo "no $bin: build first (ninja -C $build)"
        echo "0 passed, 1 failed"
        exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
        bash tests/fleet/pg.sh "$bin" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
p=$(grep -cE '^ok [0-9]+' "$out")
k=$(grep -ciE '^ok [0-9]+[^#]*# *SKIP' "$out")
f=$(grep -cE '^not ok [0-9]+' "$out")
if grep -qiE '^1\.\.0 # SKIP' "$out"; then
        k=$((k + 1))
elif ! grep -qE '^1\.\.[0-9]+' "$out" || [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        f=$((f + 1))   # it died before it could say
fi
echo "$((p - k)) passed, $f failed, $k skipped"
[ "$f" = 0 ]
