#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Nothing acknowledged is lost on power loss: agentfabd works a task through
# its steps and delivery on a disk that records every write and flush it is
# sent, and every crash point a real disk could have kept is then mounted
# and checked: each step announced before it (journal entry, Step
# property, state file) still there with its commit, its objects and its
# conversation lines; the delivered branch and the "succeeded" state once
# announced; every file of every task whole.
#
# The disk: an ext4 file system on a loop device over the file of a FUSE
# file system (tests/crash/blklog.c) that logs each write and flush the
# loop driver sends it, in the format of the kernel's dm-log-writes target
# (this kernel has no device mapper, no nbd and no ublk; a loop device over
# FUSE is the block-level recorder it allows). The daemon runs under the
# integration harness (real systemd, dbus-daemon, polkitd, journald,
# launcher and sandboxes; tests/integration/lib/harness.sh) with its state
# directory on that disk, and with tests/crash/ack-mark.so preloaded, which
# puts a mark into the log at the instant each acknowledgement is announced.
# tests/crash/replay.py replays the log to the crash points and checks
# them (its docstring lists the crash points and the checks).
#
#   tests/crash/run.sh BUILDDIR [--short] [--steps=N] [--random=N] [--seed=N]
#
# The long form (the default): a task of 12 steps (file writes, a command,
# the fix), then its verification and delivery; every flush, every mark,
# and 3 random prefixes and 3 random subsets between each two flushes
# (those that give an image not checked already): some 1,300 crash points,
# about 11 minutes here at load 6.
# --short (tools/test.sh): 6 steps; of every flush, every mark, and one
# random prefix and one random subset between each two flushes (some 800
# crash points), 400 spread evenly over the log, every mark among them:
# one to two minutes.
# Needs root, /dev/fuse, loop devices and blklog (libfuse3-dev). Prints
# "  ok: ..." / "  FAIL: ..." lines and "N passed, N failed".
set -u

BUILDDIR=$(realpath "${1:?usage: run.sh BUILDDIR [--short] [--steps=N] [--random=N] [--seed=N]}")
shift
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$SRC/tests/integration/lib/check.sh"

STEPS=12 RANDOM_POINTS=3 MAX_POINTS=0 SEED=
for a in "$@"; do
        case "$a" in
        --short) STEPS=6 RANDOM_POINTS=1 MAX_POINTS=400 ;;
        --steps=*) STEPS=${a#--steps=} ;;
        --random=*) RANDOM_POINTS=${a#--random=} ;;
        --seed=*) SEED=${a#--seed=} ;;
        --max-points=*) MAX_POINTS=${a#--max-points=} ;;
        *) echo "unknown option $a" >&2; exit 2 ;;
        esac
done

[ "$(id -u)" = 0 ] || check_skip_all "the crash test needs root"
[ -c /dev/fuse ] || check_skip_all "no /dev/fuse"
[ -e /dev/loop-control ] || check_skip_all "no loop devices"
[ -x "$BUILDDIR/tests/crash/blklog" ] || check_skip_all "blklog was not built (libfuse3-dev missing)"
[ -e "$BUILDDIR/tests/crash/ack-mark.so" ] || check_skip_all "ack-mark.so was not built"

. "$SRC/tests/integration/lib/harness.sh"

WORK=$(mktemp -d /var/tmp/agentfab-crash.XXXXXX)
SOCK=agentfab-crash-$$
BLKLOG_PID= LOOP= MODEL_PID=
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
T=/var/lib/agentfab/tasks
export HARNESS_WANTS="${HARNESS_WANTS:-} agentfab.service"
CTL=(agentfabctl --no-ask-password)

