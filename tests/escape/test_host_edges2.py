# SPDX-License-Identifier: Apache-2.0
"""Host edges where the host reads, runs or serves what the agent can reach
(second review): `airlock run --control PATH` with PATH somewhere the sandbox
sees (its own workspace): the control socket changes the sandbox's
capabilities, the agent must not be able to talk to it; a hardware driver
(run on the host with the caller's rights) that the agent could rewrite."""

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


REPO = __import__("pathlib").Path(__file__).resolve().parent.parent.parent
SIM = REPO / "examples/robot-sim/robot_sim.py"


def test_hardware_driver_from_the_workspace_is_refused(airlock):
    """The hardware driver runs on the host with the caller's rights: a
    driver (or the script it runs) that the agent
    can rewrite in its workspace would be the agent's code on the host at
    the next start."""
    ws = airlock.make_dir()
    (ws / "driver.py").write_text(SIM.read_text())
    d = airlock.make_dir("robot")
    for name, drv in (("script", {"command": ["python3", str(ws / "driver.py"), "--stdio"]}),
                      ("exe", {"command": [str(ws / "driver.py"), "--stdio"]})):
        pol = d / f"policy-{name}.json"
        pol.write_text(json.dumps({"hardware": {"driver": drv,
                                                "actuators": {"allow": ["motor_left"]},
                                                "limits": {"maxSpeed": 0.5, "rate": 100}}}))
        airlock.chown(d)
        airlock.chown(ws)
        (ws / "driver.py").chmod(0o755)
        p = airlock.run(["run", "-q", "-w", ws, "--policy", pol, "--", "/bin/true"], timeout=30,
                        check_setup=False)
        assert p.returncode == 125, (name, p.returncode, p.stderr)
        assert "hardware" in p.stderr and "workspace" in p.stderr, (name, p.stderr)
