#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Tasks with a network, end to end: the real agentfabd registers them with
# the real agentfab-proxy (its hardened unit, socket-activated), the real
# launcher hands the channel to the sandbox, and the tasks' own commands
# (pip, npm) reach a package registry the test serves on the harness's
# loopback (127.0.0.2: 127.0.0.1 is the sandbox's own loopback and in
# NO_PROXY) — or are refused: a host not in the allowlist trips the network
# breaker naming it, and approve --allow-host lets the redone step through;
# the harness's own services (the model server, an sshd) and the addresses
# nobody allowed are refused even in audited mode, and their own logs show
# that nothing reached them; a second install in a task of the same owner
# and environment is served by /cache and makes no connection at all.
#
#   tests/integration/network.sh BUILDDIR
#
# Needs root. Prints "  ok: ..." / "  FAIL: ..." lines and "N passed, N failed".
set -u

BUILDDIR=$(realpath "${1:?usage: network.sh BUILDDIR}")
HERE=$(dirname "$(realpath "$0")")
SRC=$(realpath "$HERE/../..")
. "$HERE/lib/harness.sh"

. "$HERE/lib/check.sh"

[ "$(id -u)" = 0 ] || check_skip_all "network tests need root"
/usr/bin/python3 -m pip --version >/dev/null 2>&1 ||
        check_skip_all "network tests need the system's pip (python3-pip, tools/install-deps.sh)"

WORK=$(mktemp -d /tmp/agentfab-network.XXXXXX)
chmod 755 "$WORK"
MODEL_PID=
REGISTRY_PID=
SSHD_PID=
RUN_SSHD_MADE=
free_port() { python3 -c "import socket; s = socket.socket(); s.bind(('$1', 0)); print(s.getsockname()[1])"; }
PORT=$(free_port 127.0.0.1)
REG=127.0.0.2
REG_PORT=$(free_port $REG)
SSH_PORT=$(free_port 127.0.0.1)
NETMSG=e1724f7f803240d2a256a216468e59e9
ALLOWMSG=b6d40bfd8bb94eb89958fb6139e8af85
BREAKERMSG=721e187c39954be5bc87afe6ce82154c

stop_pid() { if [ -n "$1" ]; then kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; fi; }
cleanup() {
        stop_pid "$MODEL_PID"
        stop_pid "$REGISTRY_PID"
        stop_pid "$SSHD_PID"
        [ -z "$RUN_SSHD_MADE" ] || rmdir /run/sshd 2>/dev/null
        rm -rf "$WORK"
}
trap cleanup EXIT

# model SCRIPT: (re)starts the scripted model server; replies by step.
model() {
        stop_pid "$MODEL_PID"
        : > "$WORK/requests.jsonl"
        python3 "$SRC/tests/model-server.py" --script "$1" --log "$WORK/requests.jsonl" --port "$PORT" --by-step \
                > "$WORK/model.out" 2> "$WORK/model.err" &
        MODEL_PID=$!
        local i
        for i in $(seq 100); do [ -s "$WORK/model.out" ] && return 0; sleep 0.05; done
        echo "model server did not start: $(cat "$WORK/model.err")"
        return 1
}

