#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make demo's hardware scene: an agent in a sandbox drives the simulated
robot through Airlock's hardware gate. It is clamped, refused the damaged
joint and the microphone, stopped by the deadman, and stopped by the host's
emergency stop (`airlock estop`). Then: what the robot itself received."""

import base64
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
AIRLOCK = os.environ.get("AIRLOCK_BIN", str(REPO / "build/src/cli/airlock"))
SIM = REPO / "examples/robot-sim/robot_sim.py"

AGENT = r"""
set +e
say() { echo "agent: $*"; }
say "my devices:"; airlock-tool hw ls
say "full speed ahead (2.0)"; airlock-tool hw set motor_left 2; airlock-tool hw set motor_right 2
say "move the arm"; airlock-tool hw set arm_joint_5 0.3
say "listen"; airlock-tool hw read microphone
say "driving on without a break..."; sleep 2.6
say "where am I?"; airlock-tool hw read imu
say "again, slower"; airlock-tool hw set motor_left 0.3; airlock-tool hw set motor_right 0.3
say "READY"; sleep 1.5
say "and once more"; airlock-tool hw set motor_left 0.3
exit 0
"""


def main():
    demo = pathlib.Path(tempfile.mkdtemp(prefix="airlock-robot-"))
    os.chmod(demo, 0o755)
    log, audit, run_dir = demo / "robot.jsonl", demo / "audit.jsonl", demo / "run"
    ws = demo / "ws"
    ws.mkdir()
    policy = demo / "robot.json"
    policy.write_text(json.dumps({
        "workspace": {"path": str(ws), "mode": "ro"},
        "hardware": {
            "driver": {"command": ["python3", str(SIM), "--stdio", "--log", str(log)]},
            "actuators": {"allow": ["motor_left", "motor_right"], "deny": ["arm_joint_5"]},
            "sensors": {"deny": ["microphone"]},
            "limits": {"maxSpeed": 0.5, "maxAcceleration": 0.5, "motionTimeout": 2, "rate": 10}}}))
    print("== the hardware gate: an agent drives a simulated robot (examples/robot-sim)")
    print("   policy: motors allowed, arm_joint_5 denied (damaged), microphone denied;")
    print("   maxSpeed 0.5, maxAcceleration 0.5/s, motionTimeout 2 s, 10 calls/s")
    sid = os.urandom(8).hex()
    r, w = os.pipe()
    sup = subprocess.Popen([AIRLOCK, "supervise", "--id", sid, "--policy", str(policy), "--run-dir",
                            str(run_dir), "--audit", str(audit), "--ready-fd", str(w)],
                           pass_fds=(w,), stdin=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        if f.readline().strip() != "ok":
            sys.exit("the sandbox did not start")
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(run_dir / sid / "control.sock"))
        s.sendall((json.dumps({"op": "exec", "argv": ["sh", "-c", AGENT]}) + "\n").encode())
        for line in s.makefile():
            ev = json.loads(line)
            if ev.get("type") in ("stdout", "stderr"):
                for out in base64.b64decode(ev["data"]).decode(errors="replace").splitlines():
                    if out == "agent: READY":
                        time.sleep(0.3)
                        print("host: airlock estop " + sid)
                        subprocess.run([AIRLOCK, "estop", "--run-dir", str(run_dir), sid])
                    else:
                        print("   " + out if not out.startswith("agent:") else out)
            elif ev.get("type") == "exit":
                break
        s.close()
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(run_dir / sid / "control.sock"))
        s.sendall(b'{"op": "destroy"}\n')
        s.makefile().readline()
        sup.wait(timeout=20)
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()

    got = [json.loads(x) for x in log.read_text().splitlines()]
    sets = [e for e in got if e["op"] == "set"]
    print()
    print("== what the robot received (its own log)")
    print(f"   {len(sets)} speed settings, the largest {max(abs(e['value']) for e in sets):.3f} "
          f"(asked: 2.0); nothing for arm_joint_5: "
          f"{not [e for e in got if e.get('name') == 'arm_joint_5']}; microphone never read: "
          f"{not [e for e in got if e.get('name') == 'microphone']}")
    t0 = got[0]["t"]
    for e in got:
        if e["op"] == "stop":
            print(f"   +{e['t'] - t0:6.3f}s stop ({e['why']}) at x={e['x']:.2f} y={e['y']:.2f}")
    print()
    print("== the audit log's hw.command lines")
    for line in audit.read_text().splitlines():
        e = json.loads(line)
        if e["kind"] == "hw.command" and (e["decision"] != "allow" or e["op"] == "set"):
            print(f"   {e['decision']:5} {e['op']:4} {e.get('name', ''):12} rule={e['rule']:15} "
                  f"requested={e.get('requested', '')} actual={e.get('actual', '')} "
                  f"{e.get('reason', '')}")
    subprocess.run(["rm", "-rf", str(demo)])


if __name__ == "__main__":
    main()
