#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# People on any host of a fleet (agentfabd(8), "A FLEET OF HOSTS"): two
# hosts booted as in fleet.sh, sharing a private PostgreSQL cluster, a
# repository served over https and the scripted model server. Every task
# here names the environment "onlya", which only host-a has, so host-a
# works on it and the people are on host-b.
#
#   fleet-people.sh BUILDDIR
#
# Scenarios: status, logs and summary of a task host-a worked on, read on
# host-b, are what host-a shows; a task stopped by its step budget on
# host-a is approved on host-b (polkit there refuses its owner, lets root)
# and goes on; an approval for its earlier stop, posted late, does not
# approve its later stop (the holder drops it, with a journal entry, and
# host-b refuses one outright); amended by its owner on host-b while it
# waits, and its later stop approved on host-b, it succeeds; a task at
# work on host-a is paused, resumed and cancelled by its owner on host-b,
# and someone else on host-b is refused by polkit there, with nothing
# posted.
set -u

BUILDDIR=$(realpath "${1:?usage: fleet-people.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"
. "$HERE/lib/fleet-host.sh"
. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "fleet tests need root"
[ -x /usr/lib/postgresql/15/bin/initdb ] || check_skip_all "no PostgreSQL 15 (apt-get install postgresql)"

WORK=$(mktemp -d /tmp/agentfab-fleet-people.XXXXXX)
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

# One script for every task, by step: six steps (the tests, the finish,
# and the finish's review of the change the seventh); with max_steps=3 the
# budget stops the task before step 4 and before step 7. The first step
# waits while $WORK/hold exists, so that a task can be caught at work.
python3 - "$WORK/script.json" "$WORK/hold" <<'PY'
import json, sys
out, hold = sys.argv[1:]
ls = {"reply": {"content": None, "tool_calls": [{"name": "list_files", "arguments": {}}]}}
json.dump([
 {"reply": {"content": "Plan:\n1. Make add() return a + b.\n2. Run the tests and finish."}},
 dict(ls, hold_while=hold),
 {"reply": {"content": "Fix add", "tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}},
 ls,
 ls,
 {"reply": {"content": None, "tool_calls": [{"name": "run_tests", "arguments": {}}]}},
 {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "add() adds."}}]}},
], open(out, "w"))
PY
python3 "$SRC/tests/model-server.py" --script "$WORK/script.json" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
        > "$WORK/model.out" 2> "$WORK/model.err" &
MODEL_PID=$!
for _ in $(seq 100); do [ -s "$WORK/model.out" ] && break; sleep 0.05; done

# ---- The hosts

bash "$HERE/lib/fleet-host.sh" "$BUILDDIR" "$FLEET_STATE" host-b "$PG_CONNINFO user=host_b" "$PORT" "$WORK/git/cert.pem" \
        > "$WORK/host-b.log" 2>&1 &
B_PID=$!
harness_prepare_root() {
        fleet_prepare_root "$1" host-a "$PG_OWNER_CONNINFO" "$PORT" "$WORK/git/cert.pem" \
                "$(printf '[Environment]\nName=onlya\n')"
}
harness_boot || { cat "$WORK/host-b.log"; check_skip_all "the harness could not boot host-a"; }
trap 'harness_teardown; cleanup' EXIT
for _ in $(seq 600); do [ -e "$FLEET_STATE/host-b.env" ] || [ -e "$FLEET_STATE/host-b.failed" ] && break; sleep 0.1; done
[ -e "$FLEET_STATE/host-b.env" ] || { cat "$WORK/host-b.log"; check_skip_all "the harness could not boot host-b"; }

REMOTE=$WORK/remote/remote.git
af_id=$(hx id -u agentfab):$(hx id -g agentfab)
[ "$af_id" = "$(hx_on host-b id -u agentfab):$(hx_on host-b id -g agentfab)" ] ||
        check_skip_all "the agentfab user differs between the hosts"
