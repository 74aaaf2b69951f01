#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A simulated differential-drive robot speaking Airlock's hardware driver
protocol (docs/hardware.md, "Writing a driver"): JSON lines both ways.

    to the robot:   {"id": N, "op": "set"|"read"|"stop"|"list", "name": s, "value": x}
    from the robot: {"id": N, "ok": true, "value": ...} for read and list
                    {"id": N, "ok": false, "error": s}

Devices: motor_left, motor_right (wheel speeds, m/s), arm_joint_5 (a joint's
speed, rad/s), camera, imu, microphone. It integrates its position from the
wheel speeds, and logs every message it receives, with the time it arrived
(time.time()), to --log as JSON lines: that log is what the device got, and
Airlock's tests check the gate against it.

Fail safe: when the connection from the supervisor drops (the sandbox ended,
or its supervisor died), every motor stops. A real driver must do the same.

    robot_sim.py --stdio --log FILE         the supervisor started it (fd 0)
    robot_sim.py --listen SOCKET --log FILE a socket the supervisor connects to
"""

import argparse
import json
import math
import os
import socket
import sys
import time

ACTUATORS = ("motor_left", "motor_right", "arm_joint_5")
SENSORS = ("camera", "imu", "microphone")
WHEEL_BASE = 0.3


class Robot:
    def __init__(self, log_path):
        self.log = open(log_path, "a", buffering=1) if log_path else None
        self.speed = {a: 0.0 for a in ACTUATORS}
        self.x = self.y = self.theta = 0.0
        self.last = time.monotonic()
        self.frame = 0

    def record(self, **kw):
        kw["t"] = time.time()
        if self.log:
            self.log.write(json.dumps(kw) + "\n")

    def integrate(self):
        now = time.monotonic()
        dt, self.last = now - self.last, now
        left, right = self.speed["motor_left"], self.speed["motor_right"]
        v, w = (left + right) / 2, (right - left) / WHEEL_BASE
        self.x += v * math.cos(self.theta) * dt
        self.y += v * math.sin(self.theta) * dt
        self.theta += w * dt

    def stop(self, why):
        self.integrate()
        for a in ACTUATORS:
            self.speed[a] = 0.0
        self.record(op="stop", why=why, x=self.x, y=self.y)

    def handle(self, msg):
        """The answer to one message, or None."""
        op, mid = msg.get("op"), msg.get("id")
        if op == "set":
            self.integrate()
            name, value = msg.get("name"), msg.get("value")
            self.record(op="set", id=mid, name=name, value=value)
            if name in ACTUATORS and isinstance(value, (int, float)) and math.isfinite(value):
                self.speed[name] = float(value)
            return None
        if op == "stop":
            self.stop("stop")
            return None
        if op == "list":
            self.record(op="list", id=mid)
            devs = [{"name": a, "kind": "actuator"} for a in ACTUATORS]
            devs += [{"name": s, "kind": "sensor"} for s in SENSORS]
            return {"id": mid, "ok": True, "value": devs}
        if op == "read":
            name = msg.get("name")
            self.record(op="read", id=mid, name=name)
            self.integrate()
            if name == "imu":
                left, right = self.speed["motor_left"], self.speed["motor_right"]
                val = {"x": self.x, "y": self.y, "theta": self.theta,
                       "v": (left + right) / 2, "w": (right - left) / WHEEL_BASE}
            elif name == "camera":
                self.frame += 1
                val = {"frame": self.frame, "width": 64, "height": 48}
            elif name == "microphone":
                val = {"level": 0.12}
            elif name in ACTUATORS:
                val = {"speed": self.speed[name]}
            else:
                return {"id": mid, "ok": False, "error": "no such device"}
            return {"id": mid, "ok": True, "value": val}
        self.record(op="unknown", msg=msg)
        return {"id": mid if isinstance(mid, int) and mid > 0 else 1, "ok": False,
                "error": "unknown op"}


def serve(robot, conn):
    robot.record(op="connect")
    f = conn.makefile("rb")
    try:
        for raw in f:
            try:
                msg = json.loads(raw)
            except ValueError:
                robot.record(op="garbage")
                continue
            if not isinstance(msg, dict):
                continue
            ans = robot.handle(msg)
            if ans is not None:
                try:
                    conn.sendall((json.dumps(ans) + "\n").encode())
                except OSError:
                    break
    except OSError:
        pass
    # Fail safe: no supervisor, no motion.
    robot.stop("disconnect")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stdio", action="store_true", help="the connection is fd 0")
    ap.add_argument("--listen", metavar="SOCKET", help="serve a unix socket")
    ap.add_argument("--log", metavar="FILE", help="log what arrives, JSON lines")
    a = ap.parse_args()
    robot = Robot(a.log)
    if a.listen:
        try:
            os.unlink(a.listen)
        except FileNotFoundError:
            pass
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(a.listen)
        srv.listen(4)
        robot.record(op="listening", path=a.listen)
        while True:
            conn, _ = srv.accept()
            serve(robot, conn)
            conn.close()
    else:
        serve(robot, socket.socket(fileno=sys.stdin.fileno()))


if __name__ == "__main__":
    main()