cleanup() {
        [ -n "$MODEL_PID" ] && { kill "$MODEL_PID" 2>/dev/null; wait "$MODEL_PID" 2>/dev/null; }
        harness_teardown >/dev/null 2>&1
        # The file system on the loop device, the loop device, the FUSE
        # file system, its server: in this order, or the unmount waits on
        # a server that is gone.
        if [ -n "$LOOP" ]; then
                grep -q "^$LOOP " /proc/self/mounts && umount -l "$LOOP" 2>/dev/null
                losetup -d "$LOOP" 2>/dev/null
        fi
        mountpoint -q "$WORK/fuse" && { umount "$WORK/fuse" 2>/dev/null || umount -l "$WORK/fuse"; }
        [ -n "$BLKLOG_PID" ] && { kill "$BLKLOG_PID" 2>/dev/null; wait "$BLKLOG_PID" 2>/dev/null; }
        BLKLOG_PID= LOOP= MODEL_PID=
        [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

harness_prepare_root() {
        local R=$1 u
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.service agentfab.socket agentfab-launcher.socket >/dev/null 2>&1 || return 1
        # The mark of each announcement (ack-mark.c).
        mkdir -p "$R/usr/local/lib/agentfab-crash" "$R/etc/systemd/system/agentfab.service.d"
        cp "$BUILDDIR/tests/crash/ack-mark.so" "$R/usr/local/lib/agentfab-crash/"
        printf '[Service]\nEnvironment=LD_PRELOAD=/usr/local/lib/agentfab-crash/ack-mark.so AGENTFAB_CRASH_MARK_SOCKET=%s\n' \
                "$SOCK" > "$R/etc/systemd/system/agentfab.service.d/crash-mark.conf"
        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-test.conf" <<CONF
[Daemon]
IdleTimeoutSec=300

[Agent]
CommandTimeoutSec=60

[Breakers]
# The long form's steps add more lines than the default allows; a breaker
# is no part of this test.
MaxLinesChanged=100000
MaxFilesChanged=100000

[Model]
Name=default
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
TimeoutSec=20
MaxRetries=5
RetryBaseSec=200ms
CONF
        for u in alice; do
                grep -q "^$u:" "$R/etc/passwd" || useradd --root "$R" -s /bin/bash "$u" || return 1
                local uid gid
                uid=$(awk -F: -v u="$u" '$1 == u {print $3}' "$R/etc/passwd")
                gid=$(awk -F: -v u="$u" '$1 == u {print $4}' "$R/etc/passwd")
                rm -rf "$R/home/$u"
                mkdir -p "$R/home/$u"
                chown "$uid:$gid" "$R/home/$u"
                chmod 755 "$R/home/$u"
        done
        # The recorded disk is the state directory (harness.sh keeps a file
        # system mounted there, and binds it to /var/lib/agentfab).
        mkdir -p "$HARNESS_BASE/var-lib-agentfab"
        mount "$LOOP" "$HARNESS_BASE/var-lib-agentfab"
}

task_prop() { hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$1" org.agentfab.Task1 "$2" 2>/dev/null | sed 's/^[a-z] "\{0,1\}\(.*\)"\{0,1\}$/\1/; s/"$//'; }

wait_state() {
        local id=$1 secs=$2 s i want; shift 2
        for i in $(seq $((secs * 4))); do
                s=$(task_prop "$id" State)
                for want in "$@"; do [ "$s" = "$want" ] && return 0; done
                case $s in succeeded|failed|cancelled) [[ " $* " == *" $s "* ]] || return 1 ;; esac
                sleep 0.25
        done
        return 1
}

echo "=== the recorded disk"
truncate -s 1G "$WORK/base.img"
# No lazy initialisation: ext4lazyinit's writes would be noise in the log.
mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$WORK/base.img" || { fail "mkfs.ext4"; check_summary; exit 1; }
cp --sparse=always "$WORK/base.img" "$WORK/disk.img"
mkdir -p "$WORK/fuse" "$WORK/replay"
"$BUILDDIR/tests/crash/blklog" "$WORK/disk.img" "$WORK/log" "$SOCK" "$WORK/fuse" > "$WORK/blklog.out" 2>&1 &
BLKLOG_PID=$!
for i in $(seq 100); do [ -e "$WORK/fuse/disk" ] && break; sleep 0.05; done
[ -e "$WORK/fuse/disk" ] || { fail "blklog did not start: $(cat "$WORK/blklog.out")"; check_summary; exit 1; }
LOOP=$(losetup -f --show "$WORK/fuse/disk") || { fail "losetup"; check_summary; exit 1; }
ok "ext4 on $LOOP over blklog's recorded file"

echo "=== a task of $STEPS steps and its delivery, its state directory on that disk"
harness_boot || { fail "harness_boot"; check_summary; exit 1; }
hx systemctl start agentfab-launcher.socket >/dev/null 2>&1

python3 - "$STEPS" > "$WORK/script.json" <<'PY'
import json, sys
n = int(sys.argv[1])
s = [{"reply": {"content": "Plan: %d steps, then the fix." % n}}]
for i in range(1, n + 1):
    calls = [{"name": "write_file", "arguments": {"path": "notes/step-%d.txt" % i, "content": "step %d\n" % i * 10}}]
    if i % 3 == 2:
        # A command that writes too: the workspace changes behind the tools.
        calls.append({"name": "run_command", "arguments": {"command": "seq %d > data-%d.txt" % (i * 20, i)}})
    s.append({"reply": {"content": "Step %d" % i, "tool_calls": calls}})
s.append({"reply": {"content": "Fix add", "tool_calls": [
    {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}})
s.append({"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}})
print(json.dumps(s))
PY
python3 "$SRC/tests/model-server.py" --script "$WORK/script.json" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
        > "$WORK/model.out" 2> "$WORK/model.err" &
MODEL_PID=$!
for i in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done

hx_as alice bash -c "set -e; cd ~ && mkdir repo && cd repo && git init -q &&
        printf 'def add(a, b):\n    return a - b\n' > calc.py &&
        printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nif __name__ == \"__main__\":\n    unittest.main()\n' > test_calc.py &&
        git add . && git -c user.name=alice -c user.email=alice@example.com commit -q -m 'calc with a bug' && chmod -R a+rX ~/repo"
id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/repo --goal "Make add() add" --test "python3 -m unittest" \
        --limit max_steps=$((STEPS + 10)) 2>&1) || { fail "submit: $id"; check_summary; exit 1; }
if wait_state "$id" 300 succeeded; then ok "task $id succeeded"; else
        fail "task $id: $(task_prop "$id" State): $(task_prop "$id" Reason)"
        hx journalctl -q --no-pager -u agentfab.service | tail -30
fi
announced=$(hx journalctl -q --no-pager -o cat AGENTFAB_EVENT=step AGENTFAB_TASK="$id" | wc -l)
echo "    $announced steps announced in the journal; the state directory holds $(hx du -sh /var/lib/agentfab | cut -f1)"
hx journalctl -q --no-pager -o short-monotonic > "$WORK/journal.txt" 2>&1
# What follows counts as well: the daemon is stopped and the system goes
# down, and no announced step may be lost on the way.
python3 -c "
import socket, sys; s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect('\0' + sys.argv[1]); s.send(b'end'); s.recv(8)" "$SOCK"
kill "$MODEL_PID" 2>/dev/null; wait "$MODEL_PID" 2>/dev/null; MODEL_PID=
harness_teardown >/dev/null 2>&1
umount "$WORK/fuse" 2>/dev/null; losetup -d "$LOOP" 2>/dev/null; LOOP=
umount "$WORK/fuse" 2>/dev/null
wait "$BLKLOG_PID" 2>/dev/null; BLKLOG_PID=

marks=$(python3 - "$WORK/log" <<'PY'
import struct, sys
f = open(sys.argv[1], "rb")
magic, version, n, ss = struct.unpack("<QQQI", f.read(28))
pos, steps = ss, 0
for _ in range(n):
    f.seek(pos); sector, nr, flags, dl = struct.unpack("<QQQQ", f.read(32))
    if flags & 8:
        text = f.read(dl)
        steps += text.startswith(b"step ")
        nr = 0
    pos += ss + (0 if flags & 4 else nr * ss)
print(steps)
PY
)
[ "$announced" -gt 0 ] && [ "$marks" = "$announced" ] &&
        ok "each of the $announced step announcements is marked in the write log" ||
        fail "$announced steps announced, $marks marked in the log"

echo "=== the crash points"
out=$(python3 "$HERE/replay.py" --log "$WORK/log" --base "$WORK/base.img" --work "$WORK/replay" \
        --random "$RANDOM_POINTS" --max-points "$MAX_POINTS" ${SEED:+--seed "$SEED"} --control 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
if [ "$rc" = 0 ] && grep -q "^crash points: [0-9]* checked.*, 0 with" <<<"$out"; then
        ok "$(grep -o '[0-9]* checked' <<<"$out" | head -1) crash points: no acknowledged step lost, every file whole"
else
        fail "crash points with an acknowledgement lost or a file not whole"
fi
grep -q "^control: caught" <<<"$out" && ok "the check finds a step announced before it was written (control)" ||
        fail "the control point was not caught: the check cannot fail"

check_summary
