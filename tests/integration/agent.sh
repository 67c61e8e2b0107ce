#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The agent end to end: real tasks through the real agentfabd, launcher,
# sandbox (agentfab-task-ID.scope under the real systemd of the harness),
# git ledger and journal, with a scripted OpenAI-compatible model server
# (tests/model-server.py) that the real libcurl client talks to over
# loopback. Nothing is mocked but the model's mind.
#
#   tests/integration/agent.sh BUILDDIR
#
# Needs root. Prints "  ok: ..." / "  FAIL: ..." lines and "N passed, N failed".
set -u

BUILDDIR=$(realpath "${1:?usage: agent.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/agent-evidence.sh"
. "$HERE/agent-pause.sh"
. "$HERE/agent-budget.sh"
. "$HERE/agent-review.sh"
. "$HERE/agent-tree.sh"
. "$HERE/agent-leave-out.sh"
. "$HERE/agent-tests-speak.sh"
. "$HERE/agent-context.sh"
. "$HERE/agent-open-models.sh"
. "$HERE/agent-git.sh"
. "$HERE/agent-plan.sh"
. "$HERE/agent-edits.sh"
. "$HERE/agent-outline.sh"
. "$HERE/agent-syntax.sh"
. "$HERE/agent-finish-review.sh"
. "$HERE/agent-resources.sh"

. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "agent tests need root"

# Once in CI the scripted model server was unreachable for a task (ASan
# run, load 12): say what became of it, should it recur.
check_on_fail() {
        [[ "$*" == *"Couldn't connect"* || "$*" == *"Couldn\\'t connect"* ]] || return 0
        echo "    model server (pid ${MODEL_PID:-none}, port $PORT):" \
                "$([ -n "$MODEL_PID" ] && kill -0 "$MODEL_PID" 2>/dev/null && echo alive || echo gone)," \
                "listening: $(ss -Hltn "sport = :$PORT" 2>/dev/null | wc -l), errors: $(tail -c 300 "$WORK/model.err" 2>/dev/null)"
}

WORK=$(mktemp -d /tmp/agentfab-agent.XXXXXX)
MODEL_PID=
FORGE_PID=
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
FORGE_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
FORGE_TOKEN=forge-tok-secret-0815
# t_ssh_repo: an OpenSSH server on the host's loopback, its files in a
# directory the test user can reach (WORK is private to root).
SSH_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SSH_DIR=$(mktemp -d /tmp/agentfab-ssh.XXXXXX)
chmod 755 "$SSH_DIR"
SSH_USER=agentfab-git-test
SSHD_PID=

stop_model() {
        if [ -n "$MODEL_PID" ]; then
                kill "$MODEL_PID" 2>/dev/null
                wait "$MODEL_PID" 2>/dev/null
                MODEL_PID=
        fi
}

stop_forge() {
        if [ -n "$FORGE_PID" ]; then
                kill "$FORGE_PID" 2>/dev/null
                wait "$FORGE_PID" 2>/dev/null
                FORGE_PID=
        fi
}

# forge: (re)starts the small forge (tests/forge-server.py) on $FORGE_PORT,
# on the host's loopback like the model server; it logs every request.
forge() {
        stop_forge
        : > "$WORK/forge.jsonl"
        python3 "$SRC/tests/forge-server.py" --log "$WORK/forge.jsonl" --port "$FORGE_PORT" \
                > "$WORK/forge.out" 2> "$WORK/forge.err" &
        FORGE_PID=$!
        local i
        for i in $(seq 100); do
                [ -s "$WORK/forge.out" ] && return 0
                sleep 0.05
        done
        echo "forge server did not start: $(cat "$WORK/forge.err")"
        return 1
}

stop_sshd() {
        if [ -n "$SSHD_PID" ]; then
                kill "$SSHD_PID" 2>/dev/null
                wait "$SSHD_PID" 2>/dev/null
                SSHD_PID=
        fi
}

cleanup() {
        stop_model
        stop_forge
        stop_sshd
        if id "$SSH_USER" >/dev/null 2>&1; then userdel "$SSH_USER" 2>/dev/null; fi
        rm -rf "$WORK" "$SSH_DIR"
}
trap cleanup EXIT

# model SCRIPT [--by-step]: (re)starts the scripted model server on $PORT.
# The harness shares the host's network namespace, so agentfabd inside
# reaches it on 127.0.0.1. With --by-step the reply is chosen by how many
# assistant messages the request carries, so a step that is redone after
# a crash gets the same answer.
model() {
        local script=$1; shift
        stop_model
        : > "$WORK/requests.jsonl"
        python3 "$SRC/tests/model-server.py" --script "$script" --log "$WORK/requests.jsonl" --port "$PORT" "$@" \
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
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket >/dev/null 2>&1 || return 1

        # A sanitizer build reports into the journal and must not stop at exit
        # for leak checks, which need ptrace (refused by the unit's filter).
        if meson introspect --buildoptions "$BUILDDIR" | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "b_sanitize" and o["value"] not in ("none", "") for o in json.load(sys.stdin)) else 1)'; then
                local unit
                for unit in agentfab.service agentfab-launcher@.service; do
                        mkdir -p "$R/etc/systemd/system/$unit.d"
                        printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1\n' \
                                > "$R/etc/systemd/system/$unit.d/sanitizer.conf"
                done
        fi

        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-test.conf" <<EOF
[Daemon]
IdleTimeoutSec=30

[Agent]
CommandTimeoutSec=60

[Breakers]
MaxConsecutiveTestFailures=3
MaxMalformedReplies=5

[Model]
Name=default
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
TimeoutSec=20
MaxRetries=3
RetryBaseSec=200ms

[Model]
Name=tight
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted-small
ContextBudget=3000

[Model]
Name=keyed
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted-keyed
APIKeyCredential=model-key

# A file:// push target is for tests only (AllowFileURLs=yes).
[Forge]
Name=testforge
Kind=gitea
API=http://127.0.0.1:$FORGE_PORT/api/v1
TokenCredential=forge-token
AllowFileURLs=yes

[Forge]
Name=tokenforge
Kind=github
API=https://api.github.com
TokenCredential=forge-token

[Git]
SSHKeyCredential=git-key
SSHKnownHostsCredential=git-known-hosts

# t_environments: a tiny image made from the host's files, and a broken one.
[Environment]
Name=tiny
Image=/var/lib/machines/tiny
Cache=pip
CacheMaxSize=64K
Environment=FOO=bar

[Environment]
Name=loose
Image=/var/lib/machines/loose
EOF
        bash "$SRC/tests/integration/lib/tiny-image.sh" "$R/var/lib/machines/tiny" sh cat ls id env true echo test grep mkdir head || return 1
        bash "$SRC/tests/integration/lib/tiny-image.sh" "$R/var/lib/machines/loose" sh cat true grep || return 1
        chmod o+w "$R/var/lib/machines/loose/usr/bin"
        # The key is a credential of the service, as an administrator would set it up.
        printf 'sk-test-secret-4711\n' > "$R/etc/agentfab/model-key"
        chmod 600 "$R/etc/agentfab/model-key"
        mkdir -p "$R/etc/systemd/system/agentfab.service.d"
        printf '[Service]\nLoadCredential=model-key:/etc/agentfab/model-key\n' > "$R/etc/systemd/system/agentfab.service.d/50-model-key.conf"

        # The forge's token, likewise; and a bare repository as the push
        # target, owned by the daemon's user and writable for it only
        # through this drop-in (ProtectSystem=strict keeps /srv read-only).
        printf '%s\n' "$FORGE_TOKEN" > "$R/etc/agentfab/forge-token"
        chmod 600 "$R/etc/agentfab/forge-token"
        printf '[Service]\nLoadCredential=forge-token:/etc/agentfab/forge-token\nReadWritePaths=-/srv/remote.git\n' \
                > "$R/etc/systemd/system/agentfab.service.d/50-forge.conf"
        rm -rf "$R/srv/remote.git"
        mkdir -p "$R/srv"
        git init -q --bare --initial-branch=main "$R/srv/remote.git" || return 1
        local afuid
        afuid=$(awk -F: '$1 == "agentfab" {print $3 ":" $4}' "$R/etc/passwd")
        [ -n "$afuid" ] && chown -R "$afuid" "$R/srv/remote.git" || return 1
        local u
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

        # A certificate for the https repository server of t_https_repo, trusted
        # inside the booted system as a site's own CA would be (before boot:
        # libgit2 reads the trust store once, when agentfabd starts).
        mkdir -p "$WORK/https" "$R/usr/local/share/ca-certificates"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/https/key.pem" -out "$WORK/https/cert.pem" -days 2 \
                -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >/dev/null 2>&1 || return 1
        cp "$WORK/https/cert.pem" "$R/usr/local/share/ca-certificates/agentfab-test.crt"
        chroot "$R" update-ca-certificates >/dev/null 2>&1 || return 1
        echo 'carol:carol-secret' | chpasswd --root "$R" || return 1

        # t_ssh_repo: the ssh server's host key, the daemon's client key and
        # two known hosts credentials, the right one and one that lists
        # another key for the same host and port.
        local S=$SSH_DIR
        rm -f "$S/hostkey" "$S/client" "$S/other"
        ssh-keygen -q -t ed25519 -N '' -C sshd-test -f "$S/hostkey" || return 1
        ssh-keygen -q -t ed25519 -N '' -C agentfab-test -f "$S/client" || return 1
        ssh-keygen -q -t ed25519 -N '' -C other -f "$S/other" || return 1
        install -m 600 "$S/client" "$R/etc/agentfab/git-key" || return 1
        printf '# the test server\n[127.0.0.1]:%s %s\n' "$SSH_PORT" "$(cut -d' ' -f1,2 "$S/hostkey.pub")" \
                > "$R/etc/agentfab/git-known-hosts" || return 1
        printf '[127.0.0.1]:%s %s\n' "$SSH_PORT" "$(cut -d' ' -f1,2 "$S/other.pub")" \
                > "$R/etc/agentfab/git-known-hosts-wrong" || return 1
        printf '[Service]\nLoadCredential=%s\nLoadCredential=%s\nLoadCredential=%s\n' git-key:/etc/agentfab/git-key \
                git-known-hosts:/etc/agentfab/git-known-hosts git-known-hosts-wrong:/etc/agentfab/git-known-hosts-wrong \
                > "$R/etc/systemd/system/agentfab.service.d/50-git.conf"
        review_prepare_root "$R"
        context_prepare_root "$R"
        open_models_prepare_root "$R"
        resources_prepare_root "$R"
}

