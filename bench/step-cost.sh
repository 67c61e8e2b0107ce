#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# What a step costs the daemon on generated repositories of 1,000, 10,000
# and 100,000 files (bench/step-cost.c): its changes and breakers, its
# checkpoint, the changes since base; for a step that wrote one file with
# write_file, one whose command touched nothing, one whose command rewrote
# 1,000 files; against git add -A && git write-tree, git status and the
# change lists by libgit2's walk, without the stat index, on the same tree in
# the same run. Needs no systemd: it runs the ledger in this process.
#   bench/step-cost.sh [BUILDDIR] [--short] [--sizes=LIST]
# --short: 1,000 and 10,000 files; --sizes=100000: that size only (about
# 9 minutes here, 4 of them making and importing the repository).
# STEPS=N steps per figure (default 15; 7 with --short). libgit2's walk is
# timed on the first 3 steps, on the first only from 50,000 files on (a
# minute each at 100,000 files); OLD_STEPS=N sets it for every size.
set -eu
BUILDDIR=build
SIZES=1000,10000,100000
STEPS=${STEPS:-}
for a in "$@"; do
        case "$a" in
        --short) SIZES=1000,10000; STEPS=${STEPS:-7} ;;
        --sizes=*) SIZES=${a#--sizes=} ;;
        -*) echo "unknown option $a" >&2; exit 2 ;;
        *) BUILDDIR=$a ;;
        esac
done
[ -x "$BUILDDIR/bench/step-cost" ] || ninja -C "$BUILDDIR" bench/step-cost >/dev/null
command -v git >/dev/null || { echo "git is needed for the repositories and the baselines" >&2; exit 1; }
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$BUILDDIR/bench/step-cost" --sizes="$SIZES" --steps="${STEPS:-15}" ${OLD_STEPS:+--old-steps="$OLD_STEPS"}
