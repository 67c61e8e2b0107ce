#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what building, testing and the demo need, from Debian's packages.
set -euo pipefail

packages=(
        # build
        gcc meson ninja-build pkg-config
        libsystemd-dev libgit2-dev libcurl4-openssl-dev libjson-c-dev libseccomp-dev liburing-dev libpq-dev
        # the fleet's database: the fleet tests and benchmark start a private
        # PostgreSQL 15 cluster (tests/fleet/pg.sh)
        postgresql
        # the fleet's central journal: systemd-journal-upload on each host,
        # systemd-journal-remote where the audit reads it
        # (tests/integration/fleet-audit.sh)
        systemd-journal-remote
        # the real services the integration tests and the demo boot
        systemd systemd-sysv dbus polkitd pkexec
        # tools the tests drive them with
        git python3 util-linux procps passwd iproute2 man-db groff-base
        # the egress proxy test fetches through it with curl; the network test's
        # tasks install from a package registry with the system's pip
        curl python3-pip
        # agentfabctl's completion is installed where bash-completion says
        bash-completion
        # the ssh server the ssh:// repository scenario fetches from, and the
        # certificate and trust store of the https:// one
        openssh-server openssl ca-certificates
        # the sandbox benchmark's baseline
        bubblewrap
        # compiling the SELinux policy module
        selinux-policy-dev make
        # the libFuzzer targets (tools/fuzz.sh)
        clang libclang-rt-14-dev
        # checkers the review stage's tests run in the sandbox
        shellcheck cppcheck
        # the leave-out scenarios' Python project runs pytest (.pytest_cache)
        python3-pytest
        # the first prompt's symbol outline, run in the sandbox from the
        # host's /usr (tests/integration/agent-outline.sh)
        universal-ctags
        # the crash test's recording disk (tests/crash/blklog.c) and the
        # images it mounts
        libfuse3-dev fuse3 e2fsprogs
)

missing=()
for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# The network test's tasks install from an npm registry with npm (and
# node). Asked for by command, not by package: a nodejs from NodeSource
# carries its own npm and conflicts with Debian's npm package.
command -v npm >/dev/null || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
        if [ "$(id -u)" != 0 ]; then
                echo "Missing packages: ${missing[*]} (run as root to install them)" >&2
                exit 1
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
