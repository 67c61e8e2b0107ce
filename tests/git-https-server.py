#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small git smart-HTTP server over TLS, for tests: fetch only.

    git-https-server.py --root DIR --cert CERT --key KEY [--port N] [--log FILE]

Serves the repositories below DIR at https://127.0.0.1:PORT/NAME.git with
git's smart protocol (git upload-pack --stateless-rpc); prints the port on
its first line. Pushing is refused. Every request is logged as one line.
Only the Python standard library and git are used.
"""

import argparse
import os
import ssl
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

ARGS = None


def pkt_line(s):
    data = s.encode()
    return b"%04x" % (len(data) + 4) + data


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        if ARGS.log:
            with open(ARGS.log, "a") as f:
                f.write("%s %s\n" % (self.command, self.path))

    def repo(self, path, suffix):
        if not path.endswith(suffix):
            return None
        name = path[1:-len(suffix)]
        if not name or "/." in "/" + name or name.startswith("/"):
            return None
        full = os.path.realpath(os.path.join(ARGS.root, name))
        if not full.startswith(os.path.realpath(ARGS.root) + os.sep) or not os.path.isdir(full):
            return None
        return full

    def fail(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        u = urlsplit(self.path)
        service = parse_qs(u.query).get("service", [""])[0]
        repo = self.repo(u.path, "/info/refs")
        if not repo or service != "git-upload-pack":
            return self.fail(404 if not repo else 403)
        refs = subprocess.run(["git", "upload-pack", "--stateless-rpc", "--advertise-refs", repo],
                              capture_output=True, check=True).stdout
        body = pkt_line("# service=git-upload-pack\n") + b"0000" + refs
        self.send_response(200)
        self.send_header("Content-Type", "application/x-git-upload-pack-advertisement")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                n = int(self.rfile.readline().strip().split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_POST(self):
        repo = self.repo(urlsplit(self.path).path, "/git-upload-pack")
        if not repo:
            return self.fail(403)
        out = subprocess.run(["git", "upload-pack", "--stateless-rpc", repo], input=self.read_body(),
                             capture_output=True).stdout
        self.send_response(200)
        self.send_header("Content-Type", "application/x-git-upload-pack-result")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