# The registry: a PEP 503 simple index of one project, demo-pkg, with a
# wheel made here (a zip with its dist-info, as pip wants it); and an npm
# registry of one package, demo-npm: its package document at /demo-npm and
# the tarball it names, with the digests npm checks.
make_registry() {
        local D=$WORK/registry
        mkdir -p "$D/simple/demo-pkg" "$D/files" "$D/tarballs"
        python3 - "$D" "http://$REG:$REG_PORT" <<'PY' || return 1
import base64, hashlib, io, json, sys, tarfile, zipfile
d, base = sys.argv[1], sys.argv[2]
name = "demo_pkg-1.0-py3-none-any.whl"
files = {
    "demo_pkg/__init__.py": "MAGIC = 'demo-pkg-imported-4242'\n",
    "demo_pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
    "demo_pkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: agentfab-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(text.encode())}")
record.append("demo_pkg-1.0.dist-info/RECORD,,")
files["demo_pkg-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(f"{d}/files/{name}", "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
sha = hashlib.sha256(open(f"{d}/files/{name}", "rb").read()).hexdigest()
with open(f"{d}/simple/demo-pkg/index.html", "w") as f:
    f.write(f'<!DOCTYPE html><html><body><a href="../../files/{name}#sha256={sha}">{name}</a></body></html>\n')
with open(f"{d}/simple/index.html", "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="demo-pkg/">demo-pkg</a></body></html>\n')

package = {"name": "demo-npm", "version": "1.0.0", "main": "index.js"}
files = {
    "package/package.json": json.dumps(package) + "\n",
    "package/index.js": "module.exports.MAGIC = 'demo-npm-required-4242';\n",
}
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT) as t:
    for path, text in files.items():
        info = tarfile.TarInfo(path)
        info.size, info.mode, info.mtime = len(text.encode()), 0o644, 0
        t.addfile(info, io.BytesIO(text.encode()))
tgz = buf.getvalue()
open(f"{d}/tarballs/demo-npm-1.0.0.tgz", "wb").write(tgz)
package["dist"] = {
    "tarball": f"{base}/tarballs/demo-npm-1.0.0.tgz",
    "shasum": hashlib.sha1(tgz).hexdigest(),
    "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode(),
}
with open(f"{d}/demo-npm", "w") as f:
    json.dump({"name": "demo-npm", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": package}}, f)
PY
        : > "$WORK/registry.log"
        python3 "$HERE/registry-server.py" --dir "$D" --host $REG --port "$REG_PORT" --log "$WORK/registry.log" \
                > "$WORK/registry.out" 2> "$WORK/registry.err" &
        REGISTRY_PID=$!
        local i
        for i in $(seq 100); do [ -s "$WORK/registry.out" ] && return 0; sleep 0.05; done
        echo "registry did not start: $(cat "$WORK/registry.err")"
        return 1
}

harness_prepare_root() {
        local R=$1
        DESTDIR="$R" meson install -C "$BUILDDIR" --quiet --no-rebuild >/dev/null || return 1
        systemd-sysusers --root="$R" "$R/usr/lib/sysusers.d/agentfab.conf" || return 1
        journalctl --root="$R" --update-catalog || return 1
        systemctl --root="$R" enable agentfab.socket agentfab-launcher.socket agentfab-proxy.socket >/dev/null 2>&1 || return 1
        if meson introspect --buildoptions "$BUILDDIR" | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "b_sanitize" and o["value"] not in ("none", "") for o in json.load(sys.stdin)) else 1)'; then
                local unit
                for unit in agentfab.service agentfab-launcher@.service agentfab-proxy.service; do
                        mkdir -p "$R/etc/systemd/system/$unit.d"
                        printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1\n' \
                                > "$R/etc/systemd/system/$unit.d/sanitizer.conf"
                done
                printf 'MemoryDenyWriteExecute=no\nMemoryMax=infinity\n' >> "$R/etc/systemd/system/agentfab-proxy.service.d/sanitizer.conf"
        fi
        # A name the proxy resolves itself, to the loopback nobody may reach.
        printf '127.0.0.1 rebind.test\n' >> "$R/etc/hosts"

        mkdir -p "$R/etc/agentfab/agentfab.conf.d"
        cat > "$R/etc/agentfab/agentfab.conf.d/50-test.conf" <<EOF
[Daemon]
IdleTimeoutSec=30

[Agent]
CommandTimeoutSec=60

[Model]
Name=default
Endpoint=http://127.0.0.1:$PORT/v1
Model=scripted
TimeoutSec=20

# The registry allowed by address; pip's and npm's caches per owner.
[Environment]
Name=net
Network=allowlist
Allow=$REG:$REG_PORT
Cache=pip npm
Environment=PIP_DISABLE_PIP_VERSION_CHECK=1
Environment=PIP_DEFAULT_TIMEOUT=10

# The same with nothing allowed: an approval has to add the registry.
[Environment]
Name=closed
Network=allowlist
Cache=pip npm
Environment=PIP_DISABLE_PIP_VERSION_CHECK=1
Environment=PIP_DEFAULT_TIMEOUT=10

[Environment]
Name=audit
Network=audited
EOF
        grep -q '^alice:' "$R/etc/passwd" || useradd --root "$R" -s /bin/bash alice || return 1
        local uid gid
        uid=$(awk -F: '$1 == "alice" {print $3}' "$R/etc/passwd")
        gid=$(awk -F: '$1 == "alice" {print $4}' "$R/etc/passwd")
        rm -rf "$R/home/alice"
        mkdir -p "$R/home/alice"
        chown "$uid:$gid" "$R/home/alice"
        chmod 755 "$R/home/alice"
}

CTL=(agentfabctl --no-ask-password)
task_prop() { hx busctl get-property org.agentfab.Factory1 "/org/agentfab/Factory1/task/$1" org.agentfab.Task1 "$2" 2>/dev/null | sed 's/^[a-z] "\{0,1\}\(.*\)"\{0,1\}$/\1/; s/"$//'; }

# wait_state ID STATE...: until the task is in one of the states (90 s).
wait_state() {
        local id=$1 s i; shift
        for i in $(seq 360); do
                s=$(task_prop "$id" State)
                for want in "$@"; do [ "$s" = "$want" ] && return 0; done
                case $s in succeeded|failed|cancelled) [[ " $* " == *" $s "* ]] || return 1 ;; esac
                sleep 0.25
        done
        return 1
}

make_repo() {
        hx_as alice bash -c "set -e; cd ~ && rm -rf $1 && mkdir $1 && cd $1 && git init -q && echo hello > README &&
                git add . && git -c user.name=alice -c user.email=alice@example.com commit -q -m start && chmod -R a+rX ~/$1"
}

