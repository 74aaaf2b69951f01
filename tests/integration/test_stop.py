# SPDX-License-Identifier: Apache-2.0
"""The kill switch (`airlock stop`, docs/cli.md): sandboxes running a busy
loop and a network flood through the gate are frozen, their gates closed,
killed and destroyed within a bound, with no daemon running; the audit shows
sandbox.stopped and no connection through the gate that began after the
freeze; a supervisor that does not answer is stopped from outside."""

import json
import os
import signal
import subprocess
import time

import pytest

from stoplib import parse_ts, settle, start_upstream

# Root stops 50 (the figure); an ordinary user fewer, to keep the
# shared machine usable.
N_ROOT = int(os.environ.get("AIRLOCK_STOP_N", "50"))
N_USER = 6
STOP_BOUND_S = 30


@pytest.fixture
def upstream():
    srv = start_upstream()
    yield srv
    srv.shutdown()
    srv.server_close()


class Fleet:
    """N supervisors (`airlock supervise`) in one run directory, no daemon."""

    def __init__(self, airlock, n, policy):
        self.airlock = airlock
        self.run_dir = airlock.make_dir("run")
        self.audit_dir = airlock.make_dir("audit")
        pol = airlock.make_dir("policy") / "policy.json"
        self.ws = airlock.make_dir()
        airlock.chown(self.ws)
        pol.write_text(json.dumps({"workspace": {"path": str(self.ws), "mode": "ro"}, **policy}))
        airlock.chown(pol.parent)
        self.sups = []
        for _ in range(n):
            sid = os.urandom(8).hex()
            r, w = os.pipe()
            argv = airlock.cmd(["supervise", "--id", sid, "--policy", pol, "--run-dir", self.run_dir,
                                "--audit", self.audit_dir / f"{sid}.jsonl", "--ready-fd", str(w)])
            p = subprocess.Popen(argv, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            os.close(w)
            self.sups.append((sid, p, r))
        for sid, p, r in self.sups:
            with os.fdopen(r) as f:
                ready = f.readline().strip()
            assert ready == "ok", (ready, p.stderr.read().decode() if p.poll() is not None else "")

    def ids(self):
        return [s[0] for s in self.sups]

    def request(self, sid, obj, timeout=20):
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        s.connect(str(self.run_dir / sid / "control.sock"))
        s.sendall((json.dumps(obj) + "\n").encode())
        out = s.makefile().readline()
        s.close()
        return json.loads(out)

    def audit(self, sid):
        path = self.audit_dir / f"{sid}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def stop(self, *args, timeout=STOP_BOUND_S + 30):
        argv = self.airlock.cmd(["stop", "--run-dir", self.run_dir, "--json", *args])
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    def close(self):
        for sid, p, _ in self.sups:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


def cgroup_leaves(sid):
    name = f"airlock-{sid}"
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        if name in dirs:
            found.append(os.path.join(root, name))
        dirs[:] = [d for d in dirs if not d.startswith("airlock-")]
        if root.count("/") > 8:
            dirs[:] = []
    return found


def test_stop_all_freezes_then_kills_busy_and_flooding_sandboxes(airlock, upstream):
    port = upstream.server_address[1]
    n = N_USER if airlock.rootless else N_ROOT
    fleet = Fleet(airlock, n, {
        "network": {"allow": [f"upstream.test:{port}"], "hosts": {"upstream.test": "127.0.0.1"},
                    "allowPrivate": ["127.0.0.1"]},
        "limits": {"cpus": 0.05},
    })
    try:
        flood = (f"while :; do curl -s -o /dev/null http://upstream.test:{port}/; done")
        for sid in fleet.ids():
            for script in ("while :; do :; done", flood):
                ans = fleet.request(sid, {"op": "exec", "argv": ["sh", "-c", script], "background": True})
                assert ans.get("type") == "started" or ans.get("ok") is not False, ans
        # Every sandbox floods the gate before the stop.
        deadline = time.time() + 60
        while time.time() < deadline:
            seen = [sid for sid in fleet.ids()
                    if any(e["kind"] == "net.decision" for e in fleet.audit(sid))]
            if len(seen) == n:
                break
            time.sleep(0.2)
        assert len(seen) == n, f"{len(seen)} of {n} sandboxes reached the gate"

        t0 = time.monotonic()
        p = fleet.stop("--all")
        took = time.monotonic() - t0
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)["stopped"]
        assert sorted(o["id"] for o in out) == sorted(fleet.ids())
        assert all(o["how"] == "supervisor" and o["stopped"] for o in out), out
        if not airlock.rootless:
            assert all(o["frozen"] for o in out), out
        assert took < STOP_BOUND_S, f"stopping {n} sandboxes took {took:.1f}s"

        # Gone within the bound: supervisors exited, cgroups removed.
        for sid, proc, _ in fleet.sups:
            proc.wait(timeout=STOP_BOUND_S)
            assert not (fleet.run_dir / sid).exists()
            assert cgroup_leaves(sid) == []
        # Nothing more reaches the upstream (once requests relayed before
        # the freeze have been served by its threads).
        settle(upstream)

        for sid in fleet.ids():
            log = fleet.audit(sid)
            kinds = [e["kind"] for e in log]
            stopped = [e for e in log if e["kind"] == "sandbox.stopped"]
            assert len(stopped) == 1, kinds
            st = stopped[0]
            assert st["by"] == f"cli:uid={os.getuid() if not airlock.user else airlock.user.pw_uid}"
            assert st["frozen"] is (not airlock.rootless) or airlock.rootless
            frozen_at = parse_ts(st["frozenAt"])
            i = kinds.index("sandbox.stopped")
            # No gate record after sandbox.stopped: the gates were closed first.
            assert "net.decision" not in kinds[i + 1:], kinds[i:]
            assert kinds[-1] == "sandbox.destroyed"
            # A connection recorded after the freeze (ended by closing the
            # gate) began before it: nothing crossed the gate afterwards.
            for e in log:
                if e["kind"] == "net.decision" and parse_ts(e["ts"]) > frozen_at:
                    began = parse_ts(e["ts"]) - e.get("durationMs", 0) / 1000.0
                    assert began <= frozen_at + 0.002, (e, st)
    finally:
        fleet.close()


