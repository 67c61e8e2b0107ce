# TAP helpers for the shell tests.
n=0
failed=0
ok() {
        n=$((n + 1))
        if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
is() {
        if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"; echo "# got '$1', expected '$2'"; fi
}
done_testing() {
        echo "1..$n"
        [ "$failed" = 0 ]
}