# The proxy's journal entries of a task: "VERDICT HOST PORT ADDRESS REASON".
net_journal() {
        hx journalctl --sync >/dev/null 2>&1
        hx journalctl -q -o json --no-pager MESSAGE_ID=$NETMSG AGENTFAB_TASK="$1" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    print(e.get("AGENTFAB_VERDICT"), e.get("AGENTFAB_HOST"), e.get("AGENTFAB_PORT"), e.get("AGENTFAB_ADDRESS") or "-",
          e.get("AGENTFAB_REASON") or "-")
'
}

# What a task runs to install demo-pkg: the wheel from /cache if it is
# there (no network at all), else from the registry into /cache; then the
# install itself, offline, and an import that proves it.
PIP_FROM_CACHE="python3 -m pip download -q --no-index --find-links /cache/wheels -d /cache/wheels demo-pkg"
PIP_FROM_INDEX="python3 -m pip download -q --index-url http://$REG:$REG_PORT/simple/ --trusted-host $REG -d /cache/wheels demo-pkg"
PIP_INSTALL="python3 -m pip install -q --no-index --find-links /cache/wheels --target /tmp/deps demo-pkg"
IMPORT="PYTHONPATH=/tmp/deps python3 -c 'import demo_pkg; print(\"imported:\", demo_pkg.MAGIC)'"
INSTALL_CMD="($PIP_FROM_CACHE 2>/dev/null && echo wheel-from-cache || $PIP_FROM_INDEX) && $PIP_INSTALL && $IMPORT"

# What a task runs to install demo-npm: the same command each time, with
# npm's cache in /cache (npm_config_cache, the environment's Cache=npm);
# --prefer-offline takes what the cache holds without asking the registry.
# npm's own calls home (audit, fund, the update check) are off, and a
# refused fetch is not retried for a minute.
NPM_CMD="mkdir -p /tmp/app && cd /tmp/app && npm_config_update_notifier=false npm install --prefer-offline --no-audit --no-fund"
NPM_CMD+=" --fetch-retries=0 --registry=http://$REG:$REG_PORT/ demo-npm"
NPM_CMD+=" && node -e 'console.log(\"required:\", require(\"/tmp/app/node_modules/demo-npm\").MAGIC)'"

