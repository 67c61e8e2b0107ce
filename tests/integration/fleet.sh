#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Two agentfab hosts of one fleet ([Fleet], agentfabd(8)): each a systemd
# booted by the harness, sharing a PostgreSQL cluster that this test starts
# on loopback (tests/fleet/pg.sh), a repository served over https and the
# scripted model server. Host "host-a" is this shell's harness and makes the
# fleet's schema (its role owns the database); "host-b" is booted by a
# second shell (lib/fleet-host.sh) and logs in with a role of its own.
#
#   fleet.sh BUILDDIR
#
# Scenarios: tasks submitted on host-a are claimed by host-a or host-b,
# each by one host and worked on once, and succeed; "agentfabctl list
# --fleet" says the same on both hosts; every journal entry of a claimed
# task names the host and the epoch of its claim; tasks in an environment
# only host-b has go to host-b; the database stopped
# while a task is at work: its host pauses it (its sandbox frozen) within
# 2/3 LeaseSec, and, the database back, resumes it to success; a host
# restarted mid-task confirms in the database that it holds the task, then
# finishes it; each step is published to the shared Remote= (a bare
# repository of this test's, at /srv/agentfab-fleet in both hosts) as
# refs/agentfab/<task>/<epoch> and acknowledged in the database; a step at
# an epoch that is no longer its host's is refused, and the host cancels
# the task and its sandbox; a host stopped (SIGSTOP) past its lease: the
# other host takes its task over from the last acknowledged step within
# LeaseSec + 10 s and finishes it (each step once on the branch, the
# takeover in its journal), and the stopped host, continued, fences itself
# before it acts on anything that waited, and cancels the task and its
# sandbox; a host killed whole (its systemd): the other host finishes its
# task the same way.
set -u

