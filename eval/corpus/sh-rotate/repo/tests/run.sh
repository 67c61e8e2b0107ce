#!/bin/sh
. "$(dirname "$0")/tap.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for t in 20240101-0100 20240102-0100 20240103-0100 20240104-0100 20240105-0100; do : > "$d/backup-$t.tar"; done
: > "$d/notes.txt"
sh ./rotate.sh "$d" 3
is "$(ls "$d" | grep -c '^backup-')" 3 "three backups kept"
[ -e "$d/backup-20240105-0100.tar" ]; ok $? "the newest is kept"
[ ! -e "$d/backup-20240102-0100.tar" ]; ok $? "an old one is gone"
[ -e "$d/notes.txt" ]; ok $? "other files stay"
sh ./rotate.sh "$d" 5
is "$(ls "$d" | grep -c '^backup-')" 3 "keeping more than there are removes nothing"
done_testing