# pip_script FILE N [COMMAND]: a task that installs demo-pkg (or runs
# COMMAND) in N steps (the second is the one redone after an approval),
# then finishes.
pip_script() {
        python3 - "$1" "${3:-$INSTALL_CMD}" "$2" <<'PY'
import json, sys
steps = [{"reply": {"content": "Plan: install the package from the registry."}}]
steps += [{"reply": {"content": "Install the package", "tool_calls": [{"name": "run_command", "arguments": {"command": sys.argv[2]}}]}}] * int(sys.argv[3])
steps.append({"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "installed"}}]}})
json.dump(steps, open(sys.argv[1], "w"))
PY
}

# A task whose commands move more than max_network_bytes= through the proxy
# stops at the budget breaker, which names the bytes. Its cache is emptied
# after, so that the next scenario installs from the registry again.
t_budget_network() {
        echo "=== max_network_bytes=2000: pip through the proxy past it stops the task at the budget breaker"
        pip_script "$WORK/pip-budget.json" 1
        model "$WORK/pip-budget.json" || { fail "model server"; return; }
        make_repo pipbudget
        local id reason
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/pipbudget --goal "install demo-pkg" --environment=net \
                --limit max_network_bytes=2000 2>&1) || { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "stopped"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        [ "$(task_prop "$id" Breaker)" = budget ] && ok "Breaker is budget" || fail "breaker $(task_prop "$id" Breaker)"
        reason=$(task_prop "$id" Reason)
        echo "    Reason: $reason"
        [[ $reason == "budget exhausted: network "*" of max_network_bytes=2000; approve with --limit=max_network_bytes=N to raise it" ]] &&
                ok "Reason names the network bytes and the limit" || fail "reason: $reason"
        hx "${CTL[@]}" cancel "$id" >/dev/null 2>&1 && wait_state "$id" cancelled && ok "cancelled" || fail "cancel"
        hx_as alice "${CTL[@]}" cache clear net >/dev/null 2>&1 || fail "cache clear: $(hx_as alice "${CTL[@]}" cache clear net 2>&1)"
}

t_allowlist() {
        echo "=== allowlist: pip through the egress proxy to a registry allowed by address, then from /cache alone"
        pip_script "$WORK/pip.json" 1
        model "$WORK/pip.json" || { fail "model server"; return; }
        make_repo pip1
        : > "$WORK/registry.log"
        local id id2 out j
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/pip1 --goal "install demo-pkg" --environment=net 2>&1) ||
                { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "a task in Network=allowlist installed from the registry and succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; hx_as alice "${CTL[@]}" logs "$id" 2>&1 | tail -20; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        grep -q 'imported: demo-pkg-imported-4242' <<<"$out" && ok "pip downloaded and installed demo-pkg; it imports" ||
                fail "no import: $(tail -c 600 <<<"$out")"
        grep -q "GET /simple/demo-pkg/ 200" "$WORK/registry.log" && grep -q "GET /files/demo_pkg-1.0-py3-none-any.whl 200" "$WORK/registry.log" &&
                ok "the registry served the index and the wheel: $(grep -c "^GET" "$WORK/registry.log") requests" ||
                fail "registry log: $(cat "$WORK/registry.log")"
        j=$(net_journal "$id")
        grep -q "^allowed $REG $REG_PORT $REG " <<<"$j" && ! grep -q '^refused' <<<"$j" &&
                ok "the proxy journaled the connections as allowed, none refused: $(grep -c '^allowed' <<<"$j")" ||
                fail "journal: $j"
        # What the task's connections moved, as the proxy counted them for it.
        local res nconn nup ndown
        res=$(hx_as alice "${CTL[@]}" --json status "$id" 2>&1 | python3 -c '
import json, sys; r = json.load(sys.stdin)["resources"]
print(r["net_connections"], r["net_up_bytes"], r["net_down_bytes"])')
        read -r nconn nup ndown <<<"$res"
        [ "${nconn:-0}" = "$(grep -c '^allowed' <<<"$j")" ] && [ "${nup:-0}" -gt 0 ] && [ "${ndown:-0}" -gt "${nup:-0}" ] &&
                ok "its resources count the connections and bytes: $nconn connections, $nup bytes up, $ndown down" ||
                fail "resources: $res"

        # The same install in a second task of the same owner and environment.
        make_repo pip2
        : > "$WORK/registry.log"
        id2=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/pip2 --goal "install demo-pkg" --environment=net 2>&1) ||
                { fail "submit: $id2"; return; }
        if wait_state "$id2" succeeded; then ok "the second task succeeded"; else
                fail "state $(task_prop "$id2" State): $(task_prop "$id2" Reason)"; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id2" 2>&1)
        grep -q 'wheel-from-cache' <<<"$out" && grep -q 'imported: demo-pkg-imported-4242' <<<"$out" &&
                ok "it installed demo-pkg from /cache" || fail "second install: $(tail -c 600 <<<"$out")"
        j=$(net_journal "$id2")
        [ -z "$j" ] && [ ! -s "$WORK/registry.log" ] &&
                ok "and made no network connection: no proxy journal entry, nothing in the registry's log" ||
                fail "second task's connections: $j / $(cat "$WORK/registry.log")"
}

t_breaker_allow_host() {
        echo "=== a host not allowed: refused, the network breaker names it, approve --allow-host lets the redone step through"
        pip_script "$WORK/closed.json" 2
        model "$WORK/closed.json" || { fail "model server"; return; }
        make_repo closed
        : > "$WORK/registry.log"
        local id out reason j
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/closed --goal "install demo-pkg" --environment=closed 2>&1) ||
                { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "the task paused"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        reason=$(task_prop "$id" Reason)
        [ "$(task_prop "$id" Breaker)" = network ] && [[ $reason == *"refused a connection to $REG:$REG_PORT"*"--allow-host=$REG:$REG_PORT"* ]] &&
                ok "by the network breaker, naming the host: $reason" || fail "breaker $(task_prop "$id" Breaker): $reason"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=$BREAKERMSG | grep -q "\"AGENTFAB_BREAKER\":\"network\"" &&
                ok "the breaker is journaled" || fail "no breaker entry"
        [ ! -s "$WORK/registry.log" ] && ok "nothing reached the registry" || fail "registry log: $(cat "$WORK/registry.log")"
        j=$(net_journal "$id")
        grep -q "^refused $REG $REG_PORT .*not in the task's allowlist\|^refused $REG $REG_PORT " <<<"$j" &&
                ok "the proxy journaled the refusal: $(head -1 <<<"$j")" || fail "journal: $j"

        expect_refused "2:is not a host name, address or \*\.glob" "a malformed --allow-host is refused (InvalidArgs, exit 2)" \
                hx "${CTL[@]}" approve "$id" --allow-host='bad host'
        [ "$(task_prop "$id" State)" = awaiting-approval ] && ok "and changed nothing" || fail "state $(task_prop "$id" State)"
        out=$(hx "${CTL[@]}" approve "$id" --comment "the registry is fine" --allow-host="$REG:$REG_PORT" 2>&1) &&
                ok "root approves with --allow-host=$REG:$REG_PORT" || fail "approve: $out"
        if wait_state "$id" succeeded; then ok "the redone step reached the registry; the task succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        grep -q 'imported: demo-pkg-imported-4242' <<<"$out" && ok "demo-pkg installed after the approval" ||
                fail "logs: $(tail -c 600 <<<"$out")"
        hx journalctl -q -o json AGENTFAB_TASK="$id" MESSAGE_ID=$ALLOWMSG | grep -q "\"AGENTFAB_HOSTS\":\"$REG:$REG_PORT\".*\|\"AGENTFAB_UID\":\"0\"" &&
                ok "the allowed host is journaled with who allowed it" || fail "no allow-host entry"
        hx python3 -c "import json; p = json.load(open('/var/lib/agentfab/tasks/$id/state.json'))['progress']; assert p['allowed_hosts'] == ['$REG:$REG_PORT'], p" \
                >/dev/null 2>&1 && ok "the task's state keeps the allowed host (a restart keeps it)" || fail "state.json has no allowed_hosts"
        out=$(hx busctl introspect org.agentfab.Factory1 "/org/agentfab/Factory1/task/$id" org.agentfab.Task1 2>&1)
        grep -q '^\.ApproveWithOptions *method *sa{sv}' <<<"$out" && ok "ApproveWithOptions(sa{sv}) is introspectable" ||
                fail "introspection: $(grep -i approve <<<"$out")"
}

have_npm() {
        command -v npm >/dev/null && command -v node >/dev/null && return 0
        skip "$1: no npm or node here (tools/install-deps.sh installs them)"
        return 1
}

t_npm_allowlist() {
        echo "=== allowlist: npm through the egress proxy to a registry allowed by address, then from /cache alone"
        have_npm t_npm_allowlist || return
        pip_script "$WORK/npm.json" 1 "$NPM_CMD"
        model "$WORK/npm.json" || { fail "model server"; return; }
        make_repo npm1
        : > "$WORK/registry.log"
        local id id2 out j
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/npm1 --goal "install demo-npm" --environment=net 2>&1) ||
                { fail "submit: $id"; return; }
        if wait_state "$id" succeeded; then ok "a task in Network=allowlist ran npm install from the registry and succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; hx_as alice "${CTL[@]}" logs "$id" 2>&1 | tail -20; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        grep -q 'required: demo-npm-required-4242' <<<"$out" && ok "npm installed demo-npm; node requires it" ||
                fail "no require: $(tail -c 600 <<<"$out")"
        grep -q "GET /demo-npm 200" "$WORK/registry.log" && grep -q "GET /tarballs/demo-npm-1.0.0.tgz 200" "$WORK/registry.log" &&
                ok "the registry served the package document and the tarball: $(grep -c '^GET' "$WORK/registry.log") requests" ||
                fail "registry log: $(cat "$WORK/registry.log")"
        j=$(net_journal "$id")
        grep -q "^allowed $REG $REG_PORT $REG " <<<"$j" && ! grep -q '^refused' <<<"$j" &&
                ok "the proxy journaled npm's connections as allowed, none refused: $(grep -c '^allowed' <<<"$j")" ||
                fail "journal: $j"

        # The identical install in a second task of the same owner and environment.
        make_repo npm2
        : > "$WORK/registry.log"
        id2=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/npm2 --goal "install demo-npm" --environment=net 2>&1) ||
                { fail "submit: $id2"; return; }
        if wait_state "$id2" succeeded; then ok "the second npm task succeeded"; else
                fail "state $(task_prop "$id2" State): $(task_prop "$id2" Reason)"; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id2" 2>&1)
        grep -q 'required: demo-npm-required-4242' <<<"$out" && ok "it installed demo-npm again" ||
                fail "second install: $(tail -c 600 <<<"$out")"
        j=$(net_journal "$id2")
        [ -z "$j" ] && [ ! -s "$WORK/registry.log" ] &&
                ok "from /cache alone: no proxy journal entry, not even a connection in the registry's log" ||
                fail "second task's connections: $j / $(cat "$WORK/registry.log")"
        hx find /var/lib/agentfab/cache -path '*/npm/_cacache/*' -type f 2>/dev/null | grep -q . &&
                ok "npm's cache is in the owner's cache directory" || fail "no npm cache under /var/lib/agentfab/cache"
}

