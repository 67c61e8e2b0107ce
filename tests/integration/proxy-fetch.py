#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs inside a task sandbox: sends raw requests to the egress proxy's
forwarder on the sandbox's loopback and prints one "result NAME STATUS"
line per request. Raw, so that the host is written exactly as the test
says (curl would normalise 2130706433 to 127.0.0.1 before the proxy saw it).

    proxy-fetch.py NAME 'REQUEST-HEAD-WITH-\\r\\n'   one request, prints its status
    proxy-fetch.py --hold NAME 'REQUEST'              keeps a first connection open meanwhile
    proxy-fetch.py --idle NAME SECONDS 'CONNECT ...'  tunnel, then idle; prints whether the proxy closed it
"""
import os
import socket
import sys
import time

PORT = 3128


def head(text):
    return text.encode("latin1").decode("unicode_escape").encode("latin1")


def status_of(data, timeout=15):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.sendall(data)
    reply = b""
    try:
        while b"\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        while True:  # the rest, so that the byte counts are whole
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
    except socket.timeout:
        pass
    s.close()
    line = reply.split(b"\r\n", 1)[0].decode("latin1")
    parts = line.split(" ")
    return (parts[1] if len(parts) > 1 else "none"), len(reply)


def main():
    args = sys.argv[1:]
    if args[0] == "--hold":
        held = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        time.sleep(0.2)
        status, _ = status_of(head(args[2]))
        print("result", args[1], status)
        held.close()
    elif args[0] == "--idle":
        s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        s.sendall(head(args[3]))
        first = s.recv(4096).split(b"\r\n", 1)[0].decode("latin1")
        time.sleep(float(args[2]))
        s.settimeout(2)
        try:
            closed = s.recv(1) == b""
        except (socket.timeout, ConnectionError):
            closed = False
        print("result", args[1], first.split(" ")[1] if " " in first else "none", "closed" if closed else "open")
    else:
        status, size = status_of(head(args[1]))
        print("result", args[0], status, size)


main()
sys.stdout.flush()
os._exit(0)