CTL=(agentfabctl --no-ask-password)
task_prop() { hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$1" org.agentfab.Task1 "$2" 2>/dev/null | sed 's/^[a-z] "\{0,1\}\(.*\)"\{0,1\}$/\1/; s/"$//'; }

# wait_state ID STATE...: until the task is in one of the states (60 s).
wait_state() {
        local id=$1 s i; shift
        for i in $(seq 240); do
                s=$(task_prop "$id" State)
                for want in "$@"; do [ "$s" = "$want" ] && return 0; done
                case $s in succeeded|failed|cancelled) [[ " $* " == *" $s "* ]] || return 1 ;; esac
                sleep 0.25
        done
        return 1
}

# A small Python project whose test fails: add() subtracts.
make_repo() {
        local name=$1
        hx_as alice bash -c "set -e; cd ~ && rm -rf $name && mkdir $name && cd $name && git init -q &&
                printf 'def add(a, b):\n    return a - b\n' > calc.py &&
                printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n\nif __name__ == \"__main__\":\n    unittest.main()\n' > test_calc.py &&
                git add . && git -c user.name=alice -c user.email=alice@example.com commit -q -m 'calc with a bug' &&
                git checkout -q -b work && echo 'local notes' > NOTES && chmod -R a+rX ~/$name"
}

submit() {
        local repo=$1; shift
        hx_as alice "${CTL[@]}" submit --repo "/home/alice/$repo" --goal "Make add() add" \
                --acceptance "test_calc passes" --test "python3 -m unittest -v" "$@" 2>&1
}

ledger_log() { hx git --git-dir="/var/lib/agentfab/tasks/$1/ledger.git" log --format=full "agentfab/$1"; }

# ---------------------------------------------------------------- scenarios

t_fix_and_deliver() {
        echo "=== fix a failing test and deliver the branch"
        cat > "$WORK/fix.json" <<'EOF'
[
 {"reply": {"content": "Plan:\n1. Read calc.py.\n2. Make add() return a + b.\n3. Run the tests and finish.\nRisks: none.", "usage": {"prompt_tokens": 100, "completion_tokens": 20}}},
 {"reply": {"content": null, "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}, "stream": true},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() now adds; both tests pass."}}]}}
]
EOF
        model "$WORK/fix.json" --by-step || { fail "model server"; return; }
        make_repo proj
        local before id
        before=$(hx_as alice bash -c 'cd ~/proj && git rev-parse HEAD && git status --porcelain && git branch --show-current && sha256sum calc.py NOTES')
        id=$(submit proj) || { fail "submit: $id"; return; }
        ok "submitted $id"
        if wait_state "$id" succeeded; then ok "task succeeded"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"
                hx journalctl -q -u agentfab.service -u 'agentfab-launcher@*' --no-pager | tail -30
                return
        fi
        FIX_ID=$id

        local plan log commit
        plan=$(task_prop "$id" Plan)
        [[ $plan == *"Make add() return a + b"* ]] && ok "Plan property holds the plan" || fail "plan: $plan"
        log=$(ledger_log "$id")
        echo "$log" | sed -n '1,40p' | sed 's/^/    | /'
        grep -q "Agentfab-Task: $id" <<<"$log" && ok "commit has Agentfab-Task trailer" || fail "no task trailer"
        grep -q "Agentfab-Step: 2" <<<"$log" && ok "commit has Agentfab-Step trailer" || fail "no step trailer"
        grep -q "Agentfab-Model: default/scripted" <<<"$log" && ok "commit names the model" || fail "no model trailer"
        grep -q "^Author: agentfab" <<<"$log" && ok "agentfab is the author" || fail "author"
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:calc.py" | grep -q 'return a + b' &&
                ok "the branch has the fix" || fail "fix not on branch"
        commit=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%H --grep="Agentfab-Step: 2" "agentfab/$id" | head -1)
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=step | grep -q "\"AGENTFAB_COMMIT\":\"$commit\"" &&
                ok "journal step entry carries the commit id" || fail "no AGENTFAB_COMMIT=$commit"
        for ev in plan model-call command file-change step delivered; do
                hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=$ev _SYSTEMD_UNIT=agentfab.service | grep -q . &&
                        ok "journal has $ev entries" || fail "no $ev entry"
        done
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep -q 'python3 -m unittest' &&
                ok "the test command is journaled" || fail "test command not journaled"

        # The sandbox ran the tests: as the unprivileged user, inside its scope.
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=command | grep -q '"AGENTFAB_EXIT_STATUS":"0"' &&
                ok "tests passed inside the sandbox" || fail "no passing command"
        [ -z "$(hx systemctl list-units --no-legend 'agentfab-task-*.scope' | grep "$id")" ] &&
                ok "the task's scope is gone after delivery" || fail "scope left behind"

        local summary
        summary=$(hx_as alice "${CTL[@]}" summary "$id")
        grep -q "Make add() add" <<<"$summary" && grep -q "calc.py" <<<"$summary" && grep -q "pass" <<<"$summary" &&
                ok "summary: goal, files, test result" || fail "summary: $summary"
        grep -q "Needs human confirmation" <<<"$summary" && ok "summary lists what needs confirmation" || fail "no confirmation list"

        hx_as alice "${CTL[@]}" diff "$id" | grep -q '^+    return a + b' && ok "agentfabctl diff" || fail "diff"
        hx_as alice "${CTL[@]}" logs "$id" | grep -q 'python3 -m unittest' && ok "agentfabctl logs shows the commands' output" || fail "logs"
        hx_as alice bash -c "${CTL[*]} export $id --format=bundle > /tmp/b.bundle && cd ~/proj && git bundle verify /tmp/b.bundle" >/dev/null 2>&1 &&
                ok "exported bundle verifies" || fail "bundle verify"
        hx_as alice "${CTL[@]}" export "$id" --format=mbox | grep -q '^Subject: \[PATCH' && ok "mbox export" || fail "mbox"

        out=$(hx_as alice "${CTL[@]}" fetch "$id" 2>&1) && ok "fetch into the user's repository" || fail "fetch: $out"
        hx_as alice git -C /home/alice/proj log --format=%B "agentfab/$id" | grep -q "Agentfab-Task: $id" &&
                ok "fetched branch has the checkpoints" || fail "fetched branch"
        local after
        after=$(hx_as alice bash -c 'cd ~/proj && git rev-parse HEAD && git status --porcelain && git branch --show-current && sha256sum calc.py NOTES')
        [ "$before" = "$after" ] && ok "user's checkout, branch and files untouched" || fail "user's repo changed: $before / $after"
        expect_refused "1:Branch 'agentfab/$id' exists already" "existing branch never overwritten (exit 1)" \
                hx_as alice "${CTL[@]}" fetch "$id"
}