t_npm_breaker_allow_host() {
        echo "=== npm to a host not allowed: refused, the network breaker names it, approve --allow-host lets the redone step through"
        have_npm t_npm_breaker_allow_host || return
        pip_script "$WORK/npm-closed.json" 2 "$NPM_CMD"
        model "$WORK/npm-closed.json" || { fail "model server"; return; }
        make_repo npmclosed
        : > "$WORK/registry.log"
        local id out reason j
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/npmclosed --goal "install demo-npm" --environment=closed 2>&1) ||
                { fail "submit: $id"; return; }
        if wait_state "$id" awaiting-approval; then ok "the npm task paused"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        reason=$(task_prop "$id" Reason)
        [ "$(task_prop "$id" Breaker)" = network ] && [[ $reason == *"refused a connection to $REG:$REG_PORT"*"--allow-host=$REG:$REG_PORT"* ]] &&
                ok "by the network breaker, naming the host: $reason" || fail "breaker $(task_prop "$id" Breaker): $reason"
        [ ! -s "$WORK/registry.log" ] && ok "nothing reached the registry, not even a connection" ||
                fail "registry log: $(cat "$WORK/registry.log")"
        j=$(net_journal "$id")
        grep -q "^refused $REG $REG_PORT " <<<"$j" && ! grep -q '^allowed' <<<"$j" &&
                ok "the proxy journaled the refusal: $(head -1 <<<"$j")" || fail "journal: $j"
        out=$(hx "${CTL[@]}" approve "$id" --allow-host="$REG:$REG_PORT" 2>&1) &&
                ok "root approves with --allow-host=$REG:$REG_PORT" || fail "approve: $out"
        if wait_state "$id" succeeded; then ok "the redone npm install reached the registry; the task succeeded"; else
                fail "after approval: $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        grep -q 'required: demo-npm-required-4242' <<<"$out" && ok "demo-npm installed after the approval" ||
                fail "logs: $(tail -c 600 <<<"$out")"
        grep -q "GET /tarballs/demo-npm-1.0.0.tgz 200" "$WORK/registry.log" && ok "the registry served it then" ||
                fail "registry log: $(cat "$WORK/registry.log")"
}

