#!/bin/sh
# sizes.sh DIR: prints "BYTES NAME" for each regular file in DIR, largest first.
set -eu
for f in $(ls "$1"); do
        [ -f "$1/$f" ] || continue
        printf '%s %s\n' "$(wc -c < "$1/$f" | tr -d ' ')" "$f"
done | sort -rn
