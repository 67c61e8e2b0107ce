#!/bin/sh
. "$(dirname "$0")/tap.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf 'aaaa' > "$d/big file.txt"
printf 'a' > "$d/small"
mkdir "$d/sub dir"
out=$(sh ./sizes.sh "$d")
is "$(echo "$out" | head -1)" "4 big file.txt" "a name with a space, largest first"
is "$(echo "$out" | sed -n 2p)" "1 small" "then the small one"
is "$(echo "$out" | wc -l | tr -d ' ')" 2 "directories are left out"
done_testing