[ "$(hx id -u alice)" = "$(hx_on host-b id -u alice)" ] || check_skip_all "alice differs between the hosts"
git init -q --bare "$REMOTE" && chown -R "$af_id" "$REMOTE" &&
        fleet_share "$HARNESS_PID" "$WORK/remote" &&
        (. "$FLEET_STATE/host-b.env" && fleet_share "$HARNESS_PID" "$WORK/remote") ||
        check_skip_all "cannot share the Remote= repository with the hosts"
# Somebody who owns no task, on host-b.
hx_on host-b useradd -s /bin/bash bob || check_skip_all "cannot add bob on host-b"

echo "=== two hosts join the fleet"
hx systemctl start agentfab.service
for _ in $(seq 100); do
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.migrations" 2>/dev/null)" -ge 3 ] 2>/dev/null && break
        sleep 0.1
done
psql -X -q -v ON_ERROR_STOP=1 "$PG_OWNER_CONNINFO" -c "SELECT agentfab.add_host('host-a', 'agentfab')" \
        -c "SELECT agentfab.add_host('host-b', 'host_b')" >/dev/null &&
        ok "host-a made the schema (version $(pg_psql -tA -c "SELECT max(version) FROM agentfab.migrations")); both roles mapped" ||
        fail "schema or mapping"
hx_on host-b systemctl start agentfab.service
live=0
for _ in $(seq 150); do
        live=$(pg_psql -tA -c "SELECT count(*) FROM agentfab.hosts WHERE lease_until > now()")
        [ "$live" = 2 ] && break
        sleep 0.1
done
[ "$live" = 2 ] && ok "both hosts hold a lease" || fail "hosts with a lease: $live"

fleet_state() { pg_psql -tA -c "SELECT state || ' ' || coalesce(host, '-') FROM agentfab.tasks WHERE id = '$1'"; }
# wait_fleet ID "STATE HOST" [TRIES of 0.25 s]
wait_fleet() {
        local i
        for i in $(seq "${3:-240}"); do
                [ "$(fleet_state "$1")" = "$2" ] && return 0
                sleep 0.25
        done
        return 1
}
prop_a() {
        hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$1" org.agentfab.Task1 "$2" 2>/dev/null |
                sed 's/^[a-z] "\{0,1\}\(.*\)"\{0,1\}$/\1/; s/"$//'
}
# What host-b's status --json says of a field (as root there).
status_b() {
        hx_on host-b "${CTL[@]}" status --json "$1" 2>/dev/null |
                python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$2" 2>/dev/null
}
# wait_b ID FIELD VALUE: host-b's status shows it (its holder wrote it).
wait_b() {
        local i
        for i in $(seq 120); do
                [ "$(status_b "$1" "$2")" = "$3" ] && return 0
                sleep 0.25
        done
        return 1
}
submit_a() {
        hx_as alice "${CTL[@]}" submit --repo "$REPO" --goal "$1" --test "python3 -m unittest -v" --environment onlya "${@:2}"
}
# journal_request ID RESULT: host-a's entry for a request from host-b.
journal_request() {
        hx journalctl -q --no-pager -o json MESSAGE_ID=dc9bf5c1d78b4b269c8a6ab2a28de961 "AGENTFAB_TASK=$1" \
                "AGENTFAB_RESULT=$2" 2>/dev/null
}

echo "=== status, logs and summary of a task on host-a, from host-b"
rm -f "$WORK/hold"
id=$(submit_a "Make add() add") || fail "submit: $id"
if ! wait_fleet "$id" "succeeded host-a"; then
        fail "the task did not succeed on host-a: $(fleet_state "$id")"