# An sshd of the test's own on the harness's loopback, one of the services
# no task may reach: its own host key, no logins at all, and at LogLevel
# VERBOSE it logs every connection it accepts ("Connection from ...").
start_sshd() {
        local d=$WORK/sshd i
        mkdir -p "$d"
        ssh-keygen -q -t ed25519 -N '' -C network-test -f "$d/hostkey" || return 1
        printf '%s\n' "ListenAddress 127.0.0.1" "Port $SSH_PORT" "HostKey $d/hostkey" "AuthenticationMethods none" \
                "PasswordAuthentication no" "KbdInteractiveAuthentication no" "PubkeyAuthentication no" "UsePAM no" \
                "PermitRootLogin no" "AllowUsers nobody-here" "PidFile none" "LogLevel VERBOSE" > "$d/sshd_config"
        [ -d /run/sshd ] || { mkdir -p /run/sshd && RUN_SSHD_MADE=1; }
        : > "$WORK/sshd.log"
        /usr/sbin/sshd -D -e -f "$d/sshd_config" 2>> "$WORK/sshd.log" &
        SSHD_PID=$!
        for i in $(seq 100); do grep -q 'Server listening' "$WORK/sshd.log" && return 0; sleep 0.05; done
        echo "sshd did not start: $(cat "$WORK/sshd.log")"
        return 1
}
stop_sshd() { stop_pid "$SSHD_PID"; SSHD_PID=; }

# The probes among the model server's requests: GETs, which agentfabd never
# makes (its POSTs carry the task's commands, probes and all, as text).
model_gets() {
        python3 -c '
import json, sys
print(" ".join(e["path"].split("probe=")[1] for e in map(json.loads, open(sys.argv[1]))
               if e.get("method") == "GET" and "probe=" in e["path"]))' "$WORK/requests.jsonl"
}

