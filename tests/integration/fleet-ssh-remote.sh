#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# An ssh:// Remote= ([Fleet] RemoteSSHKeyCredential=, agentfab.conf(5)):
# one agentfab host of a fleet, booted by the harness, with a private
# PostgreSQL cluster (tests/fleet/pg.sh), a repository served over https and
# the scripted model server; its Remote= is a bare repository behind an
# sshd of this test's on loopback, which knows only this host's key.
#
#   fleet-ssh-remote.sh BUILDDIR
#
# Scenarios: a task's step is pushed over ssh with the host's own key (the
# credential), under refs/agentfab/<task>/<epoch>, and the task succeeds;
# the key is in no file of the task and not in the journal; an sshd whose
# host key is not in the known hosts is refused before the key is offered,
# with the reason in the journal, and nothing reaches its repository.
set -u

BUILDDIR=$(realpath "${1:?usage: fleet-ssh-remote.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/lib/fleet-host.sh"
. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "fleet tests need root"
[ -x /usr/lib/postgresql/15/bin/initdb ] || check_skip_all "no PostgreSQL 15 (apt-get install postgresql)"
[ -x /usr/sbin/sshd ] || check_skip_all "no sshd (apt-get install openssh-server)"
# sshd without PAM refuses an account locked with "!" even for keys.
[ "$(getent shadow root | cut -d: -f2 | cut -c1)" != "!" ] || check_skip_all "root's account is locked ('!'): sshd refuses it"

WORK=$(mktemp -d /tmp/agentfab-fleet-ssh.XXXXXX)
chmod 755 "$WORK"
MODEL_PID='' GIT_PID='' SSHD_PID=''
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
SSH_PORT=$(free_port)
CTL=(agentfabctl --no-ask-password)
S=$WORK/ssh

stop_sshd() {
        [ -n "$SSHD_PID" ] && { kill "$SSHD_PID" 2>/dev/null; wait "$SSHD_PID" 2>/dev/null; }
        SSHD_PID=
}
cleanup() {
        stop_sshd
        [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null
        [ -n "$GIT_PID" ] && kill "$GIT_PID" 2>/dev/null
        type pg_stop >/dev/null 2>&1 && pg_stop >/dev/null 2>&1
        rm -rf "$WORK"
}
trap cleanup EXIT

# ---- The database, the repositories, the model, the ssh server

PG_NO_TRAP=1 . "$SRC/tests/fleet/pg.sh"
pg_start || check_skip_all "PostgreSQL did not start"

mkdir -p "$WORK/git/root" "$WORK/git/src" "$S"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/git/key.pem" -out "$WORK/git/cert.pem" -days 2 \
        -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >/dev/null 2>&1
(cd "$WORK/git/src" && git init -q && printf 'def add(a, b):\n    return a - b\n' > calc.py &&
        printf 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nif __name__ == "__main__":\n    unittest.main()\n' > test_calc.py &&
        git add . && git -c user.name=remote -c user.email=r@r commit -q -m 'calc with a bug' &&
        git clone -q --bare . "$WORK/git/root/calc.git")
python3 "$SRC/tests/git-https-server.py" --root "$WORK/git/root" --cert "$WORK/git/cert.pem" --key "$WORK/git/key.pem" \
        --log "$WORK/git/requests.log" > "$WORK/git/port" 2> "$WORK/git/err" &
GIT_PID=$!
for _ in $(seq 100); do [ -s "$WORK/git/port" ] && break; sleep 0.05; done
REPO="https://localhost:$(head -1 "$WORK/git/port")/calc.git"

cat > "$WORK/fix.json" <<'EOS'
[
 {"reply": {"content": "Plan:\n1. Make add() return a + b.\n2. Run the tests and finish."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": null, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}}
]
EOS
python3 "$SRC/tests/model-server.py" --script "$WORK/fix.json" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
        > "$WORK/model.out" 2> "$WORK/model.err" &
MODEL_PID=$!
for _ in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done

# The host's key, the server's host key, and another host key for the
# server that is not the known one. The server logs in root with the
# host's key only (this test runs as root and writes nothing outside
# $WORK over ssh).
ssh-keygen -q -t ed25519 -N '' -C sshd-test -f "$S/hostkey" &&
        ssh-keygen -q -t ed25519 -N '' -C impostor -f "$S/impostor" &&
        ssh-keygen -q -t ed25519 -N '' -C host-a -f "$S/client" || check_skip_all "ssh-keygen failed"
install -m 600 "$S/client.pub" "$S/authorized_keys"
printf '[127.0.0.1]:%s %s\n' "$SSH_PORT" "$(cut -d' ' -f1,2 "$S/hostkey.pub")" > "$S/known_hosts"
REMOTE=$WORK/remote.git
git init -q --bare "$REMOTE"

# start_sshd HOSTKEY: an sshd on loopback that serves $REMOTE as root.
start_sshd() {
        printf '%s\n' "ListenAddress 127.0.0.1" "Port $SSH_PORT" "HostKey $1" "AuthorizedKeysFile $S/authorized_keys" \
                "AllowUsers root" "PermitRootLogin prohibit-password" "PasswordAuthentication no" \
                "KbdInteractiveAuthentication no" "UsePAM no" "StrictModes no" "PidFile none" > "$S/sshd_config"
        mkdir -p /run/sshd
        : > "$S/sshd.log"
        /usr/sbin/sshd -D -e -f "$S/sshd_config" 2> "$S/sshd.log" &
        SSHD_PID=$!
        for _ in $(seq 100); do grep -q 'Server listening' "$S/sshd.log" && return 0; sleep 0.05; done
        return 1
}
start_sshd "$S/hostkey" || check_skip_all "sshd did not start: $(cat "$S/sshd.log")"

# ---- The host

harness_prepare_root() {
        local R=$1
        fleet_prepare_root "$R" host-a "$PG_OWNER_CONNINFO" "$PORT" "$WORK/git/cert.pem" \
                "$(printf '[Fleet]\nRemote=ssh://root@127.0.0.1:%s%s\nRemoteSSHKeyCredential=fleet-git-key\n\n[Git]\nSSHKnownHostsCredential=known-hosts\n' \
                        "$SSH_PORT" "$REMOTE")" || return 1
        install -d -m 700 "$R/etc/agentfab/ssh"
        install -m 600 "$S/client" "$R/etc/agentfab/ssh/fleet-git-key"
        install -m 644 "$S/known_hosts" "$R/etc/agentfab/ssh/known_hosts"
        printf '[Service]\nLoadCredential=fleet-git-key:/etc/agentfab/ssh/fleet-git-key\nLoadCredential=known-hosts:/etc/agentfab/ssh/known_hosts\n' \
                > "$R/etc/systemd/system/agentfab.service.d/fleet-ssh.conf"
}
harness_boot || check_skip_all "the harness could not boot the host"
trap 'harness_teardown; cleanup' EXIT

echo "=== a host of a fleet whose Remote= is ssh://"
hx systemctl start agentfab.service
for _ in $(seq 100); do
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.migrations" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
        sleep 0.1
done
psql -X -q -v ON_ERROR_STOP=1 "$PG_OWNER_CONNINFO" -c "SELECT agentfab.add_host('host-a', 'agentfab')" >/dev/null &&
        ok "the host started with an ssh:// Remote= and made the fleet's schema" ||
        fail "schema or mapping: $(hx journalctl -q --no-pager -u agentfab.service | tail -5)"

fleet_row() { pg_psql -tA -F ' ' -c "SELECT state, epoch, coalesce(checkpoint, '-') FROM agentfab.tasks WHERE id = '$1'"; }

echo "=== a step pushed over ssh with the host's own key"
id=$(hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add" --test "python3 -m unittest -v" 2>&1) ||
        fail "submit: $id"
st=
for _ in $(seq 480); do
        read -r st epoch cp <<<"$(fleet_row "$id")"
        case $st in succeeded|failed|cancelled) break ;; esac
        sleep 0.25
done
[ "$st" = succeeded ] && ok "the task succeeded" ||
        fail "task $id is '$st': $(hx journalctl -q --no-pager -u agentfab.service | grep -i -e remote -e ssh | tail -5)"
ref=$(git --git-dir="$REMOTE" rev-parse -q --verify "refs/agentfab/$id/$epoch^{commit}" 2>/dev/null)
[ -n "$ref" ] && [ "$cp" != - ] && git --git-dir="$REMOTE" merge-base --is-ancestor "$cp" "$ref" &&
        [ "$(git --git-dir="$REMOTE" log --format=%s "$ref" | grep -c '^Fix add$')" = 1 ] &&
        git --git-dir="$REMOTE" rev-parse -q --verify "refs/agentfab/$id/base^{commit}" >/dev/null &&
        ok "refs/agentfab/$id/$epoch and its base are in the ssh repository, with the acknowledged step once" ||
        fail "ssh repository: refs/agentfab/$id/$epoch '$ref', database checkpoint '$cp': $(git --git-dir="$REMOTE" for-each-ref)"
grep -q "Accepted publickey for root from 127.0.0.1" "$S/sshd.log" && ok "the daemon logged in with the credential's key" ||
        fail "no login seen: $(tail -5 "$S/sshd.log")"
keyline=$(sed -n 3p "$S/client")
[ ${#keyline} -gt 40 ] && ! hx grep -rqsF -- "$keyline" "/var/lib/agentfab/tasks/$id" &&
        ok "the key is in none of the task's files" || fail "key in the task's files"
! hx journalctl -q --no-pager -o json | grep -qF -- "$keyline" && ok "nor in the journal" || fail "key in the journal"

echo "=== an ssh server whose host key is not the known one"
stop_sshd
before=$(git --git-dir="$REMOTE" for-each-ref | sort)
start_sshd "$S/impostor" || fail "sshd with another host key did not start"
since=$(hx date '+%Y-%m-%d %H:%M:%S')
id2=$(hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add (impostor)" --test "python3 -m unittest -v" 2>&1) ||
        fail "submit: $id2"
msg=
for _ in $(seq 240); do
        msg=$(hx journalctl -q --no-pager -u agentfab.service --since "$since" | grep -F "cannot publish step" | grep -F "$id2")
        [ -n "$msg" ] && break
        sleep 0.25
done
grep -q "host key of '127.0.0.1' port $SSH_PORT is unknown: it is not the key the known hosts list" <<<"$msg" &&
        ok "the push is refused with the reason in the journal: ${msg##*: Cannot}" || fail "journal: '$msg'"
! grep -q "Accepted publickey" "$S/sshd.log" && ok "the key was never offered to that server" ||
        fail "logged in to the impostor: $(grep Accepted "$S/sshd.log")"
[ "$(git --git-dir="$REMOTE" for-each-ref | sort)" = "$before" ] && ok "nothing reached its repository" ||
        fail "refs changed: $(git --git-dir="$REMOTE" for-each-ref)"
read -r st2 _ cp2 <<<"$(fleet_row "$id2")"
[ "$st2" = running ] && [ "$cp2" = - ] && ok "the step is not acknowledged: the task waits, running, with no checkpoint" ||
        fail "task $id2 in the database: '$st2' checkpoint '$cp2'"
hx_as alice "${CTL[@]}" cancel "$id2" >/dev/null 2>&1

check_summary
