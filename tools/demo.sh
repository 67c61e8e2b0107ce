#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The demo: a task through the whole factory, end to end, on a real systemd.
#
#   bash tools/demo.sh             the demo (as root; the README's first command)
#   bash tools/demo.sh --record    the same against the scripted model server,
#                                  writing tools/demo-transcript.jsonl anew
#
# Installs dependencies, builds, installs agentfab into a system booted with
# systemd as PID 1 (in private namespaces over an overlay of /, so the host
# is left as it was; with HARNESS_HOST_SYSTEMD=1 on a host where systemd is
# PID 1, into the host itself). Then what sets the factory apart:
#  1. the ordinary user demo submits a task (make a C program's failing
#     test pass, and have CI run it); the agent plans, edits and tests in
#     its sandbox, and its step that adds a CI workflow trips the
#     protected-path breaker: the task waits for a person;
#  2. ada, an administrator but not root, approves it with agentfabctl at a
#     terminal; polkit asks for her password through pkttyagent, in a
#     prompt that names the task, its owner and the breaker (the demo types
#     the password, which it made up at random);
#  3. the review stage runs the repository's checker (gcc's warnings, named
#     in its .agentfab.md) on the final tree: its warnings on the lines the
#     task changed are in the summary;
#  4. agentfabd runs the tests itself on the final tree, and the delivered
#     tip's trailers record it (Agentfab-Tests: pass (...)) with the
#     review's result; git log on the fetched branch shows them.
# It checks those four and ends with "N passed, N failed" (exit 1 if one is
# missing), and says how long it took after the build.
#
# No model weights can be had here, and the demo needs no model server: the
# default model profile is of kind "replay" and plays back
# tools/demo-transcript.jsonl, which agentfabd recorded (its own
# transcript.jsonl of the task) with --record from the scripted
# OpenAI-compatible server of the tests (tests/model-server.py --by-step
# --script tools/demo-model.json). Point a [Model] profile at a real
# endpoint (agentfab.conf(5)) to have a real model do the same.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD

RECORD=0
case "${1:-}" in
        "") ;;
        --record) RECORD=1 ;;
        *) echo "usage: bash tools/demo.sh [--record]" >&2; exit 2 ;;
esac

bash tools/install-deps.sh || exit 1
meson setup build >/dev/null 2>&1 || meson setup --reconfigure build >/dev/null || exit 1
ninja -C build >/dev/null || exit 1
T0=$(date +%s%N)        # the demo's own time starts after the build

BUILDDIR=$TOP/build
. tests/integration/lib/harness.sh

# ada's password: made up now, known only to this script, typed at the prompt.
ADA_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
GOAL="Make main() return success, and have CI run make test"
MODEL_PID=
PORT=
HOST_INSTALL=0
WORK=$(mktemp -d /tmp/agentfab-demo.XXXXXX)
demo_cleanup() {
        [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null
        if [ "$HOST_INSTALL" = 1 ]; then
                rm -f /etc/polkit-1/rules.d/40-agentfab-demo.rules
                userdel -r ada >/dev/null 2>&1
        fi
        rm -rf "$WORK"
}
# harness_boot keeps this and runs it before its own teardown.
trap demo_cleanup EXIT

if [ "$RECORD" = 1 ]; then
        PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        # The harness shares the host's network namespace: agentfabd inside
        # reaches the server on 127.0.0.1.
        python3 tests/model-server.py --by-step --script tools/demo-model.json --port "$PORT" \
                --log "$WORK/requests.jsonl" > "$WORK/model.out" 2>&1 &
        MODEL_PID=$!
        for _ in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done
fi

demo_config() {
        mkdir -p "$1/etc/agentfab/agentfab.conf.d" "$1/usr/share/agentfab/demo"
        cp tools/demo-transcript.jsonl "$1/usr/share/agentfab/demo/transcript.jsonl"
        cp tools/demo-prompt.py "$1/usr/share/agentfab/demo/prompt.py"
        if [ "$RECORD" = 1 ]; then
                printf '[Model]\nName=default\nEndpoint=http://127.0.0.1:%s/v1\nModel=scripted-demo\nTimeoutSec=20\n' "$PORT"
        else
                printf '[Model]\nName=default\nKind=replay\nReplayPath=/usr/share/agentfab/demo/transcript.jsonl\n'
        fi > "$1/etc/agentfab/agentfab.conf.d/50-demo.conf"
}

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf"
        journalctl --root="$R" --update-catalog
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1
        demo_config "$R"
        local u
        for u in demo ada; do
                grep -q "^$u:" "$R/etc/passwd" || useradd --root "$R" -s /bin/bash "$u"
                rm -rf "${R:?}/home/$u"; mkdir -p "$R/home/$u"
                chown "$(awk -F: -v u="$u" '$1 == u {print $3 ":" $4}' "$R/etc/passwd")" "$R/home/$u"
        done
        # ada is this system's administrator, as Debian's polkit knows them
        # (the group sudo), and its only one: the prompt asks for her.
        usermod --root "$R" -c "Ada (administrator)" ada
        echo "ada:$ADA_PASSWORD" | chpasswd --root "$R"
        gpasswd --root "$R" -M ada sudo >/dev/null
}