BUILDDIR=$(realpath "${1:?usage: fleet.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/lib/fleet-host.sh"
. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "fleet tests need root"
[ -x /usr/lib/postgresql/15/bin/initdb ] || check_skip_all "no PostgreSQL 15 (apt-get install postgresql)"

WORK=$(mktemp -d /tmp/agentfab-fleet.XXXXXX)
chmod 755 "$WORK"
FLEET_STATE=$WORK/hosts
mkdir -p "$FLEET_STATE"
MODEL_PID= GIT_PID= B_PID=
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CTL=(agentfabctl --no-ask-password)

cleanup() {
        [ -n "$B_PID" ] && { touch "$FLEET_STATE/host-b.stop"; timeout 60 tail --pid="$B_PID" -f /dev/null; }
        [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null
        [ -n "$GIT_PID" ] && kill "$GIT_PID" 2>/dev/null
        type pg_stop >/dev/null 2>&1 && pg_stop >/dev/null 2>&1
        rm -rf "$WORK"
}
trap cleanup EXIT

# ---- The database, the repository, the model

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

# ---- The hosts

# host-b boots in a shell of its own while this one boots host-a.
# Only host-b has the environment "special" (the host's own system).
bash "$HERE/lib/fleet-host.sh" "$BUILDDIR" "$FLEET_STATE" host-b "$PG_CONNINFO user=host_b" "$PORT" "$WORK/git/cert.pem" \
        "$(printf '[Environment]\nName=special\n')" > "$WORK/host-b.log" 2>&1 &
B_PID=$!
harness_prepare_root() {
        fleet_prepare_root "$1" host-a "$PG_OWNER_CONNINFO" "$PORT" "$WORK/git/cert.pem"
}
harness_boot || { cat "$WORK/host-b.log"; check_skip_all "the harness could not boot host-a"; }
trap 'harness_teardown; cleanup' EXIT
for _ in $(seq 600); do [ -e "$FLEET_STATE/host-b.env" ] || [ -e "$FLEET_STATE/host-b.failed" ] && break; sleep 0.1; done
[ -e "$FLEET_STATE/host-b.env" ] || { cat "$WORK/host-b.log"; check_skip_all "the harness could not boot host-b"; }

# Remote=: one bare repository both hosts see at /srv/agentfab-fleet,
# owned by their daemon's user (the same on both: the same sysusers.d).
REMOTE=$WORK/remote/remote.git
RGIT=(git -c safe.directory='*' --git-dir="$REMOTE")
af_id=$(hx id -u agentfab):$(hx id -g agentfab)
[ "$af_id" = "$(hx_on host-b id -u agentfab):$(hx_on host-b id -g agentfab)" ] ||
        check_skip_all "the agentfab user differs between the hosts"
git init -q --bare "$REMOTE" && chown -R "$af_id" "$REMOTE" &&
        fleet_share "$HARNESS_PID" "$WORK/remote" &&
        (. "$FLEET_STATE/host-b.env" && fleet_share "$HARNESS_PID" "$WORK/remote") ||
        check_skip_all "cannot share the Remote= repository with the hosts"

# host-a's role owns the database: its daemon makes the schema. Then each
# login role is mapped to its host, as an administrator does once.
echo "=== two hosts join the fleet"
hx systemctl start agentfab.service
for _ in $(seq 100); do
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.migrations" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
        sleep 0.1
done
psql -X -q -v ON_ERROR_STOP=1 "$PG_OWNER_CONNINFO" -c "SELECT agentfab.add_host('host-a', 'agentfab')" \
        -c "SELECT agentfab.add_host('host-b', 'host_b')" >/dev/null &&
        ok "host-a's daemon made the schema; both roles mapped to hosts" || fail "schema or mapping"
hx_on host-b systemctl start agentfab.service
live=0
for _ in $(seq 150); do
        live=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.hosts WHERE lease_until > now()")
        [ "$live" = 2 ] && break
        sleep 0.1
done
[ "$live" = 2 ] && ok "both hosts hold a lease" || fail "hosts with a lease: $live"

echo "=== tasks submitted on host-a, worked on by either host, each once"
ids=()
for i in 1 2 3 4; do
        id=$(hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add ($i)" --test "python3 -m unittest -v" 2>&1) ||
                { fail "submit $i: $id"; continue; }
        ids+=("$id")
done
[ "${#ids[@]}" = 4 ] && ok "four submissions queued in the fleet from host-a" || fail "queued: ${#ids[@]}"

fleet_state() { pg_psql -tA -c "SELECT state || ' ' || coalesce(host, '-') FROM agentfab.tasks WHERE id = '$1'"; }
done_all=0
for _ in $(seq 480); do
        n=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE state IN ('succeeded', 'failed', 'cancelled')")
        [ "$n" -ge "${#ids[@]}" ] && { done_all=1; break; }
        sleep 0.25
done
[ "$done_all" = 1 ] && ok "every task ended in the database" || fail "ended: $n of ${#ids[@]}"

declare -A by_host=()
for id in "${ids[@]}"; do
        read -r st host <<<"$(fleet_state "$id")"
        on_a=0 on_b=0
        hx test -e "/var/lib/agentfab/tasks/$id/state.json" && on_a=1
        hx_on host-b test -e "/var/lib/agentfab/tasks/$id/state.json" && on_b=1
        if [ "$st" != succeeded ]; then
                fail "task $id is $st on $host"
                continue
        fi
        by_host[$host]=$(( ${by_host[$host]:-0} + 1 ))
        if [ "$host" = host-a ] && [ $on_a = 1 ] && [ $on_b = 0 ]; then :
        elif [ "$host" = host-b ] && [ $on_b = 1 ] && [ $on_a = 0 ]; then :
        else fail "task $id: the database says $host, on host-a: $on_a, on host-b: $on_b"; continue; fi
        run_on=(hx); [ "$host" = host-b ] && run_on=(hx_on host-b)
        steps=$("${run_on[@]}" git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" log --format=%s "agentfab/$id" | grep -c '^Fix add$')
        [ "$steps" = 1 ] || fail "task $id: 'Fix add' $steps times on its branch"
done
[ "${by_host[host-a]:-0}" -ge 1 ] && [ "${by_host[host-b]:-0}" -ge 1 ] &&
        ok "both hosts worked (host-a ${by_host[host-a]:-0}, host-b ${by_host[host-b]:-0}), each task on one host, its step once" ||
        fail "tasks by host: host-a ${by_host[host-a]:-0}, host-b ${by_host[host-b]:-0}"
[ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge 12 ] && ok "the model server answered both hosts" || fail "model requests"

echo "=== each step is published to Remote= and acknowledged in the database"
pub_bad=0
for id in "${ids[@]}"; do
        read -r epoch cp <<<"$(pg_psql -tA -F ' ' -c "SELECT epoch, coalesce(checkpoint, '-') FROM agentfab.tasks WHERE id = '$id'")"
        ref=$("${RGIT[@]}" rev-parse -q --verify "refs/agentfab/$id/$epoch^{commit}" 2>/dev/null)
        nlines=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.lines WHERE task = '$id' AND epoch = $epoch")
        gap=$(pg_psql -tA -c "SELECT count(*) - coalesce(max(n) + 1, 0) FROM agentfab.lines WHERE task = '$id'")
        fixes=$("${RGIT[@]}" log --format=%s "$ref" 2>/dev/null | grep -c '^Fix add$')
        # At its end the task's tip (the checkpoint and what delivery
        # added) replaced its last checkpoint there.
        if [ -n "$ref" ] && "${RGIT[@]}" merge-base --is-ancestor "$cp" "$ref" 2>/dev/null && [ "$nlines" -ge 4 ] &&
           [ "$gap" = 0 ] && [ "$fixes" = 1 ]; then :
        else
                pub_bad=$((pub_bad + 1))
                echo "    $id: refs/agentfab/$id/$epoch '$ref', database's checkpoint '$cp', $nlines lines (gap $gap), 'Fix add' $fixes times"
        fi
done
[ "$pub_bad" = 0 ] &&
        ok "every task's checkpoint is in the database and under refs/agentfab/<task>/<epoch> on Remote= (with its delivered tip), its step once, its conversation there" ||
        fail "$pub_bad tasks not published as acknowledged"

echo "=== a task that names an environment goes to a host that has it"
eids=()
for i in 1 2; do
        id=$(hx_on host-b runuser -u alice -- "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add (special $i)" \
                --test "python3 -m unittest -v" --environment special 2>&1) || { fail "submit on host-b: $id"; continue; }
        eids+=("$id")
done
for _ in $(seq 480); do
        n=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE environment = 'special' AND state = 'succeeded'")
        [ "$n" -ge "${#eids[@]}" ] && break
        sleep 0.25
done
where=$(for id in "${eids[@]}"; do fleet_state "$id"; done | sort | uniq -c | sed 's/^ *//')
[ "${#eids[@]}" = 2 ] && [ "$where" = "2 succeeded host-b" ] &&
        ok "both tasks in environment 'special', submitted on host-b, were worked on by host-b, the one host that has it" ||
        fail "tasks in 'special': $where"

echo "=== the journal names the host and the epoch"
bad=0 checked=0
for id in "${ids[@]}"; do
        read -r host epoch <<<"$(pg_psql -tA -F ' ' -c "SELECT host, epoch FROM agentfab.tasks WHERE id = '$id'")"
        run_on=(hx); [ "$host" = host-b ] && run_on=(hx_on host-b)
        out=$("${run_on[@]}" journalctl -q --no-pager -o json "AGENTFAB_TASK=$id")
        n=$(python3 -c 'import json,sys
h, e = sys.argv[1:]
es = [json.loads(l) for l in sys.stdin if l.strip()]
bad = [x.get("AGENTFAB_EVENT") for x in es if x.get("AGENTFAB_HOST") != h or x.get("AGENTFAB_EPOCH") != e]
print(len(es) if es and not bad else "-1 %d entries; lacking: %s" % (len(es), [(x.get("AGENTFAB_EVENT"), x.get("AGENTFAB_HOST"), x.get("AGENTFAB_EPOCH")) for x in es if x.get("AGENTFAB_HOST") != h or x.get("AGENTFAB_EPOCH") != e][:4]))' "$host" "$epoch" <<<"$out")
        if [ "${n%% *}" -gt 0 ]; then checked=$((checked + n)); else bad=$((bad + 1)); echo "    $id on $host (epoch $epoch): ${n#* }"; fi
done
[ "$bad" = 0 ] && ok "all $checked journal entries of the tasks carry AGENTFAB_HOST= and AGENTFAB_EPOCH= of their claim" ||
        fail "$bad tasks with journal entries that lack or misname the host or epoch"

echo "=== list --fleet is the same on every host"
la=$(hx "${CTL[@]}" list --fleet --all --json 2>&1)
lb=$(hx_on host-b "${CTL[@]}" list --fleet --all --json 2>&1)
norm() { python3 -c 'import json,sys; print(sorted((t["id"], t["state"], t.get("host"), t["epoch"]) for t in json.load(sys.stdin)))'; }
na=$(norm <<<"$la") nb=$(norm <<<"$lb")
[ -n "$na" ] && [ "$na" = "$nb" ] && ok "list --fleet: the same tasks, states, hosts and epochs from both hosts" ||
        fail "list --fleet differs: host-a $la / host-b $lb"
for id in "${ids[@]}"; do grep -q "$id" <<<"$na" || fail "list --fleet lacks $id"; done
out=$(hx "${CTL[@]}" list --fleet --all 2>&1)
grep -q "HOST" <<<"$out" && grep -q "host-[ab]" <<<"$out" && ok "the table names each task's host" || fail "table: $out"

echo "=== diff and fetch of a task from a host that does not hold it"
# Its host published its tip to Remote= at its end: any host reads it there.
for id in "${ids[@]}"; do
        read -r _ host <<<"$(fleet_state "$id")"
        if [ "$host" = host-b ]; then here=(hx_on host-b runuser -u alice --) there=(hx_as alice); other=host-a
        else here=(hx_as alice) there=(hx_on host-b runuser -u alice --); other=host-b; fi
        d_here=$("${here[@]}" "${CTL[@]}" diff "$id" 2>&1)
        d_there=$("${there[@]}" "${CTL[@]}" diff "$id" 2>&1)
        grep -q '^+    return a + b' <<<"$d_here" && [ "$d_here" = "$d_there" ] &&
                ok "diff of $id (on $host) from $other: the same patch as on $host" ||
                fail "diff of $id from $other: '$d_there' / on $host: '$d_here'"
        tip=$(if [ "$host" = host-b ]; then hx_on host-b git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" rev-parse "agentfab/$id"
              else hx git --git-dir="/var/lib/agentfab/tasks/$id/ledger.git" rev-parse "agentfab/$id"; fi)
        out=$("${there[@]}" bash -c "cd /tmp && rm -rf fetched-$id && git clone -q $REPO fetched-$id && agentfabctl --no-ask-password fetch $id --repo=/tmp/fetched-$id && git -C fetched-$id rev-parse agentfab/$id" 2>&1)
        [ "$(tail -1 <<<"$out")" = "$tip" ] && ok "fetch of $id from $other: branch agentfab/$id at its delivered tip" ||
                fail "fetch of $id from $other: $out (tip on $host: $tip)"
        break
done
nope=$(hx_as alice "${CTL[@]}" diff 0123456789ab 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "No task" <<<"$nope" && ok "diff of a task the fleet does not have: $nope" || fail "diff of an unknown task: $rc $nope"

echo "=== the database gone past 2/3 LeaseSec: the host fences itself, and goes on once it is back"
# The task's second model call waits while $WORK/hold exists, so that the
# task is at work when the database goes.
kill "$MODEL_PID" 2>/dev/null; wait "$MODEL_PID" 2>/dev/null
python3 - "$WORK/fence.json" "$WORK/hold" <<'PY'
import json, sys
out, hold = sys.argv[1:]
json.dump([
 {"reply": {"content": "Plan:\n1. Make add() return a + b.\n2. Run the tests and finish."}},
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}, "hold_while": hold},
 {"reply": {"content": None, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}},
], open(out, "w"))
PY
touch "$WORK/hold"
: > "$WORK/requests.jsonl"
python3 "$SRC/tests/model-server.py" --script "$WORK/fence.json" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
        > "$WORK/model.out" 2> "$WORK/model.err" &
MODEL_PID=$!
for _ in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done
task_prop_on() {
        local run_on=(hx); [ "$1" = host-b ] && run_on=(hx_on host-b)
        "${run_on[@]}" busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$2" org.agentfab.Task1 "$3" 2>/dev/null |
                sed 's/^[a-z] "\{0,1\}\(.*\)"\{0,1\}$/\1/; s/"$//'
}
fid=$(hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add (fenced)" --test "python3 -m unittest -v" 2>&1) ||
        fail "submit: $fid"
fhost=
for _ in $(seq 240); do
        fhost=$(pg_psql -tA -c "SELECT host FROM agentfab.tasks WHERE id = '$fid' AND state = 'running'")
        [ -n "$fhost" ] && [ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge 2 ] && break
        sleep 0.25
done
if [ -z "$fhost" ]; then
        fail "the task was not at work: $(fleet_state "$fid")"
else
        eval "$PG_STOP_SERVER"
        t0=$(date +%s%N)
        st=
        for _ in $(seq 60); do
                st=$(task_prop_on "$fhost" "$fid" State)
                [ "$st" = paused ] && break
                sleep 0.25
        done
        t1=$(date +%s%N)
        reason=$(task_prop_on "$fhost" "$fid" Reason)
        [ "$st" = paused ] && [[ $reason == *"lost contact"* ]] &&
                ok "without its database, $fhost paused the task after $(( (t1 - t0) / 1000000 )) ms (LeaseSec=6s): $reason" ||
                fail "state on $fhost without the database: $st ($reason)"
        [ "$(task_prop_on "$fhost" "$fid" FreezerState)" = frozen ] && ok "its sandbox is frozen" ||
                fail "freezer: $(task_prop_on "$fhost" "$fid" FreezerState)"
        eval "$PG_START_SERVER"
        rm -f "$WORK/hold"
        for _ in $(seq 240); do
                [ "$(fleet_state "$fid")" = "succeeded $fhost" ] && break
                sleep 0.25
        done
        [ "$(fleet_state "$fid")" = "succeeded $fhost" ] && [ "$(task_prop_on "$fhost" "$fid" State)" = succeeded ] &&
                ok "the database back, $fhost checked that it still holds the task, resumed it, and it succeeded" ||
                fail "after the database came back: $(fleet_state "$fid"), on $fhost $(task_prop_on "$fhost" "$fid" State): $(task_prop_on "$fhost" "$fid" Reason)"
        run_on=(hx); [ "$fhost" = host-b ] && run_on=(hx_on host-b)
        steps=$("${run_on[@]}" git --git-dir="/var/lib/agentfab/tasks/$fid/ledger.git" log --format=%s "agentfab/$fid" | grep -c '^Fix add$')
        [ "$steps" = 1 ] && ok "its step is once on the branch" || fail "'Fix add' $steps times on the branch"
fi

echo "=== a restarted host checks in the database that it holds its task before it goes on"
touch "$WORK/hold"
: > "$WORK/requests.jsonl"
rid=$(hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add (restarted)" --test "python3 -m unittest -v" 2>&1) ||
        fail "submit: $rid"
rhost=
for _ in $(seq 240); do
        rhost=$(pg_psql -tA -c "SELECT host FROM agentfab.tasks WHERE id = '$rid' AND state = 'running'")
        [ -n "$rhost" ] && [ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge 2 ] && break
        sleep 0.25
done
if [ -z "$rhost" ]; then
        fail "the task was not at work: $(fleet_state "$rid")"
else
        run_on=(hx); [ "$rhost" = host-b ] && run_on=(hx_on host-b)
        "${run_on[@]}" systemctl restart agentfab.service
        rm -f "$WORK/hold"
        for _ in $(seq 240); do
                [ "$(fleet_state "$rid")" = "succeeded $rhost" ] && break
                sleep 0.25
        done
        # The new daemon's own entries: its check in the database comes
        # before any work on the task (a sandbox made, a model call, a
        # command, a file changed, a step).
        inv=$("${run_on[@]}" systemctl show -p InvocationID --value agentfab.service)
        order=$("${run_on[@]}" journalctl -q --no-pager -o json "_SYSTEMD_INVOCATION_ID=$inv" | python3 -c '
import json, sys
rid = sys.argv[1]
held = work = None
for l in sys.stdin:
    e = json.loads(l)
    t = int(e["__REALTIME_TIMESTAMP"])
    if held is None and "holds its lease in the fleet: working (1 tasks held)" in str(e.get("MESSAGE")):
        held = t
    if work is None and e.get("AGENTFAB_TASK") == rid and e.get("AGENTFAB_EVENT") in ("sandbox", "model-call", "command", "file-change", "step"):
        work = (t, e["AGENTFAB_EVENT"])
print("ok" if held and work and held < work[0] else "held %s, first work %s" % (held, work))' "$rid")
        [ "$order" = ok ] && [ "$(fleet_state "$rid")" = "succeeded $rhost" ] &&
                ok "restarted mid-task, $rhost confirmed in the database that it holds the task before working on it, and finished it" ||
                fail "after the restart: $(fleet_state "$rid"); $order"
        steps=$("${run_on[@]}" git --git-dir="/var/lib/agentfab/tasks/$rid/ledger.git" log --format=%s "agentfab/$rid" | grep -c '^Fix add$')
        [ "$steps" = 1 ] && ok "its step is once on the branch" || fail "'Fix add' $steps times on the branch"
fi

echo "=== a host whose epoch is gone: the database refuses its step, and it stops the task"
# Another claim of the task (as a takeover makes) raises its epoch while
# its host is in the middle of a step: that step's acknowledgment finds
# zero rows.
touch "$WORK/hold"
: > "$WORK/requests.jsonl"
lid=$(hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add (lost)" --test "python3 -m unittest -v" 2>&1) ||
        fail "submit: $lid"
lhost=
for _ in $(seq 240); do
        lhost=$(pg_psql -tA -c "SELECT host FROM agentfab.tasks WHERE id = '$lid' AND state = 'running'")
        [ -n "$lhost" ] && [ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge 2 ] && break
        sleep 0.25
done
if [ -z "$lhost" ]; then
        fail "the task was not at work: $(fleet_state "$lid")"
else
        pg_psql -q -c "UPDATE agentfab.tasks SET epoch = epoch + 1 WHERE id = '$lid'"
        rm -f "$WORK/hold"
        st=
        for _ in $(seq 240); do
                st=$(task_prop_on "$lhost" "$lid" State)
                [ "$st" = cancelled ] && break
                sleep 0.25
        done
        reason=$(task_prop_on "$lhost" "$lid" Reason)
        read -r dbst cp nl <<<"$(pg_psql -tA -F ' ' -c "SELECT state, coalesce(checkpoint, '-'), (SELECT count(*) FROM agentfab.lines WHERE task = '$lid') FROM agentfab.tasks WHERE id = '$lid'")"
        [ "$st" = cancelled ] && [[ $reason == *"took this task over"* ]] && [ "$dbst $cp $nl" = "running - 0" ] &&
                ok "$lhost's step was refused at the old epoch: it cancelled the task here ($reason); the database has none of it, and still says running" ||
                fail "after the epoch moved: on $lhost $st ($reason); in the database: $dbst, checkpoint $cp, $nl lines"
        run_on=(hx); [ "$lhost" = host-b ] && run_on=(hx_on host-b)
        for _ in $(seq 40); do
                "${run_on[@]}" systemctl is-active --quiet "agentfab-task-$lid.scope" || break
                sleep 0.25
        done
        ! "${run_on[@]}" systemctl is-active --quiet "agentfab-task-$lid.scope" && ok "its sandbox is gone" ||
                fail "agentfab-task-$lid.scope is still active on $lhost"
fi

echo "=== what a fleet cannot take"
hx_as alice bash -c 'cd /tmp && rm -rf local && mkdir local && cd local && git init -q && echo x > f && git add f &&
        git -c user.name=a -c user.email=a@a commit -q -m x' || fail "local repository"
expect_refused "2:every host can fetch" "a repository only this host has is refused on a host of a fleet (InvalidSpec, exit 2)" \
        hx_as alice "${CTL[@]}" submit --repo /tmp/local --goal g


# ---- Takeover: host-b holds a task whose "Fix add" step is acknowledged,
# and waits for the model's third answer (run_tests) while $WORK/hold
# exists. host-a's daemon is stopped meanwhile, so that host-b claims it.
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
: > "$WORK/requests.jsonl"
python3 "$SRC/tests/model-server.py" --script "$WORK/takeover.json" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
        > "$WORK/model.out" 2> "$WORK/model.err" &
MODEL_PID=$!
for _ in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# first_call_after T0: ms from T0 (date +%s.%N) to the model's first request
# after it (from any host that is still running).
first_call_after() {
        # The server keeps writing at its offset after the log is emptied:
        # what lies before is NUL bytes.
        python3 -c '
import json, sys
t0 = float(sys.argv[1])
ts = []
for l in open(sys.argv[2], errors="replace"):
    l = l.strip("\0 \n")
    try:
        r = json.loads(l)
    except ValueError:
        continue
    if r.get("n") is not None and r.get("t", 0) > t0:
        ts.append(r["t"])
print(int((min(ts) - t0) * 1000) if ts else "")' "$1" "$WORK/requests.jsonl"
}
fleet_row() { pg_psql -tA -F ' ' -c "SELECT state, coalesce(host, '-'), epoch, coalesce(checkpoint, '-') FROM agentfab.tasks WHERE id = '$1'"; }

# takeover_setup LABEL: a task held on host-b after its first acknowledged
# commit; sets TID and OLD_EPOCH.
takeover_setup() {
        TID= OLD_EPOCH=
        touch "$WORK/hold"
        : > "$WORK/requests.jsonl"
        hx systemctl stop agentfab.service
        TID=$(hx_on host-b runuser -u alice -- "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add ($1)" \
                --test "python3 -m unittest -v" 2>&1) || { fail "submit on host-b: $TID"; TID=; return 1; }
        local st host epoch cp
        for _ in $(seq 240); do
                read -r st host epoch cp <<<"$(fleet_row "$TID")"
                [ "$st $host" = "running host-b" ] && [ "$cp" != - ] && [ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge 3 ] && break
                sleep 0.25
        done
        if [ "$st $host" != "running host-b" ] || [ "$cp" = - ]; then
                fail "the task did not get to work on host-b with a checkpoint: $(fleet_row "$TID")"
                TID=
                return 1
        fi
        OLD_EPOCH=$epoch
}

# takeover_wait T0: waits for host-a to hold TID and for it to succeed;
# sets TAKEN_MS (from T0 to host-a's claim in the database).
takeover_wait() {
        local t0=$1 row
        TAKEN_MS=
        for _ in $(seq 400); do
                row=$(fleet_row "$TID")
                if [ -z "$TAKEN_MS" ] && [[ $row == *" host-a "* ]]; then TAKEN_MS=$(( $(now_ms) - t0 )); fi
                [[ $row == "succeeded host-a "* ]] && break
                sleep 0.1
        done
}

# takeover_check HOW: the branch, the conversation and the journal after
# host-a finished TID.
takeover_check() {
        local how=$1 epoch steps entry gap
        read -r _ _ epoch _ <<<"$(fleet_row "$TID")"
        steps=$(hx git --git-dir="/var/lib/agentfab/tasks/$TID/ledger.git" log --format=%s "agentfab/$TID" | grep -c '^Fix add$')
        [ "$steps" = 1 ] && ok "$how: 'Fix add' is once on host-a's branch" || fail "$how: 'Fix add' $steps times on the branch"
        gap=$(pg_psql -tA -c "SELECT count(*) - coalesce(max(n) + 1, 0) FROM agentfab.lines WHERE task = '$TID'")
        [ "$gap" = 0 ] && ok "$how: the conversation in the database has no gap" || fail "$how: conversation gap $gap"
        entry=$(hx journalctl -q --no-pager -o json "AGENTFAB_TASK=$TID" AGENTFAB_EVENT=takeover | python3 -c '
import json, sys
es = [json.loads(l) for l in sys.stdin if l.strip()]
print(" ".join("%s:%s:%s:%s" % (e.get("AGENTFAB_FROM_HOST"), e.get("AGENTFAB_FROM_EPOCH"), e.get("AGENTFAB_EPOCH"), e.get("AGENTFAB_HOST")) for e in es))')
        [ "$entry" = "host-b:$OLD_EPOCH:$epoch:host-a" ] &&
                ok "$how: host-a's journal marks the takeover from host-b (epoch $OLD_EPOCH -> $epoch)" ||
                fail "$how: takeover entries: '$entry' (expected host-b:$OLD_EPOCH:$epoch:host-a)"
        [ "$(hx "${CTL[@]}" status "$TID" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = succeeded ] &&
                ok "$how: agentfabctl status on host-a says succeeded" || fail "$how: status on host-a"
}

echo "=== a host stopped (SIGSTOP) past its lease: another host takes its task over; continued, it has fenced itself"
if takeover_setup stopped; then
        bpid=$(hx_on host-b systemctl show -p MainPID --value agentfab.service)
        ref_before=$("${RGIT[@]}" rev-parse -q --verify "refs/agentfab/$TID/$OLD_EPOCH" 2>/dev/null)
        hx_on host-b kill -STOP "$bpid"
        t0=$(now_ms) t0s=$(date +%s.%N)
        hx systemctl start agentfab.service
        # host-b's answer goes into its socket while it is stopped.
        rm -f "$WORK/hold"
        takeover_wait "$t0"
        WORK_MS=$(first_call_after "$t0s")
        [ -n "$TAKEN_MS" ] && [ "$TAKEN_MS" -le 16000 ] &&
                ok "host-a held the task $TAKEN_MS ms after host-b stopped, its first model call there after ${WORK_MS:-?} ms (LeaseSec=6s; at most LeaseSec + 10 s)" ||
                fail "host-a took the task over after '${TAKEN_MS:-never}' ms: $(fleet_row "$TID")"
        [[ $(fleet_row "$TID") == "succeeded host-a "* ]] && ok "host-a finished it" || fail "after the takeover: $(fleet_row "$TID")"
        cont_us=$(( $(date +%s%N) / 1000 ))
        hx_on host-b kill -CONT "$bpid"
        st=
        for _ in $(seq 120); do
                st=$(task_prop_on host-b "$TID" State)
                [ "$st" = cancelled ] && break
                sleep 0.25
        done
        reason=$(task_prop_on host-b "$TID" Reason)
        [ "$st" = cancelled ] && [[ $reason == *"took this task over"* ]] &&
                ok "continued, host-b fenced itself, found the task taken over and cancelled it here: $reason" ||
                fail "host-b after SIGCONT: $st ($reason)"
        for _ in $(seq 40); do
                hx_on host-b systemctl is-active --quiet "agentfab-task-$TID.scope" || break
                sleep 0.25
        done
        ! hx_on host-b systemctl is-active --quiet "agentfab-task-$TID.scope" && ok "host-b's sandbox of it is gone" ||
                fail "agentfab-task-$TID.scope is still active on host-b"
        # The model's answer that waited in host-b's socket is not acted
        # on: the fence comes first (no command, no step, nothing pushed).
        late=$(hx_on host-b journalctl -q --no-pager -o json "AGENTFAB_TASK=$TID" | python3 -c '
import json, sys
since = int(sys.argv[1])
print(" ".join(e.get("AGENTFAB_EVENT") for e in map(json.loads, filter(str.strip, sys.stdin))
               if int(e["__REALTIME_TIMESTAMP"]) >= since and e.get("AGENTFAB_EVENT") in ("command", "step", "file-change", "model-call")))' "$cont_us")
        ref_after=$("${RGIT[@]}" rev-parse -q --verify "refs/agentfab/$TID/$OLD_EPOCH" 2>/dev/null)
        [[ $(fleet_row "$TID") == "succeeded host-a "* ]] && [ -z "$late" ] && [ "$ref_after" = "$ref_before" ] &&
                ok "host-b did no more work on it once continued (no command, step or model call) and pushed nothing" ||
                fail "after host-b went on: $(fleet_row "$TID"); its work: '$late'; refs/agentfab/$TID/$OLD_EPOCH $ref_before -> $ref_after"
        takeover_check "stopped host"
fi

# The benchmark's deaths (bench/fleet-hosts.sh): the same, FLEET_TAKEOVER_RUNS
# times in all; the time to host-a's claim in the database and to its first
# model call ("at work elsewhere"), against LeaseSec.
claims=() works=()
[ -n "${TAKEN_MS:-}" ] && claims+=("$TAKEN_MS") && [ -n "${WORK_MS:-}" ] && works+=("$WORK_MS")
for run in $(seq 2 "${FLEET_TAKEOVER_RUNS:-1}"); do
        takeover_setup "bench $run" || break
        bpid=$(hx_on host-b systemctl show -p MainPID --value agentfab.service)
        hx_on host-b kill -STOP "$bpid"
        t0=$(now_ms) t0s=$(date +%s.%N)
        hx systemctl start agentfab.service
        rm -f "$WORK/hold"
        takeover_wait "$t0"
        w=$(first_call_after "$t0s")
        hx_on host-b kill -CONT "$bpid"
        [[ $(fleet_row "$TID") == "succeeded host-a "* ]] && [ -n "$TAKEN_MS" ] && [ -n "$w" ] ||
                { fail "bench run $run: $(fleet_row "$TID")"; break; }
        claims+=("$TAKEN_MS") works+=("$w")
        for _ in $(seq 120); do [ "$(task_prop_on host-b "$TID" State)" = cancelled ] && break; sleep 0.25; done
done
if [ "${#claims[@]}" -ge 1 ]; then
        python3 - 6000 "${claims[*]}" "${works[*]}" <<'PY'
import statistics, sys
lease = int(sys.argv[1])
for what, xs in (("held by the other host", sys.argv[2]), ("its first model call there", sys.argv[3])):
    xs = sorted(int(x) for x in xs.split())
    if xs:
        print("bench: host stopped -> %s: %d runs, median %d ms (%.2f x LeaseSec), best %d ms, worst %d ms (%.2f x LeaseSec); baseline LeaseSec=%d ms"
              % (what, len(xs), statistics.median(xs), statistics.median(xs) / lease, xs[0], xs[-1], xs[-1] / lease, lease))
PY
fi

echo "=== a host killed whole in the middle of a task: another host finishes it"
if takeover_setup killed; then
        # shellcheck source=/dev/null
        bsys=$(. "$FLEET_STATE/host-b.env" && echo "$HARNESS_PID")
        kill -KILL "$bsys"
        t0=$(now_ms)
        hx systemctl start agentfab.service
        rm -f "$WORK/hold"
        takeover_wait "$t0"
        [ -n "$TAKEN_MS" ] && [ "$TAKEN_MS" -le 16000 ] &&
                ok "host-a held the task $TAKEN_MS ms after host-b's systemd was killed (LeaseSec=6s; at most LeaseSec + 10 s)" ||
                fail "host-a took the task over after '${TAKEN_MS:-never}' ms: $(fleet_row "$TID")"
        [[ $(fleet_row "$TID") == "succeeded host-a "* ]] && ok "host-a finished it" || fail "after the takeover: $(fleet_row "$TID")"
        takeover_check "killed host"
        echo "takeover: host-a held the killed host's task after $TAKEN_MS ms"
fi

echo "fleet: failed: ${FAILED_NAMES[*]:-none}"
check_summary
