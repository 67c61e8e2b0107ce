#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Three agentfab hosts of one fleet under load: each a systemd booted by the
# harness ("host-a" by this shell, "host-b" and "host-c" by
# lib/fleet-host.sh), sharing a PostgreSQL cluster this test starts on
# loopback (tests/fleet/pg.sh), a repository served over https, a bare
# Remote= repository and the scripted model server.
#
#   fleet-scale.sh BUILDDIR
#
# Scenarios:
#  - SCALE (default 200) small tasks, submitted spread over the three
#    hosts, all succeed: each claimed by one host and worked on once (its
#    state on that host's disk only, its step once on its branch on
#    Remote= at refs/agentfab/<task>/<epoch>, which holds the database's
#    checkpoint,
#    its conversation lines without a gap), every host worked on some,
#    "agentfabctl list --fleet" the same from every host. It prints the
#    rate (tasks a minute) and how many each host did.
#  - The database restarted twice while tasks are at work on every host
#    (held in the middle of a step by the model server), the second time
#    while their steps are being acknowledged: every host reconnects (the
#    journal says so, its lease is renewed again), every task succeeds,
#    none is done twice.
#  - A claim that committed, its answer lost with the connection (host-b
#    reaches the database through lib/fleet-db-proxy.py, which closes the
#    connection instead of passing on that answer): host-b finds in the
#    database the task it holds and had not heard of, and it succeeds.
#
# Knobs: SCALE=N tasks (200), SLOTS=N per host (4), SCALE_RESTARTS=N
# database restarts during the first scenario (0), SCALE_LIMIT_SEC=N the
# time the tasks may take before the test fails (300; the figure is printed
# either way).
set -u

