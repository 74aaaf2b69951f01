# SPDX-License-Identifier: Apache-2.0
"""An upstream on the host's 127.0.0.1 that reflects what the gate sent it.

The reflected-secret tests give it their own request handler (what to echo
and how); this module holds what they share: the threaded server that keeps
the requests' headers it saw, the request reader, and the fixture's start
and stop."""

import contextlib
import socketserver
import threading


class Upstream(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
        self.seen = []
        self.port = self.server_address[1]


def read_request(rfile):
    """(method, path, [(name, value), ...]) of the next request, its body
    (by Content-Length) read and dropped; None at end of stream."""
    line = rfile.readline().decode(errors="replace")
    if not line:
        return None
    method, path = line.split(" ")[:2]
    headers = []
    while True:
        h = rfile.readline().decode(errors="replace")
        if h in ("\r\n", "\n", ""):
            break
        k, v = h.split(":", 1)
        headers.append((k.strip(), v.strip()))
    n = int({k.lower(): v for k, v in headers}.get("content-length", "0"))
    if n:
        rfile.read(n)
    return method, path, headers


@contextlib.contextmanager
def serving(handler):
    srv = Upstream(handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
