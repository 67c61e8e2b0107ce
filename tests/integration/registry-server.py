#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A package registry for the network tests: static files over HTTP.

    registry-server.py --dir DIR --host ADDRESS --port N --log FILE

Serves DIR (a PEP 503 simple index and the wheels it links to, an npm
package document and its tarball) and appends one line per connection
("connection from ADDRESS:PORT", before anything is read) and per request
("METHOD PATH CODE") to FILE, so that a test can prove what reached it and
what did not. Prints its port on the first line of stdout.
Only the Python standard library is used.
"""

import argparse
import functools
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer


class Handler(SimpleHTTPRequestHandler):
    log_path = None

    def setup(self):
        # Before anything is read: a connection that sends nothing is seen too.
        with open(self.log_path, "a") as f:
            f.write("connection from %s:%d\n" % self.client_address[:2])
        super().setup()

    def log_request(self, code="-", size="-"):
        with open(self.log_path, "a") as f:
            f.write(f"{self.command} {self.path} {code}\n")

    def log_message(self, format, *args):
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--host", default="127.0.0.2")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", required=True)
    a = p.parse_args()
    Handler.log_path = a.log
    server = ThreadingHTTPServer((a.host, a.port), functools.partial(Handler, directory=a.dir))
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
