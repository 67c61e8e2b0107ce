#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A tiny forge for tests: answers POST /.../repos/OWNER/REPO/pulls the way
# Gitea and GitHub do, and logs every request (method, path, headers, body)
# as one JSON line. Binds to 127.0.0.1 and prints its port on stdout.
#
#   forge-server.py --log FILE [--port N] [--mode MODE]
#
# MODE: created (201 with html_url, the default), exists (422 as GitHub
# says it), unauthorized (401 that echoes the Authorization header), huge (201 with a body far over any bound, Content-Length set),
# huge-unsized (the same without Content-Length), garbage (201, not JSON),
# redirect (302 to another place). A request for a repository named like a
# mode gets that mode's answer, so that one server serves every case.
import argparse
import http.server
import json
import re
import sys

args = None
MODES = ("created", "exists", "unauthorized", "huge", "huge-unsized", "garbage", "redirect")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def reply(self, status, body, length=True, extra=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in extra:
            self.send_header(k, v)
        if length:
            self.send_header("Content-Length", str(len(data)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        self.reply(405, {"message": "only POST here"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        entry = {
            "method": "POST",
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        with open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()

        m = re.fullmatch(r".*/repos/([^/]+)/([^/]+)/pulls", self.path)
        if not m:
            return self.reply(404, {"message": "Not Found"})
        owner, repo = m.groups()
        # A repository named like a mode asks for that mode.
        mode = repo if repo in MODES else args.mode
        if mode == "exists":
            return self.reply(422, {"message": "Validation Failed",
                                    "errors": [{"resource": "PullRequest", "code": "custom",
                                                "message": "A pull request already exists for %s:%s.\n\x1b[31mred"
                                                % (owner, (body or {}).get("head"))}]})
        if mode == "unauthorized":
            return self.reply(401, {"message": "Bad credentials: %s" % self.headers.get("Authorization", "")})
        if mode == "huge":
            return self.reply(201, b'{"html_url": "http://x/1", "pad": "' + b"x" * (4 * 1024 * 1024) + b'"}')
        if mode == "huge-unsized":
            return self.reply(201, b'{"html_url": "http://x/1", "pad": "' + b"x" * (4 * 1024 * 1024) + b'"}', length=False)
        if mode == "garbage":
            return self.reply(201, b"<html>hello</html>")
        if mode == "redirect":
            return self.reply(302, {"message": "moved"}, extra=[("Location", "http://127.0.0.1:1/elsewhere")])
        number = sum(1 for _ in open(args.log))
        self.reply(201, {"number": number, "state": "open",
                         "html_url": "http://127.0.0.1:%d/%s/%s/pulls/%d" % (self.server.server_port, owner, repo, number)})


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--mode", default="created")
    args = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(server.server_port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
