# SPDX-License-Identifier: Apache-2.0
"""Host edges where the host reads, runs or serves what the agent can reach
(second review): `airlock run --control PATH` with PATH somewhere the sandbox
sees (its own workspace). The control socket changes the sandbox's
capabilities; the agent must not be able to talk to it."""

import json
import subprocess
import time

# Inside: wait for the control socket to appear in the workspace, then ask
# it for a network grant, and print what it answered.
AGENT = r"""
import json, os, socket, sys, time
p = "/workspace/ctl.sock"
for _ in range(200):
    if os.path.exists(p):
        break
    time.sleep(0.05)
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(p)
    s.sendall(json.dumps({"op": "caps"}).encode() + b"\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    print("ANSWER", data.decode(errors="replace").strip())
except OSError as e:
    print("REFUSED", e)
"""


def test_control_socket_not_reachable_from_the_sandbox(airlock):
    ws = airlock.make_dir()
    (ws / "agent.py").write_text(AGENT)
    airlock.chown(ws)
    p = airlock.run(["run", "-q", "-w", ws, "--control", ws / "ctl.sock", "--",
                     "/usr/bin/python3", "/workspace/agent.py"], timeout=60,
                    check_setup=False)
    out = p.stdout + p.stderr
    if p.returncode == 125:
        # Refused up front is a fine answer too, with a message that says why.
        assert "--control" in p.stderr, out
        return
    # The socket refuses the sandbox's connection before reading a request
    # (a listing answered "ok" means the agent could change its own reach).
    assert ("REFUSED" in out or "ANSWER" in out) and '"ok"' not in out, out
