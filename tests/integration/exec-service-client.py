# SPDX-License-Identifier: LGPL-2.1-or-later
# Drives a live sandbox's exec service the way the daemon will: several
# commands in one sandbox, each with its own result. Prints one line per
# check: "ok ..." or "FAIL ...".
import json, socket, subprocess, sys

ws, unit = sys.argv[1], sys.argv[2]
a, b = socket.socketpair()
p = subprocess.Popen(["agentfab-sandbox", "--workspace", ws, "--unit", unit, "--memory-max=64M", "--tasks-max=64",
                      "--serve-fd", str(b.fileno())], pass_fds=[b.fileno()])
b.close()
f = a.makefile("rwb")
n = 0


def run(argv, **kw):
    global n
    n += 1
    req = {"type": "exec", "id": n, "argv": argv}
    req.update(kw)
    f.write((json.dumps(req) + "\n").encode())
    f.flush()
    out = []
    while True:
        m = json.loads(f.readline())
        if m["type"] in ("exit", "error"):
            return m, "".join(out)
        if m["type"] == "output":
            out.append(m["data"])


def check(ok, what):
    print(("ok " if ok else "FAIL ") + what, flush=True)


m, out = run(["sh", "-c", "echo out; echo err >&2; exit 3"])
check(m["status"] == 3 and "out" in out and "err" in out, "exit status and both streams: %s %r" % (m, out))
m, out = run(["sh", "-c", "(setsid sleep 600 &); (nohup sleep 601 >/dev/null 2>&1 &); echo started"])
m, out = run(["sh", "-c", "ps -e -o comm= | grep -c sleep || true"])
check(out.strip() == "0", "nothing a command left running reaches the next one (%r)" % out)
m, out = run(["python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))"])
check(m["signal"] == 9, "memory bomb killed at MemoryMax: %s" % m)
m, out = run(["sh", "-c", "echo alive"])
check(m["status"] == 0 and out == "alive\n", "the sandbox carries on after the memory bomb")
m, out = run(["sh", "-c", "while :; do :; done"], timeout_ms=1000)
check(m["timed_out"] and m["signal"] == 9 and m["duration_usec"] < 3000000, "per-command timeout: %s" % m)
m, out = run(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"])
check(m["status"] == 0 and len(out) == 3000000, "large output streamed whole (%d bytes)" % len(out))
m, out = run(["pwd"], cwd="/tmp")
check(out == "/tmp\n", "cwd honoured")
m, out = run(["sh", "-c", "echo $FOO"], env={"FOO": "bar"})
check(out == "bar\n", "env honoured")
m, out = run(["no-such-command"])
check(m["status"] == 127 and "Cannot execute" in out, "missing command reported: %r" % out)
f.write(b'{"type":"exec","id":"x","argv":"rm -rf /"}\n{"garbage\n')
f.flush()
m1 = json.loads(f.readline())
m2 = json.loads(f.readline())
check(m1["type"] == "error" and m2["type"] == "error", "malformed requests refused: %s %s" % (m1, m2))
m, out = run(["true"])
check(m["type"] == "exit" and m["status"] == 0, "still serving after bad requests")
f.close()
a.close()
check(p.wait(timeout=10) == 0, "the sandbox ends when its connection closes")
