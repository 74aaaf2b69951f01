# SPDX-License-Identifier: Apache-2.0
"""An emergency stop asked of a supervisor that does not answer (stopped,
hung) is answered 503 after its bound, and the daemon goes on serving
every other request meanwhile: a grant repeating it cannot hold the
daemon for everyone."""

import json
import os
import pathlib
import signal
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
SIM = REPO / "examples/robot-sim/robot_sim.py"


def test_estop_of_a_hung_supervisor_does_not_stall_the_daemon(make_daemon, tmp_path):
    hw = tmp_path / "hardware.json"
    hw.write_text(json.dumps({"hardware": {
        "driver": {"command": ["python3", str(SIM), "--stdio", "--log", str(tmp_path / "l")]},
        "actuators": {"allow": ["motor_left"]},
        "limits": {"maxSpeed": 0.5, "rate": 100}}}))
    tmp_path.chmod(0o755)
    d = make_daemon("--hardware", str(hw))
    c = d.client(d.admin, timeout=30)
    sb = c.create(sandbox_class="small")["id"]
    sup = d.supervisors()[sb]
    os.kill(sup, signal.SIGSTOP)
    try:
        result = {}

        def estop():
            status, _, data = c.request("POST", f"/v1/sandboxes/{sb}/estop", {})
            result["status"] = status
            result["body"] = data

        threads = [threading.Thread(target=estop, daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        other = d.client(d.admin, timeout=10)
        took = []
        for _ in range(3):
            t1 = time.monotonic()
            other.health()
            took.append(time.monotonic() - t1)
        assert max(took) < 0.7, f"requests waited for a hung supervisor's estop: {took}"
        for t in threads:
            t.join(10)
            assert not t.is_alive(), "the estop never answered"
        assert result["status"] == 503, result
        assert b"supervisor_unreachable" in result["body"], result
    finally:
        os.kill(sup, signal.SIGCONT)
    c.delete(sb)
