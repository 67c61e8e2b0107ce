#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A client that asks and never reads, for tests/integration/slow-clients.sh.

  slow-client.py bus --calls=N [--batch=B] [--method=ListTasks] [--hold=SEC]
      Connects to the system bus with a socket of its own (no D-Bus
      library: any library reads what arrives), authenticates, says Hello
      and sends up to N calls of org.agentfab.Factory1's METHOD, B every
      50 ms, holding the connection for SEC seconds without reading a
      byte: the answers pile up wherever the bus and agentfabd let them.
  slow-client.py stream --task=ID [--kind=output] [--hold=SEC]
      Asks the stream socket to follow a task and never reads.

Prints one line: "sent N calls" or "following ID", then holds. Its own
receive buffer is made as small as the kernel allows, so that what it is
sent waits at the other end, not here."""
import argparse
import os
import socket
import struct
import sys
import time


def pad(b, n):
    return b + b"\0" * ((-len(b)) % n)


def marshal_call(serial, dest, path, iface, member):
    """A METHOD_CALL with no body, little endian, as the D-Bus spec says."""
    fields = b""
    for code, sig, value in ((1, b"o", path), (2, b"s", iface), (3, b"s", member), (6, b"s", dest)):
        v = value.encode()
        f = struct.pack("<B", code) + struct.pack("<B", 1) + sig + b"\0"
        f += struct.pack("<I", len(v)) + v + b"\0"
        fields = pad(fields, 8) + f
    head = struct.pack("<cBBBII", b"l", 1, 0, 1, 0, serial) + struct.pack("<I", len(fields)) + fields
    return pad(head, 8)


def small_rcvbuf(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)


def hold(sec):
    end = time.monotonic() + sec
    while time.monotonic() < end:
        time.sleep(0.2)


def run_bus(a):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    small_rcvbuf(s)
    s.connect(a.address)
    s.sendall(b"\0AUTH EXTERNAL " + str(os.geteuid()).encode().hex().encode() + b"\r\n")
    line = b""
    while not line.endswith(b"\r\n"):
        c = s.recv(1)
        if not c:
            sys.exit("the bus closed the connection while authenticating")
        line += c
    if not line.startswith(b"OK "):
        sys.exit("authentication refused: %r" % line)
    s.sendall(b"BEGIN\r\n")
    s.sendall(marshal_call(1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"))
    call_iface = "org.agentfab.Factory1"
    # dbus-daemon lets 128 calls of a connection wait for their answers
    # and refuses the rest at once: sent all at once, only 128 would reach
    # the daemon. So the calls go in batches, BATCH every 50 ms for HOLD
    # seconds, as a client with many callers behind it would send them.
    sent = 0
    serial = 2
    s.settimeout(0.5)
    end = time.monotonic() + a.hold
    while time.monotonic() < end and sent < a.calls:
        batch = b"".join(marshal_call(serial + i, "org.agentfab.Factory1", "/org/agentfab/Factory1", call_iface, a.method)
                         for i in range(min(a.batch, a.calls - sent)))
        try:
            s.sendall(batch)
        except socket.timeout:
            # The bus stopped reading us for a while: try again later.
            time.sleep(0.05)
            continue
        n = min(a.batch, a.calls - sent)
        serial += n
        sent += n
        time.sleep(0.05)
    print("sent %d calls" % sent, flush=True)
    hold(end - time.monotonic())


def run_stream(a):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    small_rcvbuf(s)
    s.connect(a.socket)
    s.sendall(('{"task": "%s", "stream": "%s", "follow": true}\n' % (a.task, a.kind)).encode())
    print("following %s" % a.task, flush=True)
    # What the daemon said first, peeked at, not read: it stays queued.
    time.sleep(1)
    try:
        first = s.recv(200, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        print("first: %s" % first.decode(errors="replace").split("\n")[0], flush=True)
    except BlockingIOError:
        print("first: nothing yet", flush=True)
    hold(a.hold)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("bus")
    b.add_argument("--calls", type=int, default=1000)
    b.add_argument("--method", default="ListTasks")
    b.add_argument("--batch", type=int, default=64)
    b.add_argument("--hold", type=float, default=60)
    b.add_argument("--address", default="/run/dbus/system_bus_socket")
    st = sub.add_parser("stream")
    st.add_argument("--task", required=True)
    st.add_argument("--kind", default="output")
    st.add_argument("--hold", type=float, default=60)
    st.add_argument("--socket", default="/run/agentfab/agentfab.sock")
    a = p.parse_args()
    run_bus(a) if a.what == "bus" else run_stream(a)


if __name__ == "__main__":
    main()
