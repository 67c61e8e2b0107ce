# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# harness.sh: run agentfab's integration tests against a real systemd, dbus-daemon,
# polkitd and journald. Source this file from a bash test script; do not execute it.
#
# WHERE SYSTEMD COMES FROM
#   The decision is made in one place, _harness_mode():
#   * "host" mode: HARNESS_HOST_SYSTEMD=1 and /run/systemd/system exists (the host's
#     systemd is PID 1). hx runs commands directly on the host, harness_boot and
#     harness_teardown do nothing, harness_prepare_root is NOT called (install agentfab
#     on the host yourself), HARNESS_ROOT=/ and HARNESS_PID=1.
#   * "namespace" mode (the default, and the fallback when HARNESS_HOST_SYSTEMD=1 is
#     set on a host without systemd as PID 1): harness_boot boots
#     /lib/systemd/systemd --system as PID 1 of new mount, pid, cgroup, uts and ipc
#     namespaces, over an overlay of the host's root filesystem, following
#     shared/docs/systemd-in-namespaces.md: writable cgroup v1 controllers (memory, pids,
#     cpu, cpuacct, name=systemd) and the cgroup2 hierarchy are delegated through child
#     cgroups below this shell's own, so MemoryMax=, TasksMax=, CPUQuota= are enforced;
#     pivot_root (never chroot, which would break user namespaces inside). Everything
#     written inside lands in the overlay's upper directory and vanishes at teardown.
#     The network namespace is the host's: do not start network services inside.
#
# INTERFACE
#   harness_boot        Boot the system. Returns non-zero with a message (after tearing
#                       down) on failure. Installs EXIT, INT, TERM, HUP and PIPE traps
#                       that tear down (a trap the caller had for one of them before is
#                       run first; one set after harness_boot replaces ours, so call
#                       harness_teardown from it), and a watchdog process that tears down
#                       if the calling shell dies without running its traps (SIGKILL).
#   harness_prepare_root ROOT
#                       Optional hook, defined by the caller. Called before PID 1 starts,
#                       in a subshell with `set -e`, with the overlay's root directory
#                       (e.g. `DESTDIR="$1" meson install -C build`, polkit rules, units;
#                       enable a socket with a symlink in
#                       "$1/etc/systemd/system/sockets.target.wants/"). Only the host's
#                       root filesystem is visible in the overlay, not other mounts.
#   hx CMD...           Run CMD as root inside, with a clean environment (PATH, HOME,
#                       LANG=C.UTF-8, no pager, default signal dispositions). stdin is
#                       passed through; returns CMD's exit status, 128+N if a signal N
#                       killed it, 125 if the harness cannot run it at all. CMD runs in
#                       a session of its own (no controlling terminal): Ctrl-C reaches
#                       the test script, whose trap tears the system down.
#   hx_as USER CMD...   The same as USER, via `runuser -u USER --` inside. No PAM
#                       session is registered with logind, on purpose: polkit then
#                       applies the allow_any rules.
#   harness_reboot [reboot|poweroff]
#                       The test system goes down (`systemctl reboot` inside, or a
#                       poweroff) and boots again on the same overlay and state directory,
#                       as a machine on its disk: /run, /tmp and the volatile journal are
#                       new. Processes hx started are ended. Namespace mode only.
#   harness_teardown    Power off, kill what is left, remove the child cgroups, unmount
#                       and delete the base directory. Idempotent. Returns non-zero if
#                       something could not be removed (and says what).
#
# VARIABLES SET
#   HARNESS_MODE         host | namespace
#   HARNESS_BASE         base directory (upper/, work/, root/, console.log, launch.sh)
#   HARNESS_ROOT         root of the booted system as seen from the host (the overlay)
#   HARNESS_PID          host pid of the booted systemd
#   HARNESS_BOOT_MS      wall time from the start of harness_boot until `running`, in ms
#   HARNESS_CONSOLE_LOG  the console of PID 1 (a pty, recorded with script(1))
#   HARNESS_CGROUP_DIRS  (array) the delegated child cgroup directories
#
# VARIABLES READ (all optional)
#   HARNESS_TMPDIR       where to create the base directory (default /tmp); must be on a
#                        file system usable as an overlay upper layer (not overlayfs)
#   HARNESS_HOST_SYSTEMD 1 to use the host's systemd, see above
#   HARNESS_BOOT_TIMEOUT seconds to wait for `running` (default 30)
#   HARNESS_STOP_TIMEOUT seconds to wait for poweroff before killing (default 10)
#   HARNESS_MASK_UNITS   extra units to mask, separated by white space
#   HARNESS_WANTS        extra units pulled in by the boot target at boot
#   HARNESS_SYSTEMD_ARGS extra arguments for PID 1 (e.g. --log-level=debug)
#   HARNESS_SAVE_CONSOLE a file to copy PID 1's console log to at teardown
#   HARNESS_STATE_SIZE   a size (e.g. 512m): /var/lib/agentfab is a tmpfs of that size,
#                        mounted in the harness's own namespace so that it outlives
#                        harness_reboot, and small enough for a test to fill it
#   HARNESS_DEBUG        1 to log the teardown's steps with time stamps
#
# REQUIREMENTS
#   root; bash >= 4.4; util-linux (unshare, nsenter, runuser, mount, pivot_root),
#   bsdutils (script, logger), coreutils >= 8.31 (env --default-signal), systemd,
#   dbus, polkitd, passwd (useradd). All of these are on a Debian 12 system with
#   systemd, dbus and polkitd installed.