if [ "${HARNESS_HOST_SYSTEMD:-}" = 1 ] && [ -d /run/systemd/system ]; then
        meson install -C build --quiet --no-rebuild
        demo_config /
        systemctl enable --now agentfab.socket agentfab-launcher.socket
        id demo >/dev/null 2>&1 || useradd -m -s /bin/bash demo
        # On a real host ada is not added to the group sudo: a rule makes
        # her the administrator of agentfab's actions alone, and both go
        # when the demo ends.
        id ada >/dev/null 2>&1 && { echo "A user ada exists already; the demo would change her password."; exit 1; }
        useradd -m -c "Ada (administrator)" -s /bin/bash ada
        echo "ada:$ADA_PASSWORD" | chpasswd
        cat > /etc/polkit-1/rules.d/40-agentfab-demo.rules <<'EOF'
// tools/demo.sh: ada answers for agentfab's actions; removed when it ends.
polkit.addAdminRule(function(action, subject) {
        if (action.id.indexOf("org.agentfab.") == 0)
                return ["unix-user:ada"];
        return null;
});
EOF
        HOST_INSTALL=1
fi

harness_boot || exit 1
[ "$HARNESS_MODE" = namespace ] && echo "(systemd booted as PID 1 in private namespaces in ${HARNESS_BOOT_MS} ms)"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
note() { printf '\033[2m# %s\033[0m\n' "$*"; }
as_demo() { step "$*"; hx_as demo "$@"; }
as_root() { step "$*"; hx "$@"; }
prop() { hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$1" org.agentfab.Task1 "$2" 2>/dev/null |
        sed 's/^[a-z]* "\{0,1\}//; s/"$//'; }
# wait_state ID STATE...: until the task is in one of the states (60 s at most).
wait_state() {
        local id=$1 s w end=$((SECONDS + 60)); shift
        while [ "$SECONDS" -lt "$end" ]; do
                s=$(prop "$id" State)
                for w in "$@"; do [ "$s" = "$w" ] && return 0; done
                case "$s" in succeeded|failed|cancelled) return 1 ;; esac
                sleep 0.1
        done
        return 1
}

PASSED=0 FAILED=0
ok()   { PASSED=$((PASSED + 1)); CHECKS+=("  ok: $*"); }
fail() { FAILED=$((FAILED + 1)); CHECKS+=("  FAIL: $*"); }
CHECKS=()

as_root systemctl status --no-pager agentfab.socket agentfab-launcher.socket | grep -E '●|○|Active:|Listen:'

# The repository: a C program whose test fails, and the project's notes for
# agentfab, whose checker the review stage runs on the final tree.
hx_as demo bash -s <<'EOS'
set -e
cd ~ && rm -rf hello && git init -q hello && cd hello
cat > main.c <<'EOF'
#include <stdio.h>

int main(void) {
        return 1;
}
EOF
printf 'test: main\n\t./main && echo "ok 1 - main() returns success"\n\nmain: main.c\n\tcc -o main main.c\n' > Makefile
cat > .agentfab.md <<'EOF'
# hello

```agentfab
# gcc's warnings, on the lines a task changed
checker: cc -fsyntax-only -Wall -Wextra main.c 2>&1
```
EOF
echo main > .gitignore
git add . && git -c user.name=Demo -c user.email=demo@example.com commit -q -m "A program that fails its test"
chmod -R a+rX ~
EOS
as_demo cat /home/demo/hello/.agentfab.md

T_SUBMIT=$(date +%s%N)
step "agentfabctl submit --repo ~/hello --goal '$GOAL' --test 'make test' --ref DEMO-1   # as user demo"
ID=$(hx_as demo agentfabctl submit --repo /home/demo/hello --goal "$GOAL" \
        --acceptance "make test exits 0; a CI workflow runs make test" --test "make test" --ref DEMO-1 --limit max_steps=20)
echo "$ID"
[[ $ID =~ ^[0-9a-f]{12}$ ]] || { echo "submit failed"; exit 1; }

