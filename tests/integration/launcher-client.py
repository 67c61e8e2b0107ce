# SPDX-License-Identifier: LGPL-2.1-or-later
# Drives agentfab-launcher the way agentfabd will: a workspace fd over
# SCM_RIGHTS, one request line, "ready", then the exec service on the same
# connection. Prints one line per check: "ok ..." or "FAIL ...".
#
#   launcher-client.py main WORKSPACE     the checks that need a live sandbox
#   launcher-client.py open TASK WORKSPACE [LIMITS_JSON]   one request, prints the reply, holds
#                                         the connection until stdin closes
#   launcher-client.py raw TEXT [FD_PATH...]   sends TEXT (no newline added), prints the reply
#   launcher-client.py reap ID...         prints the reply
import pwd
import json, os, socket, subprocess, sys, time

SOCK = "/run/agentfab/launcher.sock"


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(SOCK)
    return s


def readline(s):
    b = b""
    while not b.endswith(b"\n"):
        c = s.recv(1)
        if not c:
            break
        b += c
    return json.loads(b) if b else None


def request(msg, fds=()):
    s = connect()
    socket.send_fds(s, [(json.dumps(msg) + "\n").encode()], list(fds))
    return s, readline(s)


def open_sandbox(task, ws_fd, limits=None, env=None):
    msg = {"type": "sandbox", "task": task}
    if limits is not None:
        msg["limits"] = limits
    if env is not None:
        msg["env"] = env
    return request(msg, [ws_fd])


class Session:
    def __init__(self, s):
        self.s, self.f, self.n = s, s.makefile("rwb"), 0

    def run(self, argv, **kw):
        self.n += 1
        req = {"type": "exec", "id": self.n, "argv": argv}
        req.update(kw)
        self.f.write((json.dumps(req) + "\n").encode())
        self.f.flush()
        out = []
        while True:
            line = self.f.readline()
            if not line:
                return {"type": "eof"}, "".join(out)
            m = json.loads(line)
            if m["type"] in ("exit", "error"):
                return m, "".join(out)
            if m["type"] == "output":
                out.append(m["data"])

    def close(self):
        self.f.close()
        self.s.close()


def check(ok, what):
    print(("ok " if ok else "FAIL ") + what, flush=True)


def show(unit, *props):
    out = subprocess.run(["systemctl", "show", unit] + ["-p" + p for p in props], capture_output=True, text=True,
                         timeout=10).stdout
    return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)


def wait_gone(unit, timeout=10.0):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if show(unit, "LoadState").get("LoadState") == "not-found":
            return (time.monotonic() - start) * 1000
        time.sleep(0.02)
    return None