t_audited_refusals() {
        echo "=== audited: the harness's loopback services and private addresses are refused, journaled, never reached"
        local id out j name
        python3 - "$WORK/audit.json" "$PORT" "$REG:$REG_PORT" "$SSH_PORT" <<'PY'
import json, sys
port, reg, ssh = sys.argv[2], sys.argv[3], sys.argv[4]
# Through the proxy whatever NO_PROXY says: curl's -x with --noproxy ''.
# Each request to the model server names itself (?probe=NAME), so that its
# log would show which one got through.
c = "curl -s -m 10 --noproxy '' -x http://127.0.0.1:3128 -o /dev/null -w '%{http_code}'"
tries = {
    "model": f"http://127.0.0.1:{port}/v1/models?probe=model",
    "registry": f"http://{reg}/simple/demo-pkg/",
    "metadata": "http://169.254.169.254/latest/meta-data/",
    "rebind": f"http://rebind.test:{port}/v1/models?probe=rebind",
    "decimal": f"http://2130706433:{port}/v1/models?probe=decimal",
    "octal": f"http://0177.0.0.1:{port}/v1/models?probe=octal",
    "mapped": f"http://[::ffff:127.0.0.1]:{port}/v1/models?probe=mapped",
}
cmd = "; ".join(f"echo result {n} $({c} '{u}')" for n, u in tries.items() if n not in ("decimal", "octal", "mapped"))
# curl writes IPv4 in its canonical form itself: these go out as written,
# on a raw connection to the forwarder.
raw = ("import socket, sys; s = socket.create_connection(('127.0.0.1', 3128)); "
       "s.sendall(('GET ' + sys.argv[1] + ' HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n').encode()); "
       "print(s.recv(64).split()[1].decode())")
for n in ("decimal", "octal", "mapped"):
    cmd += f"; echo result {n} $(python3 -c \"{raw}\" '{tries[n]}')"
cmd += f"; echo result connect $({c} -p 'http://127.0.0.1:{port}/v1/models?probe=connect')"
# sshd is no HTTP server: a CONNECT tunnel is the only way there, by
# address and by a name that resolves to it.
tunnel = ("import socket, sys; s = socket.create_connection(('127.0.0.1', 3128)); "
          "s.sendall(('CONNECT ' + sys.argv[1] + ' HTTP/1.1\\r\\nHost: ' + sys.argv[1] + '\\r\\n\\r\\n').encode()); "
          "print(s.recv(64).split()[1].decode())")
for n, target in (("sshd", f"127.0.0.1:{ssh}"), ("sshd-name", f"localhost:{ssh}")):
    cmd += f"; echo result {n} $(python3 -c \"{tunnel}\" '{target}')"
steps = [
    {"reply": {"content": "Plan: look around the network."}},
    {"reply": {"content": "Probe", "tool_calls": [{"name": "run_command", "arguments": {"command": cmd}}]}},
    {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "probed"}}]}},
]
json.dump(steps, open(sys.argv[1], "w"))
PY
        model "$WORK/audit.json" || { fail "model server"; return; }
        start_sshd || { fail "sshd"; stop_sshd; return; }
        make_repo audit
        # Each target's log, proven to log: one connection from the host
        # itself to each before the task (nothing listens on 169.254.169.254
        # here: for it the journal and the 403 are the proof).
        : > "$WORK/registry.log"
        curl -s -m 5 -o /dev/null "http://127.0.0.1:$PORT/v1/models?probe=control" || fail "control request to the model server"
        curl -s -m 5 -o /dev/null "http://$REG:$REG_PORT/simple/" || fail "control request to the registry"
        timeout 5 python3 -c "import socket; s = socket.create_connection(('127.0.0.1', $SSH_PORT)); print(s.recv(64).decode().strip())" \
                > "$WORK/sshd.banner" 2>&1 || fail "control connection to sshd: $(cat "$WORK/sshd.banner")"
        local i
        for i in $(seq 100); do grep -q 'Connection from 127.0.0.1' "$WORK/sshd.log" && break; sleep 0.05; done
        [ "$(model_gets)" = "control" ] && [ "$(grep -c '^connection from' "$WORK/registry.log")" = 1 ] &&
                [ "$(grep -c 'Connection from' "$WORK/sshd.log")" = 1 ] &&
                ok "each target logs what reaches it: one control connection each in the model server's, the registry's and sshd's logs ($(cat "$WORK/sshd.banner"))" ||
                fail "control: model '$(model_gets)', registry $(grep -c '^connection from' "$WORK/registry.log"), sshd $(grep -c 'Connection from' "$WORK/sshd.log")"

        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/audit --goal "probe" --environment=audit 2>&1) ||
                { fail "submit: $id"; stop_sshd; return; }
        if wait_state "$id" succeeded; then ok "audited mode: no breaker, the task went on and succeeded"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; stop_sshd; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        for name in model registry metadata rebind decimal octal mapped sshd sshd-name; do
                grep -q "^result $name 403$" <<<"$out" && ok "refused: $name ($(grep "^result $name " <<<"$out"))" ||
                        fail "$name: $(grep "^result $name " <<<"$out")"
        done
        grep -q "^result connect 403$\|^result connect 000$" <<<"$out" && ok "refused: CONNECT to the model server" ||
                fail "connect: $(grep '^result connect' <<<"$out")"
        j=$(net_journal "$id")
        [ "$(grep -c '^refused' <<<"$j")" = 10 ] && ! grep -q '^allowed' <<<"$j" &&
                ok "each attempt journaled as refused (10), none allowed" || fail "journal: $j"
        grep -q "^refused 2130706433 $PORT 127.0.0.1 " <<<"$j" && grep -q "^refused rebind.test $PORT 127.0.0.1 " <<<"$j" &&
                grep -q "^refused localhost $SSH_PORT 127.0.0.1 " <<<"$j" &&
                ok "judged on the address connected to (2130706433, rebind.test and localhost as 127.0.0.1)" || fail "journal: $j"
        grep -q "^refused 127.0.0.1 $SSH_PORT 127.0.0.1 " <<<"$j" && ok "the CONNECT to sshd is journaled: $(grep " $SSH_PORT " <<<"$j" | head -1)" ||
                fail "no sshd entry: $j"
        [ "$(model_gets)" = "control" ] && ok "nothing reached the model server (its own log: the control request only)" ||
                fail "the model server saw: $(model_gets)"
        [ "$(grep -c '^connection from' "$WORK/registry.log")" = 1 ] && ok "nothing reached the registry (its own log: the control connection only)" ||
                fail "registry log: $(cat "$WORK/registry.log")"
        [ "$(grep -c 'Connection from' "$WORK/sshd.log")" = 1 ] && ok "nothing reached sshd (its own log: the control connection only)" ||
                fail "sshd log: $(grep 'Connection from' "$WORK/sshd.log")"
        stop_sshd
        ! pgrep -f "sshd -D -e -f $WORK/sshd/sshd_config" >/dev/null && ok "sshd stopped" || fail "sshd still running"
}

