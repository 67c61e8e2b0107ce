#!/bin/sh
# rotate.sh DIR KEEP: keeps the KEEP newest backup-*.tar files of DIR (by
# name: they are named backup-YYYYMMDD-HHMM.tar) and removes the others.
set -eu
dir=$1
keep=$2
count=$(ls "$dir" | grep -c '^backup-.*\.tar$' || true)
remove=$((count - keep - 1))
[ "$remove" -gt 0 ] || exit 0
ls "$dir" | grep '^backup-.*\.tar$' | sort | head -n "$remove" | while read -r f; do
        rm -f "$dir/$f"
done
