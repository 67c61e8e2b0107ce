#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# One audit for a fleet (agentfabd(8), "A FLEET OF HOSTS"): two agentfab
# hosts as in fleet.sh (host-a this shell's harness, host-b a second one,
# a private PostgreSQL cluster, a repository over https, the scripted model
# server), each sending its journal with systemd-journal-upload to one
# systemd-journal-remote that this test runs (over http here; TLS is in the
# man page), which writes the central journal into a directory both hosts
# see.
#
#   fleet-audit.sh BUILDDIR
#
# Scenarios: tasks worked on by both hosts; the central journal holds every
# entry of each task that either host's journal has, and entries of both
# hosts; "agentfabctl audit ID --verify --directory=" on it finds no gap
# for any task; a copy of a task's entries with an epoch changed part way
# (no takeover entry marks it), or with another host's name at the same
# epoch, is reported, a line each and exit 1; a task whose host is stopped
# (SIGSTOP) past its lease, or killed whole (its systemd), mid-task is
# taken over and finished by the other, and verifies on the central journal
# with its takeover entry (the stopped host's late entries, once continued,
# included), and not without it.
set -u

BUILDDIR=$(realpath "${1:?usage: fleet-audit.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/lib/fleet-host.sh"
. "$HERE/lib/check.sh"

JREMOTE=/lib/systemd/systemd-journal-remote
[ "$(id -u)" = 0 ] || check_skip_all "fleet tests need root"
[ -x /usr/lib/postgresql/15/bin/initdb ] || check_skip_all "no PostgreSQL 15 (apt-get install postgresql)"
[ -x "$JREMOTE" ] && [ -x /lib/systemd/systemd-journal-upload ] ||
        check_skip_all "no systemd-journal-remote (apt-get install systemd-journal-remote)"

WORK=$(mktemp -d /tmp/agentfab-fleet-audit.XXXXXX)
chmod 755 "$WORK"
FLEET_STATE=$WORK/hosts
mkdir -p "$FLEET_STATE"
MODEL_PID= GIT_PID= B_PID= JR_PID=
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
CTL=(agentfabctl --no-ask-password)

cleanup() {
        [ -n "$B_PID" ] && { touch "$FLEET_STATE/host-b.stop"; timeout 60 tail --pid="$B_PID" -f /dev/null; }
        [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null
        [ -n "$GIT_PID" ] && kill "$GIT_PID" 2>/dev/null
        [ -n "$JR_PID" ] && kill "$JR_PID" 2>/dev/null
        type pg_stop >/dev/null 2>&1 && pg_stop >/dev/null 2>&1
        rm -rf "$WORK"
}
trap cleanup EXIT

# ---- The database, the repository, the model (as fleet.sh)

PG_NO_TRAP=1 . "$SRC/tests/fleet/pg.sh"
pg_start || check_skip_all "PostgreSQL did not start"
pg_psql -c "CREATE ROLE host_b LOGIN" || check_skip_all "cannot make host-b's role"

mkdir -p "$WORK/git/root" "$WORK/git/src"
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
GIT_PORT=$(head -1 "$WORK/git/port")
REPO="https://localhost:$GIT_PORT/calc.git"

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

# ---- The central journal: systemd-journal-remote, listening on loopback
# (both hosts share this network), writing into a directory that both
# hosts see at /srv/agentfab-fleet/central.

SHARE=$WORK/remote
CENTRAL=$SHARE/central
mkdir -p "$CENTRAL"
JPORT=$(free_port)
"$JREMOTE" --listen-http="127.0.0.1:$JPORT" --output="$CENTRAL/" > "$WORK/journal-remote.log" 2>&1 &
JR_PID=$!

# ---- The hosts

bash "$HERE/lib/fleet-host.sh" "$BUILDDIR" "$FLEET_STATE" host-b "$PG_CONNINFO user=host_b" "$PORT" "$WORK/git/cert.pem" \
        > "$WORK/host-b.log" 2>&1 &
B_PID=$!
harness_prepare_root() {
        fleet_prepare_root "$1" host-a "$PG_OWNER_CONNINFO" "$PORT" "$WORK/git/cert.pem"
}
harness_boot || { cat "$WORK/host-b.log"; check_skip_all "the harness could not boot host-a"; }
trap 'harness_teardown; cleanup' EXIT
for _ in $(seq 600); do [ -e "$FLEET_STATE/host-b.env" ] || [ -e "$FLEET_STATE/host-b.failed" ] && break; sleep 0.1; done
[ -e "$FLEET_STATE/host-b.env" ] || { cat "$WORK/host-b.log"; check_skip_all "the harness could not boot host-b"; }
on() { local h=$1; shift; if [ "$h" = host-a ]; then hx "$@"; else hx_on "$h" "$@"; fi; }

REMOTE=$SHARE/remote.git
af_id=$(hx id -u agentfab):$(hx id -g agentfab)
[ "$af_id" = "$(hx_on host-b id -u agentfab):$(hx_on host-b id -g agentfab)" ] ||
        check_skip_all "the agentfab user differs between the hosts"
git init -q --bare "$REMOTE" && chown -R "$af_id" "$REMOTE" &&
        fleet_share "$HARNESS_PID" "$SHARE" &&
        (. "$FLEET_STATE/host-b.env" && fleet_share "$HARNESS_PID" "$SHARE") ||
        check_skip_all "cannot share the Remote= repository with the hosts"

echo "=== each host sends its journal to the central systemd-journal-remote"
upload_ok=1
for h in host-a host-b; do
        on "$h" sh -c "mkdir -p /etc/systemd/journal-upload.conf.d &&
                printf '[Upload]\nURL=http://127.0.0.1:$JPORT\n' > /etc/systemd/journal-upload.conf.d/central.conf &&
                systemctl start systemd-journal-upload.service" || upload_ok=0
done
# A mark on each host, to see its journal reach the central one.
for h in host-a host-b; do on "$h" logger -t fleet-audit "mark of $h"; done
marks=0
for _ in $(seq 100); do
        marks=$(journalctl --directory="$CENTRAL" -q --no-pager -o cat SYSLOG_IDENTIFIER=fleet-audit 2>/dev/null | grep -c '^mark of host-')
        [ "$marks" -ge 2 ] && break
        sleep 0.1
done
[ "$upload_ok" = 1 ] && [ "$marks" -ge 2 ] &&
        ok "systemd-journal-upload on both hosts reaches journal-remote; its directory holds both hosts' entries" ||
        fail "central journal: uploaders started: $upload_ok, marks seen: $marks; $(tail -3 "$WORK/journal-remote.log")"

# host-a's role owns the database: its daemon makes the schema.
hx systemctl start agentfab.service
for _ in $(seq 100); do
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.migrations" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
        sleep 0.1
done
psql -X -q -v ON_ERROR_STOP=1 "$PG_OWNER_CONNINFO" -c "SELECT agentfab.add_host('host-a', 'agentfab')" \
        -c "SELECT agentfab.add_host('host-b', 'host_b')" >/dev/null || fail "schema or mapping"
hx_on host-b systemctl start agentfab.service
live=0
for _ in $(seq 150); do
        live=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.hosts WHERE lease_until > now()")
        [ "$live" = 2 ] && break
        sleep 0.1
done
[ "$live" = 2 ] || fail "hosts with a lease: $live"

echo "=== tasks worked on by both hosts"
ids=()
for i in 1 2 3 4; do
        id=$(hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add ($i)" --test "python3 -m unittest -v" 2>&1) ||
                { fail "submit $i: $id"; continue; }
        ids+=("$id")
done
fleet_state() { pg_psql -tA -c "SELECT state || ' ' || coalesce(host, '-') || ' ' || epoch FROM agentfab.tasks WHERE id = '$1'"; }
n=0
for _ in $(seq 480); do
        n=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE state IN ('succeeded', 'failed', 'cancelled')")
        [ "$n" -ge "${#ids[@]}" ] && break
        sleep 0.25
done
declare -A host_of=() epoch_of=() by_host=()
for id in "${ids[@]}"; do
        read -r st host epoch <<<"$(fleet_state "$id")"
        [ "$st" = succeeded ] || fail "task $id is $st on $host"
        host_of[$id]=$host epoch_of[$id]=$epoch
        by_host[$host]=$(( ${by_host[$host]:-0} + 1 ))
done
[ "${#ids[@]}" = 4 ] && [ "${by_host[host-a]:-0}" -ge 1 ] && [ "${by_host[host-b]:-0}" -ge 1 ] &&
        ok "four tasks submitted on host-a succeeded, worked on by both hosts (host-a ${by_host[host-a]:-0}, host-b ${by_host[host-b]:-0})" ||
        fail "tasks by host: host-a ${by_host[host-a]:-0}, host-b ${by_host[host-b]:-0} of ${#ids[@]}"

# task_entries WHERE ID: the task's entries of agentfab.service, as
# "HOST EPOCH EVENT" lines, from a host's own journal or the central one.
task_entries() {
        local where=$1 id=$2
        if [ "$where" = central ]; then
                journalctl --directory="$CENTRAL" -q --no-pager -o json "AGENTFAB_TASK=$id" _SYSTEMD_UNIT=agentfab.service
        else
                on "$where" journalctl -q --no-pager -o json "AGENTFAB_TASK=$id" _SYSTEMD_UNIT=agentfab.service
        fi | python3 -c 'import json, sys
for l in sys.stdin:
    e = json.loads(l)
    print(e.get("AGENTFAB_HOST", "-"), e.get("AGENTFAB_EPOCH", "-"), e.get("AGENTFAB_EVENT", "-"))'
}

echo "=== the central journal holds every entry of each task, from both hosts"
# What each host has of the task, together, is what the central journal
# has once the uploads caught up (they follow the journal as it grows).
missing=() hosts_seen=()
for id in "${ids[@]}"; do
        want=$( (task_entries host-a "$id"; task_entries host-b "$id") | sort)
        got=
        for _ in $(seq 100); do
                got=$(task_entries central "$id" | sort)
                [ -n "$want" ] && [ "$got" = "$want" ] && break
                sleep 0.1
        done
        [ -n "$want" ] && [ "$got" = "$want" ] || missing+=("$id: $(wc -l <<<"$got") of $(wc -l <<<"$want")")
        mapfile -t -O "${#hosts_seen[@]}" hosts_seen < <(awk '{print $1}' <<<"$got" | sort -u)
done
both=$(printf '%s\n' "${hosts_seen[@]}" | sort -u | tr '\n' ' ')
[ "${#missing[@]}" = 0 ] && [ "$both" = "host-a host-b " ] &&
        ok "the central journal has each task's entries of both hosts' journals, no more, no fewer (hosts: $both)" ||
        fail "central journal: missing ${missing[*]:-none}; hosts $both"

echo "=== audit --verify on the central journal"
bad=0
for id in "${ids[@]}"; do
        out=$(on "${host_of[$id]}" "${CTL[@]}" audit "$id" --verify --directory=/srv/agentfab-fleet/central 2>&1)
        rc=$?
        if [ "$rc" != 0 ] || ! grep -q "journal entries checked: no gaps." <<<"$out"; then
                bad=$((bad + 1)); echo "    $id on ${host_of[$id]}: exit $rc: $out"
        fi
done
[ "$bad" = 0 ] && ok "every task verifies against its branch on the central journal, with no gap" ||
        fail "$bad tasks do not verify on the central journal"

# Each task's entries, in the central journal, are of the host and epoch
# of its claim, as the database has them: the journals were merged, not
# mixed up.
mixed=()
for id in "${ids[@]}"; do
        other=$(task_entries central "$id" | grep -vc "^${host_of[$id]} ${epoch_of[$id]} ")
        [ "$other" = 0 ] || mixed+=("$id: $other")
done
[ "${#mixed[@]}" = 0 ] && ok "each task's entries in the central journal name its host and epoch in the database" ||
        fail "entries of another host or epoch: ${mixed[*]}"

echo "=== a forged copy of the central journal is reported"
# forge ID DIR MODE: the task's entries from the central journal, changed,
# written with systemd-journal-remote into DIR/forged.journal. MODE
# "epoch": from the first step on, one epoch later (no takeover marks it);
# "host": one command entry of the task's epoch named as the other host's;
# "notakeover": without its takeover entry.
forge() {
        local id=$1 dir=$2 mode=$3
        mkdir -p "$dir"
        journalctl --directory="$CENTRAL" -q -o export "AGENTFAB_TASK=$id" | python3 -c '
import sys
mode, epoch, other = sys.argv[1:]
data = sys.stdin.buffer.read()
entries, cur, i = [], [], 0
while i < len(data):          # the export format: journalctl(1), "-o export"
    if data[i] == 0x0a:
        entries.append(cur)
        cur, i = [], i + 1
        continue
    nl = data.index(b"\n", i)
    line = data[i:nl]
    if b"=" in line:
        cur.append(line.split(b"=", 1))
        i = nl + 1
    else:                     # a binary field: its name, a 64-bit length, the data
        n = int.from_bytes(data[nl + 1:nl + 9], "little")
        cur.append([line, data[nl + 9:nl + 9 + n]])
        i = nl + 9 + n + 1
if cur:
    entries.append(cur)
get = lambda e, k: next((f[1] for f in e if f[0] == k), None)
def put(e, k, v):
    for f in e:
        if f[0] == k:
            f[1] = v
later = done = False
for e in entries:
    ev = get(e, b"AGENTFAB_EVENT")
    later = later or ev == b"step"
    if mode == "epoch" and later and get(e, b"AGENTFAB_EPOCH") == epoch.encode():
        put(e, b"AGENTFAB_EPOCH", b"%d" % (int(epoch) + 1))
    if mode == "host" and not done and ev == b"command" and get(e, b"AGENTFAB_EPOCH") == epoch.encode():
        put(e, b"AGENTFAB_HOST", other.encode())
        done = True
out = bytearray()
if mode == "notakeover":
    entries = [e for e in entries if get(e, b"AGENTFAB_EVENT") != b"takeover"]
for e in entries:
    for name, value in e:
        if b"\n" in value or not value.isascii():
            out += name + b"\n" + len(value).to_bytes(8, "little") + value + b"\n"
        else:
            out += name + b"=" + value + b"\n"
    out += b"\n"
sys.stdout.buffer.write(out)' "$mode" "${epoch_of[$id]}" "$4" | "$JREMOTE" --output="$dir/forged.journal" - 2>>"$WORK/forge.err"
}
fid=${ids[0]} fhost=${host_of[${ids[0]}]}
other='host-b'; [ "$fhost" = host-b ] && other='host-a'
fe=${epoch_of[$fid]}
forge "$fid" "$SHARE/forged-epoch" epoch "$other"
expect_refused "1:epoch $((fe + 1)): the entries go from '$fhost' at epoch $fe to '$fhost' at epoch $((fe + 1)) without a takeover entry" \
        "a copy with the epoch changed part way, no takeover entry: reported, exit 1" \
        on "$fhost" "${CTL[@]}" audit "$fid" --verify --directory=/srv/agentfab-fleet/forged-epoch
forge "$fid" "$SHARE/forged-host" host "$other"
expect_refused "1:epoch $fe: entries from two hosts, '$fhost' and '$other'" \
        "a copy with another host's entry at the task's epoch: reported, exit 1" \
        on "$fhost" "${CTL[@]}" audit "$fid" --verify --directory=/srv/agentfab-fleet/forged-host
expect_exit 0 "the same task on the central journal itself still verifies" \
        on "$fhost" "${CTL[@]}" audit "$fid" --verify --directory=/srv/agentfab-fleet/central

# ---- Takeovers. A task's third model answer (run_tests, after the
# acknowledged "Fix add") waits while $WORK/hold exists.
kill "$MODEL_PID" 2>/dev/null; wait "$MODEL_PID" 2>/dev/null
python3 - "$WORK/takeover.json" "$WORK/hold" <<'PY'
import json, sys
out, hold = sys.argv[1:]
json.dump([
 {"reply": {"content": "Plan:\n1. Make add() return a + b.\n2. Run the tests and finish."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 {"reply": {"content": None, "tool_calls": [{"name": "run_tests", "arguments": {}}]}, "hold_while": hold},
 {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}},
], open(out, "w"))
PY
touch "$WORK/hold"
: > "$WORK/requests.jsonl"
python3 "$SRC/tests/model-server.py" --script "$WORK/takeover.json" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
        > "$WORK/model.out" 2> "$WORK/model.err" &
MODEL_PID=$!
for _ in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done

fleet_row() { pg_psql -tA -F ' ' -c "SELECT state, coalesce(host, '-'), epoch, coalesce(checkpoint, '-') FROM agentfab.tasks WHERE id = '$1'"; }
# in_sync HOST ID: the central journal has every entry of the task that
# HOST's own journal has.
in_sync() {
        local want got
        want=$(task_entries "$1" "$2" | sort)
        for _ in $(seq 100); do
                got=$(task_entries central "$2" | grep "^$1 " | sort)
                [ -n "$want" ] && [ "$got" = "$want" ] && return 0
                sleep 0.1
        done
        echo "    central has $(wc -l <<<"$got") of $1's $(wc -l <<<"$want") entries of $2"
        return 1
}

# takeover_setup LABEL: a task held by host-b, its "Fix add" step
# acknowledged, waiting for the model's third answer; sets TID and
# OLD_EPOCH. host-a's daemon is stopped meanwhile, so that host-b claims it.
takeover_setup() {
        local st= host= cp=-
        TID= OLD_EPOCH=
        touch "$WORK/hold"
        : > "$WORK/requests.jsonl"
        hx systemctl stop agentfab.service
        TID=$(hx_on host-b runuser -u alice -- "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add ($1)" \
                --test "python3 -m unittest -v" 2>&1) || { fail "$1: submit on host-b: $TID"; TID=; return 1; }
        for _ in $(seq 240); do
                read -r st host OLD_EPOCH cp <<<"$(fleet_row "$TID")"
                [ "$st $host" = "running host-b" ] && [ "$cp" != - ] && [ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge 3 ] && break
                sleep 0.25
        done
        if [ "$st $host" != "running host-b" ] || [ "$cp" = - ]; then
                fail "$1: the task did not get to work on host-b with a checkpoint: $(fleet_row "$TID")"
                return 1
        fi
        # What host-b journaled so far is in the central journal: the
        # uploader follows the journal as it grows. (What a host journals
        # in its last moment before a crash may not get there: agentfabd(8).)
        in_sync host-b "$TID" || fail "$1: host-b's entries did not reach the central journal"
}

# takeover_finish LABEL: host-a's daemon started, the model let go; waits
# for host-a to finish TID, sets NEW_EPOCH.
takeover_finish() {
        local row=
        hx systemctl start agentfab.service
        rm -f "$WORK/hold"
        for _ in $(seq 400); do
                row=$(fleet_row "$TID")
                [[ $row == "succeeded host-a "* ]] && break
                sleep 0.1
        done
        read -r _ _ NEW_EPOCH _ <<<"$row"
        [[ $row == "succeeded host-a "* ]] && [ "$NEW_EPOCH" -gt "$OLD_EPOCH" ] &&
                ok "$1: host-a took the task over from host-b (epoch $OLD_EPOCH) at epoch $NEW_EPOCH and finished it" ||
                fail "$1: after host-b went: $row"
}

# takeover_verify LABEL: the central journal has the task's steps of both
# hosts and the takeover entry, and audit --verify there finds no gap.
takeover_verify() {
        local got tk out rc
        in_sync host-a "$TID" || fail "$1: host-a's entries did not reach the central journal"
        got=$(task_entries central "$TID")
        tk=$(journalctl --directory="$CENTRAL" -q --no-pager -o json "AGENTFAB_TASK=$TID" AGENTFAB_EVENT=takeover | python3 -c '
import json, sys
print(" ".join("%s:%s:%s:%s:%s" % (e.get("AGENTFAB_FROM_HOST"), e.get("AGENTFAB_FROM_EPOCH"), e.get("AGENTFAB_HOST"), e.get("AGENTFAB_EPOCH"), e.get("AGENTFAB_STEP")) for e in map(json.loads, filter(str.strip, sys.stdin))))')
        grep -q "^host-b $OLD_EPOCH step$" <<<"$got" && grep -q "^host-a $NEW_EPOCH step$" <<<"$got" &&
                [[ $tk == "host-b:$OLD_EPOCH:host-a:$NEW_EPOCH:"* ]] &&
                ok "$1: the central journal has the task's steps from host-b (epoch $OLD_EPOCH) and host-a (epoch $NEW_EPOCH), and the takeover entry ($tk)" ||
                fail "$1: central journal of the taken-over task: takeover '$tk'; $(sort <<<"$got" | uniq -c | tr '\n' ';')"
        out=$(hx "${CTL[@]}" audit "$TID" --verify --directory=/srv/agentfab-fleet/central 2>&1)
        rc=$?
        [ "$rc" = 0 ] && grep -q "journal entries checked: no gaps." <<<"$out" &&
                ok "$1: audit --verify on the central journal: the takeover is marked, no gap ($(tail -1 <<<"$out"))" ||
                fail "$1: audit --verify of the taken-over task: exit $rc: $out"
}

echo "=== a host stopped (SIGSTOP) past its lease: host-a takes its task over; continued, host-b's late entries do not break the audit"
if takeover_setup stopped; then
        bpid=$(hx_on host-b systemctl show -p MainPID --value agentfab.service)
        hx_on host-b kill -STOP "$bpid"
        takeover_finish "stopped host"
        hx_on host-b kill -CONT "$bpid"
        st=
        for _ in $(seq 120); do
                st=$(hx_on host-b busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$TID" \
                        org.agentfab.Task1 State 2>/dev/null)
                [ "$st" = 's "cancelled"' ] && break
                sleep 0.25
        done
        [ "$st" = 's "cancelled"' ] || fail "stopped host: host-b, continued, says $st"
        in_sync host-b "$TID" || fail "stopped host: host-b's late entries did not reach the central journal"
        takeover_verify "stopped host"
fi

echo "=== a host killed whole (its systemd) mid-task: host-a finishes its task; it verifies on the central journal"
if takeover_setup killed; then
        # shellcheck source=/dev/null
        bsys=$(. "$FLEET_STATE/host-b.env" && echo "$HARNESS_PID")
        [ -n "$bsys" ] && kill -KILL "$bsys"
        takeover_finish "killed host"
        takeover_verify "killed host"
        hosts=$(hx "${CTL[@]}" audit "$TID" --json --directory=/srv/agentfab-fleet/central | python3 -c '
import json, sys
print(" ".join(sorted({json.loads(l).get("AGENTFAB_HOST", "-") for l in sys.stdin if l.strip()})))')
        [ "$hosts" = "host-a host-b" ] && ok "agentfabctl audit --directory= lists the task's entries of both hosts" ||
                fail "audit --directory= lists entries of '$hosts'"
        # The same entries without the takeover entry: an unmarked change
        # of host and epoch.
        epoch_of[$TID]=$OLD_EPOCH
        forge "$TID" "$SHARE/forged-takeover" notakeover host-a
        expect_refused "1:epoch $NEW_EPOCH: the entries go from 'host-b' at epoch $OLD_EPOCH to 'host-a' at epoch $NEW_EPOCH without a takeover entry" \
                "the same entries without the takeover entry: reported, exit 1" \
                hx "${CTL[@]}" audit "$TID" --verify --directory=/srv/agentfab-fleet/forged-takeover
fi

echo "=== where no daemon knows the tasks: the central journal and a mirror of Remote="
# This shell is not a host of the fleet: agentfabctl reads the branches
# from a mirror of the Remote= repository (refs/agentfab/TASK/*).
# (Remote= belongs to the hosts' agentfab user: git's upload-pack takes
# safe.directory only from a global configuration, this test's own.)
printf '[safe]\n\tdirectory = *\n' > "$WORK/gitconfig"
GIT_CONFIG_GLOBAL=$WORK/gitconfig git clone -q --mirror "$REMOTE" "$WORK/mirror.git" || fail "cannot mirror Remote="
bad=0 all=("${ids[@]}")
[ -n "${TID:-}" ] && all+=("$TID")
for id in "${all[@]}"; do
        out=$("$BUILDDIR/src/ctl/agentfabctl" audit "$id" --verify --directory="$CENTRAL" --repo="$WORK/mirror.git" 2>&1)
        rc=$?
        if [ "$rc" != 0 ] || ! grep -q "journal entries checked: no gaps." <<<"$out"; then
                bad=$((bad + 1)); echo "    $id: exit $rc: $out"
        fi
done
[ "$bad" = 0 ] && ok "all ${#all[@]} tasks (the taken-over one too) verify with --repo= on a mirror of Remote=, no daemon asked" ||
        fail "$bad of ${#all[@]} tasks do not verify with --repo="
expect_refused "4:has no refs/agentfab/000000000000/EPOCH" "a task the repository has no refs of: refused, exit 4" \
        "$BUILDDIR/src/ctl/agentfabctl" audit 000000000000 --verify --directory="$CENTRAL" --repo="$WORK/mirror.git"

echo "fleet-audit: failed: ${FAILED_NAMES[*]:-none}"
check_summary
