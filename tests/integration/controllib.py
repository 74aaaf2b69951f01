# SPDX-License-Identifier: Apache-2.0
"""A live sandbox's control socket (`airlock run --control SOCK`), for the
tests that change its capabilities while it runs."""

import json
import socket
import time


def ask(sock, req, timeout=20):
    """One request on the control socket; its JSON answer."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(str(sock))
    s.sendall(json.dumps(req).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return json.loads(data)


def wait_file(path, p, limit=30):
    """The JSON the sandbox wrote at `path`; fails if the run `p` ended
    first or nothing came within `limit` seconds."""
    deadline = time.monotonic() + limit
    while not path.exists():
        if p.poll() is not None:
            out, err = p.communicate(timeout=10)
            raise AssertionError(f"the run ended: rc={p.returncode} {out} {err}")
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.05)
    return json.loads(path.read_text())
