#!/usr/bin/env python3
"""A small authorization service for the gateway's `auth: external` tests (Python's own HTTP
server, no packages). Prints its port, then answers `GET /check` by the Authorization header:

  Bearer alice   200, X-User-Id: alice, X-Roles: reader (and X-Internal: not for the backend)
  Bearer root    200, X-User-Id: root, X-Roles: admin, reader
  Bearer slow    200 after 3 s (longer than the gateway waits)
  Bearer broken  500 with a text body
  none           401, WWW-Authenticate: Basic realm="authz", a JSON body
  anything else  403, X-Reason: unknown user, a JSON body

A path under /api/admin is 403 for everyone but root: the decision reads X-Forwarded-Uri.
`GET /seen` answers the questions asked so far, as JSON (method, path, the asker's port, headers).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEEN = []
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, headers, body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/seen":
            with LOCK:
                body = json.dumps(SEEN).encode()
            return self.answer(200, [("Content-Type", "application/json")], body)
        with LOCK:
            SEEN.append({"method": self.command, "path": self.path, "port": self.client_address[1],
                         "headers": {k.lower(): v for k, v in self.headers.items()}})
        auth = self.headers.get("Authorization", "")
        uri = self.headers.get("X-Forwarded-Uri", "")
        user = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        if user is None:
            return self.answer(401, [("WWW-Authenticate", 'Basic realm="authz"'),
                                     ("Content-Type", "application/json")],
                               b'{"error": "who are you?"}')
        if user == "slow":
            time.sleep(3)
            return self.answer(200, [("X-User-Id", "slow")])
        if user == "broken":
            return self.answer(500, [("Content-Type", "text/plain")], b"authz is broken\n")
        if user not in ("alice", "root"):
            return self.answer(403, [("X-Reason", "unknown user"), ("Content-Type", "application/json")],
                               b'{"error": "unknown user"}')
        if uri.startswith("/api/admin") and user != "root":
            return self.answer(403, [("X-Reason", "admins only"), ("Content-Type", "application/json")],
                               b'{"error": "admins only"}')
        roles = "admin, reader" if user == "root" else "reader"
        return self.answer(200, [("X-User-Id", user), ("X-Roles", roles), ("X-Internal", "secret")])


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
