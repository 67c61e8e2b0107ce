#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Broken surroundings, against the real harness: the state directory's file
# system filling up in the middle of a task, dbus-daemon restarted, polkitd
# and journald stopped, the launcher and a sandbox killed in the middle of a
# command, the daemon killed in the middle of a command and after its
# stored sandbox ended (no sandbox taken up again then), and right after
# the bus reported a step (which must stay done), a reboot with one
# task paused and one at work, and SIGKILLs of the daemon at random moments
# across many tasks at work. Real systemd,
# dbus-daemon, polkitd, journald, launcher and sandboxes; the scripted model
# server of tests/model-server.py stands in for the model.
#
#   tests/integration/faults.sh BUILDDIR
#
# Environment: ONLY="t_a t_b" runs just those scenarios; KILL_TASKS and
# KILLS (default 20 and 20) size the SIGKILL scenario, KILL_STEPS (80) its
# tasks' steps; SEED makes its
# moments repeatable. Needs root. Prints "  ok: ..." / "  FAIL: ..." lines
# and "N passed, N failed".
set -u

BUILDDIR=$(realpath "${1:?usage: faults.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"

. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "fault tests need root"

WORK=$(mktemp -d /tmp/agentfab-faults.XXXXXX)
MODEL_PID=
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
T=/var/lib/agentfab/tasks
# The state directory is a file system of its own, small enough to fill.
export HARNESS_STATE_SIZE=${HARNESS_STATE_SIZE:-768m}
# agentfab.service is enabled (WantedBy=multi-user.target); the test system
# boots a narrower target, which pulls it in instead.
export HARNESS_WANTS="${HARNESS_WANTS:-} agentfab.service"

stop_model() {
        if [ -n "$MODEL_PID" ]; then
                kill "$MODEL_PID" 2>/dev/null
                wait "$MODEL_PID" 2>/dev/null
                MODEL_PID=
        fi
}
cleanup() { stop_model; rm -rf "$WORK"; }
trap cleanup EXIT

# model SCRIPT: (re)starts the scripted model server, replies chosen by the
# number of assistant messages (--by-step), so a redone step gets the same
# answer and many tasks can share one script.
model() {
        stop_model
        : > "$WORK/requests.jsonl"
        python3 "$SRC/tests/model-server.py" --script "$1" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
                > "$WORK/model.out" 2> "$WORK/model.err" &
        MODEL_PID=$!
        local i
        for i in $(seq 100); do
                [ -s "$WORK/model.out" ] && return 0
                sleep 0.05
        done
        echo "model server did not start: $(cat "$WORK/model.err")"
        return 1
}

harness_prepare_root() {
        local R=$1 u
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.service agentfab.socket agentfab-launcher.socket >/dev/null 2>&1 || return 1
        if meson introspect --buildoptions "$BUILDDIR" | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "b_sanitize" and o["value"] not in ("none", "") for o in json.load(sys.stdin)) else 1)'; then
                for u in agentfab.service agentfab-launcher@.service; do
                        mkdir -p "$R/etc/systemd/system/$u.d"
                        printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1\n' \
                                > "$R/etc/systemd/system/$u.d/sanitizer.conf"
                done
        fi
        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-test.conf" <<CONF
[Daemon]
IdleTimeoutSec=30
MaxActiveTasks=24
MaxTasksPerUser=100

[Agent]
CommandTimeoutSec=60

[Model]
Name=default
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
TimeoutSec=20
MaxRetries=5
RetryBaseSec=200ms
CONF
        for u in alice carol; do
                grep -q "^$u:" "$R/etc/passwd" || useradd --root "$R" -s /bin/bash "$u" || return 1
                local uid gid
                uid=$(awk -F: -v u="$u" '$1 == u {print $3}' "$R/etc/passwd")
                gid=$(awk -F: -v u="$u" '$1 == u {print $4}' "$R/etc/passwd")
                rm -rf "$R/home/$u"
                mkdir -p "$R/home/$u"
                chown "$uid:$gid" "$R/home/$u"
                chmod 755 "$R/home/$u"
        done
        usermod --root "$R" -aG sudo carol || return 1
        echo 'carol:carol-secret' | chpasswd --root "$R" || return 1
}

