# SPDX-License-Identifier: Apache-2.0
"""What the kill switch's tests share (tests/integration/test_stop.py,
tests/daemon/test_stop_api.py): an upstream that counts the requests the
sandboxes' floods make, and the checks that the flood stopped."""

import http.server
import socketserver
import threading
import time
from datetime import datetime, timezone


class Counter(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.hits.append(time.time())
        body = b"x" * 4096
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a connection the stop closed mid-answer


def start_upstream():
    srv = Server(("127.0.0.1", 0), Counter)
    srv.hits = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def settle(upstream):
    """The upstream's count stops moving within 5 s and then stays put."""
    last, still = len(upstream.hits), time.monotonic()
    deadline = time.monotonic() + 5
    while time.monotonic() - still < 0.5:
        assert time.monotonic() < deadline, "requests still arrive after the stop"
        time.sleep(0.05)
        if len(upstream.hits) != last:
            last, still = len(upstream.hits), time.monotonic()
    time.sleep(1.0)
    assert len(upstream.hits) == last


def parse_ts(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