def test_stop_by_id_and_unknown_id(airlock):
    fleet = Fleet(airlock, 2, {})
    try:
        a, b = fleet.ids()
        p = fleet.stop(a, "0123456789abcdef")
        assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
        out = {o["id"]: o for o in json.loads(p.stdout)["stopped"]}
        assert out[a]["how"] == "supervisor" and out[a]["stopped"]
        assert out["0123456789abcdef"]["how"] == "not_found"
        fleet.sups[0][1].wait(timeout=STOP_BOUND_S)
        # The other one still runs and answers.
        assert fleet.request(b, {"op": "status"})["state"] == "running"
    finally:
        fleet.close()


def test_stop_usage_errors(airlock):
    run = airlock.make_dir("run")
    for args, what in ((["--all", "0123456789abcdef"], "not both"), ([], "not both"),
                       (["NOTANID"], "not a sandbox id"), (["--timeout", "0", "--all"], "--timeout")):
        p = subprocess.run(airlock.cmd(["stop", "--run-dir", run, *args]), capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 2 and what in p.stderr, (args, p.stderr)


def test_unanswering_supervisor_is_stopped_from_outside(airlock):
    if airlock.rootless:
        pytest.skip("SIGSTOP of the supervisor from the test needs root over the user's processes")
    fleet = Fleet(airlock, 1, {})
    try:
        sid, proc, _ = fleet.sups[0]
        ans = fleet.request(sid, {"op": "exec", "argv": ["sh", "-c", "while :; do :; done"],
                                  "background": True})
        assert ans.get("ok") is not False, ans
        os.kill(proc.pid, signal.SIGSTOP)  # a hung supervisor
        t0 = time.monotonic()
        p = fleet.stop(sid, "--timeout", "1")
        assert time.monotonic() - t0 < 15
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)["stopped"][0]
        assert out["how"] == "cgroup" and out["stopped"], out
        assert "did not answer" in out["message"]
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        assert cgroup_leaves(sid) == []
    finally:
        fleet.close()
