# SPDX-License-Identifier: Apache-2.0
"""What the kill switch's tests share (tests/integration/test_stop.py,
tests/daemon/test_stop_api.py): an upstream that counts the requests the
sandboxes' floods make, and the checks that the flood stopped."""

import http.server
import socket
import socketserver
import threading
import time
from datetime import datetime, timezone


class Counter(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/barrier":
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
    # A flood from 50 sandboxes overflows a short accept queue; the kernel
    # then finishes those handshakes seconds later, after the senders are
    # gone, and requests sent before the stop would be counted after it.
    request_queue_size = 4096

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.lock = threading.Lock()
        self.inflight = 0

    def process_request(self, request, client_address):
        with self.lock:
            self.inflight += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        super().shutdown_request(request)
        with self.lock:
            self.inflight -= 1

    def handle_error(self, request, client_address):
        pass  # a connection the stop closed mid-answer


def start_upstream():
    srv = Server(("127.0.0.1", 0), Counter)
    srv.hits = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def drain(upstream, bound=15.0):
    """Serve every connection already queued at the upstream: a request of our
    own goes behind them in its accept queue, and then every handler thread
    finishes. A slow upstream thus never looks like a flood that survived."""
    port = upstream.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=bound) as s:
        s.sendall(b"GET /barrier HTTP/1.0\r\n\r\n")
        while s.recv(65536):
            pass
    deadline = time.monotonic() + bound
    while upstream.inflight > 0:
        assert time.monotonic() < deadline, \
            f"{upstream.inflight} connections to the upstream stay open after the stop"
        time.sleep(0.05)


def settle(upstream):
    """Once what was relayed before the stop has been served, the upstream's
    count stays put: nothing new reaches it."""
    drain(upstream)
    last = len(upstream.hits)
    time.sleep(1.0)
    drain(upstream)
    assert len(upstream.hits) == last, f"{len(upstream.hits) - last} requests arrived after the stop"


def parse_ts(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
