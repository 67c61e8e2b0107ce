#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The demo: a task through the whole factory, end to end, on a real systemd.
# Installs dependencies, builds, installs agentfab into a system booted with
# systemd as PID 1 (in private namespaces over an overlay of /, so the host
# is left as it was; with HARNESS_HOST_SYSTEMD=1 on a host where systemd is
# PID 1, into the host itself). An ordinary user submits a task (a C program
# whose test fails); the agent plans, reads, edits and runs the tests in its
# sandbox, commits each step and delivers a branch, which the user fetches.
# No model weights can be had here, and the demo needs no model server: the
# default model profile is of kind "replay" and plays back
# tools/demo-transcript.jsonl, a transcript recorded by agentfabd from the
# scripted OpenAI-compatible server of the tests (tests/model-server.py
# --by-step --script tools/demo-model.json). Point a [Model] profile at a
# real endpoint (agentfab.conf(5)) to have a real model do the same.
set -uo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD

bash tools/install-deps.sh || exit 1
meson setup build >/dev/null 2>&1 || meson setup --reconfigure build >/dev/null || exit 1
ninja -C build >/dev/null || exit 1

BUILDDIR=$TOP/build
. tests/integration/lib/harness.sh

demo_config() {
        mkdir -p "$1/etc/agentfab/agentfab.conf.d" "$1/usr/share/agentfab/demo"
        cp tools/demo-transcript.jsonl "$1/usr/share/agentfab/demo/transcript.jsonl"
        printf '[Model]\nName=default\nKind=replay\nReplayPath=/usr/share/agentfab/demo/transcript.jsonl\n' \
                > "$1/etc/agentfab/agentfab.conf.d/50-demo.conf"
}

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf"
        journalctl --root="$R" --update-catalog
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1
        demo_config "$R"
        grep -q '^demo:' "$R/etc/passwd" || useradd --root "$R" -s /bin/bash demo
        rm -rf "$R/home/demo"; mkdir -p "$R/home/demo"
        chown "$(awk -F: '$1 == "demo" {print $3 ":" $4}' "$R/etc/passwd")" "$R/home/demo"
}

if [ "${HARNESS_HOST_SYSTEMD:-}" = 1 ] && [ -d /run/systemd/system ]; then
        meson install -C build --quiet --no-rebuild
        demo_config /
        systemctl enable --now agentfab.socket agentfab-launcher.socket
        id demo >/dev/null 2>&1 || useradd -m -s /bin/bash demo
fi

harness_boot || exit 1
[ "$HARNESS_MODE" = namespace ] && echo "(systemd booted as PID 1 in private namespaces in ${HARNESS_BOOT_MS} ms)"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
as_demo() { step "$*"; hx_as demo "$@"; }
as_root() { step "$*"; hx "$@"; }

as_root systemctl status --no-pager agentfab.socket agentfab-launcher.socket | grep -E '●|○|Active:|Listen:'
hx_as demo bash -c 'cd ~ && git init -q hello && cd hello && printf "int main(void) { return 1; }\n" > main.c &&
        printf "test:\n\tcc -o main main.c && ./main\n" > Makefile && echo main > .gitignore && git add . &&
        git -c user.name=Demo -c user.email=demo@example.com commit -q -m "A program that fails" && chmod -R a+rX ~'
step "agentfabctl submit --repo ~/hello --goal 'Make main() return success' --test 'make test'   # as user demo"
ID=$(hx_as demo agentfabctl submit --repo /home/demo/hello --goal "Make main() return success" \
        --acceptance "make test exits 0" --test "make test" --limit max_steps=20)
echo "$ID"
as_demo timeout 180 agentfabctl watch "$ID"
as_demo agentfabctl status "$ID"
as_root busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$ID" org.agentfab.Task1 State Step HeadCommit Checkpoints
as_demo agentfabctl logs "$ID"
as_demo agentfabctl fetch "$ID"
as_demo git -C /home/demo/hello log --format=full "agentfab/$ID"
as_demo git -C /home/demo/hello diff HEAD "agentfab/$ID"
as_demo agentfabctl summary "$ID"
as_root journalctl --no-pager -o verbose AGENTFAB_TASK="$ID" AGENTFAB_EVENT=step | grep -E '^[A-Z][a-z]{2} |MESSAGE=|AGENTFAB_STEP|AGENTFAB_COMMIT'
as_root journalctl --no-pager -x -n 3 AGENTFAB_TASK="$ID" AGENTFAB_EVENT=delivered
as_root agentfabctl audit "$ID"
harness_teardown
echo
echo "Demo done: task $ID went through agentfabd, its sandbox and git under a real systemd, D-Bus, polkit and journald."