else
        ok "the task in environment 'onlya' succeeded on host-a"
        ! hx_on host-b test -e "/var/lib/agentfab/tasks/$id" && ok "host-b has nothing of it on its disk" ||
                fail "host-b has the task's directory"
        norm() {
                python3 -c 'import json,sys
d = json.load(sys.stdin)
for k in ("host", "epoch", "fleet_owner", "breaker_stop", "resources", "updated_usec"):
    d.pop(k, None)
print(json.dumps(d, sort_keys=True))'
        }
        sa= sb= same=0
        for _ in $(seq 40); do
                sa=$(hx_as alice "${CTL[@]}" status --json "$id" 2>&1 | norm)
                sb=$(hx_on host-b runuser -u alice -- "${CTL[@]}" status --json "$id" 2>&1 | norm)
                [ -n "$sa" ] && [ "$sa" = "$sb" ] && { same=1; break; }
                sleep 0.25
        done
        [ "$same" = 1 ] && grep -q '"state": "succeeded"' <<<"$sb" &&
                ok "status --json on host-b is what host-a shows (state, step, plan, head, breaker, owner...)" ||
                fail "status differs: host-a $sa / host-b $sb"
        out=$(hx_on host-b runuser -u alice -- "${CTL[@]}" status "$id" 2>&1)
        grep -q "Host: host-a (epoch 1; owner alice@host-a" <<<"$out" && ok "status on host-b names the host, epoch and owner" ||
                fail "status on host-b: $out"
        res=$(hx_on host-b runuser -u alice -- "${CTL[@]}" status --json "$id" 2>/dev/null |
                python3 -c 'import json,sys; print(json.load(sys.stdin).get("resources", {}).get("model_calls", 0))' 2>/dev/null)
        [ "${res:-0}" -ge 6 ] && ok "and what it used ($res model calls)" || fail "resources on host-b: $res"
        la= lb= same=0
        for _ in $(seq 40); do
                la=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
                lb=$(hx_on host-b runuser -u alice -- "${CTL[@]}" logs "$id" 2>&1)
                [ -n "$la" ] && [ "$la" = "$lb" ] && { same=1; break; }
                sleep 0.25
        done
        [ "$same" = 1 ] && grep -q "Ran 1 test" <<<"$lb" && ok "logs on host-b are host-a's ($(wc -l <<<"$lb") lines)" ||
                fail "logs differ: host-a $(head -c 300 <<<"$la") / host-b $(head -c 300 <<<"$lb")"
        ma=$(hx_as alice "${CTL[@]}" summary "$id" 2>&1)
        mb=$(hx_on host-b runuser -u alice -- "${CTL[@]}" summary "$id" 2>&1)
        [ -n "$ma" ] && [ "$ma" = "$mb" ] && grep -q "add() adds" <<<"$mb" && ok "summary on host-b is host-a's" ||
                fail "summary differs: host-a $(head -c 300 <<<"$ma") / host-b $(head -c 300 <<<"$mb")"
        expect_refused "3:" "bob on host-b may not read alice's task (polkit there, exit 3)" \
                hx_on host-b runuser -u bob -- "${CTL[@]}" status "$id"
fi

echo "=== a budget's stop on host-a, approved on host-b; a late approval for the earlier stop answers no later one"
bid=$(submit_a "Make add() add (budget)" --limit max_steps=3) || fail "submit: $bid"
if ! wait_b "$bid" state awaiting-approval; then
        fail "host-b never saw the task wait for approval: $(fleet_state "$bid"), on host-a $(prop_a "$bid" State)"