BUILDDIR=$(realpath "${1:?usage: fleet-scale.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/lib/fleet-host.sh"
. "$HERE/lib/check.sh"

SCALE=${SCALE:-200}
SLOTS=${SLOTS:-4}
SCALE_LIMIT_SEC=${SCALE_LIMIT_SEC:-300}

[ "$(id -u)" = 0 ] || check_skip_all "fleet tests need root"
[ -x /usr/lib/postgresql/15/bin/initdb ] || check_skip_all "no PostgreSQL 15 (apt-get install postgresql)"

WORK=$(mktemp -d /tmp/agentfab-fleet-scale.XXXXXX)
chmod 755 "$WORK"
FLEET_STATE=$WORK/hosts
mkdir -p "$FLEET_STATE"
MODEL_PID='' GIT_PID='' PROXY_PID=''
declare -A HOST_PID=()
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CTL=(agentfabctl --no-ask-password)
HOSTS=(host-a host-b host-c)
OTHERS=(host-b host-c)

cleanup() {
        local h
        for h in "${!HOST_PID[@]}"; do touch "$FLEET_STATE/$h.stop"; done
        for h in "${!HOST_PID[@]}"; do timeout 60 tail --pid="${HOST_PID[$h]}" -f /dev/null; done
        [ -n "$MODEL_PID" ] && kill "$MODEL_PID" 2>/dev/null
        [ -n "$GIT_PID" ] && kill "$GIT_PID" 2>/dev/null
        [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
        type pg_stop >/dev/null 2>&1 && pg_stop >/dev/null 2>&1
        rm -rf "$WORK"
}
trap cleanup EXIT

# on HOST CMD...: CMD on that host (host-a is this shell's).
on() {
        local h=$1
        shift
        if [ "$h" = host-a ]; then hx "$@"; else hx_on "$h" "$@"; fi
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ---- The database, the repository, the model

PG_NO_TRAP=1 . "$SRC/tests/fleet/pg.sh"
pg_start || check_skip_all "PostgreSQL did not start"
# host-b reaches the database through a proxy that can lose a claim's
# answer (the third scenario).
PROXY_PORT=$(pg_free_port)
python3 "$HERE/lib/fleet-db-proxy.py" "$PROXY_PORT" "$PG_PORT" "$WORK/drop-claim" > "$WORK/proxy.out" 2> "$WORK/proxy.err" &
PROXY_PID=$!
for _ in $(seq 100); do [ -s "$WORK/proxy.out" ] && break; sleep 0.05; done
[ -s "$WORK/proxy.out" ] || check_skip_all "the database proxy did not start: $(cat "$WORK/proxy.err")"
pg_psql -c "CREATE ROLE host_b LOGIN" -c "CREATE ROLE host_c LOGIN" || check_skip_all "cannot make the hosts' roles"

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
TEST_CMD="python3 -m unittest -q"

# The fewest model calls a task can take: a plan, one edit, finish (the
# diff review before the finish is answered by the server on its own).
# HOLD, if given, is a file the edit's answer waits for to be gone.
start_model() {
        local hold=${1:-}
        if [ -n "$MODEL_PID" ]; then
                kill "$MODEL_PID" 2>/dev/null
                wait "$MODEL_PID" 2>/dev/null
        fi
        python3 - "$WORK/script.json" "$hold" <<'PY'
import json, sys
out, hold = sys.argv[1:]
edit = {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}}
if hold:
    edit["hold_while"] = hold
json.dump([
 {"reply": {"content": "Plan:\n1. Make add() return a + b.\n2. Finish."}},
 edit,
 {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}},
], open(out, "w"))
PY
        : > "$WORK/model.out"
        : > "$WORK/requests.jsonl"
        python3 "$SRC/tests/model-server.py" --script "$WORK/script.json" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
                > "$WORK/model.out" 2> "$WORK/model.err" &
        MODEL_PID=$!
        for _ in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done
}
start_model

# ---- The hosts

conninfo_of() {
        if [ "$1" = host-b ]; then echo "host=127.0.0.1 port=$PROXY_PORT dbname=agentfab user=host_b"
        else echo "$PG_CONNINFO user=${1/-/_}"; fi
}
EXTRA=$(printf '[Daemon]\nMaxActiveTasks=%s\nMaxTasksPerUser=100000\n\n[Fleet]\nSlots=%s\nLeaseSec=10s\n' "$SLOTS" "$SLOTS")
for h in "${OTHERS[@]}"; do
        bash "$HERE/lib/fleet-host.sh" "$BUILDDIR" "$FLEET_STATE" "$h" "$(conninfo_of "$h")" "$PORT" "$WORK/git/cert.pem" \
                "$EXTRA" > "$WORK/$h.log" 2>&1 &
        HOST_PID[$h]=$!
done
harness_prepare_root() {
        fleet_prepare_root "$1" host-a "$PG_OWNER_CONNINFO" "$PORT" "$WORK/git/cert.pem" "$EXTRA"
}
HARNESS_BOOT_TIMEOUT=${HARNESS_BOOT_TIMEOUT:-60}
harness_boot || { cat "$WORK"/host-*.log; check_skip_all "the harness could not boot host-a"; }
trap 'harness_teardown; cleanup' EXIT
for h in "${OTHERS[@]}"; do
        for _ in $(seq 900); do [ -e "$FLEET_STATE/$h.env" ] || [ -e "$FLEET_STATE/$h.failed" ] && break; sleep 0.1; done
        [ -e "$FLEET_STATE/$h.env" ] || { cat "$WORK/$h.log"; check_skip_all "the harness could not boot $h"; }
done

# Remote=: one bare repository every host sees at /srv/agentfab-fleet.
REMOTE=$WORK/remote/remote.git
RGIT=(git -c safe.directory='*' --git-dir="$REMOTE")
af_id=$(hx id -u agentfab):$(hx id -g agentfab)
for h in "${OTHERS[@]}"; do
        [ "$af_id" = "$(hx_on "$h" id -u agentfab):$(hx_on "$h" id -g agentfab)" ] ||
                check_skip_all "the agentfab user differs between the hosts"
done
git init -q --bare "$REMOTE" && chown -R "$af_id" "$REMOTE" && fleet_share "$HARNESS_PID" "$WORK/remote" &&
        (. "$FLEET_STATE/host-b.env" && fleet_share "$HARNESS_PID" "$WORK/remote") &&
        (. "$FLEET_STATE/host-c.env" && fleet_share "$HARNESS_PID" "$WORK/remote") ||
        check_skip_all "cannot share the Remote= repository with the hosts"

echo "=== three hosts join the fleet"
hx systemctl start agentfab.service
for _ in $(seq 100); do
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.migrations" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
        sleep 0.1
done
psql -X -q -v ON_ERROR_STOP=1 "$PG_OWNER_CONNINFO" -c "SELECT agentfab.add_host('host-a', 'agentfab')" \
        -c "SELECT agentfab.add_host('host-b', 'host_b')" -c "SELECT agentfab.add_host('host-c', 'host_c')" >/dev/null &&
        ok "host-a's daemon made the schema; the three roles mapped to hosts" || fail "schema or mapping"
for h in "${OTHERS[@]}"; do hx_on "$h" systemctl start agentfab.service; done
live=0
for _ in $(seq 150); do
        live=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.hosts WHERE lease_until > now()")
        [ "$live" = 3 ] && break
        sleep 0.1
done
[ "$live" = 3 ] && ok "the three hosts hold a lease" || fail "hosts with a lease: $live"

# ---- Checks shared by both scenarios

# check_worked_once WHAT ID...: each task succeeded in the database, its
# state is on the disk of its host alone, its step is once on its branch
# on Remote= at refs/agentfab/<task>/<epoch>, which holds the database's
# checkpoint, and its conversation lines in the database have no gap and
# no line twice. Sets BY_HOST[host]=count.
declare -A BY_HOST
check_worked_once() {
        local what=$1 h id st host epoch cp ref fixes bad=0 nbad=0 shown=0
        shift
        declare -A on_disk=() db=()
        BY_HOST=()
        for h in "${HOSTS[@]}"; do
                for id in $(on "$h" ls /var/lib/agentfab/tasks); do
                        on_disk[$id]="${on_disk[$id]:-}${on_disk[$id]:+,}$h"
                done
        done
        while read -r id st host epoch cp; do
                db[$id]="$st $host $epoch $cp"
        done < <(pg_psql -tA -F ' ' -c "SELECT id, state, coalesce(host, '-'), epoch, coalesce(checkpoint, '-') FROM agentfab.tasks")
        for id in "$@"; do
                read -r st host epoch cp <<<"${db[$id]:-missing - - -}"
                if [ "$st" != succeeded ] || [ "${on_disk[$id]:-}" != "$host" ]; then
                        bad=$((bad + 1))
                        [ $shown -lt 5 ] && echo "    $id: $st on $host (epoch $epoch); on disk on: ${on_disk[$id]:-none}" && shown=$((shown + 1))
                        continue
                fi
                BY_HOST[$host]=$(( ${BY_HOST[$host]:-0} + 1 ))
                ref=$("${RGIT[@]}" rev-parse -q --verify "refs/agentfab/$id/$epoch^{commit}" 2>/dev/null)
                fixes=$("${RGIT[@]}" log --format=%s "$ref" 2>/dev/null | grep -c '^Fix add$')
                # At its end the task's tip (its checkpoint and what
                # delivery added) replaced its last checkpoint there.
                if [ -z "$ref" ] || ! "${RGIT[@]}" merge-base --is-ancestor "$cp" "$ref" 2>/dev/null || [ "$fixes" != 1 ]; then
                        nbad=$((nbad + 1))
                        [ $shown -lt 5 ] && echo "    $id: refs/agentfab/$id/$epoch '$ref', the database's checkpoint '$cp', 'Fix add' $fixes times" &&
                                shown=$((shown + 1))
                fi
        done
        [ "$bad" = 0 ] && ok "$what: all $# succeeded, each on the disk of the one host the database names" ||
                fail "$what: $bad of $# not succeeded on one host"
        [ "$nbad" = 0 ] && ok "$what: each task's step once on its branch on Remote=, at refs/agentfab/<task>/<epoch>, which holds the database's checkpoint" ||
                fail "$what: $nbad tasks not published once as acknowledged"
        # The conversation: lines 0..max, each once (the primary key says
        # once), at least plan, edit and finish.
        local ids gaps
        ids=$(printf "'%s'," "$@")
        gaps=$(pg_psql -tA -F ' ' -c "SELECT t.id, count(l.n), coalesce(max(l.n), -1) FROM agentfab.tasks t LEFT JOIN agentfab.lines l ON l.task = t.id
                WHERE t.id IN (${ids%,}) GROUP BY t.id HAVING count(l.n) <> coalesce(max(l.n), -1) + 1 OR count(l.n) < 4")
        [ -z "$gaps" ] && ok "$what: every task's conversation lines in the database, from 0 without a gap" ||
                fail "$what: lines with gaps or too few (task, count, max n): $(head -5 <<<"$gaps")"
}

# ---- 1. SCALE tasks over three hosts

echo "=== $SCALE tasks submitted over the three hosts, each worked on once by one host"
# One submitter a host, all at once; task i on host i mod 3.
t0=$(now_ms)
SUBMIT_PIDS=()
for k in 0 1 2; do
        h=${HOSTS[$k]}
        n=$(( (SCALE - k + 2) / 3 ))
        on "$h" runuser -u alice -- bash -c 'k=$1 n=$2 repo=$3 test=$4; shift 4
                for j in $(seq 0 $((n - 1))); do
                        "$@" submit --repo "$repo" --goal "Make add() add ($((j * 3 + k)))" --test "$test" || echo "submit failed: $j" >&2
                done' sh "$k" "$n" "$REPO" "$TEST_CMD" "${CTL[@]}" > "$WORK/ids.$h" 2> "$WORK/submit.$h.err" &
        SUBMIT_PIDS+=($!)
done
# SCALE_RESTARTS=N: the database restarted N times, 4 s apart, while the
# tasks are claimed and worked on (not in CI: a stress of its own).
RESTARTER_PID=
if [ "${SCALE_RESTARTS:-0}" -gt 0 ]; then
        (for _ in $(seq "$SCALE_RESTARTS"); do sleep 4; eval "$PG_RESTART"; echo "restarted at $(date +%T.%N)"; done) \
                > "$WORK/restarts.log" 2>&1 &
        RESTARTER_PID=$!
fi
wait_submit=0
for p in "${SUBMIT_PIDS[@]}"; do wait "$p" || wait_submit=1; done
t_sub=$(now_ms)
mapfile -t ids < <(cat "$WORK"/ids.host-*)
[ "${#ids[@]}" = "$SCALE" ] && [ "$wait_submit" = 0 ] &&
        ok "$SCALE submissions queued in the fleet from the three hosts in $(( (t_sub - t0) / 1000 )).$(( (t_sub - t0) % 1000 / 100 )) s" ||
        fail "queued: ${#ids[@]} of $SCALE: $(cat "$WORK"/submit.*.err | head -5)"

ended=0
deadline=$(( t0 + SCALE_LIMIT_SEC * 1000 ))
while [ "$(now_ms)" -lt "$deadline" ]; do
        ended=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE state IN ('succeeded', 'failed', 'cancelled')")
        [ "$ended" -ge "${#ids[@]}" ] && break
        sleep 0.5
done
t1=$(now_ms)
if [ -n "$RESTARTER_PID" ]; then
        wait "$RESTARTER_PID"
        echo "  the database was restarted $(grep -c restarted "$WORK/restarts.log") times meanwhile"
fi
ms=$(( t1 - t0 ))
rate=$(( ${#ids[@]} * 60000 * 10 / (ms > 0 ? ms : 1) ))
echo "  figure: ${#ids[@]} tasks in $(( ms / 1000 )).$(( ms % 1000 / 100 )) s, $(( rate / 10 )).$(( rate % 10 )) tasks a minute" \
        "(Slots=$SLOTS a host, $(nproc) CPUs); submitted in $(( (t_sub - t0) / 1000 )) s"
# Each task from its row to its end, by the database's clock.
echo "  figure: a task from its submission to its end: $(pg_psql -tA -c "SELECT
        'median ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM updated - created))::numeric, 1) ||
        ' s, worst ' || round(max(extract(epoch FROM updated - created))::numeric, 1) || ' s' FROM agentfab.tasks")"
# Where a task's time goes: waiting in the queue (its row to the journal
# entry of its claim) and worked on (its claim to its end in the database).
for h in "${HOSTS[@]}"; do
        on "$h" journalctl -q --no-pager -o json -u agentfab.service -g "^Claimed task" --output-fields=MESSAGE 2>/dev/null
done > "$WORK/claims.json"
pg_psql -tA -F ' ' -c "SELECT id, extract(epoch FROM created), extract(epoch FROM updated) FROM agentfab.tasks" > "$WORK/times"
python3 - "$WORK/claims.json" "$WORK/times" <<'PY'
import json, re, statistics, sys
claimed = {}
for l in open(sys.argv[1]):
    if l.strip():
        e = json.loads(l)
        m = re.match(r"Claimed task '([^']+)'", e.get("MESSAGE", ""))
        if m:
            claimed[m.group(1)] = int(e["__REALTIME_TIMESTAMP"]) / 1e6
wait, work = [], []
for l in open(sys.argv[2]):
    i, c, u = l.split()
    if i in claimed:
        wait.append(claimed[i] - float(c))
        work.append(float(u) - claimed[i])
if wait:
    f = lambda v: "median %.1f s, worst %.1f s" % (statistics.median(v), max(v))
    print("  figure: of %d tasks: in the queue %s; from its claim to its end %s" % (len(wait), f(wait), f(work)))
PY
[ "$ended" -ge "${#ids[@]}" ] && ok "every task ended in the database within $SCALE_LIMIT_SEC s" ||
        fail "ended: $ended of ${#ids[@]} after $SCALE_LIMIT_SEC s"

check_worked_once "$SCALE tasks" "${ids[@]}"
echo "  figure: tasks by host: host-a ${BY_HOST[host-a]:-0}, host-b ${BY_HOST[host-b]:-0}, host-c ${BY_HOST[host-c]:-0}"
[ "${BY_HOST[host-a]:-0}" -ge 1 ] && [ "${BY_HOST[host-b]:-0}" -ge 1 ] && [ "${BY_HOST[host-c]:-0}" -ge 1 ] &&
        ok "every host worked on some" || fail "a host worked on none"
[ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE epoch <> 1")" = 0 ] &&
        ok "every task was claimed once (epoch 1)" ||
        fail "tasks claimed more than once: $(pg_psql -tA -c "SELECT id, host, epoch FROM agentfab.tasks WHERE epoch <> 1" | head -5)"

echo "=== list --fleet is the same from every host"
norm() { python3 -c 'import json,sys; print(sorted((t["id"], t["state"], t.get("host"), t["epoch"]) for t in json.load(sys.stdin)))'; }
declare -A lists=()
for h in "${HOSTS[@]}"; do
        lists[$h]=$(on "$h" "${CTL[@]}" list --fleet --all --json 2>&1 | norm 2>&1)
done
n_listed=$(python3 -c 'import ast,sys; print(len(ast.literal_eval(sys.stdin.read())))' <<<"${lists[host-a]}" 2>/dev/null)
[ "$n_listed" = "$SCALE" ] && [ "${lists[host-a]}" = "${lists[host-b]}" ] && [ "${lists[host-a]}" = "${lists[host-c]}" ] &&
        ok "list --fleet: the same $SCALE tasks, states, hosts and epochs from the three hosts" ||
        fail "list --fleet: $n_listed tasks from host-a; the same from host-b: $([ "${lists[host-a]}" = "${lists[host-b]}" ] && echo yes || echo no), from host-c: $([ "${lists[host-a]}" = "${lists[host-c]}" ] && echo yes || echo no)"

# The number of conversation lines of a task worked on once, clean: the
# same for every task of this script.
LINES=$(pg_psql -tA -c "SELECT DISTINCT count(*) FROM agentfab.lines GROUP BY task")
[ "$(wc -l <<<"$LINES")" = 1 ] && ok "every task's conversation has the same $LINES lines" ||
        fail "tasks' conversations differ in length: $(tr '\n' ' ' <<<"$LINES")"
LINES=$(head -1 <<<"$LINES")

# ---- 2. The database restarted twice in the middle of work

echo "=== the database restarted twice while every host has tasks at work: each host reconnects, nothing lost or done twice"
N2=$(( 3 * SLOTS ))
touch "$WORK/hold"
start_model "$WORK/hold"
rids=()
for i in $(seq 0 $((N2 - 1))); do
        h=${HOSTS[$((i % 3))]}
        id=$(on "$h" runuser -u alice -- "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add (restart $i)" --test "$TEST_CMD" 2>&1) ||
                { fail "submit on $h: $id"; continue; }
        rids+=("$id")
done
rlist=$(printf "'%s'," "${rids[@]}")
rlist=${rlist%,}
# At work: claimed, and the edit's model call held (the plan and the edit
# asked for, by every task).
at_work=
for _ in $(seq 240); do
        at_work=$(pg_psql -tA -c "SELECT string_agg(host || ' ' || n, ', ' ORDER BY host) FROM
                (SELECT host, count(*) AS n FROM agentfab.tasks WHERE id IN ($rlist) AND state = 'running' GROUP BY host) x")
        [ "$at_work" = "host-a $SLOTS, host-b $SLOTS, host-c $SLOTS" ] &&
                [ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge $((2 * N2)) ] && break
        sleep 0.25
done
[ "$at_work" = "host-a $SLOTS, host-b $SLOTS, host-c $SLOTS" ] && ok "$N2 tasks at work, held in the middle of a step: $at_work" ||
        fail "tasks at work: $at_work; model requests: $(grep -c '"n"' "$WORK/requests.jsonl")"

# restart_db LABEL: restarts the server, then waits for every host's
# journal to say it connected again after the restart, and for its lease
# to be renewed after it; prints each host's time from the server back to
# its new connection.
restart_db() {
        local label=$1 h tdown tup up_db c renewed figs=() missing=()
        tdown=$(date +%s%6N)
        eval "$PG_RESTART" || { fail "$label: the server did not restart"; return; }
        tup=$(date +%s%6N)
        up_db=$(pg_psql -tA -c "SELECT now()")
        for h in "${HOSTS[@]}"; do
                c=
                for _ in $(seq 120); do
                        c=$(on "$h" journalctl -q --no-pager -o json -u agentfab.service --since="@$((tdown / 1000000))" \
                                MESSAGE="Connected to the fleet's database." 2>/dev/null |
                                python3 -c 'import json, sys
t = [int(json.loads(l)["__REALTIME_TIMESTAMP"]) for l in sys.stdin if l.strip()]
t = [x for x in t if x > int(sys.argv[1])]
print(min(t) if t else "")' "$tdown")
                        renewed=$(pg_psql -tA -c "SELECT renewed > '$up_db' FROM agentfab.hosts WHERE name = '$h'" 2>/dev/null)
                        [ -n "$c" ] && [ "$renewed" = t ] && break
                        sleep 0.25
                done
                if [ -n "$c" ] && [ "$renewed" = t ]; then
                        figs+=("$h $(( (c - tdown) / 1000 )) ms")
                else
                        missing+=("$h (connected: ${c:-no}, lease renewed: ${renewed:-?})")
                fi
        done
        echo "  figure: $label: pg_ctl restart took $(( (tup - tdown) / 1000 )) ms; from its start to each host's new connection: ${figs[*]}"
        [ "${#missing[@]}" = 0 ] && ok "$label: every host's journal says it connected again, and its lease was renewed after the restart" ||
                fail "$label: not back: ${missing[*]}"
}

t_hold=$(now_ms)
restart_db "first restart, the steps held"
held_left=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE id IN ($rlist) AND state = 'running' AND epoch = 1")
[ "$held_left" = "$N2" ] && ok "the tasks are still at work on their hosts, at their epoch" ||
        fail "at work after the restart: $held_left of $N2: $(pg_psql -tA -c "SELECT id, state, host, epoch FROM agentfab.tasks WHERE id IN ($rlist)" | head -5)"
# Released, with each task's row locked by another session: the steps'
# acknowledgments wait on the wire (a host's one connection with them),
# and the server restarts under them: they fail as "may have committed",
# and are sent again on the new connection. (LeaseSec=10s: a host's lease
# renewal waits behind them less than the 6.7 s that would fence it.)
printf 'BEGIN;\nSELECT id FROM agentfab.tasks WHERE id IN (%s) FOR UPDATE;\nSELECT pg_sleep(60);\n' "$rlist" |
        "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$PG_ADMIN_CONNINFO" > "$WORK/locker.out" 2>&1 &
LOCKER_PID=$!
for _ in $(seq 100); do
        [ "$(pg_psql -tA -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(60)%' AND state = 'active'")" = 1 ] && break
        sleep 0.05
done
rm -f "$WORK/hold"
echo "  figure: the steps held for $(( ($(now_ms) - t_hold) / 1000 )) s from the first restart (the model's TimeoutSec=20s)"
# Until every host waits, or 1.5 s after the first did (a host whose one
# connection waits longer than 2/3 LeaseSec fences itself); a loaded
# machine may take several seconds to get the steps that far.
waiting= first_wait=
for _ in $(seq 400); do
        waiting=$(pg_psql -tA -c "SELECT string_agg(usename || ' ' || n, ', ' ORDER BY usename) FROM (SELECT usename, count(*) AS n
                FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%ack%' GROUP BY usename) x")
        [ "$(tr -cd ',' <<<"$waiting")" = ",," ] && break
        if [ -n "$waiting" ]; then
                [ -n "$first_wait" ] || first_wait=$(now_ms)
                [ $(( $(now_ms) - first_wait )) -ge 1500 ] && break
        fi
        sleep 0.05
done
echo "  figure: acknowledgments waiting on the wire when the server went, by database role: ${waiting:-none}"
[ -n "$waiting" ] && ok "steps' acknowledgments were on the wire when the server restarted" ||
        fail "no acknowledgment was waiting on the wire: $(cat "$WORK/locker.out")"
restart_db "second restart, the steps being acknowledged"
for _ in $(seq 480); do
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE id IN ($rlist) AND state IN ('succeeded', 'failed', 'cancelled')")" = "$N2" ] && break
        sleep 0.25
done
wait "$LOCKER_PID" 2>/dev/null
retried=$(for h in "${HOSTS[@]}"; do
        printf '%s %s ' "$h" "$(on "$h" journalctl -q --no-pager -u agentfab.service -g 'did not acknowledge step' | wc -l)"
done)
echo "  figure: steps whose acknowledgment was sent again, by host: $retried"
check_worked_once "after the restarts" "${rids[@]}"
[ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.tasks WHERE id IN ($rlist) AND epoch = 1")" = "$N2" ] &&
        ok "after the restarts: every task still at the epoch of its one claim" ||
        fail "after the restarts: claimed again: $(pg_psql -tA -c "SELECT id, host, epoch FROM agentfab.tasks WHERE id IN ($rlist) AND epoch <> 1" | head -5)"
odd=$(pg_psql -tA -F ' ' -c "SELECT task, count(*) FROM agentfab.lines WHERE task IN ($rlist) GROUP BY task HAVING count(*) <> $LINES")
[ -z "$odd" ] && ok "after the restarts: every task's conversation has the $LINES lines of one clean run: no line twice" ||
        fail "after the restarts: conversations of another length (task, lines): $(head -5 <<<"$odd")"
fix_edits=$(python3 -c 'import json, sys
n = 0
for l in open(sys.argv[1]):
    b = json.loads(l).get("body") or {}
    if sum(1 for m in b.get("messages", []) if m.get("role") == "assistant") == 1:
        n += 1
print(n)' "$WORK/requests.jsonl")
[ "$fix_edits" = "$N2" ] && ok "the held step's model call was made once for each of the $N2 tasks" ||
        fail "the held step's model call: $fix_edits times for $N2 tasks"

# ---- 3. A claim's answer lost with the connection

echo "=== a claim that committed, its answer lost with the connection: its host finds it in the database"
# host-b alone claims (the others' daemons stopped); the proxy closes its
# connection instead of passing on the answer to the claim that gets this
# task (an empty claim of the slow poll's passes).
start_model
for h in host-a host-c; do on "$h" systemctl stop agentfab.socket agentfab.service; done
echo "(lost answer)" > "$WORK/drop-claim"
lid=$(hx_on host-b runuser -u alice -- "${CTL[@]}" submit --repo "$REPO" --goal "Make add() add (lost answer)" --test "$TEST_CMD" 2>&1) ||
        fail "submit on host-b: $lid"
for _ in $(seq 240); do
        [ "$(pg_psql -tA -c "SELECT state FROM agentfab.tasks WHERE id = '$lid'")" = succeeded ] && break
        sleep 0.25
done
grep -q dropped "$WORK/proxy.out" && ok "the proxy closed host-b's connection instead of passing on its claim's answer" ||
        fail "the proxy dropped no claim's answer"
found=$(hx_on host-b journalctl -q --no-pager -u agentfab.service -g "Claimed task '$lid'.*answer was lost" | wc -l)
read -r st host epoch <<<"$(pg_psql -tA -F ' ' -c "SELECT state, host, epoch FROM agentfab.tasks WHERE id = '$lid'")"
[ "$st $host $epoch" = "succeeded host-b 1" ] && [ "$found" = 1 ] &&
        ok "host-b found the task it held in the database and had not heard of, and it succeeded at its one claim" ||
        fail "the task of the lost answer: $st on $host at epoch $epoch; host-b's journal found it: $found"
check_worked_once "the lost answer" "$lid"

echo "=== no daemon crashed"
crashes=$(for h in "${HOSTS[@]}"; do
        on "$h" journalctl -q --no-pager -u agentfab.service -g "AddressSanitizer|runtime error:|dumped core|code=killed|code=dumped" |
                sed "s/^/    $h: /"
done)
[ -z "$crashes" ] && ok "no host's agentfabd crashed or reported a sanitizer error" || fail "crashes: $(head -5 <<<"$crashes")"

echo "fleet-scale: failed: ${FAILED_NAMES[*]:-none}"
check_summary
