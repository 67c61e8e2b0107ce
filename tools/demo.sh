#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The demo: what agentfab does today, end to end, on a real systemd.
# Installs dependencies, builds, installs agentfab into a system booted with
# systemd as PID 1 (in private namespaces over an overlay of /, so the host
# is left as it was; with HARNESS_HOST_SYSTEMD=1 on a host where systemd is
# PID 1, into the host itself), then submits a task as an ordinary user and
# shows it through busctl, agentfabctl and journalctl.
set -uo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD

bash tools/install-deps.sh || exit 1
meson setup build >/dev/null 2>&1 || meson setup --reconfigure build >/dev/null || exit 1
ninja -C build >/dev/null || exit 1

BUILDDIR=$TOP/build
. tests/integration/lib/harness.sh

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf"
        journalctl --root="$R" --update-catalog
        systemctl --root="$R" enable agentfab.socket >/dev/null 2>&1
        grep -q '^demo:' "$R/etc/passwd" || useradd --root "$R" -s /bin/bash demo
        rm -rf "$R/home/demo"; mkdir -p "$R/home/demo"
        chown "$(awk -F: '$1 == "demo" {print $3 ":" $4}' "$R/etc/passwd")" "$R/home/demo"
}

if [ "${HARNESS_HOST_SYSTEMD:-}" = 1 ] && [ -d /run/systemd/system ]; then
        meson install -C build --quiet --no-rebuild
        systemctl enable --now agentfab.socket
        id demo >/dev/null 2>&1 || useradd -m -s /bin/bash demo
fi

harness_boot || exit 1
[ "$HARNESS_MODE" = namespace ] && echo "(systemd booted as PID 1 in private namespaces in ${HARNESS_BOOT_MS} ms)"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
as_demo() { step "$*"; hx_as demo "$@"; }
as_root() { step "$*"; hx "$@"; }

as_root systemctl status --no-pager agentfab.socket agentfab.service | grep -E '●|○|Active:|Listen:|TriggeredBy'
hx_as demo bash -c 'cd ~ && git init -q hello && cd hello && printf "int main(void) { return 1; }\n" > main.c &&
        printf "test:\n\tcc -o main main.c && ./main\n" > Makefile && git add . &&
        git -c user.name=Demo -c user.email=demo@example.com commit -q -m "A program that fails"'
step "agentfabctl submit --repo ~/hello --goal 'Make main() return success' --test 'make test'   # as user demo"
ID=$(hx_as demo agentfabctl submit --repo /home/demo/hello --goal "Make main() return success" \
        --acceptance "make test exits 0" --test "make test" --limit max_steps=20)
echo "$ID"
as_root systemctl is-active agentfab.service
as_demo agentfabctl list
as_demo agentfabctl status "$ID"
as_root busctl tree org.agentfab.Factory1
as_root busctl introspect org.agentfab.Factory1 "/org/agentfab/Factory1/task/$ID" org.agentfab.Task1
as_root busctl get-property org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 Version ActiveTasks
as_demo agentfabctl --no-ask-password approve "$ID"
as_demo agentfabctl cancel "$ID"
as_demo agentfabctl watch "$ID"
as_root journalctl --no-pager -o verbose AGENTFAB_TASK="$ID" | grep -E '^[A-Z][a-z]{2} |MESSAGE=|MESSAGE_ID=|AGENTFAB_|_SYSTEMD_UNIT='
as_root journalctl --no-pager -x -n 4 AGENTFAB_TASK="$ID"
as_root agentfabctl audit "$ID"
harness_teardown
echo
echo "Demo done: the task went through agentfabd under a real systemd, D-Bus, polkit and journald."
