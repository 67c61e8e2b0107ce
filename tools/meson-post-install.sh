#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# After "meson install" on a live system: create the user, index the journal
# catalog, and let systemd and dbus-daemon see the new files. A DESTDIR
# (package or image build) install leaves all of that to the target system.
set -e
[ -z "${DESTDIR:-}" ] || exit 0
command -v systemd-sysusers >/dev/null && systemd-sysusers "${MESON_INSTALL_PREFIX:-/usr}/lib/sysusers.d/agentfab.conf" || true
command -v journalctl >/dev/null && journalctl --update-catalog || true
if [ -d /run/systemd/system ]; then
        systemctl daemon-reload || true
        busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig >/dev/null 2>&1 || true
fi
