#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The bash completion of agentfabctl, sourced as bash-completion would: a
# verb prefix, a verb's options, an option's values, and task ids from
# "agentfabctl list" (a stand-in agentfabctl on PATH prints a listing).
# TAP output.
set -u
SCRIPT=${1:?usage: test-bash-completion.sh COMPLETION-SCRIPT}
n=0 failed=0
check() {
        local what=$1 want=$2 got=$3
        n=$((n + 1))
        if [[ $got == "$want" ]]; then echo "ok $n - $what"; else echo "not ok $n - $what: got '$got', want '$want'"; failed=$((failed + 1)); fi
}

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cat > "$bin/agentfabctl" <<'EOS'
#!/bin/sh
# what "agentfabctl list --all" prints (without --all, finished tasks are
# left out: the completion must ask for all, to complete their ids too)
case " $* " in *" list --all "*) ;; *) exit 2 ;; esac
printf 'ID            STATE              OWNER   CREATED              GOAL\n'
printf '0123456789ab  running            1000    2026-12-01 10:00:00  Fix add\n'
printf '0123456789cd  failed             1000    2026-12-01 10:01:00  Other\n'
printf 'fedcba987654  succeeded          1000    2026-12-01 10:02:00  Third\n'
printf '\n3 tasks listed.\n'
EOS
chmod +x "$bin/agentfabctl"
export PATH="$bin:$PATH"

# As in an interactive shell: bash-completion's own library first, where installed.
if [ -r /usr/share/bash-completion/bash_completion ]; then
        # shellcheck source=/dev/null
        . /usr/share/bash-completion/bash_completion
fi
# shellcheck source=/dev/null
. "$SCRIPT"
complete -p agentfabctl >/dev/null 2>&1 && check "completion registered for agentfabctl" 1 1 || check "completion registered" 1 0

# complete WORDS...: COMPREPLY for the last word, sorted, space-separated.
complete_words() {
        COMP_WORDS=("$@")
        COMP_CWORD=$(($# - 1))
        COMPREPLY=()
        _agentfabctl agentfabctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf '%s\n' "${COMPREPLY[@]}" | sort | xargs
}

check "verb prefix 're'" "reject replay reset resume review" "$(complete_words agentfabctl re)"
check "verb prefix 'a'" "amend approve audit" "$(complete_words agentfabctl a)"
check "every verb" 20 "$(complete_words agentfabctl '' | wc -w)"
check "options of amend" "--acceptance= --goal=" "$(complete_words agentfabctl amend 0123456789ab -- | xargs -n1 | grep -E -- '^--(goal|acceptance|repo)=' | sort | xargs)"
check "audit --verify" "--verify" "$(complete_words agentfabctl audit 0123456789ab --ve | xargs -n1 | grep -- '--verify')"
check "submit --ref=" "--ref=" "$(complete_words agentfabctl submit --re | xargs -n1 | grep -- '--ref=')"
check "task ids from list" "0123456789ab 0123456789cd" "$(complete_words agentfabctl status 0123)"
check "all task ids" "0123456789ab 0123456789cd fedcba987654" "$(complete_words agentfabctl approve '')"
check "reset's second argument" "base" "$(complete_words agentfabctl reset 0123456789ab b)"
check "export formats" "bundle" "$(complete_words agentfabctl export 0123456789ab --format=b)"
check "list --state= values" "awaiting-approval" "$(complete_words agentfabctl list --state=aw)"
check "list options" "--all --state=" "$(complete_words agentfabctl list -- | xargs -n1 | grep -E -- '^--(all|state=)$' | sort | xargs)"
check "no id after the id" "" "$(complete_words agentfabctl status 0123456789ab '')"
check "nothing positional for submit" "" "$(complete_words agentfabctl submit '')"
check "eval's built-in agents" "oracle-wrong-first" "$(complete_words agentfabctl eval --agent=oracle-wr)"
check "approve --limit= names" "max_cost= max_cpu_sec=" "$(complete_words agentfabctl approve 0123456789ab --limit=max_c | xargs -n1 | grep -E '^max_c(pu_sec|ost)=$' | xargs)"
check "nothing positional for usage" "" "$(complete_words agentfabctl usage '')"

echo "1..$n"
[ "$failed" = 0 ]
