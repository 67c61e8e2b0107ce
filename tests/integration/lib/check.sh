# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The checks of the integration scripts, counted and printed one way
# (sourced by each script; tools/test.sh's run_counted reads the last line):
#
#   ok WHAT...              a check held:         "  ok: WHAT"
#   fail WHAT...            a check failed:       "  FAIL: WHAT"; then the
#                           script's check_on_fail WHAT..., if it defines one
#   skip WHAT...            a check not made here: "  skip: WHAT"
#   check WHAT CMD...       ok if CMD succeeds (its output is dropped)
#   check_flag NAME FLAG DETAIL
#                           ok "NAME: DETAIL" if FLAG is 1, else fail
#   expect_exit CODE WHAT CMD...
#                           ok if CMD exits with exactly CODE
#   expect_refused EXPECTED WHAT CMD...
#                           CMD must fail, and fail the way EXPECTED says:
#                             N          its exit status is N (1-255)
#                             N:REGEX    that, and its output matches REGEX
#                             REGEX      its output matches REGEX, e.g. the
#                                        D-Bus error's name (dbus-send prints
#                                        it) or the reason
#                           (REGEX: grep -E, over stdout and stderr together)
#   run_group NAME [CMD...] runs CMD (default: NAME) as one counted check:
#                           it passes if none of the checks within failed
#   check_summary           "N skipped" if any, then, as the last line,
#                           "N passed, N failed"; returns 1 if any failed
#   check_skip_all REASON   the whole script cannot run here: says why,
#                           counts one skip, prints the summary, exits 0
#
# After check, expect_exit and expect_refused, CHECK_RC is the command's
# exit status and CHECK_OUT its output, for checks that look further.
# PASSED, FAILED, SKIPPED and FAILED_NAMES (the first word of each failed
# check, or the group's name) are the counts so far.

PASSED=0
FAILED=0
SKIPPED=0
FAILED_NAMES=()
CHECK_RC=0
CHECK_OUT=
CHECK_GROUP=
CHECK_GROUP_FAILED=0

ok() {
        echo "  ok: $*"
        [ -n "$CHECK_GROUP" ] || PASSED=$((PASSED + 1))
}

fail() {
        local first=${1:-}
        echo "  FAIL: $*"
        if [ -n "$CHECK_GROUP" ]; then
                CHECK_GROUP_FAILED=1
        else
                FAILED=$((FAILED + 1))
                FAILED_NAMES+=("${first%%[ :]*}")
        fi
        if declare -F check_on_fail >/dev/null; then
                check_on_fail "$@"
        fi
        return 0
}

skip() {
        echo "  skip: $*"
        [ -n "$CHECK_GROUP" ] || SKIPPED=$((SKIPPED + 1))
}

check() {
        local what=$1
        shift
        check_run_ "$@"
        if [ "$CHECK_RC" = 0 ]; then ok "$what"; else fail "$what (exit $CHECK_RC)"; fi
}

check_flag() {
        if [ "$2" = 1 ]; then ok "$1: $3"; else fail "$1: $3"; fi
}

# check_run_ CMD...: runs CMD with its output in a file, not a pipe (a
# process it leaves behind must not hold the check up), into CHECK_RC and
# CHECK_OUT.
check_run_() {
        local f=${TMPDIR:-/tmp}/agentfab-check.$$
        CHECK_RC=0
        "$@" >"$f" 2>&1 || CHECK_RC=$?
        CHECK_OUT=$(cat "$f" 2>/dev/null)
        rm -f "$f"
}

# The output, shortened to what fits on a line of a failure.
check_output_head_() {
        local s=${1//$'\n'/ | }
        [ "${#s}" -le 300 ] || s="${s:0:300}..."
        printf '%s' "$s"
}

expect_exit() {
        local want=$1 what=$2
        shift 2
        check_run_ "$@"
        if [ "$CHECK_RC" = "$want" ]; then
                ok "$what"
        else
                fail "$what: exit $CHECK_RC, expected $want: $(check_output_head_ "$CHECK_OUT")"
        fi
}

expect_refused() {
        local expected=$1 what=$2 want_rc='' want_re=''
        shift 2
        if [[ $expected =~ ^[0-9]+$ ]]; then
                want_rc=$expected
        elif [[ $expected =~ ^([0-9]+):(.*)$ ]]; then
                want_rc=${BASH_REMATCH[1]} want_re=${BASH_REMATCH[2]}
        else
                want_re=$expected
        fi
        check_run_ "$@"
        if [ "$CHECK_RC" = 0 ]; then
                fail "$what: not refused (exit 0): $(check_output_head_ "$CHECK_OUT")"
        elif [ -n "$want_rc" ] && [ "$CHECK_RC" != "$want_rc" ]; then
                fail "$what: exit $CHECK_RC, expected $want_rc: $(check_output_head_ "$CHECK_OUT")"
        elif [ -n "$want_re" ] && ! grep -qE -- "$want_re" <<<"$CHECK_OUT"; then
                fail "$what: exit $CHECK_RC, output does not match '$want_re': $(check_output_head_ "$CHECK_OUT")"
        else
                ok "$what"
        fi
}

run_group() {
        local name=$1
        shift
        [ "$#" -gt 0 ] || set -- "$name"
        echo "=== $name"
        CHECK_GROUP=$name CHECK_GROUP_FAILED=0
        "$@"
        CHECK_GROUP=
        if [ "$CHECK_GROUP_FAILED" = 0 ]; then
                PASSED=$((PASSED + 1)); echo "PASS $name"
        else
                FAILED=$((FAILED + 1)); FAILED_NAMES+=("$name"); echo "FAIL $name"
        fi
}

check_summary() {
        [ "$SKIPPED" = 0 ] || echo "$SKIPPED skipped"
        echo "$PASSED passed, $FAILED failed"
        [ "$FAILED" = 0 ]
}

check_skip_all() {
        echo "$*; skipping"
        SKIPPED=$((SKIPPED + 1))
        check_summary
        exit 0
}