CTL=(agentfabctl --no-ask-password)
task_prop() { hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$1" org.agentfab.Task1 "$2" 2>/dev/null | sed 's/^[a-z] "\{0,1\}\(.*\)"\{0,1\}$/\1/; s/"$//'; }
list_tasks() { hx busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks 2>&1; }

# wait_state ID SECONDS STATE...: until the task is in one of the states.
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

# A small Python project whose test fails: add() subtracts.
make_repo() {
        hx_as alice bash -c "set -e; cd ~ && rm -rf $1 && mkdir $1 && cd $1 && git init -q &&
                printf 'def add(a, b):\n    return a - b\n' > calc.py &&
                printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nif __name__ == \"__main__\":\n    unittest.main()\n' > test_calc.py &&
                git add . && git -c user.name=alice -c user.email=alice@example.com commit -q -m 'calc with a bug' && chmod -R a+rX ~/$1"
}

submit() {
        local repo=$1; shift
        hx_as alice "${CTL[@]}" submit --repo "/home/alice/$repo" --goal "Make add() add" \
                --test "python3 -m unittest" "$@" 2>&1
}

# steps ID: the Agentfab-Step trailers on the task's branch, in order.
steps() { hx git --git-dir="$T/$1/ledger.git" log --reverse --format=%B "agentfab/$1" 2>/dev/null | sed -n 's/^Agentfab-Step: //p' | tr '\n' ' '; }
# assistant ID: the assistant messages of its conversation.
assistant() { hx python3 -c "import json; print(sum(1 for l in open('$T/$1/conversation.jsonl') if json.loads(l)['role'] == 'assistant'))" 2>&1; }

# files_whole ID: every file of the task parses, line by line for the JSON
# lines files, and the ledger is a sound git repository.
files_whole() {
        hx python3 - "$T/$1" <<'PY' || return 1
import json, os, sys
d = sys.argv[1]
json.load(open(os.path.join(d, "state.json")))
for f in ("conversation.jsonl", "events.jsonl", "transcript.jsonl"):
    p = os.path.join(d, f)
    if not os.path.exists(p):
        continue
    data = open(p, "rb").read()
    if data and not data.endswith(b"\n"):
        sys.exit("%s: torn last line" % f)
    for n, line in enumerate(data.splitlines(), 1):
        try:
            json.loads(line)
        except ValueError:
            sys.exit("%s:%d: not JSON" % (f, n))
PY
        hx git --git-dir="$T/$1/ledger.git" fsck --no-progress >/dev/null 2>&1
}

# The plan, three steps that each write a file, the fix, finish. Step 2's
# reply comes after DELAY seconds (a window for the fault).
step_script() {
        local delay=$1 out=$2
        cat > "$out" <<JSON
[
 {"reply": {"content": "Plan: three files, then the fix."}},
 {"reply": {"content": "First file", "tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}]}},
 {"delay": $delay, "reply": {"content": "Second file", "tool_calls": [{"name": "write_file", "arguments": {"path": "two.txt", "content": "2\n"}}]}},
 {"reply": {"content": "Third file", "tool_calls": [{"name": "write_file", "arguments": {"path": "three.txt", "content": "3\n"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}}
]
JSON
}

# A task of step_script that ended well: steps 1-4 once each, 7 assistant
# messages (plan, four steps, finish, and finish again after the review of
# the diff), every file whole.
check_complete() {
        local id=$1 what=$2 s n
        s=$(steps "$id")
        n=$(assistant "$id")
        if [ "$s" = "1 2 3 4 " ] && [ "$n" = 7 ] && files_whole "$id"; then
                ok "$what: steps 1 2 3 4 once each, 7 assistant messages, files whole"
        else
                fail "$what: steps '$s', assistant messages '$n', files whole: $(files_whole "$id" 2>&1 && echo yes || echo no)"
                echo "--- the task's journal"
                hx journalctl -q --no-pager -o cat AGENTFAB_TASK="$id" | tail -60
        fi
}

# Nothing of a task's sandbox is left: scope, processes of its uid, its uid's lock.
sandbox_gone() {
        local id=$1 left
        left=$(hx systemctl list-units --all --no-legend "agentfab-task-$id.scope" | grep -v 'inactive\|not-found')
        [ -z "$left" ] || { echo "scope: $left"; return 1; }
        left=$(hx ps -eo uid=,pid=,comm= | awk '$1 >= 393216 && $1 <= 458751')
        [ -z "$left" ] || { echo "processes: $left"; return 1; }
        # /proc/locks lists the locks of every namespace: this lock file's are
        # those on its device and inode.
        local key
        key=$(hx python3 -c 'import os; s = os.stat("/run/agentfab-launcher/task-uids.lock"); print("%02x:%02x:%d" % (os.major(s.st_dev), os.minor(s.st_dev), s.st_ino))' 2>/dev/null)
        if [ -n "$key" ] && hx grep -q " $key " /proc/locks; then
                echo "uid locks held: $(hx grep " $key " /proc/locks)"
                return 1
        fi
        return 0
}

# ---------------------------------------------------------------- scenarios

t_disk_full() {
        echo "=== the state directory's file system fills up in the middle of a task"
        step_script 15 "$WORK/full.json"
        model "$WORK/full.json" || { fail "model server"; return; }
        make_repo full
        local id i reason out
        id=$(submit full) || { fail "submit: $id"; return; }
        # While the model thinks about step 2, the disk fills up.
        for i in $(seq 480); do [ "$(steps "$id")" = "1 " ] && break; sleep 0.25; done
        [ "$(steps "$id")" = "1 " ] || { fail "step 1 never came: $(task_prop "$id" State) $(task_prop "$id" Reason)"; return; }
        hx sh -c 'dd if=/dev/zero of=/var/lib/agentfab/filler bs=1M status=none; cat /dev/zero > /var/lib/agentfab/filler2' 2>/dev/null
        out=$(hx df -B1 --output=avail /var/lib/agentfab | tail -1)
        [ "${out// /}" = 0 ] && ok "the state file system is full" || fail "still free: $out"
        if wait_state "$id" 60 failed awaiting-approval; then
                reason=$(task_prop "$id" Reason)
                [[ $reason == *"No space left on device"* ]] && ok "the task stopped ($(task_prop "$id" State)): $reason" ||
                        fail "stopped, reason: '$reason'"
        else
                fail "the task did not stop: $(task_prop "$id" State): $(task_prop "$id" Reason)"
        fi
        files_whole "$id" && ok "state, conversation, events, transcript and ledger whole while full" ||
                fail "a file is torn: $(files_whole "$id" 2>&1)"
        hx systemctl is-active agentfab.service >/dev/null && ok "the daemon is still up" || fail "the daemon is down"
        out=$(list_tasks) && ok "it answers ListTasks" || fail "ListTasks: $out"

        # Space comes back: resume goes on from the last checkpoint.
        hx rm -f /var/lib/agentfab/filler /var/lib/agentfab/filler2
        out=$(hx_as alice "${CTL[@]}" resume "$id" 2>&1) && ok "resumed" || fail "resume: $out"
        if wait_state "$id" 90 succeeded; then ok "the task succeeded after the disk was freed"; else
                fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        check_complete "$id" "disk full"
}

t_dbus_restart() {
        echo "=== dbus-daemon restarted while two tasks are at work"
        step_script 5 "$WORK/dbus.json"
        model "$WORK/dbus.json" || { fail "model server"; return; }
        make_repo bus1
        make_repo bus2
        local a b i out pid_before pid_after
        a=$(submit bus1) || { fail "submit: $a"; return; }
        b=$(submit bus2) || { fail "submit: $b"; return; }
        for i in $(seq 480); do [ "$(steps "$a")$(steps "$b")" = "1 1 " ] && break; sleep 0.25; done
        [ "$(steps "$a")$(steps "$b")" = "1 1 " ] || { fail "step 1 never came"; return; }
        pid_before=$(hx systemctl show -p MainPID --value agentfab.service)
        hx systemctl restart dbus.service && ok "dbus-daemon restarted during step 2" || fail "restart dbus"
        # The daemon answers on the new bus, by itself or reactivated.
        local t0=$(date +%s%N)
        for i in $(seq 40); do out=$(hx timeout 10 busctl call org.agentfab.Factory1 /org/agentfab/Factory1 \
                org.agentfab.Factory1 ListTasks 2>&1) && break; sleep 0.25; done
        [[ $out == *"$a"* && $out == *"$b"* ]] &&
                ok "ListTasks answers on the new bus with both tasks after $(( ($(date +%s%N) - t0) / 1000000 )) ms" ||
                fail "ListTasks: $out"
        pid_after=$(hx systemctl show -p MainPID --value agentfab.service)
        echo "    (agentfabd pid $pid_before before, $pid_after after)"
        if wait_state "$a" 90 succeeded && wait_state "$b" 90 succeeded; then ok "both tasks succeeded"; else
                fail "states: $(task_prop "$a" State) '$(task_prop "$a" Reason)', $(task_prop "$b" State) '$(task_prop "$b" Reason)'"; fi
        check_complete "$a" "task 1"
        check_complete "$b" "task 2"
        out=$(hx_as alice "${CTL[@]}" status "$a" 2>&1) && ok "agentfabctl status works" || fail "status: $out"
}

t_polkit_stopped() {
        echo "=== polkitd stopped: calls that need it are denied, nothing changes; started again"
        make_repo pk
        local before out after id
        before=$(list_tasks)
        hx systemctl mask --runtime polkit.service >/dev/null 2>&1
        hx systemctl stop polkit.service
        hx systemctl is-active polkit.service >/dev/null && { fail "polkit still active"; return; }
        expect_refused 3 "alice's submission refused without polkit (AccessDenied, exit 3)" submit pk
        out=$CHECK_OUT
        [[ $out == *"authorization service not available"* ]] && ok "the error says authorization could not be checked: $out" ||
                fail "unclear error: $out"
        after=$(list_tasks)
        [ "$before" = "$after" ] && ok "no task was created" || fail "tasks changed: $before / $after"
        id=$(hx "${CTL[@]}" submit --repo /home/alice/pk --goal "g" --test true 2>&1) &&
                ok "root needs no polkit: $id" || fail "root refused: $id"
        expect_refused "3:authorization service not available" "carol may not cancel root's task without polkit (AccessDenied, exit 3)" \
                hx_as carol "${CTL[@]}" cancel "$id"
        [ "$(task_prop "$id" State)" != cancelled ] && ok "the task is not cancelled" || fail "cancelled"
        hx "${CTL[@]}" cancel "$id" >/dev/null 2>&1
        hx systemctl unmask --runtime polkit.service >/dev/null 2>&1
        id=$(submit pk) && ok "polkit back (bus-activated): alice submits again" || fail "after polkit came back: $id"
        hx_as alice "${CTL[@]}" cancel "$id" >/dev/null 2>&1 && ok "and cancels her task" || fail "cancel"
}

t_journald_stopped() {
        echo "=== journald stopped: the daemon goes on, and says what it could not record"
        step_script 0 "$WORK/journal.json"
        model "$WORK/journal.json" || { fail "model server"; return; }
        make_repo jd
        local id out n
        hx systemctl stop systemd-journald.socket systemd-journald-dev-log.socket systemd-journald.service 2>&1
        hx systemctl is-active systemd-journald.service >/dev/null && { fail "journald still active"; return; }
        ok "journald and its sockets stopped"
        id=$(submit jd) || { fail "submit: $id"; hx systemctl start systemd-journald.service; return; }
        if wait_state "$id" 90 succeeded; then ok "a task ran to success without journald"; else
                fail "without journald: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        hx systemctl is-active agentfab.service >/dev/null && ok "the daemon is up" || fail "the daemon is down"
        n=$(hx grep -c '"type":"step"' "$T/$id/events.jsonl")
        # The plan's four steps, finish, and finish again after the review of the diff.
        [ "$n" = 6 ] && ok "the task's own history has its 6 steps" || fail "events.jsonl steps: $n"
        hx systemctl start systemd-journald.socket systemd-journald-dev-log.socket systemd-journald.service
        hx systemctl is-active systemd-journald.service >/dev/null && ok "journald started again" || fail "journald not back"
        # The next entry tells how many could not be recorded.
        make_repo jd2
        out=$(submit jd2) && hx_as alice "${CTL[@]}" cancel "$out" >/dev/null 2>&1
        for n in $(seq 40); do
                out=$(hx journalctl -q -o json _SYSTEMD_UNIT=agentfab.service AGENTFAB_EVENT=journal-lost 2>/dev/null)
                [ -n "$out" ] && break
                sleep 0.25
        done
        [ -n "$out" ] && ok "journal: $(python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["MESSAGE"])' <<<"$out")" ||
                fail "no entry says what was lost"
        check_complete "$id" "without journald"
}

# kill_during_command WHAT: a task whose step 2 runs a 6 s command; WHAT
# (sandbox or launcher) is killed with SIGKILL while it runs.
kill_during_command() {
        local what=$1 id i pid reason out
        cat > "$WORK/kill-$what.json" <<'JSON'
[
 {"reply": {"content": "Plan: a file, a slow command, the fix."}},
 {"reply": {"content": "First file", "tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}]}},
 {"reply": {"content": "Slow", "tool_calls": [{"name": "write_file", "arguments": {"path": "two.txt", "content": "2\n"}}, {"name": "run_command", "arguments": {"command": "sleep 6; echo slept"}}]}},
 {"reply": {"content": "Third file", "tool_calls": [{"name": "write_file", "arguments": {"path": "three.txt", "content": "3\n"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}}
]
JSON
        model "$WORK/kill-$what.json" || { fail "model server"; return; }
        make_repo "kill$what"
        id=$(submit "kill$what") || { fail "submit: $id"; return; }
        for i in $(seq 240); do hx pgrep -f '^sleep 6$' >/dev/null && break; sleep 0.25; done
        hx pgrep -f '^sleep 6$' >/dev/null || { fail "the command never ran: $(task_prop "$id" State) $(task_prop "$id" Reason)"; return; }
        if [ "$what" = sandbox ]; then
                pid=$(hx systemctl show -p MainPID --value "agentfab-task-$id.scope")
                [ -n "$pid" ] && [ "$pid" != 0 ] || pid=$(hx cat "/sys/fs/cgroup/systemd/agentfab.slice/agentfab-task-$id.scope/cgroup.procs" 2>/dev/null | head -1)
        else
                pid=$(hx systemctl show -p MainPID --value "$(hx systemctl list-units --no-legend --plain 'agentfab-launcher@*.service' | awk '{print $1}' | head -1)")
        fi
        [ -n "$pid" ] && [ "$pid" != 0 ] || { fail "no $what process to kill"; return; }
        hx kill -KILL "$pid" && ok "the $what (pid $pid) killed during 'sleep 6'" || fail "kill $pid"
        # The sandbox does not outlive its launcher, which holds its uid.
        for i in $(seq 20); do hx pgrep -f '^sleep 6$' >/dev/null || break; sleep 0.1; done
        ! hx pgrep -f '^sleep 6$' >/dev/null && ok "the command ended with the $what" || fail "the command still runs"
        if wait_state "$id" 60 failed succeeded; then
                reason=$(task_prop "$id" Reason)
                ok "the task is $(task_prop "$id" State)${reason:+: $reason}"
        else
                fail "the task did not end: $(task_prop "$id" State): $(task_prop "$id" Reason)"
        fi
        for i in $(seq 40); do out=$(sandbox_gone "$id") && break; sleep 0.25; done
        out=$(sandbox_gone "$id") && ok "no scope, process of a task uid or uid lock left" || fail "left behind: $out"
        out=$(hx grep -c "/tasks/$id/" /proc/self/mountinfo)
        [ "$out" = 0 ] && ok "no mount of the task's workspace left" || fail "$out mounts left"
        files_whole "$id" && ok "the task's files are whole" || fail "torn: $(files_whole "$id" 2>&1)"
        if [ "$(task_prop "$id" State)" = failed ]; then
                out=$(hx_as alice "${CTL[@]}" resume "$id" 2>&1) || { fail "resume: $out"; return; }
                if wait_state "$id" 90 succeeded; then ok "resumed in a new sandbox and succeeded"; else
                        fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        fi
        check_complete "$id" "$what killed"
        out=$(sandbox_gone "$id") && ok "nothing left after delivery" || fail "left behind: $out"
}

t_sandbox_killed() {
        echo "=== a sandbox killed in the middle of a command"
        kill_during_command sandbox
        echo "=== the launcher killed in the middle of a command"
        kill_during_command launcher
}

# journal_of ID EVENT CURSOR: how many entries of EVENT for task ID came
# after CURSOR (filtered here: journalctl 252 with a match and
# --after-cursor leaves out the first entry that matches).
journal_of() {
        hx journalctl -q --after-cursor="$3" -o json | python3 -c '
import json, sys
print(sum(1 for j in map(json.loads, sys.stdin) if j.get("AGENTFAB_TASK") == sys.argv[1] and j.get("AGENTFAB_EVENT") == sys.argv[2]))' "$1" "$2"
}

restart_daemon() {
        local i
        for i in $(seq 80); do
                hx timeout 5 busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 \
                        ListTasks >/dev/null 2>&1 && return 0
                sleep 0.25
        done
        return 1
}

# A restarted daemon takes up a task's running sandbox only when no command
# ran in it and it checks out; otherwise the sandbox ends and the task goes
# on in a new one, its step done again once, nothing left behind.
t_sigkill_reattach() {
        local id i pid cursor out
        echo "=== agentfabd SIGKILLed while a command runs: the sandbox is not taken up again"
        cat > "$WORK/sk-cmd.json" <<'JSON'
[
 {"reply": {"content": "Plan: a file, a slow command, the fix."}},
 {"reply": {"content": "First file", "tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}]}},
 {"reply": {"content": "Slow", "tool_calls": [{"name": "write_file", "arguments": {"path": "two.txt", "content": "2\n"}}, {"name": "run_command", "arguments": {"command": "sleep 6; echo slept"}}]}},
 {"reply": {"content": "Third file", "tool_calls": [{"name": "write_file", "arguments": {"path": "three.txt", "content": "3\n"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}}
]
JSON
        model "$WORK/sk-cmd.json" || { fail "model server"; return; }
        make_repo skcmd
        id=$(submit skcmd) || { fail "submit: $id"; return; }
        for i in $(seq 240); do hx pgrep -f '^sleep 6$' >/dev/null && break; sleep 0.25; done
        pid=$(hx pgrep -f '^sleep 6$') || { fail "the command never ran: $(task_prop "$id" State) $(task_prop "$id" Reason)"; return; }
        cursor=$(hx journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p')
        hx systemctl kill -s KILL agentfab.service
        restart_daemon && ok "agentfabd killed during 'sleep 6' and started again" || { fail "agentfabd not back"; return; }
        # The command's sandbox saw its connection close and ended with it.
        for i in $(seq 40); do hx kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        ! hx kill -0 "$pid" 2>/dev/null && ok "the command in flight ended with its sandbox" || fail "the old command still runs"
        if wait_state "$id" 90 succeeded; then ok "the task succeeded"; else
                fail "the task: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(journal_of "$id" sandbox-reattached "$cursor")" = 0 ] && [ "$(journal_of "$id" sandbox "$cursor")" -ge 1 ] &&
                ok "its step went on in a new sandbox, not the one of the command" ||
                fail "reattached $(journal_of "$id" sandbox-reattached "$cursor"), new $(journal_of "$id" sandbox "$cursor")"
        check_complete "$id" "killed during a command"
        for i in $(seq 40); do out=$(sandbox_gone "$id") && break; sleep 0.25; done
        out=$(sandbox_gone "$id") && ok "nothing left behind" || fail "left behind: $out"

        echo "=== agentfabd SIGKILLed after its stored sandbox ended: a new one, nothing left behind"
        step_script 6 "$WORK/sk-dead.json"
        model "$WORK/sk-dead.json" || { fail "model server"; return; }
        make_repo skdead
        id=$(submit skdead) || { fail "submit: $id"; return; }
        for i in $(seq 240); do [ "$(steps "$id")" = "1 " ] && break; sleep 0.25; done
        [ "$(steps "$id")" = "1 " ] || { fail "step 1 never done: $(task_prop "$id" State)"; return; }
        # The daemon stands still, so that it does not see the sandbox end;
        # the sandbox's PID 1 is killed; then the daemon.
        hx systemctl kill -s STOP agentfab.service
        pid=$(hx cat "/sys/fs/cgroup/systemd/agentfab.slice/agentfab-task-$id.scope/cgroup.procs" 2>/dev/null | head -1)
        [ -n "$pid" ] || pid=$(hx sh -c "cat /sys/fs/cgroup/systemd/*/agentfab-task-$id.scope/cgroup.procs /sys/fs/cgroup/systemd/agentfab-task-$id.scope/cgroup.procs 2>/dev/null" | head -1)
        [ -n "$pid" ] || { fail "no sandbox process"; hx systemctl kill -s CONT agentfab.service; return; }
        hx kill -KILL "$pid"
        for i in $(seq 40); do hx kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        cursor=$(hx journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p')
        hx systemctl kill -s KILL agentfab.service
        hx systemctl kill -s CONT agentfab.service 2>/dev/null
        restart_daemon && ok "the sandbox (pid $pid) and agentfabd killed, agentfabd started again" || { fail "agentfabd not back"; return; }
        if wait_state "$id" 90 succeeded; then ok "the task succeeded"; else
                fail "the task: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        # systemd drops a stored connection that hangs up by itself; one
        # that is still there is refused by the daemon's checks.
        [ "$(journal_of "$id" sandbox-reattached "$cursor")" = 0 ] && [ "$(journal_of "$id" sandbox "$cursor")" -ge 1 ] &&
                ok "the task went on in a new sandbox" ||
                fail "reattached $(journal_of "$id" sandbox-reattached "$cursor"), new $(journal_of "$id" sandbox "$cursor")"
        check_complete "$id" "stored sandbox dead"
        for i in $(seq 40); do out=$(sandbox_gone "$id") && break; sleep 0.25; done
        out=$(sandbox_gone "$id") && ok "nothing left behind" || fail "left behind: $out"

        echo "=== a live stored sandbox refused by the restarted daemon: it ends, a new one, nothing left behind"
        # The next instance does not take sandboxes up (AGENTFAB_NO_REATTACH=1);
        # the one at work has its environment from its start.
        hx mkdir -p /run/systemd/system/agentfab.service.d
        printf '[Service]\nEnvironment=AGENTFAB_NO_REATTACH=1\n' | hx tee /run/systemd/system/agentfab.service.d/60-faults.conf >/dev/null
        hx systemctl daemon-reload
        model "$WORK/sk-dead.json" || { fail "model server"; return; }
        make_repo skoff
        id=$(submit skoff) || { fail "submit: $id"; return; }
        for i in $(seq 240); do [ "$(steps "$id")" = "1 " ] && break; sleep 0.25; done
        [ "$(steps "$id")" = "1 " ] || { fail "step 1 never done: $(task_prop "$id" State)"; return; }
        sleep 1   # step 2's model call is in flight
        pid=$(hx cat "/sys/fs/cgroup/systemd/agentfab.slice/agentfab-task-$id.scope/cgroup.procs" 2>/dev/null | head -1)
        cursor=$(hx journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p')
        hx systemctl kill -s KILL agentfab.service
        restart_daemon && ok "agentfabd killed and started again" || { fail "agentfabd not back"; return; }
        for i in $(seq 40); do [ -n "$pid" ] && hx kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        [ -n "$pid" ] && ! hx kill -0 "$pid" 2>/dev/null && ok "the refused sandbox (pid $pid) ended" ||
                fail "the refused sandbox (pid '$pid') still lives"
        for i in $(seq 50); do
                out=$(hx journalctl -q --after-cursor="$cursor" -o cat | grep "Not taking up the sandbox connection 'running-$id")
                [ -n "$out" ] && break
                sleep 0.1
        done
        [ -n "$out" ] && ok "the journal says why: ${out#*: }" || fail "no refusal in the journal"
        if wait_state "$id" 90 succeeded; then ok "the task succeeded in a new sandbox"; else
                fail "the task: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        check_complete "$id" "stored sandbox refused"
        for i in $(seq 40); do out=$(sandbox_gone "$id") && break; sleep 0.25; done
        out=$(sandbox_gone "$id") && ok "nothing left behind" || fail "left behind: $out"
        hx rm -f /run/systemd/system/agentfab.service.d/60-faults.conf
        hx systemctl daemon-reload
}

# A step the bus reports as done is in the state file: its acknowledgement
# is written in a worker thread, and memory (which the bus shows) takes it
# only once the file holds it. SIGKILLed right after a Step property is
# read, the restarted daemon reports at least that step; and the task ends
# with every step once.
t_step_durable() {
        local n=${DURABLE_KILLS:-6} writes=30 id i k seen after bad=0
        echo "=== agentfabd SIGKILLed right after the bus reported a step: the step stays done"
        python3 - "$writes" > "$WORK/durable.json" <<'PY'
import json, sys
n = int(sys.argv[1])
s = [{"reply": {"content": "Plan: %d files, then the fix." % n}}]
for i in range(1, n + 1):
    s.append({"delay": 0.4, "reply": {"content": "File %d" % i, "tool_calls": [
        {"name": "write_file", "arguments": {"path": "progress.txt", "content": "step %d\n" % i}},
        {"name": "read_file", "arguments": {"path": "progress.txt"}},
        {"name": "search", "arguments": {"pattern": "step %d" % i}}]}})
s.append({"reply": {"content": "Fix add", "tool_calls": [
    {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}})
s.append({"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}})
print(json.dumps(s))
PY
        model "$WORK/durable.json" || { fail "model server"; return; }
        make_repo durable
        id=$(submit durable --limit max_steps=$((writes + 10))) || { fail "submit: $id"; return; }
        seen=0
        for k in $(seq "$n"); do
                # The next step the bus reports, then the kill at once.
                for i in $(seq 200); do
                        after=$(hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$id" \
                                org.agentfab.Task1 Step 2>/dev/null | awk '{print $2}')
                        [ -n "$after" ] && [ "$after" -gt "$seen" ] && break
                        sleep 0.05
                done
                [ -n "$after" ] && [ "$after" -gt "$seen" ] || { fail "no step after $seen: $(task_prop "$id" State)"; return; }
                seen=$after
                hx systemctl kill -s KILL agentfab.service 2>/dev/null
                restart_daemon || { fail "agentfabd not back"; return; }
                after=$(task_prop "$id" Step)
                if [ -n "$after" ] && [ "$after" -ge "$seen" ]; then
                        echo "    kill $k after step $seen was reported: step $after after the restart"
                else
                        fail "step $seen was reported before the kill, $after after it"; bad=1
                fi
        done
        [ "$bad" = 0 ] && ok "$n kills right after a step was reported: none of those steps was lost"
        if wait_state "$id" 180 succeeded; then ok "the task succeeded"; else
                fail "the task: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        local want_steps
        want_steps=$(seq -s ' ' 1 $((writes + 1)))' '
        [ "$(steps "$id")" = "$want_steps" ] && [ "$(assistant "$id")" = $((writes + 4)) ] && files_whole "$id" &&
                ok "steps 1-$((writes + 1)) once each, $((writes + 4)) assistant messages, files whole" ||
                fail "steps '$(steps "$id")', assistant messages $(assistant "$id"), files whole: $(files_whole "$id" 2>&1 && echo yes || echo no)"
}

t_reboot() {
        echo "=== a reboot with one task paused for approval and one at work"
        step_script 5 "$WORK/reboot.json"
        model "$WORK/reboot.json" || { fail "model server"; return; }
        make_repo rb1
        make_repo rb2
        local a b i out
        a=$(submit rb1 --limit max_steps=1) || { fail "submit: $a"; return; }
        b=$(submit rb2) || { fail "submit: $b"; return; }
        wait_state "$a" 60 awaiting-approval && ok "task 1 paused for approval" ||
                { fail "task 1: $(task_prop "$a" State) $(task_prop "$a" Reason)"; return; }
        for i in $(seq 480); do [ "$(steps "$b")" = "1 " ] && break; sleep 0.25; done
        [ "$(steps "$b")" = "1 " ] && ok "task 2 at work on step 2" || { fail "task 2 never reached step 1"; return; }
        harness_reboot reboot && ok "the test system rebooted (in $HARNESS_BOOT_MS ms)" || { fail "reboot"; return; }
        # Nobody asks: the daemon comes back by itself for the task at work.
        for i in $(seq 120); do [ "$(steps "$b")" = "1 2 3 4 " ] && break; sleep 0.25; done
        [ "$(steps "$b")" = "1 2 3 4 " ] && ok "task 2 went on after the boot without a client asking" ||
                fail "task 2 did not go on by itself (steps '$(steps "$b")', agentfab.service $(hx systemctl is-active agentfab.service))"
        if wait_state "$b" 90 succeeded; then ok "task 2 succeeded"; else
                fail "task 2: $(task_prop "$b" State): $(task_prop "$b" Reason)"; fi
        check_complete "$b" "task at work across the reboot"
        [ "$(task_prop "$a" State)" = awaiting-approval ] && ok "task 1 is still paused for approval" ||
                fail "task 1: $(task_prop "$a" State)"
        [ "$(task_prop "$a" Breaker)" = budget ] && ok "with its breaker" || fail "breaker: $(task_prop "$a" Breaker)"
        out=$(hx "${CTL[@]}" cancel "$a" 2>&1) && ok "and can be cancelled" || fail "cancel: $out"
}

t_kill9_many() {
        local ntasks=${KILL_TASKS:-20} nkills=${KILLS:-20} writes=${KILL_STEPS:-80}
        echo "=== SIGKILL of the daemon at $nkills random moments across $ntasks tasks at work"
        RANDOM=${SEED:-$$}
        python3 - "$writes" > "$WORK/many.json" <<'PY'
import json, sys
n = int(sys.argv[1])
s = [{"reply": {"content": "Plan: %d files, then the fix." % n}}]
for i in range(1, n + 1):
    s.append({"delay": 1.0, "reply": {"content": "File %d" % i, "tool_calls": [
        {"name": "write_file", "arguments": {"path": "progress.txt", "content": "step %d\n" % i}}]}})
s.append({"delay": 0.5, "reply": {"content": "Fix add", "tool_calls": [
    {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}})
s.append({"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}})
print(json.dumps(s))
PY
        model "$WORK/many.json" || { fail "model server"; return; }
        make_repo many
        local ids=() id i k ms t0 restarted=0 active
        for i in $(seq "$ntasks"); do
                id=$(submit many --limit max_steps=$((writes + 10))) || { fail "submit $i: $id"; return; }
                ids+=("$id")
        done
        ok "$ntasks tasks submitted"
        t0=$(date +%s)
        for k in $(seq "$nkills"); do
                ms=$(( 1000 + RANDOM % 2500 ))
                sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
                active=$(hx systemctl show -p StatusText --value agentfab.service)
                hx systemctl kill -s KILL agentfab.service 2>/dev/null
                # Restart=on-failure brings it back; a call would as well.
                for i in $(seq 80); do
                        hx timeout 5 busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 \
                                ListTasks >/dev/null 2>&1 && break
                        sleep 0.25
                done
                echo "    kill $k after ${ms} ms ($active)"
        done
        ok "$nkills SIGKILLs in $(( $(date +%s) - t0 )) s"
        local mainpid
        mainpid=$(hx systemctl show -p MainPID --value agentfab.service)
        echo "    agentfabd holds $(hx ls "/proc/$mainpid/fd" 2>/dev/null | wc -l) descriptors;" \
                "$(hx grep 'Max open files' "/proc/$mainpid/limits" 2>/dev/null | tr -s ' ')"
        hx systemctl show -p NRestarts agentfab.service | sed 's/^/    /'
        hx "${CTL[@]}" list --all 2>&1 | awk '{print $2}' | sort | uniq -c | sed 's/^/    states:/'
        local bad=0 done_ok=0 want_steps want_msgs s n
        want_steps=$(seq -s ' ' 1 $((writes + 1)))' '
        want_msgs=$((writes + 4))   # the plan, the steps, finish, finish after the review of the diff
        for id in "${ids[@]}"; do
                if ! wait_state "$id" "${KILL_WAIT:-240}" succeeded; then
                        fail "task $id: $(task_prop "$id" State): $(task_prop "$id" Reason), steps $(steps "$id")"
                        [ "$bad" = 0 ] && hx journalctl -q --no-pager -u agentfab.service | grep -v "model default/scripted answered" | tail -40
                        bad=1; continue
                fi
                s=$(steps "$id")
                n=$(assistant "$id")
                if [ "$s" = "$want_steps" ] && [ "$n" = "$want_msgs" ] && files_whole "$id"; then
                        done_ok=$((done_ok + 1))
                else
                        fail "task $id: steps '$s' (want '$want_steps'), assistant messages $n (want $want_msgs)"; bad=1
                fi
        done
        [ "$done_ok" = "$ntasks" ] &&
                ok "all $ntasks tasks succeeded, each with steps 1-$((writes + 1)) once and $want_msgs assistant messages, files whole"
        left=$(hx systemctl list-units --all --no-legend 'agentfab-task-*.scope' | grep -v 'inactive\|not-found')
        [ -z "$left" ] && ok "no task scope left" || fail "scopes left: $left"
}

main() {
        harness_boot || { fail "harness_boot"; check_summary; exit 1; }
        hx systemctl start agentfab-launcher.socket >/dev/null 2>&1
        local t
        for t in t_disk_full t_dbus_restart t_polkit_stopped t_journald_stopped t_sandbox_killed t_sigkill_reattach t_step_durable t_reboot t_kill9_many; do
                if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $t "* ]]; then continue; fi
                declare -F "$t" >/dev/null || continue
                "$t"
        done

        echo "=== sanitizers and crashes"
        ! hx journalctl -q -u agentfab.service -u 'agentfab-launcher@*' --no-pager | grep -q 'AddressSanitizer\|runtime error:\|LeakSanitizer' &&
                ok "no sanitizer report from agentfabd or the launcher" || fail "sanitizer report in the journal"
        ! hx journalctl -q -u agentfab.service --no-pager | grep -q 'code=dumped\|status=6/ABRT\|status=11/SEGV' &&
                ok "agentfabd never crashed (only the test's SIGKILLs)" || fail "agentfabd crashed"
        if [ "$FAILED" != 0 ]; then
                echo "--- journal of agentfab (last 60 lines)"
                hx journalctl -q --no-pager -u agentfab.service | tail -60
        fi
        stop_model
        harness_teardown
        check_summary
}

main "$@"
