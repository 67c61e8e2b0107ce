#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""fleet-db-proxy.py PORT DBPORT DROPFILE: a TCP proxy on 127.0.0.1:PORT to
the PostgreSQL server on 127.0.0.1:DBPORT, for one host of a fleet test.
While DROPFILE exists, an answer to a client message that calls
agentfab.claim is not forwarded if it holds DROPFILE's content (a string of
the claimed task's, e.g. its goal): the proxy closes both sides of that
connection instead and removes DROPFILE (the claim committed, its answer
lost with the connection). Claims that get other tasks, or none, pass. It
prints "dropped" when it did. Only the Python standard library is used."""
import os
import socket
import sys
import threading

port, db_port, drop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def close(*socks):
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def pipe(src, dst, state, upstream):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if upstream:
                state["claim"] = b"agentfab.claim" in data
            elif state.get("claim") and os.path.exists(drop):
                try:
                    with open(drop, "rb") as f:
                        marker = f.read().strip()
                except OSError:
                    marker = b""
                if marker and marker in data:
                    os.unlink(drop)
                    print("dropped", flush=True)
                    break
            dst.sendall(data)
    except OSError:
        pass
    close(src, dst)


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(16)
print(port, flush=True)
while True:
    client, _ = listener.accept()
    try:
        server = socket.create_connection(("127.0.0.1", db_port))
    except OSError:
        client.close()
        continue
    state = {}
    threading.Thread(target=pipe, args=(client, server, state, True), daemon=True).start()
    threading.Thread(target=pipe, args=(server, client, state, False), daemon=True).start()
