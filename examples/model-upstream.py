#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A model-API-shaped upstream for the demo, on 127.0.0.1: it answers
POST /v1/messages when the request carries the right x-api-key, and says
which credentials it saw (never their values)."""

import http.server
import json
import sys

PORT = int(sys.argv[1])
KEY = sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        ok = self.headers.get("x-api-key") == KEY
        reply = {
            "id": "msg_demo",
            "content": [{"type": "text", "text": "Hello from the model." if ok else "unauthorized"}],
            "upstreamSaw": {
                "validKey": ok,
                "clientKeyLeaked": self.headers.get("x-api-key") == "agent-made-up-key",
                "account": self.headers.get("x-billing-account"),
                "promptBytes": len(body),
            },
        }
        data = json.dumps(reply).encode()
        self.send_response(200 if ok else 401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", "req-demo-1")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
