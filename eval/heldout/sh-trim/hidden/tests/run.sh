#!/bin/sh
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = "$2" ]; then echo "ok $n - $3"; else echo "not ok $n - $3"; failed=$((failed + 1)); fi; }
check "$(printf 'a  \nb\n' | sh ./trim.sh | od -c | head -1)" "$(printf 'a\nb\n' | od -c | head -1)" "spaces"
check "$(printf 'a\t \t\n' | sh ./trim.sh | od -c | head -1)" "$(printf 'a\n' | od -c | head -1)" "tabs and spaces"
echo "1..$n"
[ "$failed" = 0 ]