# The units that a test system never needs. They are masked in the overlay (not on the
# host), because they either touch state that is not namespaced (the network, the
# clock, sysctls, kernel modules, devices, the firewall), wait for a console, or are
# host services that fail or are slow without their real environment. The boot target
# is narrow as well (see _harness_configure_root), so most of these would not be
# started anyway: masking keeps a socket or a dependency from pulling them in.
_HARNESS_MASKED_UNITS=(
        # consoles and logins on terminals
        getty.target getty@.service serial-getty@.service console-getty.service
        container-getty@.service autovt@.service getty-static.service
        systemd-ask-password-console.path systemd-ask-password-console.service
        systemd-ask-password-wall.path systemd-ask-password-wall.service
        systemd-firstboot.service systemd-vconsole-setup.service
        console-setup.service keyboard-setup.service plymouth-start.service
        plymouth-quit.service plymouth-quit-wait.service plymouth-read-write.service
        # devices, kernel, sysctl, clock: host state, not namespaced
        systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket
        systemd-udev-trigger.service systemd-udev-settle.service systemd-hwdb-update.service
        systemd-sysctl.service procps.service systemd-modules-load.service kmod.service
        kmod-static-nodes.service modprobe@.service systemd-binfmt.service
        proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount
        sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount
        sys-fs-fuse-connections.mount dev-hugepages.mount
        systemd-timesyncd.service systemd-time-wait-sync.service systemd-timedated.service
        dbus-org.freedesktop.timesync1.service dbus-org.freedesktop.timedate1.service
        hwclock.service chrony.service chronyd.service ntp.service ntpsec.service
        openntpd.service systemd-pstore.service systemd-repart.service
        systemd-pcrphase.service systemd-pcrphase-sysinit.service
        systemd-pcrphase-initrd.service systemd-boot-update.service
        systemd-boot-random-seed.service systemd-bless-boot.service
        systemd-random-seed.service systemd-rfkill.service systemd-rfkill.socket
        systemd-backlight@.service systemd-oomd.service systemd-oomd.socket
        systemd-journald-audit.socket auditd.service apparmor.service
        # file systems of the host
        systemd-remount-fs.service systemd-fsck-root.service systemd-fsck@.service
        systemd-quotacheck.service quotaon.service systemd-growfs@.service
        systemd-growfs-root.service systemd-makefs@.service cryptdisks.service
        cryptdisks-early.service blk-availability.service lvm2-monitor.service
        lvm2-lvmpolld.service lvm2-lvmpolld.socket dm-event.service dm-event.socket
        multipathd.service multipathd.socket mdmonitor.service iscsid.service
        iscsid.socket open-iscsi.service e2scrub_reap.service e2scrub_all.service
        e2scrub_all.timer fstrim.service fstrim.timer
        # the network: the namespace shares the host's
        networking.service ifupdown-pre.service ifup@.service ifupdown-wait-online.service
        NetworkManager.service NetworkManager-wait-online.service
        NetworkManager-dispatcher.service systemd-networkd.service
        systemd-networkd.socket systemd-networkd-wait-online.service
        systemd-resolved.service wpa_supplicant.service ModemManager.service
        avahi-daemon.service avahi-daemon.socket dhcpcd.service connman.service
        nftables.service netfilter-persistent.service iptables.service ufw.service
        firewalld.service rpcbind.service rpcbind.socket nfs-client.target
        # host services and maintenance jobs
        postgresql.service postgresql@.service mariadb.service mysql.service
        redis-server.service podman.service podman.socket podman-auto-update.service
        podman-auto-update.timer podman-restart.service podman-clean-transient.service
        podman-kube@.service docker.service docker.socket containerd.service
        ssh.service ssh.socket sshd.service cron.service anacron.service anacron.timer
        atd.service rsyslog.service exim4.service postfix.service nginx.service
        apache2.service unattended-upgrades.service apt-daily.service apt-daily.timer
        apt-daily-upgrade.service apt-daily-upgrade.timer man-db.service man-db.timer
        dpkg-db-backup.service dpkg-db-backup.timer logrotate.service logrotate.timer
        packagekit.service packagekit-offline-update.service snapd.service
        snapd.socket cloud-init.service cloud-init-local.service cloud-config.service
        cloud-final.service qemu-guest-agent.service smartmontools.service
        smartd.service irqbalance.service sysstat.service acpid.service acpid.socket
        bluetooth.service cups.service cups.socket cups-browsed.service
        x11-common.service rc-local.service pam_namespace.service
)

# Clean environment for commands run with hx. SYSTEMD_PAGER/PAGER keep journalctl and
# busctl from starting a pager (and waiting) when a test is run from a terminal.
_HARNESS_ENV=(
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        HOME=/root LANG=C.UTF-8 TERM=dumb SYSTEMD_PAGER=cat PAGER=cat SYSTEMD_COLORS=0
)

_harness_log() {
        printf 'harness: %s\n' "$*" >&2
}

_harness_debug() {
        [[ ${HARNESS_DEBUG:-0} == 1 ]] || return 0
        printf 'harness: [%s] %s\n' "${EPOCHREALTIME:-}" "$*" >&2
}

# The single place that decides where systemd comes from.
_harness_mode() {
        [[ -n ${HARNESS_MODE:-} ]] && return 0
        if [[ ${HARNESS_HOST_SYSTEMD:-0} == 1 ]]; then
                if [[ -d /run/systemd/system ]]; then
                        HARNESS_MODE=host
                        return 0
                fi
                _harness_log "HARNESS_HOST_SYSTEMD=1 but systemd is not PID 1 here; booting one in namespaces."
        fi
        HARNESS_MODE=namespace
}

