#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# src/daemon's rooms include one way (docs/ARCHITECTURE.md):
#
#   task/ <- record/ <- host/ <- agent/ <- fleet/ <- manager.[ch] <- bus/ <- agentfabd.c
#
# A file may include headers of its own room and of rooms to its left, never
# of a room to its right; and from agent/, a file elsewhere includes only
# agent.h, the room's one header. Prints TAP: one check per file.
set -uo pipefail

src=${1:-$(cd "$(dirname "$0")/../../src/daemon" && pwd)}
cd "$src" || { echo "1..0 # SKIP no src/daemon at '$src'"; exit 0; }

rank_of() {
        case $1 in
        task/*) echo 1 ;; record/*) echo 2 ;; host/*) echo 3 ;; agent/*) echo 4 ;; fleet/*) echo 5 ;;
        manager.c|manager.h) echo 6 ;; bus/*) echo 7 ;; agentfabd.c) echo 8 ;;
        *) echo 0 ;;
        esac
}

declare -A where
while IFS= read -r f; do
        where[$(basename "$f")]=$f
done < <(find . -name '*.h' | sed 's|^\./||')

files=$(find . -name '*.[ch]' | sed 's|^\./||' | sort)
n=0 failed=0
echo "1..$(echo "$files" | wc -l)"
for f in $files; do
        n=$((n + 1))
        me=$(rank_of "$f")
        bad=()
        if [ "$me" = 0 ]; then
                bad+=("is in no room")
        fi
        while IFS= read -r h; do
                dest=${where[$h]:-}
                [ -n "$dest" ] || continue   # not the daemon's: shared/, engine/, ...
                there=$(rank_of "$dest")
                if [ "$there" -gt "$me" ]; then
                        bad+=("includes $dest, a room above it")
                elif [[ $dest == agent/* && $f != agent/* && $dest != agent/agent.h ]]; then
                        bad+=("includes $dest: outside agent/, only agent/agent.h")
                fi
        done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
        if [ "${#bad[@]}" = 0 ]; then
                echo "ok $n - $f"
        else
                failed=$((failed + 1))
                echo "not ok $n - $f ${bad[*]}"
        fi
done
[ "$failed" = 0 ]