t_proxy_restart() {
        echo "=== the proxy restarts under a running task: its next step gets a new sandbox, registered anew"
        local get="echo fetched \$(curl -s -m 10 -o /dev/null -w '%{http_code}' http://$REG:$REG_PORT/simple/demo-pkg/)"
        python3 - "$WORK/restart.json" "$get" <<'PY'
import json, sys
steps = [
    {"reply": {"content": "Plan: fetch, wait, fetch."}},
    {"reply": {"content": "Fetch", "tool_calls": [{"name": "run_command", "arguments": {"command": sys.argv[2]}}]}},
    {"reply": {"content": "Wait", "tool_calls": [{"name": "run_command", "arguments": {"command": "for i in $(seq 600); do [ -e /workspace/go ] && break; sleep 0.1; done; rm -f /workspace/go"}}]}},
    {"reply": {"content": "Fetch again", "tool_calls": [{"name": "run_command", "arguments": {"command": sys.argv[2]}}]}},
    {"reply": {"content": None, "tool_calls": [{"name": "finish", "arguments": {"summary": "fetched twice"}}]}},
]
json.dump(steps, open(sys.argv[1], "w"))
PY
        model "$WORK/restart.json" || { fail "model server"; return; }
        make_repo restart
        : > "$WORK/registry.log"
        local id i out
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/restart --goal "fetch" --environment=net 2>&1) ||
                { fail "submit: $id"; return; }
        # The restart comes after the first fetch; the second waits for it
        # (the step between waits for a file the test puts in the workspace).
        for i in $(seq 300); do grep -q "GET /simple/demo-pkg/ 200" "$WORK/registry.log" && break; sleep 0.1; done
        sleep 0.5
        hx systemctl restart agentfab-proxy.service >/dev/null 2>&1 || fail "restart the proxy"
        hx install -o agentfab -g agentfab -m 0644 /dev/null "/var/lib/agentfab/tasks/$id/workspace/go" || fail "cannot signal the task"
        if wait_state "$id" succeeded; then ok "the task went on after the proxy's restart"; else
                fail "state $(task_prop "$id" State): $(task_prop "$id" Reason)"; return; fi
        out=$(hx_as alice "${CTL[@]}" logs "$id" 2>&1)
        [ "$(grep -c '^fetched 200$' <<<"$out")" = 2 ] && [ "$(grep -c 'GET /simple/demo-pkg/ 200' "$WORK/registry.log")" = 2 ] &&
                ok "both fetches reached the registry, before and after the restart" || fail "fetches: $(grep '^fetched' <<<"$out" | tr '\n' ' ')"
        hx journalctl -q -u agentfab.service --no-pager | grep -q "Task '$id': the egress proxy went away; making its sandbox again" &&
                ok "agentfabd made the sandbox again and registered it anew" || fail "no new sandbox in the journal"
}

t_no_proxy() {
        echo "=== no egress proxy: a task that needs a network fails with the reason, never runs without it"
        pip_script "$WORK/noproxy.json" 1
        model "$WORK/noproxy.json" || { fail "model server"; return; }
        make_repo noproxy
        hx systemctl stop agentfab-proxy.socket agentfab-proxy.service >/dev/null 2>&1
        # The daemon's connection ends with the proxy; the next task finds none.
        local id reason
        id=$(hx_as alice "${CTL[@]}" submit --repo /home/alice/noproxy --goal "install" --environment=net 2>&1) ||
                { fail "submit: $id"; hx systemctl start agentfab-proxy.socket; return; }
        if wait_state "$id" failed; then
                reason=$(task_prop "$id" Reason)
                [[ $reason == *"egress proxy cannot be reached"* ]] && ok "failed: $reason" || fail "reason: $reason"
        else fail "without a proxy: $(task_prop "$id" State)"; fi
        hx systemctl start agentfab-proxy.socket >/dev/null 2>&1
        : > "$WORK/registry.log"
        hx "${CTL[@]}" resume "$id" >/dev/null 2>&1 || fail "resume"
        if wait_state "$id" succeeded; then ok "with the proxy back, Resume() reconnects and the task succeeds"; else
                fail "after resume: $(task_prop "$id" State): $(task_prop "$id" Reason)"; fi
}

main() {
        make_registry || { fail "make_registry"; check_summary; exit 1; }
        harness_boot || { fail "harness_boot"; check_summary; exit 1; }
        echo "harness: systemd booted in ${HARNESS_BOOT_MS} ms; registry on $REG:$REG_PORT"

        local t
        for t in t_budget_network t_allowlist t_breaker_allow_host t_npm_allowlist t_npm_breaker_allow_host t_audited_refusals \
                 t_proxy_restart t_no_proxy; do
                if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $t "* ]]; then continue; fi
                "$t"
        done

        echo "=== sanitizers and crashes"
        ! hx journalctl -q -u agentfab.service -u 'agentfab-launcher@*' -u agentfab-proxy.service --no-pager |
                grep -q 'AddressSanitizer\|runtime error:\|LeakSanitizer' &&
                ok "no sanitizer report from agentfabd, the launcher or the proxy" || fail "sanitizer report in the journal"
        ! hx journalctl -q -u agentfab.service -u agentfab-proxy.service --no-pager | grep -q 'code=dumped\|status=6/ABRT\|status=11/SEGV' &&
                ok "neither agentfabd nor the proxy crashed" || fail "a crash in the journal"

        if [ "$FAILED" != 0 ]; then
                echo "--- journal (last 60 lines)"
                hx journalctl -q --no-pager | tail -60
        fi
        stop_pid "$MODEL_PID"; MODEL_PID=
        harness_teardown
        check_summary
}

main "$@"
