#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The egress proxy's cost, measured in this run against a baseline of the
# same client reaching the same server directly: bulk throughput through a
# CONNECT tunnel, and the time of one small request on a new connection
# (plain HTTP forwarding and CONNECT). Prints figures and ratios; judges
# nothing. Runs on the host as root: the proxy as nobody with its own
# control socket, the client inside a real sandbox (agentfab-sandbox
# --proxy-fd, no scope).
#   bench/proxy.sh [BUILDDIR]     (MB=256 REQUESTS=500 RUNS=5 to change the sizes)
set -eu
BUILDDIR=$(realpath "${1:-build}")
MB=${MB:-256}
RUNS=${RUNS:-5}
REQUESTS=${REQUESTS:-500}
[ "$(id -u)" = 0 ] || { echo "bench/proxy.sh needs root (it runs the proxy as nobody)"; exit 1; }

D=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT
chmod 0755 "$D"
mkdir -p "$D/www" "$D/ws" "$D/ctl"
chown 65534:65534 "$D/ws" "$D/ctl"
head -c $((MB * 1024 * 1024)) /dev/zero > "$D/www/big"
echo small > "$D/www/small"
PORT=$((20000 + RANDOM % 20000))

(cd "$D/www" && exec python3 -m http.server "$PORT" --bind 127.0.0.2 >/dev/null 2>&1) & PIDS+=($!)
setpriv --reuid=65534 --regid=65534 --clear-groups "$BUILDDIR/src/proxy/agentfab-proxy" \
        --control="$D/ctl/control" --control-user=root >/dev/null 2>&1 & PIDS+=($!)
for _ in $(seq 100); do [ -S "$D/ctl/control" ] && python3 -c "import socket; socket.create_connection(('127.0.0.2', $PORT)).close()" 2>/dev/null && break; sleep 0.05; done

cat > "$D/ws/client.py" <<PY
import socket, sys, time
mode, target, via = sys.argv[1], ("127.0.0.2", $PORT), sys.argv[2] == "proxy"

def connect():
    if not via:
        return socket.create_connection(target)
    s = socket.create_connection(("127.0.0.1", 3128))
    if mode != "plain":
        s.sendall(b"CONNECT 127.0.0.2:$PORT HTTP/1.1\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(4096)
    return s

def get(path):
    s = connect()
    prefix = "http://127.0.0.2:$PORT" if via and mode == "plain" else ""
    s.sendall(("GET %s%s HTTP/1.1\r\nHost: 127.0.0.2\r\nConnection: close\r\n\r\n" % (prefix, path)).encode())
    n = 0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
    s.close()
    return n

if mode == "bulk":
    t = time.monotonic(); n = get("/big"); dt = time.monotonic() - t
    print("%.1f" % (n / dt / 1e6))
else:
    get("/small")
    t = time.monotonic()
    for _ in range($REQUESTS):
        get("/small")
    print("%.3f" % ((time.monotonic() - t) / $REQUESTS * 1000))
PY

SB="$BUILDDIR/src/sandbox/agentfab-sandbox --no-scope --uid=65534 --gid=65534 --workspace=$D/ws --proxy-fd=3 --"
median() { python3 -c "import statistics, sys; print('%.3f' % statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
pb=() pp=() pt=() db=() ds=()
# Rounds taken in turns: a sandbox's run through the proxy, then the same
# client directly, so that load from elsewhere on the machine hits both.
for i in $(seq 1 "$RUNS"); do
        out=$("$BUILDDIR/tests/integration/proxy-probe" "$D/ctl/control" <<REQ
register bench$i allowlist 127.0.0.2:$PORT
run bench$i $SB sh -c 'for m in bulk plain tunnel; do echo "result \$m \$(python3 /workspace/client.py \$m proxy)"; done'
REQ
)
        pb+=("$(sed -n 's/^result bulk //p' <<<"$out")")
        pp+=("$(sed -n 's/^result plain //p' <<<"$out")")
        pt+=("$(sed -n 's/^result tunnel //p' <<<"$out")")
        db+=("$(python3 "$D/ws/client.py" bulk direct)")
        ds+=("$(python3 "$D/ws/client.py" plain direct)")
done
proxy_bulk=$(median "${pb[@]}") proxy_plain=$(median "${pp[@]}") proxy_tunnel=$(median "${pt[@]}")
direct_bulk=$(median "${db[@]}") direct_small=$(median "${ds[@]}")

echo "egress proxy benchmark: medians of $RUNS rounds ($MB MB bulk; $REQUESTS small requests, each on a new connection)"
printf '  bulk download:  direct %9s MB/s   through a CONNECT tunnel %9s MB/s   ratio %s\n' \
        "$direct_bulk" "$proxy_bulk" "$(python3 -c "print('%.2f' % ($proxy_bulk / $direct_bulk))")"
printf '  small request:  direct %9s ms     forwarded (plain HTTP) %9s ms     CONNECT %9s ms\n' \
        "$direct_small" "$proxy_plain" "$proxy_tunnel"
printf '  per connection through the proxy: plain %sx, CONNECT %sx the direct time\n' \
        "$(python3 -c "print('%.2f' % ($proxy_plain / $direct_small))")" \
        "$(python3 -c "print('%.2f' % ($proxy_tunnel / $direct_small))")"