_harness_now_ms() {
        # EPOCHREALTIME is seconds with six decimals; its separator depends on the locale.
        local us=${EPOCHREALTIME//[!0-9]/}
        echo $((us / 1000))
}

# A process counts as gone once it is a zombie: its parent may not have reaped it yet.
_harness_alive() {
        local pid=$1 stat
        [[ -n $pid ]] || return 1
        read -r stat 2>/dev/null < "/proc/$pid/stat" || return 1
        stat=${stat##*) }
        [[ ${stat:0:1} != Z ]]
}

# Wait up to $2 seconds for pid $1 to be gone.
_harness_wait_gone() {
        local pid=$1 deadline=$(( $(_harness_now_ms) + $2 * 1000 ))
        while _harness_alive "$pid"; do
                (( $(_harness_now_ms) < deadline )) || return 1
                sleep 0.05
        done
        return 0
}

# Run a command in the background and wait for it. Unlike a foreground command, the
# `wait` builtin is interrupted by a trapped signal, so SIGTERM or SIGINT sent to the test
# script tears the system down at once instead of after the command ends. The explicit
# redirection keeps stdin (bash would give a background job /dev/null).
_harness_bg_wait() {
        local pid rc=0
        if [[ -e /proc/self/fd/0 ]]; then
                "$@" <&0 &
        else
                # No stdin at all (closed, as some CI runners leave it).
                "$@" < /dev/null &
        fi
        pid=$!
        # 2>/dev/null: no "Killed" job notice from bash; the status says it.
        wait "$pid" 2>/dev/null || rc=$?
        return "$rc"
}

# Previous trap command for a signal, as set by the caller before harness_boot.
_harness_trap_command() {
        local t
        t=$(trap -p "$1")
        [[ -n $t ]] || return 0
        eval "set -- $t"
        printf '%s' "$3"
}

_harness_on_exit() {
        local rc=$?
        # A signal now (one that came with the exit, or a second Ctrl-C) would run its
        # trap, whose `exit` ends the shell without the teardown.
        trap '' INT TERM HUP PIPE
        # The script is ending: no "Killed" notices for the hx jobs the teardown ends.
        disown -a 2>/dev/null
        if [[ -n ${_HARNESS_PREV_TRAP_EXIT:-} ]]; then
                eval "$_HARNESS_PREV_TRAP_EXIT" || true
        fi
        harness_teardown || true
        exit "$rc"
}

_harness_on_signal() {
        local sig=$1 rc=$2 prev
        prev=_HARNESS_PREV_TRAP_$sig
        _harness_log "caught SIG$sig, tearing down."
        if [[ -n ${!prev:-} ]]; then
                eval "${!prev}" || true
        fi
        # The EXIT trap does the teardown, after the caller's own EXIT trap.
        exit "$rc"
}

_harness_set_signal_traps() {
        trap '_harness_on_signal INT 130' INT
        trap '_harness_on_signal TERM 143' TERM
        trap '_harness_on_signal HUP 129' HUP
        # Output to a closed pipe (`test.sh | head`) must not end the script half-way
        # through the teardown: ignore SIGPIPE from then on, and tear down.
        trap 'trap "" PIPE; _harness_on_signal PIPE 141' PIPE
}

_harness_install_traps() {
        [[ ${_HARNESS_TRAPS_INSTALLED:-0} == 1 ]] && return 0
        _HARNESS_PREV_TRAP_EXIT=$(_harness_trap_command EXIT)
        _HARNESS_PREV_TRAP_INT=$(_harness_trap_command INT)
        _HARNESS_PREV_TRAP_TERM=$(_harness_trap_command TERM)
        _HARNESS_PREV_TRAP_HUP=$(_harness_trap_command HUP)
        _HARNESS_PREV_TRAP_PIPE=$(_harness_trap_command PIPE)
        trap _harness_on_exit EXIT
        _harness_set_signal_traps
        _HARNESS_TRAPS_INSTALLED=1
}

# Start time of a process (in clock ticks since boot), to tell it from a later process
# that got the same pid.
_harness_starttime() {
        local st fields
        read -r st 2>/dev/null < "/proc/$1/stat" || return 1
        read -r -a fields <<< "${st##*) }"
        echo "${fields[19]}"
}

# A watchdog for the case no trap can handle: the test script killed with SIGKILL (a CI
# job's hard timeout, `kill -9`). It polls the shell that called harness_boot and tears
# down when that shell is gone. It runs in a process group of its own (so a signal to the
# test's process group does not reach it) and ignores the signals the traps handle;
# harness_teardown ends it first.
_harness_start_watchdog() {
        local parent=$BASHPID start
        start=$(_harness_starttime "$parent") || return 1
        _HARNESS_WATCHDOG=$(
                set -m
                (
                        trap '' INT TERM HUP PIPE QUIT
                        while [[ $(_harness_starttime "$parent") == "$start" ]]; do
                                sleep 0.5
                        done
                        _HARNESS_WATCHDOG=
                        harness_teardown
                ) < /dev/null > /dev/null 2>&1 &
                echo "$!"
        )
}

# Sorted, comma-separated list of the cgroup controllers (and name=) in a list of mount
# options or in a /proc/self/cgroup controller field, so the two can be compared.
_harness_cg_key() {
        local IFS=, o out=()
        for o in $1; do
                if [[ $o == name=* ]] || grep -q "^${o}[[:space:]]" /proc/cgroups; then
                        out+=("$o")
                fi
        done
        (( ${#out[@]} )) || return 0
        printf '%s\n' "${out[@]}" | sort | paste -sd,
}

# Creates the delegated child cgroups: one per hierarchy below this process's own cgroup,
# which becomes the root of the booted system's cgroup namespace. Fills
# HARNESS_CGROUP_DIRS (to remove at teardown), _HARNESS_CGROUP_PROCS (their cgroup.procs,
# which the launcher joins) and _HARNESS_CGROUP_MOUNTS (what PID 1 gets at
# /sys/fs/cgroup).
_harness_cgroup_setup() {
        local -A cg_path=()
        local id ctrl path mnt type opts key rel dir delegated c
        local -a wanted=(memory pids cpu cpuacct name=systemd)

        HARNESS_CGROUP_DIRS=()
        _HARNESS_CGROUP_PROCS=()
        _HARNESS_CGROUP_MOUNTS=()
        _HARNESS_CGROUP_LINKS=()

        while IFS=: read -r id ctrl path; do
                if [[ -z $ctrl ]]; then
                        key=cgroup2
                else
                        key=$(_harness_cg_key "$ctrl")
                fi
                [[ -n $key ]] || continue
                cg_path[$key]=$path
        done < /proc/self/cgroup

        while read -r _ mnt type opts _; do
                [[ $type == cgroup || $type == cgroup2 ]] || continue
                [[ $mnt == /sys/fs/cgroup/* || $mnt == /sys/fs/cgroup ]] || continue
                rel=${mnt#/sys/fs/cgroup}
                rel=${rel#/}
                if [[ $type == cgroup2 ]]; then
                        key=cgroup2
                        delegated=1
                else
                        key=$(_harness_cg_key "$opts")
                        delegated=0
                        for c in "${wanted[@]}"; do
                                [[ ,$key, == *,$c,* ]] && delegated=1
                        done
                fi
                if [[ $delegated == 1 ]]; then
                        if [[ -z ${cg_path[$key]+set} ]]; then
                                _harness_log "cannot find this process's cgroup in hierarchy '$key' (mounted at $mnt)."
                                return 1
                        fi
                        path=${cg_path[$key]%/}
                        dir=$mnt$path/$_HARNESS_CGROUP_NAME
                        # Listed before it exists: a trap runs between two commands.
                        HARNESS_CGROUP_DIRS+=("$dir")
                        _HARNESS_CGROUP_PROCS+=("$dir/cgroup.procs")
                        if ! mkdir "$dir"; then
                                _harness_log "cannot create child cgroup '$dir'."
                                return 1
                        fi
                fi
                if [[ $type == cgroup2 ]]; then
                        opts=
                elif [[ $key == name=* ]]; then
                        opts=none,$key
                else
                        opts=$key
                fi
                _HARNESS_CGROUP_MOUNTS+=("$type|$rel|$opts|$delegated")
        done < /proc/self/mounts

        if (( ${#HARNESS_CGROUP_DIRS[@]} == 0 )); then
                _harness_log "no cgroup hierarchy found below /sys/fs/cgroup."
                return 1
        fi

        # Links such as cpu -> cpu,cpuacct on hosts that co-mount controllers.
        for mnt in /sys/fs/cgroup/*; do
                [[ -L $mnt ]] && _HARNESS_CGROUP_LINKS+=("${mnt##*/}|$(readlink "$mnt")")
        done
        return 0
}

# Moves the calling (sub)shell into the "harness-hx" leaf below the root of the booted
# system's cgroup namespace. Processes that hx starts must be inside that namespace's root
# for systemd to move them into a unit (`systemd-run --scope`; cgroup2 refuses moves from
# outside). Not in the root itself: the host side of nsenter would sit there, seen as pid
# 0 from inside, and systemd's migrations out of the root cgroup fail on it ("Input/
# output error"); on a pure cgroup2 host the root also must stay free of processes so
# systemd can enable controllers. The leaf is made on demand: systemd removes empty
# cgroups it does not know from the v1 hierarchies (when it realizes -.slice), and keeps
# them while a process is inside.
_harness_join_cgroups() {
        local dir
        for dir in "${HARNESS_CGROUP_DIRS[@]}"; do
                for _ in 1 2 3 4 5; do
                        mkdir -p "$dir/harness-hx" 2>/dev/null
                        echo "$BASHPID" 2>/dev/null > "$dir/harness-hx/cgroup.procs" && continue 2
                done
                _harness_log "hx: cannot join '$dir/harness-hx'."
                return 1
        done
}

# Writes into the overlay what the test system needs before it boots.
_harness_configure_root() {
        local r=$HARNESS_ROOT etc=$HARNESS_ROOT/etc/systemd/system u id

        mkdir -p "$etc" "$r/etc/systemd/journald.conf.d" \
                "$etc/systemd-sysusers.service.d" || return 1

        # One process for all of them: a fork or two per unit cost seconds on a
        # loaded machine, and every test boots this.
        # shellcheck disable=SC2086
        python3 - "$etc" "${_HARNESS_MASKED_UNITS[@]}" ${HARNESS_MASK_UNITS:-} <<'PY' || return 1
import os, shutil, sys
etc = sys.argv[1]
for unit in sys.argv[2:]:
    if not unit or "/" in unit or unit in (".", ".."):
        sys.exit("harness: bad unit name to mask: %r" % unit)
    path = os.path.join(etc, unit)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    os.symlink("/dev/null", path)
PY

        # A narrow boot target: sysinit (journald, tmpfiles, sysusers) and sockets
        # (dbus.socket and whatever a test enables with WantedBy=sockets.target). Not
        # basic.target, which would pull in the host's timers and paths, and not
        # multi-user.target with the host's services. polkit.service is bus-activated.
        cat > "$etc/agentfab-test.target" <<EOF || return 1
[Unit]
Description=agentfab integration test system
Requires=sysinit.target sockets.target
After=sysinit.target sockets.target
Wants=dbus.socket systemd-journald.service ${HARNESS_WANTS:-}
AllowIsolate=yes
EOF
        ln -sfn agentfab-test.target "$etc/default.target" || return 1

        # Users from sysusers.d files a test installs must exist. On Debian, the unit only
        # runs when /etc "needs an update"; an empty assignment resets its conditions.
        printf '[Unit]\nConditionNeedsUpdate=\n' \
                > "$etc/systemd-sysusers.service.d/harness.conf" || return 1

        # A journal of this boot only, in /run: what a test reads back is its own.
        printf '[Journal]\nStorage=volatile\nRateLimitIntervalSec=0\n' \
                > "$r/etc/systemd/journald.conf.d/harness.conf" || return 1

        # An identity of its own, so nothing inside is confused with the host.
        id=$(tr -d '-' < /proc/sys/kernel/random/uuid) || return 1
        rm -f "$r/etc/machine-id"
        echo "$id" > "$r/etc/machine-id" || return 1
        rm -f "$r/etc/hostname"
        echo agentfab-test > "$r/etc/hostname" || return 1
        return 0
}

# Runs inside the new namespaces (as their PID 1, before systemd) from launch.sh. It
# sees the variables that _harness_write_launcher wrote into that file.
_harness_inner() {
        set -eu
        export PATH=/usr/sbin:/usr/bin:/sbin:/bin
        local r=$H_ROOT m type rel opts delegated ro l tty pid _ n

        # /proc is still the host's here, so this is our pid as the host sees it; bash
        # opens the file itself, and exec keeps the pid for systemd.
        read -r pid _ < /proc/self/stat
        echo "$pid" > "$H_BASE/systemd.pid.tmp"
        mv "$H_BASE/systemd.pid.tmp" "$H_BASE/systemd.pid"
        # Keep the way back to the host's files for the handshake below.
        exec 3< "$H_BASE"

        echo agentfab-test > /proc/sys/kernel/hostname

        mount --bind "$r" "$r"
        mount -t proc -o nosuid,nodev,noexec proc "$r/proc"
        # SECURITY: kernel-wide settings stay read-only, as in systemd-nspawn: the
        # system inside is a test fixture, not the host's administrator.
        mount --bind "$r/proc/sys" "$r/proc/sys"
        mount -o remount,bind,ro,nosuid,nodev,noexec "$r/proc/sys"
        if [[ -e $r/proc/sysrq-trigger ]]; then
                mount --bind "$r/proc/sysrq-trigger" "$r/proc/sysrq-trigger"
                mount -o remount,bind,ro "$r/proc/sysrq-trigger"
        fi

        mount --rbind /sys "$r/sys"
        mount -o remount,bind,ro,nosuid,nodev,noexec "$r/sys"
        if mountpoint -q "$r/sys/fs/cgroup"; then
                umount -l "$r/sys/fs/cgroup"
        fi
        mount -t tmpfs -o nosuid,nodev,noexec,mode=0755 tmpfs "$r/sys/fs/cgroup"
        # With the cgroup namespace, each hierarchy shows our child cgroup as its root.
        # The delegated ones are writable, so systemd manages them and enforces limits;
        # the others are read-only.
        for m in "${H_CGROUP_MOUNTS[@]}"; do
                IFS='|' read -r type rel opts delegated <<< "$m"
                ro=ro
                [[ $delegated == 1 ]] && ro=rw
                mkdir -p "$r/sys/fs/cgroup/$rel"
                mount -t "$type" -o "$ro,nosuid,nodev,noexec${opts:+,$opts}" "$type" "$r/sys/fs/cgroup/$rel"
        done
        for l in "${H_CGROUP_LINKS[@]}"; do
                ln -s "${l#*|}" "$r/sys/fs/cgroup/${l%%|*}"
        done
        mount -o remount,ro,nosuid,nodev,noexec,mode=0755 "$r/sys/fs/cgroup"

        mount -t tmpfs -o nosuid,mode=0755,size=64m tmpfs "$r/dev"
        for n in null zero full random urandom tty; do
                touch "$r/dev/$n"
                mount --bind "/dev/$n" "$r/dev/$n"
        done
        mkdir "$r/dev/pts" "$r/dev/shm"
        mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$r/dev/pts"
        ln -s pts/ptmx "$r/dev/ptmx"
        mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$r/dev/shm"
        ln -s /proc/self/fd "$r/dev/fd"
        ln -s /proc/self/fd/0 "$r/dev/stdin"
        ln -s /proc/self/fd/1 "$r/dev/stdout"
        ln -s /proc/self/fd/2 "$r/dev/stderr"
        # PID 1's console: the pty that script(1) records into console.log. Without
        # one, PID 1's own messages (e.g. why it froze) would be lost.
        if tty=$(readlink /proc/self/fd/0) && [[ $tty == /dev/pts/* ]]; then
                touch "$r/dev/console"
                mount --bind "$tty" "$r/dev/console"
        fi

        mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$r/run"
        mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$r/tmp"
        # On the overlay, /var/tmp breaks every unit with PrivateTmp= or DynamicUser=.
        mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$r/var/tmp"
        # agentfabd's state on a real file system, as on a host: the sandboxes
        # mount task workspaces idmapped, which overlayfs does not support.
        # What the test put there before the boot comes along.
        # (A tmpfs where the harness's directory is on a file system without
        # them.)
        # (Not when the harness mounted one there already: HARNESS_STATE_SIZE.)
        mkdir -p "$H_BASE/var-lib-agentfab" "$r/var/lib/agentfab"
        if ! mountpoint -q "$H_BASE/var-lib-agentfab"; then
                case "$(stat -f -c %T "$H_BASE")" in
                ext2/ext3|ext4|xfs|btrfs|tmpfs) ;;
                *) mount -t tmpfs -o mode=0755,size=8g tmpfs "$H_BASE/var-lib-agentfab" ;;
                esac
        fi
        cp -a "$r/var/lib/agentfab/." "$H_BASE/var-lib-agentfab/"
        chown --reference="$r/var/lib/agentfab" "$H_BASE/var-lib-agentfab"
        chmod --reference="$r/var/lib/agentfab" "$H_BASE/var-lib-agentfab"
        mount --bind "$H_BASE/var-lib-agentfab" "$r/var/lib/agentfab"

        # Wait until the harness has moved unshare (our parent, outside this pid
        # namespace) out of the namespace's root cgroup, where systemd would trip over
        # it at start-up.
        for n in $(seq 500); do
                [[ -e /proc/self/fd/3/go ]] && break
                sleep 0.01
        done
        [[ -e /proc/self/fd/3/go ]] || { echo "harness: no go from the harness" >&2; exit 1; }
        exec 3<&-

        # pivot_root, not chroot: the kernel refuses to create user namespaces from a
        # chrooted process, and the sandboxes under test need them.
        cd "$r"
        pivot_root . .
        umount -l .
        cd /
        # Mount events must propagate into the units' own mount namespaces, as on
        # a booted host: systemd moves a service's credentials (LoadCredential=)
        # into /run/credentials after the service's namespace exists. As a
        # "container" it does not make / shared itself.
        mount --make-rshared /

        # shellcheck disable=SC2086
        exec env -i container="$H_CONTAINER" SYSTEMD_COLORS=0 \
                /lib/systemd/systemd --system $H_SYSTEMD_ARGS
}

# Prints a bash assignment of the array named $1 with the remaining arguments.
_harness_print_array() {
        local name=$1
        shift
        printf '%s=(' "$name"
        (( $# )) && printf ' %q' "$@"
        printf ' )\n'
}

_harness_write_launcher() {
        local f=$HARNESS_BASE/launch.sh
        {
                echo '#!/bin/bash'
                echo '# Written by tests/integration/lib/harness.sh.'
                printf 'H_BASE=%q\n' "$HARNESS_BASE"
                printf 'H_ROOT=%q\n' "$HARNESS_ROOT"
                printf 'H_CONTAINER=%q\n' "${HARNESS_CONTAINER:-agentfab-test}"
                printf 'H_SYSTEMD_ARGS=%q\n' "${HARNESS_SYSTEMD_ARGS:-}"
                _harness_print_array H_CGROUP_MOUNTS "${_HARNESS_CGROUP_MOUNTS[@]}"
                _harness_print_array H_CGROUP_LINKS "${_HARNESS_CGROUP_LINKS[@]}"
                _harness_print_array H_CGROUP_PROCS "${_HARNESS_CGROUP_PROCS[@]}"
                declare -f _harness_inner
                cat <<'EOF'
if [[ ${1:-} == --inner ]]; then
        _harness_inner
        exit 1
fi
# Outside: script(1) is our parent. Record both pids for teardown, join the delegated
# cgroups, so they become the root of the new cgroup namespace, and create the namespaces.
echo "$PPID $$" > "$H_BASE/launcher.pid"
for f in "${H_CGROUP_PROCS[@]}"; do
        echo $$ > "$f"
done
exec unshare --cgroup --mount --pid --uts --ipc --fork --propagation private \
        --kill-child=SIGKILL /bin/bash "$0" --inner
EOF
        } > "$f"
}

_harness_console_tail() {
        [[ -s ${HARNESS_CONSOLE_LOG:-} ]] || return 0
        _harness_log "last lines of PID 1's console ($HARNESS_CONSOLE_LOG):"
        tail -n "${1:-25}" "$HARNESS_CONSOLE_LOG" | tr -d '\r' | sed 's/^/    /' >&2
}

_harness_boot_fail() {
        _harness_log "boot failed: $*"
        _harness_console_tail 40
        harness_teardown || true
        return 1
}

# The host side of hx: runs in a background subshell (see _harness_bg_wait).
#
# nsenter stays outside the booted system's pid namespace as the parent of CMD. If it
# died first (as a Ctrl-C to the test's process group would do), CMD would be left to the
# host's init to reap, which may take its time, and systemd's shutdown waits for such a
# process. So nsenter and CMD get a session of their own: a signal to the test's process
# group reaches only the test script, whose trap tears the system down (and ends CMD).
# CMD starts with default signal dispositions, whatever the test script had.
_harness_nsenter() {
        _harness_join_cgroups || exit 125
        if [[ -e $HARNESS_BASE/stopping ]]; then
                _harness_log "hx: the test system is being torn down."
                exit 125
        fi
        exec setsid -w nsenter -t "$HARNESS_PID" -a -- \
                env -i --default-signal "${_HARNESS_ENV[@]}" "$@"
}

hx() {
        _harness_mode
        if [[ $HARNESS_MODE == host ]]; then
                env -i --default-signal "${_HARNESS_ENV[@]}" "$@"
                return
        fi
        if [[ -z ${HARNESS_PID:-} ]] || ! _harness_alive "$HARNESS_PID"; then
                _harness_log "hx: no system is booted (call harness_boot first)."
                return 125
        fi
        _harness_bg_wait _harness_nsenter "$@"
}

hx_as() {
        local user=${1:?hx_as: USER missing}
        shift
        hx runuser -u "$user" -- "$@"
}

_harness_wait_running() {
        local t0=$1 deadline state="" left
        deadline=$(( t0 + ${HARNESS_BOOT_TIMEOUT:-30} * 1000 ))

        while :; do
                _harness_alive "$HARNESS_PID" || { _harness_log "systemd (pid $HARNESS_PID) died during boot."; return 1; }
                left=$(( deadline - $(_harness_now_ms) ))
                (( left > 0 )) || break
                # --wait returns once start-up is over; before PID 1 listens on its private
                # bus socket it says "offline" at once, and we ask again.
                hx timeout -k 2 "$(( (left + 999) / 1000 ))" systemctl is-system-running --wait \
                        > "$HARNESS_BASE/state" 2>/dev/null < /dev/null || true
                state=$(< "$HARNESS_BASE/state")
                case $state in
                running)
                        return 0 ;;
                degraded)
                        _harness_log "the system is degraded; failed units:"
                        hx systemctl --failed --no-legend --plain < /dev/null >&2 || true
                        return 0 ;;
                maintenance|stopping)
                        break ;;
                esac
                sleep 0.05
        done
        _harness_log "the system did not reach 'running' within ${HARNESS_BOOT_TIMEOUT:-30} s (state: '${state:-none}')."
        hx systemctl list-jobs --no-pager < /dev/null >&2 || true
        return 1
}

harness_boot() {
        local t0 deadline dir c pids=()

        _harness_mode
        if [[ $HARNESS_MODE == host ]]; then
                HARNESS_ROOT=/
                HARNESS_PID=1
                HARNESS_BOOT_MS=0
                return 0
        fi
        if [[ -n ${HARNESS_BASE:-} ]]; then
                _harness_log "harness_boot: already booted ($HARNESS_BASE); call harness_teardown first."
                return 1
        fi

        t0=$(_harness_now_ms)
        if [[ $EUID != 0 ]]; then
                _harness_log "harness_boot: must run as root."
                return 1
        fi
        for c in unshare nsenter script mount umount pivot_root mountpoint timeout env runuser; do
                if ! command -v "$c" > /dev/null; then
                        _harness_log "harness_boot: '$c' not found."
                        return 1
                fi
        done
        if [[ ! -x /lib/systemd/systemd ]]; then
                _harness_log "harness_boot: /lib/systemd/systemd not found (install systemd)."
                return 1
        fi

        _harness_install_traps

        HARNESS_BASE=$(mktemp -d "${HARNESS_TMPDIR:-/tmp}/agentfab-harness.XXXXXX") || {
                _harness_log "harness_boot: cannot create a base directory."
                HARNESS_BASE=
                return 1
        }
        HARNESS_ROOT=$HARNESS_BASE/root
        HARNESS_CONSOLE_LOG=$HARNESS_BASE/console.log
        _HARNESS_CGROUP_NAME=${HARNESS_BASE##*/}
        HARNESS_CGROUP_DIRS=()
        _HARNESS_CGROUP_PROCS=()
        mkdir "$HARNESS_BASE/upper" "$HARNESS_BASE/work" "$HARNESS_ROOT" ||
                { _harness_boot_fail "cannot create directories in $HARNESS_BASE"; return 1; }

        mount -t overlay overlay \
                -o "lowerdir=/,upperdir=$HARNESS_BASE/upper,workdir=$HARNESS_BASE/work" \
                "$HARNESS_ROOT" ||
                { _harness_boot_fail "cannot mount the overlay of / at $HARNESS_ROOT"; return 1; }
        _HARNESS_OVERLAY=1

        _harness_cgroup_setup || { _harness_boot_fail "cannot set up the delegated cgroups"; return 1; }
        _harness_configure_root || { _harness_boot_fail "cannot configure the overlay"; return 1; }

        if declare -F harness_prepare_root > /dev/null; then
                # In a subshell with errexit, and not in a condition (which would switch
                # errexit off inside), so a failing step inside the hook stops it.
                local had_e=0 rc=0
                [[ $- == *e* ]] && had_e=1
                set +e
                ( set -e; harness_prepare_root "$HARNESS_ROOT" )
                rc=$?
                (( had_e )) && set -e
                (( rc == 0 )) || { _harness_boot_fail "harness_prepare_root failed (exit status $rc)"; return 1; }
        fi
        # The boot's deadlines count from here: preparing the root (installing,
        # making keys and images) is no part of booting and takes long on a busy machine.
        t0=$(_harness_now_ms)

        # A state file system of a given size, in our own mount namespace, so
        # that it outlives a reboot of the test system (harness_reboot).
        if [[ -n ${HARNESS_STATE_SIZE:-} ]]; then
                mkdir -p "$HARNESS_BASE/var-lib-agentfab" &&
                mount -t tmpfs -o "mode=0755,size=$HARNESS_STATE_SIZE" tmpfs "$HARNESS_BASE/var-lib-agentfab" ||
                        { _harness_boot_fail "cannot mount a $HARNESS_STATE_SIZE tmpfs for the state directory"; return 1; }
        fi

        _harness_launch "$t0"
}

# Starts PID 1 in new namespaces on the overlay that harness_boot prepared, and waits
# until it is running. Used by harness_boot and harness_reboot.
_harness_launch() {
        local t0=$1 deadline dir pids=()

        _harness_write_launcher || { _harness_boot_fail "cannot write the launcher"; return 1; }
        # script(1) gives PID 1 a pty as its console and records it; setsid keeps a
        # Ctrl-C on the test's terminal from reaching PID 1 (where SIGINT means reboot):
        # the trap powers the system off instead.
        : > "$HARNESS_CONSOLE_LOG"
        SHELL=/bin/sh setsid script -q -f -e \
                -c "exec /bin/bash $(printf %q "$HARNESS_BASE/launch.sh")" \
                "$HARNESS_CONSOLE_LOG" < /dev/null > /dev/null 2>&1 &
        _HARNESS_LAUNCH_JOB=$!
        disown "$_HARNESS_LAUNCH_JOB" 2>/dev/null || true

        deadline=$(( t0 + ${HARNESS_BOOT_TIMEOUT:-30} * 1000 ))
        until [[ -s $HARNESS_BASE/systemd.pid && -s $HARNESS_BASE/launcher.pid ]]; do
                if ! _harness_alive "$_HARNESS_LAUNCH_JOB" && ! [[ -s $HARNESS_BASE/launcher.pid ]]; then
                        _harness_boot_fail "the launcher exited before creating the namespaces"
                        return 1
                fi
                if (( $(_harness_now_ms) > deadline )); then
                        _harness_boot_fail "the namespaces were not created in time"
                        return 1
                fi
                sleep 0.02
        done
        read -r -a pids < "$HARNESS_BASE/launcher.pid"
        _HARNESS_SCRIPT_PID=${pids[0]}
        _HARNESS_UNSHARE_PID=${pids[1]}
        HARNESS_PID=$(< "$HARNESS_BASE/systemd.pid")

        # unshare had to be in the child cgroups when it created the cgroup namespace; now
        # it goes back to where we are (from here, outside that namespace, cgroup2 lets
        # us), and PID 1 may start.
        for dir in "${HARNESS_CGROUP_DIRS[@]}"; do
                echo "$_HARNESS_UNSHARE_PID" > "${dir%/*}/cgroup.procs" ||
                        { _harness_boot_fail "cannot move unshare out of '$dir'"; return 1; }
        done
        : > "$HARNESS_BASE/go"
        if [[ -z ${_HARNESS_WATCHDOG:-} ]]; then
                _harness_start_watchdog || _harness_log "cannot start the watchdog, ignoring."
        fi

        _harness_wait_running "$t0" || { _harness_boot_fail "see above"; return 1; }
        # shellcheck disable=SC2034 # for the caller
        HARNESS_BOOT_MS=$(( $(_harness_now_ms) - t0 ))
        return 0
}

# Pids (host view) in the delegated cgroups; with "hx", only in the harness-hx leaves.
_harness_cgroup_pids() {
        local dir f pid
        if [[ $1 == hx ]]; then
                for dir in "${HARNESS_CGROUP_DIRS[@]}"; do
                        [[ -e $dir/harness-hx/cgroup.procs ]] || continue
                        while read -r pid; do
                                echo "$pid"
                        done 2>/dev/null < "$dir/harness-hx/cgroup.procs"
                done | sort -un
                return 0
        fi
        for dir in "${HARNESS_CGROUP_DIRS[@]}"; do
                [[ -d $dir ]] || continue
                # A pipe, not a process substitution: bash waits for the find, which would
                # otherwise be left to the host's init to reap.
                find "$dir" -name cgroup.procs 2>/dev/null | while read -r f; do
                        while read -r pid; do
                                [[ $pid =~ ^[1-9][0-9]*$ ]] && echo "$pid"
                        done 2>/dev/null < "$f"
                done
        done | sort -un
}

# Lists the processes in the delegated cgroups, for diagnostics.
_harness_cgroup_processes() {
        local pid st
        echo "processes in the test system's cgroups (pid, state, parent, command):"
        for pid in $(_harness_cgroup_pids all); do
                read -r st 2>/dev/null < "/proc/$pid/stat" || continue
                echo "    $pid $(cut -d' ' -f1,2 <<< "${st##*) }") $(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline")"
        done
}

# Kill every process in the delegated cgroups (and below), outside the pid namespace as
# well (e.g. the host side of an nsenter), until they are empty or the time is up.
_harness_kill_cgroups() {
        local deadline=$(( $(_harness_now_ms) + 5000 )) pid any
        while :; do
                any=0
                for pid in $(_harness_cgroup_pids all); do
                        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
                        any=1
                        kill -KILL "$pid" 2>/dev/null || true
                done
                (( any )) || return 0
                (( $(_harness_now_ms) < deadline )) || return 1
                sleep 0.05
        done
}

# Children of pid $1.
_harness_children() {
        local c
        if [[ -r /proc/$1/task/$1/children ]]; then
                read -r -a c 2>/dev/null < "/proc/$1/task/$1/children"
                echo "${c[@]}"
                return
        fi
        for c in /proc/[0-9]*/stat; do
                read -r c 2>/dev/null < "$c" || continue
                [[ ${c##*) } =~ ^.\ $1\  ]] && echo "${c%% *}"
        done
}

# Ends what hx started and is still running, before the poweroff. Such a process is a
# child of nsenter, outside the booted system's pid namespace: when it exits, systemd's
# shutdown is not told (it only hears of its own children) and may wait 90 s for it. So
# kill it from here and let nsenter reap it and exit; its own children are reparented to
# PID 1 inside and end with the system. The "stopping" file keeps hx from starting new
# ones meanwhile (e.g. a background hx that was just being started when a signal came):
# an hx joins the harness-hx cgroups before it looks at that file, so it is either seen
# here or sees the file.
_harness_stop_hx() {
        local self_ns pid c deadline left
        : > "$HARNESS_BASE/stopping"
        self_ns=$(readlink "/proc/$$/ns/pid")
        deadline=$(( $(_harness_now_ms) + 3000 ))
        while :; do
                left=0
                for pid in $(_harness_cgroup_pids hx); do
                        [[ $(readlink "/proc/$pid/ns/pid" 2>/dev/null) == "$self_ns" ]] || continue
                        left=1
                        for c in $(_harness_children "$pid"); do
                                [[ $(readlink "/proc/$c/ns/pid" 2>/dev/null) == "$self_ns" ]] ||
                                        kill -KILL "$c" 2>/dev/null
                        done
                        # nsenter stops itself when its child is stopped.
                        kill -CONT "$pid" 2>/dev/null
                done
                (( left )) || return 0
                (( $(_harness_now_ms) < deadline )) || return 1
                sleep 0.02
        done
}

# Waits up to $1 seconds for PID 1 of the test system to be gone, helping it along:
# * At shutdown systemd stops every process with SIGSTOP before it sends SIGTERM and
#   SIGCONT; an nsenter (outside) whose child stops stops itself to pass job control on,
#   and nothing inside can continue it. A stopped nsenter cannot reap its child, and a pid
#   namespace's init does not finish exiting while a zombie of its namespace waits for
#   its parent outside. So continue them.
# * systemd-shutdown waits for the processes it signalled with sigtimedwait(SIGCHLD); it
#   gets no SIGCHLD for one whose parent is outside, and would sleep out its 90 s timeout.
#   A SIGCHLD from here makes it look again (PID 1 only reaps children on SIGCHLD, so it
#   does no harm before).
# * The kernel drops a signal to a pid namespace's init that has no handler for it: one
#   sent while systemd was still starting (interrupted boot) is lost. So repeat it; once
#   poweroff.target is queued, another request changes nothing.
_harness_wait_poweroff() {
        local deadline=$(( $(_harness_now_ms) + $1 * 1000 )) pid n=0
        kill -s RTMIN+4 "$HARNESS_PID" 2>/dev/null
        while _harness_alive "$HARNESS_PID"; do
                for pid in $(_harness_cgroup_pids hx); do
                        kill -CONT "$pid" 2>/dev/null
                done
                (( ++n % 4 == 0 )) && kill -CHLD "$HARNESS_PID" 2>/dev/null
                (( n % 10 == 0 )) && kill -s RTMIN+4 "$HARNESS_PID" 2>/dev/null
                (( $(_harness_now_ms) < deadline )) || return 1
                sleep 0.05
        done
        return 0
}

# harness_reboot [reboot|poweroff]: the test system goes down (`systemctl reboot`
# inside, or a poweroff as at teardown) and boots again on the same overlay and state
# directory: what it wrote to disk survives, /run, /tmp and the volatile journal do not.
# Processes that hx started are ended. Namespace mode only.
harness_reboot() {
        local how=${1:-reboot} t0 i dir deadline
        _harness_mode
        if [[ $HARNESS_MODE != namespace || -z ${HARNESS_BASE:-} ]]; then
                _harness_log "harness_reboot: no test system booted in namespaces."
                return 1
        fi
        t0=$(_harness_now_ms)
        [[ $how == reboot ]] && hx systemctl reboot --no-block < /dev/null > /dev/null 2>&1
        _harness_stop_hx || _harness_log "hx processes did not end."
        if [[ $how == reboot ]]; then
                # The shutdown goes on by itself; help it past what hx left (see
                # _harness_wait_poweroff), and power off only if it hangs.
                deadline=$(( t0 + ${HARNESS_STOP_TIMEOUT:-10} * 1000 ))
                while _harness_alive "$HARNESS_PID" && (( $(_harness_now_ms) < deadline )); do
                        kill -CHLD "$HARNESS_PID" 2>/dev/null
                        sleep 0.05
                done
        fi
        _harness_debug "reboot: PID 1 $(_harness_alive "$HARNESS_PID" && echo "still there" || echo gone) after $(( $(_harness_now_ms) - t0 )) ms"
        if _harness_alive "$HARNESS_PID" && ! _harness_wait_poweroff "${HARNESS_STOP_TIMEOUT:-10}"; then
                _harness_log "systemd did not go down; killing it."
                kill -KILL "$HARNESS_PID" 2>/dev/null
                _harness_wait_gone "$HARNESS_PID" 5
        fi
        for i in "${_HARNESS_UNSHARE_PID:-}" "${_HARNESS_SCRIPT_PID:-}" "${_HARNESS_LAUNCH_JOB:-}"; do
                [[ -n $i ]] || continue
                _harness_wait_gone "$i" 3 || { kill -KILL "$i" 2>/dev/null; _harness_wait_gone "$i" 2; }
        done
        _harness_kill_cgroups || _harness_log "processes left in the child cgroups."
        for dir in "${HARNESS_CGROUP_DIRS[@]}"; do
                for i in 1 2 3 4 5 6 7 8 9 10; do
                        [[ -d $dir ]] || break
                        find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null
                        [[ -d $dir ]] && sleep 0.1
                done
        done
        rm -f "$HARNESS_BASE/go" "$HARNESS_BASE/stopping" "$HARNESS_BASE/systemd.pid" "$HARNESS_BASE/launcher.pid"
        HARNESS_PID=
        _harness_cgroup_setup || { _harness_boot_fail "cannot set up the delegated cgroups"; return 1; }
        _harness_launch "$t0"
}

harness_teardown() {
        local - base dir m ok=0 i
        local -a mounts=()
        set +eu

        _harness_mode
        [[ $HARNESS_MODE == host ]] && return 0
        [[ -n ${HARNESS_BASE:-} ]] || return 0
        base=$HARNESS_BASE

        # A second Ctrl-C must not cut the teardown short; it is bounded in time.
        trap '' INT TERM HUP PIPE
        if [[ -n ${_HARNESS_WATCHDOG:-} ]]; then
                kill -KILL "$_HARNESS_WATCHDOG" 2>/dev/null
                _HARNESS_WATCHDOG=
        fi

        # Interrupted during boot, after the launcher was started but before harness_boot
        # read the pids: they are there, or about to be.
        if [[ -z ${HARNESS_PID:-} && -e $base/launch.sh ]]; then
                for i in $(seq 50); do
                        [[ -s $base/systemd.pid && -s $base/launcher.pid ]] && break
                        [[ -n ${_HARNESS_LAUNCH_JOB:-} ]] && ! _harness_alive "$_HARNESS_LAUNCH_JOB" && break
                        sleep 0.02
                done
                if [[ -s $base/systemd.pid && -s $base/launcher.pid ]]; then
                        HARNESS_PID=$(< "$base/systemd.pid")
                        read -r _HARNESS_SCRIPT_PID _HARNESS_UNSHARE_PID < "$base/launcher.pid"
                fi
        fi
        # Without the go-ahead, PID 1 is still the launcher's shell, not systemd: nothing to
        # shut down, and it would not even get a signal other than SIGKILL from here.
        if [[ -n ${HARNESS_PID:-} && ! -e $base/go ]]; then
                kill -KILL "$HARNESS_PID" 2>/dev/null
                _harness_wait_gone "$HARNESS_PID" 5
        fi

        # 1. Ask PID 1 to power off (SIGRTMIN+4 starts poweroff.target, like
        #    `systemctl poweroff`, without needing its bus), then insist.
        if [[ -n ${HARNESS_PID:-} ]] && _harness_alive "$HARNESS_PID"; then
                _harness_debug "teardown: stopping hx processes"
                _harness_stop_hx || _harness_log "hx processes did not end."
                _harness_debug "teardown: powering off"
                if ! _harness_wait_poweroff "${HARNESS_STOP_TIMEOUT:-10}"; then
                        _harness_log "systemd did not power off within ${HARNESS_STOP_TIMEOUT:-10} s; killing it."
                        _harness_cgroup_processes >&2
                        _harness_console_tail 15
                        # Killing a pid namespace's init kills everything in it; the host
                        # side of hx processes goes too, so no zombie inside waits for it.
                        kill -KILL "$HARNESS_PID" 2>/dev/null
                        _harness_kill_cgroups
                        _harness_wait_gone "$HARNESS_PID" 5
                fi
        fi

        _harness_debug "teardown: PID 1 is gone"
        # 2. unshare exits when its child did; script(1) when unshare did.
        for i in "${_HARNESS_UNSHARE_PID:-}" "${_HARNESS_SCRIPT_PID:-}" "${_HARNESS_LAUNCH_JOB:-}"; do
                [[ -n $i ]] || continue
                if ! _harness_wait_gone "$i" 3; then
                        kill -KILL "$i" 2>/dev/null
                        _harness_wait_gone "$i" 2
                fi
        done

        _harness_debug "teardown: launcher is gone"
        # 3. Whatever is still in our cgroups (a backgrounded hx, a stuck process), then
        #    the cgroups themselves, children first (systemd leaves e.g. init.scope).
        if (( ${#HARNESS_CGROUP_DIRS[@]} )); then
                _harness_kill_cgroups || _harness_log "processes left in the child cgroups."
                for dir in "${HARNESS_CGROUP_DIRS[@]}"; do
                        for i in 1 2 3 4 5 6 7 8 9 10; do
                                [[ -d $dir ]] || break
                                find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null
                                [[ -d $dir ]] && sleep 0.1
                        done
                        if [[ -d $dir ]]; then
                                _harness_log "cannot remove cgroup '$dir'."
                                ok=1
                        fi
                done
        fi

        _harness_debug "teardown: cgroups removed"
        # 4. Unmount everything below the base directory (only the overlay is mounted
        #    there in our namespace; the rest lived in the booted system's namespace),
        #    deepest first.
        for i in 1 2 3; do
                mounts=()
                while read -r _ m _; do
                        m=$(printf '%b' "$m")
                        [[ $m == "$base"/* ]] && mounts+=("$m")
                done < /proc/self/mounts
                (( ${#mounts[@]} )) || break
                for (( m = ${#mounts[@]} - 1; m >= 0; m-- )); do
                        umount "${mounts[m]}" 2>/dev/null || umount -l "${mounts[m]}" 2>/dev/null
                done
        done
        if (( ${#mounts[@]} )); then
                _harness_log "cannot unmount: ${mounts[*]}"
                ok=1
        fi

        if [[ -n ${HARNESS_SAVE_CONSOLE:-} && -e $base/console.log ]]; then
                tr -d '\r' < "$base/console.log" > "$HARNESS_SAVE_CONSOLE" ||
                        _harness_log "cannot save the console log to '$HARNESS_SAVE_CONSOLE'."
        fi

        # 5. Remove the base directory, but never through a mount.
        if (( ok == 0 )) && [[ $base == */agentfab-harness.* ]]; then
                rm -rf --one-file-system "$base"
                if [[ -e $base ]]; then
                        _harness_log "cannot remove '$base'."
                        ok=1
                fi
        fi

        _harness_debug "teardown: done"
        if [[ ${_HARNESS_TRAPS_INSTALLED:-0} == 1 ]]; then
                _harness_set_signal_traps
        else
                trap - INT TERM HUP PIPE
        fi
        if (( ok == 0 )); then
                HARNESS_BASE=
                HARNESS_ROOT=
                HARNESS_PID=
                HARNESS_CONSOLE_LOG=
                HARNESS_CGROUP_DIRS=()
                _HARNESS_CGROUP_PROCS=()
                _HARNESS_LAUNCH_JOB=
                _HARNESS_SCRIPT_PID=
                _HARNESS_UNSHARE_PID=
        fi
        return "$ok"
}