t_step_trailers() {
        echo "=== a step that edits, runs a command and the tests: its commit says so"
        cat > "$WORK/trailers.json" <<'EOF'
[
 {"reply": {"content": "Plan:\n1. Fix add() and check it.\nRisks: none.", "usage": {"prompt_tokens": 100, "completion_tokens": 20}}},
 {"reply": {"content": "Fix add() and prove it", "tool_calls": [
   {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}},
   {"name": "run_command", "arguments": {"command": "python3 -c 'import calc; print(calc.add(2, 3))'"}},
   {"name": "run_command", "arguments": {"command": "echo \"uid=$(id -u) gid=$(id -g) owner=$(stat -c %u /workspace)\""}},
   {"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}}
]
EOF
        model "$WORK/trailers.json" --by-step || { fail "model server"; return; }
        make_repo trailers
        local id log
        id=$(submit trailers) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "task succeeded"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        log=$(ledger_log "$id")
        echo "$log" | sed -n '1,20p' | sed 's/^/    | /'
        grep -q "Agentfab-Command: python3 -c 'import calc; print(calc.add(2, 3))'" <<<"$log" &&
                ok "the step's command is an Agentfab-Command trailer" || fail "no command trailer"
        grep -q "Agentfab-Tests: pass (python3 -m unittest -v, exit 0)" <<<"$log" &&
                ok "its test run is the Agentfab-Tests trailer" || fail "no tests trailer"

        # The sandbox's commands ran as a uid of the task's own, which the journal names.
        local suid afuid out
        suid=$(hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=sandbox _SYSTEMD_UNIT=agentfab.service |
                python3 -c 'import json,sys; print([json.loads(l)["AGENTFAB_SANDBOX_UID"] for l in sys.stdin][0])' 2>/dev/null)
        afuid=$(hx id -u agentfab)
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        [[ "$suid" =~ ^[0-9]+$ ]] && [ "$suid" -ge 393216 ] && [ "$suid" -le 458751 ] && [ "$suid" != "$afuid" ] &&
                grep -q "uid=$suid gid=$suid owner=$suid" <<<"$out" &&
                ok "commands ran as the task's own uid $suid (agentfab is $afuid), owning /workspace there" ||
                fail "sandbox uid '$suid' (agentfab $afuid): $(grep 'uid=' <<<"$out")"
}

t_reset_to() {
        echo "=== ResetTo: a failed task goes back to a checkpoint and resumes from there"
        cat > "$WORK/reset.json" <<'EOF'
[
 {"reply": {"content": "Plan: two files, then more.\nRisks: none."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": "Second file", "tool_calls": [{"name": "write_file", "arguments": {"path": "two.txt", "content": "two\n"}}]}},
 {"status": 400, "body": "{\"error\": {\"message\": \"scripted refusal\"}}"}
]
EOF
        model "$WORK/reset.json" --by-step || { fail "model server"; return; }
        make_repo resetme
        local id out step1 step2 base T=/var/lib/agentfab/tasks
        id=$(submit resetme) || { fail "submit: $id"; return; }
        if wait_state "$id" failed; then ok "the task failed after two checkpoints"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        step1=$(hx git --git-dir="$T/$id/ledger.git" log --format=%H --grep="Agentfab-Step: 1$" "agentfab/$id" | head -1)
        step2=$(hx git --git-dir="$T/$id/ledger.git" log --format=%H --grep="Agentfab-Step: 2$" "agentfab/$id" | head -1)
        [ -n "$step1" ] && [ -n "$step2" ] && ok "two checkpoints" || { fail "checkpoints: '$step1' '$step2'"; return; }
        out=$(hx_as alice "${CTL[@]}" status "$id" 2>&1)
        grep -q "Checkpoints: 1 ${step1:0:10} Fix add" <<<"$out" && grep -q "^ *2 ${step2:0:10} Second file" <<<"$out" &&
                ok "agentfabctl status lists the checkpoints" || fail "status: $out"

        expect_refused "2:not the base nor a checkpoint" "an unknown commit refused (InvalidArgs, exit 2)" \
                hx_as alice "${CTL[@]}" reset "$id" 0123456
        expect_refused "2:neither 'base' nor a commit id" "a malformed commit refused (InvalidArgs, exit 2)" \
                hx_as alice "${CTL[@]}" reset "$id" "../../etc"
        expect_refused "3:Interactive authentication required" \
                "another user without an administrator's password cannot reset it (exit 3)" \
                hx_as carol "${CTL[@]}" reset "$id" "${step1:0:10}"
        [ "$(hx git --git-dir="$T/$id/ledger.git" rev-parse "agentfab/$id")" = "$step2" ] && ok "refusals changed nothing" || fail "changed"

        out=$(hx_as alice "${CTL[@]}" reset "$id" "${step1:0:10}" 2>&1) && ok "reset to step 1 by an abbreviated id: $out" ||
                { fail "reset: $out"; return; }
        [ "$(hx git --git-dir="$T/$id/ledger.git" rev-parse "agentfab/$id")" = "$step1" ] && ok "the branch is at step 1" || fail "branch not reset"
        hx grep -q "a + b" "$T/$id/workspace/calc.py" && hx test ! -e "$T/$id/workspace/two.txt" &&
                ok "the workspace is step 1's: two.txt gone" || fail "workspace not reset"
        [ "$(task_prop "$id" HeadCommit)" = "$step1" ] && ok "HeadCommit follows" || fail "HeadCommit $(task_prop "$id" HeadCommit)"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=reset | grep "\"AGENTFAB_COMMIT\":\"$step1\"" |
                grep -q "\"AGENTFAB_UNDONE\":\"$step2\"" &&
                ok "journal: a reset entry with AGENTFAB_COMMIT" || fail "no reset journal entry"

        # Resumed: the model hears of the reset and finishes from step 1.
        cat > "$WORK/reset2.json" <<'EOF'
[
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds"}}]}}
]
EOF
        model "$WORK/reset2.json" || { fail "model server"; return; }
        hx_as alice "${CTL[@]}" resume "$id" >/dev/null 2>&1 || { fail "resume"; return; }
        if wait_state "$id" succeeded; then ok "resumed after the reset and delivered"; else
                fail "after reset: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        grep -q "reset the workspace and the branch to the checkpoint of step 1" "$WORK/requests.jsonl" &&
                ok "the model was told of the reset" || fail "model not told"
        hx git --git-dir="$T/$id/ledger.git" merge-base --is-ancestor "$step1" "agentfab/$id" &&
                ! hx git --git-dir="$T/$id/ledger.git" merge-base --is-ancestor "$step2" "agentfab/$id" &&
                ok "the delivered branch holds step 1, not step 2" || fail "delivered history"
        expect_refused "1:is succeeded, not failed" "a delivered task cannot be reset (BadState, exit 1)" \
                hx_as alice "${CTL[@]}" reset "$id" base
}

t_replay() {
        echo "=== replay of a finished task: same commits, no model"
        [ -n "${FIX_ID:-}" ] || { fail "no finished task to replay"; return; }
        stop_model   # the replay must not need the endpoint
        local id out a b
        id=$(hx_as alice "${CTL[@]}" replay "$FIX_ID" 2>&1) || { fail "replay: $id"; return; }
        ok "replay submitted as $id"
        if wait_state "$id" succeeded; then ok "replayed task succeeded without a model server"; else
                fail "replay ended $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        a=$(hx git --git-dir="/var/lib/agentfab/tasks/$FIX_ID/ledger.git" log --format=%T "agentfab/$FIX_ID" | tr '\n' ' ')
        b=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%T "agentfab/$id" | tr '\n' ' ')
        [ -n "$a" ] && [ "$a" = "$b" ] && ok "the replay made the same trees, commit by commit" || fail "trees differ: $a / $b"
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=model-call | grep -q "\"AGENTFAB_MODEL\":\"replay/$FIX_ID\"" &&
                ok "the journal says the answers were replayed" || fail "model-call entries do not name the replay"
        out=$(hx_as alice busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 SubmitTask 'a{sv}' 3 \
                repository s /home/alice/proj goal s g replay s 000000000000 2>&1)
        grep -q "no task '000000000000' to replay" <<<"$out" && ok "replay of an unknown task refused" || fail "unknown replay: $out"
}

t_breaker_and_approval() {
        echo "=== tests keep failing: breaker, denied and authorised approval"
        cat > "$WORK/stuck.json" <<'EOF'
[
 {"reply": {"content": "Plan: run the tests until they pass."}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": "Fix it", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}}
]
EOF
        model "$WORK/stuck.json" --by-step || { fail "model server"; return; }
        make_repo stuck
        local id out rc
        id=$(submit stuck) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "paused in awaiting-approval"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = tests-failing ] && ok "Breaker is tests-failing" || fail "breaker $(task_prop "$id" Breaker)"
        [[ $(task_prop "$id" Reason) == *"3 times"* ]] && ok "Reason says how often" || fail "reason $(task_prop "$id" Reason)"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=721e187c39954be5bc87afe6ce82154c | grep -q '"AGENTFAB_BREAKER":"tests-failing"' &&
                ok "breaker journaled with its MESSAGE_ID" || fail "breaker entry"

        rc=0; out=$(hx_as alice "${CTL[@]}" approve "$id" 2>&1) || rc=$?
        [ "$rc" = 3 ] && ok "owner without authorisation: approve denied" || fail "approve by alice: $rc $out"
        [ "$(task_prop "$id" State)" = awaiting-approval ] && ok "denied approval changed nothing" || fail "state changed"

        hx "${CTL[@]}" approve "$id" --comment "go on, fix the code" >/dev/null 2>&1 && ok "root approves" || fail "root approve"
        if wait_state "$id" succeeded; then ok "approved task went on and succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        grep -q 'approved what stopped you' "$WORK/requests.jsonl" && ok "the model was told of the approval" || fail "approval not in conversation"
        hx_as alice "${CTL[@]}" summary "$id" | grep -q 'approved by root' && ok "summary names the approver" || fail "approver not in summary"
}

t_protected_reject() {
        echo "=== protected path: breaker, rejection undoes the step"
        cat > "$WORK/protected.json" <<'EOF'
[
 {"reply": {"content": "Plan: add a migration, then fix add()."}},
 {"reply": {"content": "Add a migration", "tool_calls": [{"name": "write_file", "arguments": {"path": "db/migrations/001_init.sql", "content": "CREATE TABLE t (x int);\n"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed without a migration"}}]}}
]
EOF
        model "$WORK/protected.json" --by-step || { fail "model server"; return; }
        make_repo prot
        local id
        id=$(submit prot) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "paused"; else fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = protected-path ] && ok "Breaker is protected-path" || fail "breaker $(task_prop "$id" Breaker)"
        [[ $(task_prop "$id" Reason) == *"db/migrations/001_init.sql"* ]] && ok "Reason names the path" || fail "reason $(task_prop "$id" Reason)"
        hx "${CTL[@]}" reject "$id" --comment "no schema changes" >/dev/null 2>&1 && ok "root rejects" || fail "reject"
        if wait_state "$id" succeeded; then ok "the model took another way and succeeded"; else
                fail "after rejection: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        grep -q 'no schema changes' "$WORK/requests.jsonl" && ok "the model was told why" || fail "rejection not in conversation"
        ! hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" ls-tree -r --name-only "agentfab/$id" | grep -q migrations &&
                ok "the rejected step left no trace on the branch" || fail "migration still on the branch"
        ! hx test -e "/var/lib/agentfab/tasks/$id/workspace/db/migrations/001_init.sql" &&
                ok "nor in the workspace" || fail "migration still in the workspace"
}

t_budget() {
        echo "=== step budget"
        cat > "$WORK/budget.json" <<'EOF'
[
 {"reply": {"content": "Plan: look around."}},
 {"reply": {"content": null, "tool_calls": [{"name": "list_files", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "list_files", "arguments": {}}]}}
]
EOF
        model "$WORK/budget.json" --by-step || { fail "model server"; return; }
        make_repo budget
        local id
        id=$(submit budget --limit max_steps=2) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "paused at the budget"; else fail "state $(task_prop "$id" State)"; return; fi
        [ "$(task_prop "$id" Breaker)" = budget ] && ok "Breaker is budget" || fail "breaker $(task_prop "$id" Breaker)"
        [[ $(task_prop "$id" Reason) == *"step budget"* ]] && ok "Reason names the step budget" || fail "reason $(task_prop "$id" Reason)"
        [ "$(task_prop "$id" Step)" = 2 ] && ok "stopped after 2 steps" || fail "step $(task_prop "$id" Step)"
        hx "${CTL[@]}" cancel "$id" >/dev/null 2>&1 && wait_state "$id" cancelled && ok "cancelled" || fail "cancel"
}

t_faults() {
        echo "=== a model that fails: 500, 429 with Retry-After, garbage, a cut stream"
        cat > "$WORK/faults.json" <<'EOF'
[
 {"status": 500},
 {"reply": {"content": "Plan: fix add()."}},
 {"status": 429, "retry_after": 1},
 {"reply": {"content": "Fix", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"garbage": true},
 {"reply": {"content": "garbage args", "tool_calls": [{"name": "edit_file", "arguments": "{not json"}]}},
 {"reply": {"content": "no such tool", "tool_calls": [{"name": "rm_rf", "arguments": "{}"}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "x"}}]}, "stream": true, "cut_stream_after": 2},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed despite the faults"}}]}}
]
EOF
        model "$WORK/faults.json" || { fail "model server"; return; }
        make_repo faults
        local id
        id=$(submit faults) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "task survived the faults and succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        hx journalctl -q -o json AGENTFAB_TASK="$id" AGENTFAB_EVENT=model-call | grep -q '"AGENTFAB_ATTEMPTS":"2"' &&
                ok "retries recorded (attempts 2)" || fail "no retry recorded"
        grep -q 'unknown tool\|rm_rf' "$WORK/requests.jsonl" && ok "the model was told of the unknown tool" || fail "unknown tool not reported"
        hx systemctl is-failed agentfab.service >/dev/null && fail "daemon failed" || ok "daemon never crashed"
}

t_context_budget() {
        echo "=== context budget: old tool outputs elided, goal and latest kept"
        cat > "$WORK/context.json" <<'EOF'
[
 {"reply": {"content": "Plan: read the big file three times."}},
 {"reply": {"content": null, "tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]}},
 {"reply": {"content": "Fix", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}}
]
EOF
        # In order of arrival: once steps are condensed, a request has fewer
        # assistant messages than steps, which --by-step would count.
        model "$WORK/context.json" || { fail "model server"; return; }
        make_repo ctx
        hx_as alice bash -c 'cd ~/ctx && for i in $(seq 300); do echo "line $i of a big file that fills the context"; done > big.txt &&
                git add big.txt && git -c user.name=a -c user.email=a@a commit -q -m big'
        local id
        id=$(submit ctx --model tight) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "task with a tight context budget succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        python3 - "$WORK/requests.jsonl" <<'PY' && ok "later requests elide old tool outputs, keep the goal and the latest output" || fail "no elision seen"
import json, sys
reqs = [json.loads(l)["body"] for l in open(sys.argv[1])]
# The last before the model reviews its diff (the server answers that one).
review = "Before your work is delivered, review your whole change once."
reqs = [b for b in reqs if not any(review in (m.get("content") or "") for m in b["messages"] if m.get("role") == "user")]
last = reqs[-1]["messages"]
text = json.dumps(last)
assert "elided to fit the context budget" in text, "nothing elided"
assert "Make add() add" in last[0]["content"], "goal dropped"
tools = [m for m in last if m.get("role") == "tool"]
assert "elided" not in tools[-1]["content"], "latest output elided"
PY
}

t_api_key() {
        echo "=== the model's API key: sent to the endpoint, nowhere else"
        cat > "$WORK/key.json" <<'EOF'
[
 {"reply": {"content": "Plan: look for the key, then fix add()."}},
 {"reply": {"content": "Look around", "tool_calls": [{"name": "run_command", "arguments": {"command": "env; ls -la /run /run/credentials 2>&1; cat /run/credentials/agentfab.service/model-key 2>&1; true"}}]}},
 {"reply": {"content": "Fix", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}}
]
EOF
        model "$WORK/key.json" --by-step || { fail "model server"; return; }
        make_repo keyed
        local id
        id=$(submit keyed --model keyed) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "task with an API key succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        python3 - "$WORK/requests.jsonl" <<'PY' && ok "every request carried 'Authorization: Bearer' with the key" || fail "no Authorization header"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
assert reqs and all(r["headers"].get("authorization") == "Bearer sk-test-secret-4711" for r in reqs)
PY
        ! grep -q 'sk-test-secret-4711' <(python3 -c "
import json,sys
for l in open('$WORK/requests.jsonl'): print(json.dumps(json.loads(l)['body']))") &&
                ok "the key is not in what the model is sent" || fail "key in a request body"
        ! hx grep -rqs 'sk-test-secret-4711' "/var/lib/agentfab/tasks/$id" && ok "nor in the task's files (output, transcript, conversation)" ||
                fail "key in the task's files"
        ! hx journalctl -q --no-pager -o json | grep -q 'sk-test-secret-4711' && ok "nor in the journal" || fail "key in the journal"
        hx grep -q 'No such file or directory' "/var/lib/agentfab/tasks/$id/output.log" &&
                ok "the sandbox has no credentials directory" || fail "credentials visible in the sandbox?"
}

t_https_repo() {
        echo "=== a repository by https URL, fetched by the daemon"
        local d=$WORK/https gport id out
        rm -rf "$d/root" "$d/src"; mkdir -p "$d/root" "$d/src"
        (cd "$d/src" && git init -q && printf 'def add(a, b):\n    return a - b\n' > calc.py &&
                printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nif __name__ == "__main__":\n    unittest.main()\n' > test_calc.py &&
                git add . && git -c user.name=remote -c user.email=r@r commit -q -m 'calc from afar' &&
                git clone -q --bare . "$d/root/calc.git")
        python3 "$SRC/tests/git-https-server.py" --root "$d/root" --cert "$d/cert.pem" --key "$d/key.pem" \
                --log "$d/requests.log" > "$d/port" 2> "$d/err" &
        local gpid=$!
        for i in $(seq 100); do [ -s "$d/port" ] && break; sleep 0.05; done
        gport=$(head -1 "$d/port")
        model "$WORK/fix.json" --by-step || { fail "model server"; kill $gpid; return; }

        id=$(hx_as alice "${CTL[@]}" submit --repo "https://localhost:$gport/calc.git" --goal "Make add() add" \
                --test "python3 -m unittest -v" 2>&1) || { fail "submit: $id"; kill $gpid; return; }
        ok "submitted by URL"
        if wait_state "$id" succeeded; then ok "task on a fetched repository succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; kill $gpid; return; fi
        grep -q 'GET /calc.git/info/refs?service=git-upload-pack' "$d/requests.log" && ok "the daemon fetched over https" || fail "no fetch seen"
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%an "agentfab/$id" | grep -q remote &&
                ok "the branch starts at the remote's commit" || fail "no remote history"

        expect_refused "2:only https" "plain http refused (InvalidSpec, exit 2)" \
                hx_as alice "${CTL[@]}" submit --repo "http://127.0.0.1:$gport/calc.git" --goal g
        expect_refused "2:without a user name or password" "credentials in a URL refused (InvalidSpec, exit 2)" \
                hx_as alice "${CTL[@]}" submit --repo "https://user:secret@127.0.0.1:$gport/calc.git" --goal g
        id=$(hx_as alice "${CTL[@]}" submit --repo "https://localhost:$gport/nothing.git" --goal g 2>&1) || { fail "submit: $id"; kill $gpid; return; }
        if wait_state "$id" failed; then
                [[ $(task_prop "$id" Reason) == *"workspace"* ]] && ok "an unreachable repository fails with a reason" ||
                        fail "reason: $(task_prop "$id" Reason)"
        else fail "missing repository: $(task_prop "$id" State)"; fi

        # Submodules of a URL repository: fetched only when asked, from a URL
        # relative to the repository's; a local path in .gitmodules refused.
        local G="git -c user.name=remote -c user.email=r@r -c protocol.file.allow=always"
        rm -rf "$d/lib" "$d/super" "$d/evil"
        (set -e; mkdir "$d/lib" && cd "$d/lib" && git init -q && echo 'VERSION = 1' > lib.py && git add . && $G commit -q -m lib &&
                git clone -q --bare . "$d/root/lib.git" && cd "$d/src" && git clone -q . "$d/super" && cd "$d/super" &&
                $G submodule -q add "$d/root/lib.git" vendor/lib && git config -f .gitmodules submodule.vendor/lib.url ../lib.git &&
                $G commit -q -am 'with a submodule' && git clone -q --bare . "$d/root/super.git" &&
                git config -f .gitmodules submodule.vendor/lib.url /etc/agentfab && $G commit -q -am 'a local submodule URL' &&
                git clone -q --bare . "$d/root/evil.git") >/dev/null 2>&1 || { fail "submodule fixture"; kill $gpid; return; }
        : > "$d/requests.log"
        model "$WORK/fix.json" --by-step || { fail "model server"; kill $gpid; return; }
        id=$(hx_as alice "${CTL[@]}" submit --repo "https://localhost:$gport/super.git" --submodules --goal "Make add() add" \
                --test "python3 -m unittest -v" 2>&1) || { fail "submit: $id"; kill $gpid; return; }
        if wait_state "$id" succeeded; then ok "a task with --submodules on a URL repository succeeded"; else
                fail "submodules: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
        grep -q 'GET /lib.git/info/refs?service=git-upload-pack' "$d/requests.log" &&
                ok "the submodule was fetched from its relative URL" || fail "no fetch of lib.git: $(cat "$d/requests.log")"
        hx test -f "/var/lib/agentfab/tasks/$id/workspace/vendor/lib/lib.py" && hx test ! -e "/var/lib/agentfab/tasks/$id/workspace/vendor/lib/.git" &&
                ok "its files are in the workspace, without .git" || fail "submodule files missing"
        [ "$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" ls-tree "agentfab/$id" vendor/lib | cut -d' ' -f1-2)" = "160000 commit" ] &&
                ok "the delivered branch keeps the submodule as a gitlink" || fail "gitlink lost"
        id=$(hx_as alice "${CTL[@]}" submit --repo "https://localhost:$gport/evil.git" --submodules --goal g 2>&1) || { fail "submit: $id"; kill $gpid; return; }
        if wait_state "$id" failed; then
                [[ $(task_prop "$id" Reason) == *"/etc/agentfab"* ]] && ok "a local path as submodule URL: refused with the reason" ||
                        fail "reason: $(task_prop "$id" Reason)"
        else fail "local submodule URL: $(task_prop "$id" State)"; fi
        kill $gpid 2>/dev/null; wait $gpid 2>/dev/null
}

t_ssh_repo() {
        echo "=== a repository by ssh URL, with a key and known hosts from credentials"
        local d=$SSH_DIR id out url head accepted keyline
        id "$SSH_USER" >/dev/null 2>&1 || useradd -M -d "$d" -s /bin/sh "$SSH_USER" || { fail "useradd $SSH_USER"; return; }
        # Not locked ('!'): sshd without PAM refuses locked accounts even for keys.
        usermod -p '*' "$SSH_USER" || { fail "usermod"; return; }
        rm -rf "$d/src" "$d/calc.git"; mkdir -p "$d/src"
        (cd "$d/src" && git init -q && printf 'def add(a, b):\n    return a - b\n' > calc.py &&
                printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nif __name__ == "__main__":\n    unittest.main()\n' > test_calc.py &&
                git add . && git -c user.name=remote -c user.email=r@r commit -q -m 'calc over ssh' &&
                git clone -q --bare . "$d/calc.git")
        head=$(git -C "$d/src" rev-parse HEAD)
        chown -R "$SSH_USER" "$d/calc.git"
        install -m 644 "$d/client.pub" "$d/authorized_keys"
        printf '%s\n' "ListenAddress 127.0.0.1" "Port $SSH_PORT" "HostKey $d/hostkey" "AuthorizedKeysFile $d/authorized_keys" \
                "AllowUsers $SSH_USER" "PasswordAuthentication no" "KbdInteractiveAuthentication no" "UsePAM no" \
                "StrictModes no" "PidFile none" > "$d/sshd_config"
        mkdir -p /run/sshd
        : > "$d/sshd.log"
        /usr/sbin/sshd -D -e -f "$d/sshd_config" 2> "$d/sshd.log" &
        SSHD_PID=$!
        local i
        for i in $(seq 100); do grep -q 'Server listening' "$d/sshd.log" && break; sleep 0.05; done
        grep -q 'Server listening' "$d/sshd.log" || { fail "sshd did not start: $(cat "$d/sshd.log")"; stop_sshd; return; }
        model "$WORK/fix.json" --by-step || { fail "model server"; stop_sshd; return; }

        url="ssh://$SSH_USER@127.0.0.1:$SSH_PORT$d/calc.git"
        id=$(hx_as alice "${CTL[@]}" submit --repo "$url" --goal "Make add() add" --test "python3 -m unittest -v" 2>&1) ||
                { fail "submit: $id"; stop_sshd; return; }
        ok "submitted by ssh URL"
        if wait_state "$id" succeeded; then ok "task on a repository fetched over ssh succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; stop_sshd; return; fi
        grep -q "Accepted publickey for $SSH_USER from 127.0.0.1" "$d/sshd.log" && ok "the daemon logged in with the credential's key" ||
                fail "no login seen: $(tail -5 "$d/sshd.log")"
        [ "$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" rev-parse refs/agentfab/base 2>&1)" = "$head" ] &&
                hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" merge-base --is-ancestor "$head" "agentfab/$id" &&
                ok "the branch starts at the remote's commit" || fail "base is not the remote's $head"
        # A line from the middle of the private key: in no file of the task, nowhere in the journal.
        keyline=$(sed -n 3p "$d/client")
        [ ${#keyline} -gt 40 ] && ! hx grep -rqsF -- "$keyline" "/var/lib/agentfab/tasks/$id" &&
                ok "the key is in none of the task's files" || fail "key in the task's files"
        ! hx journalctl -q --no-pager -o json | grep -qF -- "$keyline" && ok "nor in the journal" || fail "key in the journal"

        expect_refused "2:without a password" "a password in an ssh URL refused (InvalidSpec, exit 2)" \
                hx_as alice "${CTL[@]}" submit --repo "ssh://$SSH_USER:pw@127.0.0.1:$SSH_PORT$d/calc.git" --goal g
        expect_refused "2:scp-like.*ssh://\[USER@\]HOST\[:PORT\]/PATH" "scp-like syntax refused, saying what to write (exit 2)" \
                hx_as alice "${CTL[@]}" submit --repo "$SSH_USER@127.0.0.1:calc.git" --goal g

        echo "=== an ssh server whose host key is not the known one"
        accepted=$(grep -c 'Accepted publickey' "$d/sshd.log")
        printf '[Git]\nSSHKnownHostsCredential=git-known-hosts-wrong\n' > "$HARNESS_ROOT/etc/agentfab/agentfab.conf.d/60-ssh-wrong.conf"
        hx systemctl restart agentfab.service || fail "restart with the wrong known hosts"
        id=$(hx_as alice "${CTL[@]}" submit --repo "$url" --goal "Make add() add" --test "python3 -m unittest -v" 2>&1) ||
                fail "submit: $id"
        if wait_state "$id" failed; then
                [[ $(task_prop "$id" Reason) == *"host key of "*"127.0.0.1"*" port $SSH_PORT is unknown"* ]] &&
                        ok "refused: $(task_prop "$id" Reason)" || fail "reason: $(task_prop "$id" Reason)"
        else fail "a wrong host key: $(task_prop "$id" State)"; fi
        [ "$(grep -c 'Accepted publickey' "$d/sshd.log")" = "$accepted" ] && ! hx test -e "/var/lib/agentfab/tasks/$id/ledger.git" &&
                ok "no login, nothing fetched" || fail "it logged in or fetched despite the host key"
        rm -f "$HARNESS_ROOT/etc/agentfab/agentfab.conf.d/60-ssh-wrong.conf"
        hx systemctl restart agentfab.service || fail "restart with the right known hosts"
        stop_sshd
        ! pgrep -f "sshd -D -e -f $d/sshd_config" >/dev/null && ok "sshd stopped" || fail "sshd still running"
}

t_huge_output() {
        echo "=== a command with 30 MB of output: the model sees head and tail, the log has all"
        cat > "$WORK/huge.json" <<'EOF'
[
 {"reply": {"content": "Plan: make a lot of noise, then fix add()."}},
 {"reply": {"content": "Noise", "tool_calls": [{"name": "run_command", "arguments": {"command": "echo FIRST-LINE; head -c 30000000 /dev/zero | tr '\\000' x; echo; echo LAST-LINE"}}]}},
 {"reply": {"content": "Fix", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "fixed"}}]}}
]
EOF
        model "$WORK/huge.json" --by-step || { fail "model server"; return; }
        make_repo huge
        local id size
        id=$(submit huge) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "task with a 30 MB output succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        python3 - "$WORK/requests.jsonl" <<'PY' && ok "the model got head and tail, bounded, with a note of the cut" || fail "tool output not bounded"
import json, sys
for l in open(sys.argv[1]):
    for m in json.loads(l)["body"]["messages"]:
        c = m.get("content") or ""
        if m.get("role") == "tool" and "FIRST-LINE" in c:
            assert "LAST-LINE" in c and "cut" in c and len(c) < 64 * 1024, len(c)
            sys.exit(0)
sys.exit(1)
PY
        size=$(hx stat -c %s "/var/lib/agentfab/tasks/$id/output.log")
        [ "$size" -gt 30000000 ] && ok "output.log has all of it ($size bytes)" || fail "output.log $size bytes"
        local logs
        logs=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1 | tail -c 2000)
        grep -q 'LAST-LINE' <<<"$logs" && ok "agentfabctl logs shows the log's end" || fail "logs: $(tail -c 300 <<<"$logs")"
        hx_as alice "${CTL[@]}" logs "$id" 2>/dev/null | head -1 | grep -q 'bytes of earlier output left out' &&
                ok "and says what it left out" || fail "no note of what was left out"
        hx systemctl is-active agentfab.service >/dev/null && ok "the daemon is fine" || fail "daemon not active"
}

# A repository of user $1 named $2 with one file; the tiny image has no python.
make_plain_repo() {
        hx_as "$1" bash -c "set -e; cd ~ && rm -rf $2 && mkdir $2 && cd $2 && git init -q && echo hello > README &&
                git add . && git -c user.name=$1 -c user.email=$1@example.com commit -q -m start && chmod -R a+rX ~/$2"
}

t_environments() {
        echo "=== task environments: an image as the root, variables, a cache per owner, a broken image refused"
        local out id id2 id3 id4 log
        expect_refused "2:There is no environment 'nope'; known: default, tiny, loose" \
                "an unknown environment is refused at submission with the known ones (InvalidSpec, exit 2)" \
                hx_as alice "${CTL[@]}" submit --repo /home/alice --goal x --environment=nope
        out=$(hx_as alice "${CTL[@]}" environments 2>&1)
        grep -q '^tiny .*off .*/var/lib/machines/tiny .*tiny (agentfab tiny test image; image [0-9a-f]\{12\}); caches: pip' <<<"$out" &&
                grep -q '^default .*(host) .*default (host: ' <<<"$out" &&
                ok "agentfabctl environments lists them with their system" || fail "environments: $out"

        cat > "$WORK/env.json" <<'EOF'
[
 {"reply": {"content": "Plan: look around and fill the cache."}},
 {"reply": {"content": "Look around", "tool_calls": [{"name": "run_command", "arguments": {"command": "cat /etc/os-release; echo FOO=$FOO PIP=$PIP_CACHE_DIR; mkdir -p /cache/pip && head -c 300000 /dev/zero > /cache/pip/big && echo cached-by-alice > /cache/pip/marker; echo hi > note"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "looked"}}]}}
]
EOF
        model "$WORK/env.json" --by-step || { fail "model server"; return; }
        make_plain_repo alice envrepo
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/envrepo --goal "look" --environment=tiny \
                --test "grep -q agentfab-tiny /etc/os-release" 2>&1) || { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "a task in the tiny image succeeded (its tests ran there)"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        grep -q 'PRETTY_NAME="agentfab tiny test image"' <<<"$out" && ! grep -q 'Debian' <<<"$out" &&
                ok "its commands see the image's os-release, not the host's" || fail "os-release: $(head -c 400 <<<"$out")"
        grep -q 'FOO=bar PIP=/cache/pip' <<<"$out" && ok "Environment= and the cache's variable are set" || fail "variables: $out"
        log=$(ledger_log "$id")
        grep -q '^    Agentfab-Environment: tiny (agentfab tiny test image; image [0-9a-f]\{12\})$' <<<"$log" &&
                ok "every commit names the environment and its image" || fail "trailer: $(grep Environment <<<"$log")"
        [[ $(task_prop "$id" EnvironmentIdentity) == "tiny (agentfab tiny test image; image "* ]] &&
                ok "EnvironmentIdentity property" || fail "EnvironmentIdentity: $(task_prop "$id" EnvironmentIdentity)"
        hx_as alice "${CTL[@]}" summary "$id" 2>&1 | grep -q '^tiny (agentfab tiny test image' &&
                ok "the summary says where it was built" || fail "summary has no environment"

        # The cache persists for the same owner, and no one else sees it.
        cat > "$WORK/env2.json" <<'EOF'
[
 {"reply": {"content": "Plan: read the cache."}},
 {"reply": {"content": "Read the cache", "tool_calls": [{"name": "run_command", "arguments": {"command": "cat /cache/pip/marker 2>/dev/null || echo NO-MARKER; echo x > seen"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "read"}}]}}
]
EOF
        model "$WORK/env2.json" --by-step || { fail "model server"; return; }
        id2=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/envrepo --goal "read" --environment=tiny 2>&1) || { fail "submit: $id2"; return; }
        make_plain_repo carol envrepo
        id3=$(hx_as carol "${CTL[@]}" submit --repo /home/carol/envrepo --goal "read" --environment=tiny 2>&1) || { fail "submit: $id3"; return; }
        wait_state "$id2" succeeded && wait_state "$id3" succeeded || fail "cache tasks: $(task_prop "$id2" Reason) $(task_prop "$id3" Reason)"
        hx_as alice "${CTL[@]}" logs "$id2" 2>&1 | grep -q '^cached-by-alice' &&
                ok "the owner's next task finds what the first one cached" || fail "alice's cache not kept"
        hx_as carol "${CTL[@]}" logs "$id3" 2>&1 | grep -q 'NO-MARKER' &&
                ok "another user's task does not see it" || fail "the cache is shared between users"
        local c
        c=/var/lib/agentfab/cache/tiny/$(hx id -u alice)/pip
        ! hx test -e "$c/big" && hx test -e "$c/marker" &&
                ok "CacheMaxSize=64K pruned the least recently written file after the task" || fail "cache: $(hx ls -l "$c")"
        out=$(hx_as alice "${CTL[@]}" cache 2>&1)
        grep -q '^tiny  *[1-9][0-9]*  *1$' <<<"$out" && ok "agentfabctl cache shows its size: $(tail -1 <<<"$out")" || fail "cache: $out"
        out=$(hx_as alice "${CTL[@]}" cache clear tiny 2>&1)
        grep -q '^tiny  *0  *0$' <<<"$out" && ! hx test -e "$c" && hx test -d "/var/lib/agentfab/cache/tiny/$(hx id -u carol)" &&
                ok "agentfabctl cache clear empties the caller's own cache only" || fail "cache clear: $out"
        expect_refused "2:does not exist or keeps no cache" "clearing an environment without a cache is refused (InvalidArgs, exit 2)" \
                hx_as alice "${CTL[@]}" cache clear default

        make_plain_repo alice looserepo
        id4=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/looserepo --goal "x" --environment=loose 2>&1) || { fail "submit: $id4"; return; }
        if wait_state "$id4" failed; then
                [[ $(task_prop "$id4" Reason) == *"environment "*"loose"*"not safe"*"usr/bin"* ]] &&
                        ok "a world-writable image fails the task with the reason" || fail "reason: $(task_prop "$id4" Reason)"
        else fail "a task in a world-writable image: $(task_prop "$id4" State)"; fi
}

t_kill9_resume() {
        echo "=== SIGKILL of the daemon in the middle of a step"
        cat > "$WORK/kill.json" <<'EOF'
[
 {"reply": {"content": "Plan: slow step, then fix."}},
 {"reply": {"content": "Step one", "tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}]}},
 {"reply": {"content": "Slow step", "tool_calls": [{"name": "write_file", "arguments": {"path": "two.txt", "content": "2\n"}}, {"name": "run_command", "arguments": {"command": "sleep 4"}}]}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "done after a crash"}}]}}
]
EOF
        model "$WORK/kill.json" --by-step || { fail "model server"; return; }
        make_repo killed
        local id i running= killed
        id=$(submit killed) || { fail "submit: $id"; return; }
        # Step 2's command is running (the command's journal entry comes
        # only once it ended): the kill comes while step 2 is in flight.
        # ("slee[p] 4": not the pgrep's own command line.)
        for i in $(seq 300); do
                hx pgrep -f 'slee[p] 4' >/dev/null && { running=1; break; }
                sleep 0.1
        done
        killed=$(hx systemctl show -p MainPID --value agentfab.service)
        hx systemctl kill -s KILL agentfab.service
        sleep 1
        hx busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 ListTasks >/dev/null 2>&1
        if wait_state "$id" succeeded; then ok "reactivated daemon resumed and finished"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        # What the killed daemon journaled: step 1 done, step 2's command
        # neither ended nor step 2 done. (Asked now: journald has had the
        # time to store what it was sent before the kill.)
        local done_steps ended
        done_steps=$(hx journalctl -q -o json _PID="$killed" AGENTFAB_TASK="$id" AGENTFAB_EVENT=step |
                python3 -c 'import json, sys; print(" ".join(json.loads(l)["AGENTFAB_STEP"] for l in sys.stdin))')
        ended=$(hx journalctl -q -o cat _PID="$killed" AGENTFAB_TASK="$id" AGENTFAB_EVENT=command)
        if [ -n "$running" ] && [ "$killed" -gt 0 ] 2>/dev/null && [ "$done_steps" = 1 ] && ! grep -q 'sleep 4' <<<"$ended"; then
                ok "daemon (pid $killed) killed during step 2: its command running, step 1 done, step 2 not"
        else
                fail "daemon not killed during step 2: command seen running: ${running:-no}, pid '$killed'," \
                        "steps done before the kill: '$done_steps', commands ended: $(tr '\n' ';' <<<"$ended")"
        fi
        local steps
        steps=$(hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%B "agentfab/$id" | sed -n 's/^Agentfab-Step: //p' | sort -n | tr '\n' ' ')
        [ "$steps" = "1 2 3 " ] && ok "git log: steps 1 2 3, none lost or repeated" || fail "steps on branch: $steps"
        hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" show "agentfab/$id:two.txt" >/dev/null 2>&1 &&
                ok "the redone step's file is on the branch" || fail "two.txt missing"
        local n
        n=$(hx python3 -c "import json,sys; print(sum(1 for l in open('/var/lib/agentfab/tasks/$id/conversation.jsonl') if json.loads(l)['role']=='assistant'))")
        # 5 and the finish again after the review of the diff.
        [ "$n" = 6 ] && ok "conversation: each step once (6 assistant messages)" || fail "assistant messages: $n"
        # The killed daemon's sandbox ended with its connection; nothing leaked.
        local left
        left=$(hx systemctl list-units --all --no-legend 'agentfab-task-*.scope' | grep -v 'inactive\|not-found')
        [ -z "$left" ] && ok "no task scope left behind after the crash" || fail "scopes left: $left"
}

t_push_pr() {
        echo "=== delivery to a forge: push the branch, open a pull request"
        cat > "$WORK/pr.json" <<'EOF'
[
 {"reply": {"content": "Plan:\n1. Make add() return a + b.\n2. Run the tests and finish."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() now adds; the tests pass."}}]}}
]
EOF
        model "$WORK/pr.json" --by-step || { fail "model server"; return; }
        forge || { fail "forge server"; return; }
        make_repo pr
        # The remote has the project's history on main, as on a forge.
        local R=/srv/remote.git main_before out id
        # Root pushes (git refuses a repository of another owner, so the
        # remote is root's meanwhile), then it is the daemon's again.
        out=$(hx chown -R root:root "$R" 2>&1 &&
              hx git -c safe.directory='*' -C /home/alice/pr push -q "$R" HEAD:refs/heads/main 2>&1 &&
              hx chown -R agentfab:agentfab "$R" 2>&1) || { fail "cannot set up $R: $out"; return; }
        main_before=$(hx git --git-dir="$R" rev-parse refs/heads/main)

        # What is refused at submission, before any work is done.
        expect_refused "2:no forge 'nosuchforge'" "unknown forge: InvalidSpec (exit 2)" \
                submit pr --push-url file:///srv/remote.git --forge nosuchforge --forge-repository alice/pr
        expect_refused "2:only https:// push URLs" "file:// push URL refused unless the forge allows it (exit 2)" \
                submit pr --push-url file:///srv/remote.git
        expect_refused "2:must be an https:// URL" "http:// push URL refused (exit 2)" \
                submit pr --push-url http://127.0.0.1/x.git
        expect_refused "2:Key 'push_url' must be an https:// URL with a path and no user name or password" \
                "push URL with user:password refused (exit 2)" \
                submit pr --push-url https://alice:pw@example.com/x.git
        expect_refused "2:not on the host of forge 'tokenforge'" "the token never goes to a host the submitter names (exit 2)" \
                submit pr --push-url https://evil.example/alice/pr.git --forge tokenforge --forge-repository alice/pr
        expect_refused "2:Key 'pull_request_base' must be a branch name \(not HEAD, nothing under agentfab/\)" \
                "a factory branch as pull request base refused (exit 2)" \
                submit pr --push-url file:///srv/remote.git --forge testforge --forge-repository alice/pr --pr-base agentfab/x
        [ "$(hx git --git-dir="$R" for-each-ref --format='%(refname)' | tr '\n' ' ')" = "refs/heads/main " ] &&
                ok "nothing refused reached the remote" || fail "remote refs changed by refused submissions"
        [ ! -s "$WORK/forge.jsonl" ] && ok "nor the forge" || fail "forge got a request from a refused submission"

        id=$(submit pr --push-url file:///srv/remote.git --forge testforge --forge-repository alice/pr --pr-base main) ||
                { fail "submit: $id"; return; }
        ok "submitted $id with a push URL and a forge"
        if wait_state "$id" succeeded; then ok "task succeeded"; else
                fail "task ended $(task_prop "$id" State): $(task_prop "$id" Reason)"
                hx journalctl -q -u agentfab.service --no-pager | tail -30
                return
        fi
        [ -z "$(task_prop "$id" Reason)" ] && ok "Reason is empty: the whole delivery worked" || fail "reason: $(task_prop "$id" Reason)"

        local head remote_head
        head=$(task_prop "$id" HeadCommit)
        remote_head=$(hx git --git-dir="$R" rev-parse "refs/heads/agentfab/$id" 2>&1)
        [ -n "$head" ] && [ "$head" = "$remote_head" ] && ok "the remote has agentfab/$id at the task's head" ||
                fail "remote branch: $remote_head, head $head"
        hx git --git-dir="$R" log --format=%B "agentfab/$id" | grep -q "Agentfab-Task: $id" &&
                ok "the pushed branch has the task's checkpoint commits" || fail "no checkpoints on the remote branch"
        hx git --git-dir="$R" show "agentfab/$id:calc.py" | grep -q 'return a + b' && ok "the pushed branch has the fix" ||
                fail "fix not pushed"
        [ "$(hx git --git-dir="$R" rev-parse refs/heads/main)" = "$main_before" ] && ok "the remote's main is untouched" ||
                fail "main moved"
        [ "$(hx git --git-dir="$R" for-each-ref --format='%(refname)' | tr '\n' ' ')" = "refs/heads/agentfab/$id refs/heads/main " ] &&
                ok "no other ref was pushed" || fail "refs: $(hx git --git-dir="$R" for-each-ref --format='%(refname)')"

        local pr want
        pr=$(task_prop "$id" PullRequest)
        want="http://127.0.0.1:$FORGE_PORT/alice/pr/pulls/1"
        [ "$pr" = "$want" ] && ok "PullRequest property: $pr" || fail "PullRequest '$pr', wanted '$want'"
        hx_as alice "${CTL[@]}" status "$id" | grep -q "Pull request: $want" && ok "agentfabctl status shows the pull request" ||
                fail "status does not show the pull request"
        hx_as alice "${CTL[@]}" summary "$id" > "$WORK/pr-summary.md" 2>/dev/null
        python3 - "$WORK/forge.jsonl" "$WORK/pr-summary.md" "$id" "$FORGE_TOKEN" <<'PY' &&
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
summary = open(sys.argv[2]).read()
tid, token = sys.argv[3], sys.argv[4]
assert len(reqs) == 1, "%d requests" % len(reqs)
r = reqs[0]
assert r["method"] == "POST" and r["path"] == "/api/v1/repos/alice/pr/pulls", r["path"]
assert r["headers"].get("authorization") == "token " + token, "authorization"
assert r["headers"].get("content-type") == "application/json"
b = r["body"]
assert b["head"] == "agentfab/" + tid and b["base"] == "main", (b["head"], b["base"])
assert b["title"] == "Make add() add", b["title"]
assert b["body"].strip() == summary.strip() and "## Tests" in b["body"], "body is not the summary"
PY
                ok "the forge got one POST with the token, the goal as title and the summary as body" ||
                fail "forge request: $(cat "$WORK/forge.jsonl")"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=fc994ca094d14bc9a5c8272de9a820c7 |
                grep '"AGENTFAB_EVENT":"pull-request"' | grep -qF "\"AGENTFAB_URL\":\"$want\"" &&
                ok "journal: pull-request entry with AGENTFAB_URL" || fail "no pull-request journal entry"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=87b34c28740c4e299b3b38c8b63843d5 |
                grep -qF "\"AGENTFAB_COMMIT\":\"$head\"" && ok "journal: pushed entry with the commit" || fail "no pushed journal entry"
        hx grep -q '"type":"pull-request"' "/var/lib/agentfab/tasks/$id/events.jsonl" && ok "events.jsonl has the pull request" ||
                fail "no pull-request event"
        ! hx grep -rqs "$FORGE_TOKEN" "/var/lib/agentfab/tasks/$id" && ok "the token is in none of the task's files" ||
                fail "token in the task's files"
        ! hx journalctl -q --no-pager -o json | grep -q "$FORGE_TOKEN" && ok "nor in the journal" || fail "token in the journal"

        echo "=== delivery to a forge that refuses the pull request"
        local id2 reason
        model "$WORK/pr.json" --by-step || { fail "model server"; return; }
        id2=$(submit pr --push-url file:///srv/remote.git --forge testforge --forge-repository alice/exists) ||
                { fail "submit: $id2"; return; }
        if wait_state "$id2" succeeded; then ok "task succeeded although the forge refused"; else
                fail "task ended $(task_prop "$id2" State): $(task_prop "$id2" Reason)"; return; fi
        reason=$(task_prop "$id2" Reason)
        [[ $reason == *"pull request on forge "*"testforge"*" failed: "*"HTTP 422"*"already exists"* ]] &&
                ok "Reason says what failed: $reason" || fail "reason: $reason"
        [ -z "$(task_prop "$id2" PullRequest)" ] && ok "no PullRequest" || fail "PullRequest set"
        [ "$(hx git --git-dir="$R" rev-parse "refs/heads/agentfab/$id2" 2>&1)" = "$(task_prop "$id2" HeadCommit)" ] &&
                ok "the branch was pushed all the same" || fail "branch of $id2 not pushed"
        hx journalctl -q -o json AGENTFAB_TASK="$id2" MESSAGE_ID=e7f8313621a1437293eb44641dd74ebb |
                grep -q '"AGENTFAB_EVENT":"pull-request-failed"' && ok "journal: pull-request-failed entry" ||
                fail "no delivery-failed journal entry"
        [ "$(hx git --git-dir="$R" rev-parse refs/heads/main)" = "$main_before" ] && ok "main still untouched" || fail "main moved"
        ! hx journalctl -q --no-pager -o json | grep -q "$FORGE_TOKEN" && ok "the token is not in the journal" ||
                fail "token in the journal"
        stop_forge
}

main() {
        harness_boot || { fail "harness_boot"; check_summary; exit 1; }
        hx systemctl start agentfab-launcher.socket >/dev/null 2>&1

        # ONLY="t_a t_b" runs just those scenarios.
        local t
        for t in t_fix_and_deliver t_step_trailers t_reset_to t_replay t_breaker_and_approval t_protected_reject t_budget t_faults t_context_budget t_huge_output t_environments t_api_key t_https_repo t_ssh_repo t_push_pr t_kill9_resume t_tree_kinds t_evidence t_amend t_journal_seal \
                 t_budget_cpu t_budget_quota t_budget_cost t_pause_spin t_pause_restart t_pause_at_start t_cancel_delivery t_pause_cancel t_pause_approval t_pause_release t_malformed_count t_fail_many \
                 t_review_secret t_review_checker t_review_vulnerable t_review_coverage t_review_model \
                 t_context_refused t_context_truncated t_context_hopeless t_context_restart \
                 t_edit_drift t_patch_two_files t_syntax_python t_syntax_checker_sandboxed t_finish_review \
                 t_leave_out_c t_leave_out_python t_leave_out_js t_keep_binary t_git_in_sandbox t_plan_looks \
                 t_tests_speak_unrelated t_tests_speak_give_up t_tests_speak_stuck \
                 t_open_models_formats t_open_models_text_mode t_open_models_cut_and_nudge t_outline t_resources; do
                if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $t "* ]]; then continue; fi
                "$t"
        done

        echo "=== sanitizers and crashes"
        ! hx journalctl -q -u agentfab.service -u 'agentfab-launcher@*' --no-pager | grep -q 'AddressSanitizer\|runtime error:\|LeakSanitizer' &&
                ok "no sanitizer report from agentfabd or the launcher" || fail "sanitizer report in the journal"
        ! hx journalctl -q -u agentfab.service --no-pager | grep -q 'code=dumped\|status=6/ABRT\|status=11/SEGV' &&
                ok "agentfabd never crashed (only the test's SIGKILL)" || fail "agentfabd crashed"

        if [ "$FAILED" != 0 ]; then
                echo "--- journal (last 60 lines)"
                hx journalctl -q --no-pager | tail -60
        fi
        stop_model
        stop_forge
        harness_teardown
        check_summary
}

main "$@"
