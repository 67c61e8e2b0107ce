#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, in its own
# build directory) and runs each of them, one after the other, for SECONDS
# (default 60) on its corpus. First every input in
# tests/fuzz/regressions/<target>/ is replayed: each once crashed the target.
# Prints per target the executions, the coverage (edges, features) and the
# crashes, and ends with "N passed, N failed" (a target passes when its
# regressions replay cleanly and the run finds no crash).
#
#   bash tools/fuzz.sh [SECONDS]        build and run every target
#   FUZZ_TARGETS="fuzz-config" ...      only these
#   FUZZ_RUNS=10000000 ...              stop a target after that many executions
#                                       (or SECONDS, whichever comes first)
#   bash tools/fuzz.sh --minimize       merge what the runs found into
#                                       tests/fuzz/corpus/ (libFuzzer -merge=1)
#
# The repository's corpus is only read: each run works on a copy in
# $FUZZ_BUILD/fuzz-corpus/<target>, which grows from run to run. A crash is
# kept in $FUZZ_BUILD/fuzz-artifacts/<target>/; once fixed, copy the input to
# tests/fuzz/regressions/<target>/ so that CI replays it from then on.
set -uo pipefail
cd "$(dirname "$0")/.."

build=${FUZZ_BUILD:-build-fuzz}
mode=run seconds=60
case "${1:-}" in
        --minimize) mode=minimize ;;
        "") ;;
        *[!0-9]*) echo "usage: $0 [SECONDS | --minimize]" >&2; exit 2 ;;
        *) seconds=$1 ;;
esac

fail_early() { echo "$1"; echo "0 passed, 1 failed"; exit 1; }

command -v clang >/dev/null || fail_early "clang is missing (Debian: clang, libclang-rt-14-dev)"
if [ ! -f "$build/build.ninja" ]; then
        CC=clang meson setup "$build" -Dfuzz=true -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
                -Dintegration-tests=false >/dev/null || fail_early "meson setup of $build failed"
fi
ninja -C "$build" fuzz >/dev/null || fail_early "building the fuzz targets failed"

targets=()
for exe in "$build"/tests/fuzz/fuzz-*; do
        [ -x "$exe" ] && [ -f "$exe" ] || continue
        t=${exe##*/}
        if [ -n "${FUZZ_TARGETS:-}" ] && [[ " $FUZZ_TARGETS " != *" $t "* ]]; then
                continue
        fi
        targets+=("$t")
done
[ "${#targets[@]}" -gt 0 ] || fail_early "no fuzz targets built"

# Small quarantine, short allocation stacks: several times faster on this
# kind of code (many small json-c allocations), and bounded memory on a
# shared machine. A broken invariant aborts; UBSan findings are fatal
# (-fno-sanitize-recover in the build).
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:malloc_context_size=8:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Targets that need a scratch directory (a workspace, a transcript) make it
# here, and whatever a crash leaves behind goes with it. On tmpfs when there
# is one: on ext4 the truncates and syncs of fuzz-tool-call and
# fuzz-model-reply wait for the disk (1.6 times the CPU time).
tmp=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && tmp=/dev/shm
scratch=$(mktemp -d "$tmp/agentfab-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch

flags_of() {
        local t=$1
        local f=(-rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=10)
        [ -f "tests/fuzz/$t.dict" ] && f+=("-dict=tests/fuzz/$t.dict")
        [ -f "tests/fuzz/$t.options" ] && read -ra extra < "tests/fuzz/$t.options" && f+=("${extra[@]}")
        printf '%s\n' "${f[@]}"
}

if [ "$mode" = minimize ]; then
        for t in "${targets[@]}"; do
                work="$build/fuzz-corpus/$t"
                new=$(mktemp -d "$scratch/merge.XXXXXX")
                mkdir -p "tests/fuzz/corpus/$t" "$work"
                mapfile -t f < <(flags_of "$t")
                "$build/tests/fuzz/$t" -merge=1 "${f[@]}" "$new" "tests/fuzz/corpus/$t" "$work" >/dev/null 2>&1 ||
                        { echo "$t: merge failed"; continue; }
                rm -f "tests/fuzz/corpus/$t"/*
                cp "$new"/* "tests/fuzz/corpus/$t"/ 2>/dev/null
                echo "$t: $(ls "tests/fuzz/corpus/$t" | wc -l) inputs"
        done
        exit 0
fi

passed=0 failed=0
printf '%-24s %12s %8s %9s %8s %8s\n' target executions edges features crashes seconds
for t in "${targets[@]}"; do
        exe="$build/tests/fuzz/$t"
        work="$build/fuzz-corpus/$t"
        artifacts="$build/fuzz-artifacts/$t"
        log="$build/fuzz-logs/$t.log"
        mkdir -p "$work" "$artifacts" "${log%/*}"
        mapfile -t f < <(flags_of "$t")
        crashes=0

        # Every input that ever crashed the target, replayed.
        regressions=(tests/fuzz/regressions/"$t"/*)
        if [ -e "${regressions[0]}" ]; then
                if ! "$exe" "${f[@]}" "${regressions[@]}" >"$log.regressions" 2>&1; then
                        crashes=$((crashes + 1))
                        echo "$t: a regression input crashes it again, see $log.regressions"
                fi
        fi

        # The run, on the seed corpus plus what earlier runs found.
        [ -n "${FUZZ_RUNS:-}" ] && f+=("-runs=$FUZZ_RUNS")
        start=$SECONDS
        "$exe" "${f[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts/" \
                "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
        rc=$?
        [ "$rc" = 0 ] || crashes=$((crashes + 1))
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        last=$(grep -a -E '^#[0-9]+.*cov: ' "$log" | tail -1)
        edges=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
        features=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
        [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
        printf '%-24s %12s %8s %9s %8s %8s\n' "$t" "${execs:-?}" "${edges:-?}" "${features:-?}" "$crashes" $((SECONDS - start))
        if [ "$crashes" = 0 ]; then
                passed=$((passed + 1))
        else
                failed=$((failed + 1))
                [ "$rc" = 0 ] || { echo "  crash: see $log; input kept in $artifacts/"; grep -a -m3 -E 'invariant broken|ERROR:|runtime error' "$log" | sed 's/^/  /'; }
        fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