# 1. The breaker.
wait_state "$ID" awaiting-approval
STATE=$(prop "$ID" State) BREAKER=$(prop "$ID" Breaker)
as_demo agentfabctl status "$ID"
as_root busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$ID" org.agentfab.Task1 State Breaker FreezerState
if [ "$STATE" = awaiting-approval ] && [ "$BREAKER" = protected-path ]; then
        ok "the step that added a CI workflow tripped breaker protected-path; the task waited for a person"
else
        fail "no breaker: the task is $STATE ($BREAKER): $(prop "$ID" Reason)"
fi

# 2. An administrator approves, through polkit's prompt on her terminal.
step "agentfabctl approve $ID --comment 'A CI workflow that runs make test is fine'   # as ada, an administrator, at her terminal"
note "ada is not the owner: finding the task needs org.agentfab.manage, approving it org.agentfab.approve;"
note "both are auth_admin_keep, so polkit asks (pkttyagent, which agentfabctl starts on a terminal); the demo types her password"
printf '%s\n' "$ADA_PASSWORD" | hx_as ada python3 /usr/share/agentfab/demo/prompt.py \
        agentfabctl approve "$ID" --comment "A CI workflow that runs make test is fine" > "$WORK/prompt.out"
APPROVE_RC=$?
PROMPT_OUT=$(tr -d '\r' < "$WORK/prompt.out")
echo "$PROMPT_OUT"
ADA_UID=$(hx id -u ada)
if [ "$APPROVE_RC" = 0 ] && grep -q "AUTHENTICATING FOR org.agentfab.approve" <<<"$PROMPT_OUT" &&
   grep -q "task $ID of user demo that tripped breaker protected-path" <<<"$PROMPT_OUT" &&
   hx journalctl -q -o json AGENTFAB_TASK="$ID" AGENTFAB_EVENT=approve | grep -q "\"AGENTFAB_UID\":\"$ADA_UID\""; then
        ok "ada approved through polkit's prompt, which named the task, its owner and the breaker; the journal has it"
else
        fail "approval through polkit (agentfabctl exit $APPROVE_RC)"
fi

wait_state "$ID" succeeded
as_demo timeout 60 agentfabctl watch "$ID"

# 3. The review's findings, in the summary.
as_demo agentfabctl review "$ID"
as_demo agentfabctl summary "$ID" | tee "$WORK/summary.md"
if grep -q '^## Review' "$WORK/summary.md" && grep -q "main.c:3.*unused parameter .argc." "$WORK/summary.md"; then
        ok "the review's warnings on the changed line are in the summary"
else
        fail "the summary has no review findings"
fi

# 4. The delivered tip's trailers: the test evidence, the review, the approval.
as_demo agentfabctl fetch "$ID"
as_demo git -C /home/demo/hello log --format=full "agentfab/$ID"
TIP=$(hx_as demo git -C /home/demo/hello log -1 --format=%B "agentfab/$ID")
if grep -q '^Agentfab-Tests: pass (make test, exit 0, 1 test)$' <<<"$TIP" && grep -q '^Agentfab-Review: 0 errors, 2 warnings' <<<"$TIP" &&
   grep -q '^Agentfab-Approved: step [0-9]*, breaker protected-path, by ada (uid [0-9]*)$' <<<"$TIP" &&
   [ "$(prop "$ID" State)" = succeeded ]; then
        ok "the delivered tip records the tests agentfabd ran on its tree, the review, and ada's approval"
else
        fail "the delivered tip lacks its evidence (the task is $(prop "$ID" State))"
fi
as_demo git -C /home/demo/hello diff HEAD "agentfab/$ID"
as_root journalctl --no-pager -x -n 2 AGENTFAB_TASK="$ID" AGENTFAB_EVENT=breaker
as_root agentfabctl audit "$ID" --verify
T_AUDIT=$(date +%s%N)

if [ "$RECORD" = 1 ]; then
        hx cat "/var/lib/agentfab/tasks/$ID/transcript.jsonl" > tools/demo-transcript.jsonl &&
                echo && echo "Recorded tools/demo-transcript.jsonl ($(wc -l < tools/demo-transcript.jsonl) exchanges)."
fi
harness_teardown
T1=$(date +%s%N)

echo
[ "$FAILED" = 0 ] &&
        echo "Task $ID went through agentfabd, its sandbox, polkit and git under a real systemd, D-Bus, polkitd and journald."
printf '%s\n' "${CHECKS[@]}"
secs() { echo "$(( $1 / 1000000000 )).$(( $1 / 100000000 % 10 )) s"; }
echo "The demo took $(secs $((T1 - T0))) after the build: $(secs $((T_AUDIT - T_SUBMIT))) from the submission to the audit," \
        "the rest preparing, booting and tearing down the system."
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