def main(ws):
    ws_fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    task = "0a0a0a0a0a01"
    unit = "agentfab-task-%s.scope" % task
    t0 = time.monotonic()
    s, m = open_sandbox(task, ws_fd, {"memory_max": 100 << 20, "tasks_max": 64, "cpu_quota_percent": 50},
                        {"AGENTFAB_TEST": "hello"})
    ms = (time.monotonic() - t0) * 1000
    check(m and m.get("type") == "ready" and m.get("unit") == unit and m.get("pid", 0) > 1,
          "sandbox ready in %.1f ms: %s" % (ms, m))
    if not m or m.get("type") != "ready":
        return
    x = Session(s)
    agentfab = pwd.getpwnam("agentfab").pw_uid
    r, out = x.run(["sh", "-c", "id -u; id -g; id -G; stat -c %u:%g /workspace"])
    ids = out.split()
    tuid = int(ids[0]) if ids and ids[0].isdigit() else -1
    check(r.get("status") == 0 and 0x60000 <= tuid <= 0x6FFFF and ids[1:4] == [str(tuid)] * 2 + ["%d:%d" % (tuid, tuid)]
          and m.get("uid") == tuid,
          "commands run as a uid of the task's own (%s, not agentfab's %d), which owns /workspace there: %r" % (m.get("uid"), agentfab, out))
    r, out = x.run(["sh", "-c", "echo made > /workspace/made-by-task; mkdir -p /workspace/dir-by-task"])
    st = os.stat(os.path.join(ws, "made-by-task"))
    check(r.get("status") == 0 and st.st_uid == agentfab and os.stat(os.path.join(ws, "dir-by-task")).st_uid == agentfab,
          "what the task writes is agentfab's on disk: uid %d" % st.st_uid)
    os.unlink(os.path.join(ws, "made-by-task"))
    os.rmdir(os.path.join(ws, "dir-by-task"))
    # A second sandbox at the same time gets another uid.
    s9, m9 = open_sandbox("0a0a0a0a0a09", ws_fd)
    check(m9 and m9.get("type") == "ready" and m9.get("uid") not in (None, tuid, agentfab),
          "a second live sandbox has another uid: %s and %s" % (tuid, m9 and m9.get("uid")))
    s9.close()
    wait_gone("agentfab-task-0a0a0a0a0a09.scope")
    r, out = x.run(["sh", "-c", "grep -c CapEff:.0000000000000000 /proc/self/status"])
    check(out.strip() == "1", "no effective capabilities: %r" % out)
    r, out = x.run(["cat", "/proc/self/cgroup"])
    check("agentfab.slice/%s" % unit in out, "in %s below agentfab.slice: %r" % (unit, out.splitlines()[:3]))
    r, out = x.run(["sh", "-c", "echo $AGENTFAB_TEST; echo $PATH"])
    check(out.startswith("hello\n"), "declared environment passed: %r" % out)
    p = show(unit, "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec", "Slice", "ActiveState")
    check(p.get("MemoryMax") == str(100 << 20) and p.get("TasksMax") == "64" and p.get("CPUQuotaPerSecUSec") == "500ms"
          and p.get("Slice") == "agentfab.slice" and p.get("ActiveState") == "active", "scope limits as asked: %s" % p)
    launchers = subprocess.run(["systemctl", "list-units", "--no-legend", "--plain", "agentfab-launcher@*.service"],
                               capture_output=True, text=True, timeout=10).stdout
    r, out = x.run(["python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))"])
    check(r.get("signal") == 9, "memory bomb killed at MemoryMax=100M: %s" % r)
    r, out = x.run(["sh", "-c", "echo alive"])
    check(r.get("status") == 0 and out == "alive\n", "sandbox carries on after the memory bomb")
    launchers2 = subprocess.run(["systemctl", "list-units", "--no-legend", "--plain", "agentfab-launcher@*.service"],
                                capture_output=True, text=True, timeout=10).stdout
    check(launchers.strip() != "" and launchers == launchers2 and "running" in launchers2,
          "its launcher instance stays up: %r" % launchers2.strip())
    x.close()
    gone = wait_gone(unit)
    check(gone is not None, "connection closed: scope gone after %s ms" % (gone and round(gone)))
    time.sleep(0.3)
    left = subprocess.run(["systemctl", "list-units", "--no-legend", "--plain", "agentfab-launcher@*.service"],
                          capture_output=True, text=True, timeout=10).stdout
    check(left.strip() == "", "and its launcher instance: %r" % left.strip())

    # RuntimeMaxSec=: systemd stops the scope, the peer sees the connection close.
    task3 = "0a0a0a0a0a04"
    s, m = open_sandbox(task3, ws_fd, {"runtime_max_sec": 2})
    p = show("agentfab-task-%s.scope" % task3, "RuntimeMaxUSec", "TimeoutStopUSec")
    x = Session(s)
    t0 = time.monotonic()
    r, out = x.run(["sleep", "60"])
    # The command got SIGTERM; the sandbox's PID 1 the SIGKILL after TimeoutStopSec=5s.
    eof = x.f.readline() == b""
    el = time.monotonic() - t0
    x.close()
    check(m.get("type") == "ready" and p.get("RuntimeMaxUSec") == "2s" and r.get("signal") == 15 and eof and el < 12,
          "runtime_max_sec=2: scope stopped, connection closed after %.1f s (%s, %s)" % (el, p, r))
    wait_gone("agentfab-task-%s.scope" % task3)

    # The maxima: more than the launcher grants is clamped.
    task2 = "0a0a0a0a0a02"
    s, m = open_sandbox(task2, ws_fd, {"memory_max": 1 << 50, "tasks_max": 1 << 40, "cpu_quota_percent": 5000})
    p = show("agentfab-task-%s.scope" % task2, "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec")
    check(m.get("type") == "ready" and p.get("MemoryMax") == str(2 << 30) and p.get("TasksMax") == "512"
          and p.get("CPUQuotaPerSecUSec") == "1s", "huge limits clamped to 2G, 512, 100%%: %s" % p)
    s.close()
    wait_gone("agentfab-task-%s.scope" % task2)

    # Refusals, each with a reason and no scope.
    def refused(what, msg, fds, want):
        s, m = request(msg, fds)
        s.close()
        check(m and m.get("type") == "error" and want in m.get("message", ""), "%s refused: %s" % (what, m))
    root_fd = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
    refused("root-owned workspace", {"type": "sandbox", "task": "0a0a0a0a0a03"}, [root_fd], "not owned")
    proc_fd = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
    refused("the daemon's own /proc/PID (owned by agentfab)", {"type": "sandbox", "task": "0a0a0a0a0a03"}, [proc_fd],
            "kernel file system")
    file_fd = os.open(os.path.join(ws, "file"), os.O_RDONLY)
    refused("a file as workspace", {"type": "sandbox", "task": "0a0a0a0a0a03"}, [file_fd], "not a directory")
    refused("no workspace fd", {"type": "sandbox", "task": "0a0a0a0a0a03"}, [], "fd")
    refused("two fds", {"type": "sandbox", "task": "0a0a0a0a0a03"}, [ws_fd, ws_fd], "one fd")
    # The egress proxy's channel: only a connected AF_UNIX SOCK_SEQPACKET socket.
    refused("proxy channel that is a directory", {"type": "sandbox", "task": "0a0a0a0a0a03", "proxy": True},
            [ws_fd, ws_fd], "not a socket")
    st_a, st_b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    refused("proxy channel of the wrong socket type", {"type": "sandbox", "task": "0a0a0a0a0a03", "proxy": True},
            [ws_fd, st_a.fileno()], "SOCK_SEQPACKET")
    st_a.close(); st_b.close()
    refused("proxy named but no fd", {"type": "sandbox", "task": "0a0a0a0a0a03", "proxy": True}, [ws_fd], "proxy channel")
    # The history (the task's ledger, read-only for git) is checked like the workspace.
    refused("history named but no fd", {"type": "sandbox", "task": "0a0a0a0a0a03", "history": True}, [ws_fd], "history")
    refused("root-owned history", {"type": "sandbox", "task": "0a0a0a0a0a03", "history": True}, [ws_fd, root_fd], "not owned")
    refused("a file as history", {"type": "sandbox", "task": "0a0a0a0a0a03", "history": True}, [ws_fd, file_fd],
            "not a directory")
    refused("five fds", {"type": "sandbox", "task": "0a0a0a0a0a03", "cache": True, "history": True, "proxy": True},
            [ws_fd, ws_fd, ws_fd, ws_fd, ws_fd], "four fds")
    refused("bad task id", {"type": "sandbox", "task": "../../etc"}, [ws_fd], "task")
    refused("LD_PRELOAD", {"type": "sandbox", "task": "0a0a0a0a0a03", "env": {"LD_PRELOAD": "/workspace/x.so"}},
            [ws_fd], "name")
    refused("unknown field", {"type": "sandbox", "task": "0a0a0a0a0a03", "uid": 0}, [ws_fd], "unknown")
    s = connect()
    s.sendall(b"x" * (70 * 1024))
    m = readline(s)
    s.close()
    check(m and m.get("type") == "error" and "too long" in m.get("message", ""), "oversized line refused: %s" % m)
    check(show("agentfab-task-0a0a0a0a0a03.scope", "LoadState").get("LoadState") == "not-found",
          "no scope made for refused requests")

    # Timings: from connect until "ready", a few times.
    times = []
    for i in range(7):
        t0 = time.monotonic()
        s, m = open_sandbox("0a0a0a0a0b%02x" % i, ws_fd)
        times.append((time.monotonic() - t0) * 1000)
        s.close()
        wait_gone("agentfab-task-0a0a0a0a0b%02x.scope" % i)
    times.sort()
    check(m.get("type") == "ready", "timing: connect to ready median %.1f ms (min %.1f, max %.1f)"
          % (times[len(times) // 2], times[0], times[-1]))


def hold(task, ws, limits):
    ws_fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    s, m = open_sandbox(task, ws_fd, json.loads(limits) if limits else None)
    print(json.dumps(m), flush=True)
    sys.stdin.read()
    s.close()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "main":
        main(sys.argv[2])
    elif cmd == "open":
        hold(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif cmd == "raw":
        try:
            s = connect()
            fds = [os.open(p, os.O_RDONLY) for p in sys.argv[3:]]
            socket.send_fds(s, [sys.argv[2].encode()], fds)
            print(json.dumps(readline(s)))
        except OSError as e:
            print(json.dumps({"oserror": e.errno, "strerror": e.strerror}))
    elif cmd == "reap":
        s, m = request({"type": "reap", "keep": sys.argv[2:]})
        print(json.dumps(m))
