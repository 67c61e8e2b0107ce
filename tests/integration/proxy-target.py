#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A destination for the egress proxy's integration test: an HTTP server
that logs every connection it accepts, before reading anything, so that its
log proves whether anything reached it.

    proxy-target.py ADDRESS PORT LOGFILE
"""
import http.server
import socketserver
import sys

address, port, logfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
log = open(logfile, "a", buffering=1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        log.write("connection from %s:%d\n" % self.client_address[:2])
        super().setup()

    def do_GET(self):
        log.write("request %s host=%s\n" % (self.path, self.headers.get("Host")))
        # /big: more than a small byte limit lets through.
        body = (b"x" * 4000 + b"\n") if self.path == "/big" else ("hello from %s:%d\n" % (address, port)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


Server((address, port), Handler).serve_forever()