else
        s1=$(status_b "$bid" breaker_stop)
        [ "$(status_b "$bid" breaker)" = budget ] && [ "$s1" = 4 ] && [ "$(prop_a "$bid" Step)" = 3 ] &&
                ok "host-b sees it wait at the budget's stop before step 4, as host-a has it" ||
                fail "stop on host-b: $(status_b "$bid" breaker) $s1, step on host-a $(prop_a "$bid" Step)"
        expect_refused "3:" "its owner may not approve on host-b: polkit there asks for an administrator (exit 3)" \
                hx_on host-b runuser -u alice -- "${CTL[@]}" approve "$bid"
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.requests WHERE task = '$bid'")" = 0 ] &&
                ok "and nothing was posted" || fail "a request was posted for a refused approval"
        hx_on host-b "${CTL[@]}" approve "$bid" --comment "go on from host-b" >/dev/null 2>"$WORK/approve.err" &&
                ok "root approves on host-b" || fail "approve on host-b: $(cat "$WORK/approve.err")"
        # Steps 4 to 6, then the budget again before step 7 (the finish's
        # review of the whole change is a step too).
        if wait_b "$bid" breaker_stop 7; then
                ok "host-a applied it: the task went on and stopped again at the budget, before step 7"
        else
                fail "after the approval: on host-a $(prop_a "$bid" State) step $(prop_a "$bid" Step); host-b sees stop $(status_b "$bid" breaker_stop)"
        fi
        j=$(journal_request "$bid" applied | python3 -c 'import json,sys
es = [json.loads(l) for l in sys.stdin if l.strip()]
print(" ".join("%s/%s/%s/%s/%s" % (e.get("AGENTFAB_REQUEST"), e.get("AGENTFAB_FROM_HOST"), e.get("AGENTFAB_FROM_USER"), e.get("AGENTFAB_STOP"), e.get("AGENTFAB_HOST")) for e in es))')
        [ "$j" = "approve/host-b/root/4/host-a" ] && ok "host-a's journal: approve from root on host-b, for stop 4, applied" ||
                fail "host-a's journal of applied requests: '$j'"
        hx journalctl -q --no-pager -o json "AGENTFAB_TASK=$bid" AGENTFAB_EVENT=approve 2>/dev/null | grep -q '"AGENTFAB_HOST":"host-a"' &&
                ok "and the approval's own entry, as a local approval makes it" || fail "no approve entry on host-a"

        # A request for the first stop that reaches host-a only now (as
        # one posted before the first approval would): posted as host-b
        # does, straight into the database.
        psql -X -q -tA "$PG_CONNINFO user=host_b" -v ON_ERROR_STOP=1 \
                -c "SELECT agentfab.post_request('$bid', 'approve', '{\"user\":\"root\",\"breaker\":\"budget\"}', 4)" >/dev/null ||
                fail "cannot post the late approval"
        for _ in $(seq 80); do
                [ -n "$(journal_request "$bid" stale)" ] && break
                sleep 0.25
        done
        stale=$(journal_request "$bid" stale | python3 -c 'import json,sys
es = [json.loads(l) for l in sys.stdin if l.strip()]
print(" ".join("%s:%s" % (e.get("AGENTFAB_STOP"), e.get("AGENTFAB_REASON")) for e in es))')
        [[ $stale == "4:"*"waits at step 7"* ]] && ok "host-a dropped the late approval for stop 4: $stale" ||
                fail "the late approval: '$stale'"
        sleep 1
        [ "$(prop_a "$bid" State)" = awaiting-approval ] && [ "$(prop_a "$bid" Step)" = 6 ] &&
                [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.requests WHERE task = '$bid' AND done IS NULL")" = 0 ] &&
                ok "the task still waits at its stop before step 7; the request is done" ||
                fail "after the late approval: $(prop_a "$bid" State) at step $(prop_a "$bid" Step)"
        expect_refused "1:stopped again since" "host-b refuses an approval for the earlier stop outright" \
                hx_on host-b busctl call org.agentfab.Factory1 /org/agentfab/Factory1 org.agentfab.Factory1 \
                PostFleetRequest 'ssa{sv}' "$bid" approve 1 stop t 4
        # A task that waits for approval may be amended, by its owner.
        hx_on host-b runuser -u alice -- "${CTL[@]}" amend "$bid" --acceptance "add(2, 3) is 5" 2>"$WORK/err" ||
                fail "amend: $(cat "$WORK/err")"
        for _ in $(seq 80); do [ "$(prop_a "$bid" RequirementVersion)" = 2 ] && break; sleep 0.25; done
        [ "$(prop_a "$bid" RequirementVersion)" = 2 ] && [ "$(prop_a "$bid" AcceptanceCriteria)" = "add(2, 3) is 5" ] &&
                [ "$(prop_a "$bid" State)" = awaiting-approval ] &&
                ok "its owner amended it from host-b while it waits: requirement v2 on host-a" ||
                fail "after amend: v$(prop_a "$bid" RequirementVersion): $(journal_request "$bid" refused | python3 -c 'import json,sys
print([json.loads(l).get("AGENTFAB_REASON") for l in sys.stdin if l.strip()])')"
        hx_on host-b "${CTL[@]}" approve "$bid" >/dev/null 2>"$WORK/approve.err" || fail "second approve: $(cat "$WORK/approve.err")"
        wait_fleet "$bid" "succeeded host-a" && [ "$(status_b "$bid" state)" = succeeded ] &&
                ok "approved on host-b at its second stop, the task succeeded on host-a" ||
                fail "after the second approval: $(fleet_state "$bid") ($(prop_a "$bid" Reason))"
fi

echo "=== pause, resume and cancel on host-b for a task at work on host-a; someone else refused there"
touch "$WORK/hold"
: > "$WORK/requests.jsonl"
cid=$(submit_a "Make add() add (held)") || fail "submit: $cid"
for _ in $(seq 240); do
        [ "$(prop_a "$cid" State)" = running ] && [ "$(grep -c '"n"' "$WORK/requests.jsonl")" -ge 2 ] && break
        sleep 0.25
done
if [ "$(prop_a "$cid" State)" != running ]; then
        fail "the task was not at work on host-a: $(fleet_state "$cid")"
else
        expect_refused "3:" "bob may not cancel alice's task on host-b (polkit there, exit 3)" \
                hx_on host-b runuser -u bob -- "${CTL[@]}" cancel "$cid"
        [ "$(pg_psql -tA -c "SELECT count(*) FROM agentfab.requests WHERE task = '$cid'")" = 0 ] &&
                ok "nothing posted for bob" || fail "a request was posted for bob"
        hx_on host-b runuser -u alice -- "${CTL[@]}" pause "$cid" 2>"$WORK/err" || fail "pause: $(cat "$WORK/err")"
        for _ in $(seq 80); do [ "$(prop_a "$cid" State)" = paused ] && break; sleep 0.25; done
        [ "$(prop_a "$cid" State)" = paused ] && [ "$(prop_a "$cid" FreezerState)" = frozen ] &&
                ok "alice paused it from host-b: host-a froze its sandbox" ||
                fail "after pause: $(prop_a "$cid" State) $(prop_a "$cid" FreezerState)"
        wait_b "$cid" state paused && ok "host-b shows it paused" || fail "host-b shows $(status_b "$cid" state)"
        hx_on host-b runuser -u alice -- "${CTL[@]}" resume "$cid" 2>"$WORK/err" || fail "resume: $(cat "$WORK/err")"
        for _ in $(seq 80); do [ "$(prop_a "$cid" State)" = running ] && break; sleep 0.25; done
        [ "$(prop_a "$cid" State)" = running ] && [ "$(prop_a "$cid" FreezerState)" != frozen ] &&
                ok "and resumed it: running again on host-a" || fail "after resume: $(prop_a "$cid" State)"
        hx_on host-b runuser -u alice -- "${CTL[@]}" cancel "$cid" 2>"$WORK/err" || fail "cancel: $(cat "$WORK/err")"
        wait_fleet "$cid" "cancelled host-a" 80 && [ "$(prop_a "$cid" State)" = cancelled ] &&
                ok "and cancelled it: cancelled on host-a and in the fleet" ||
                fail "after cancel: $(fleet_state "$cid"), on host-a $(prop_a "$cid" State)"
        n=$(journal_request "$cid" applied | python3 -c 'import json,sys
print(",".join(json.loads(l)["AGENTFAB_REQUEST"] + "/" + json.loads(l)["AGENTFAB_FROM_USER"] for l in sys.stdin if l.strip()))')
        [ "$n" = "pause/alice,resume/alice,cancel/alice" ] &&
                ok "host-a's journal has each of alice's requests from host-b, applied" || fail "journal: '$n'"
fi
rm -f "$WORK/hold"

echo "fleet-people: failed: ${FAILED_NAMES[*]:-none}"
check_summary
