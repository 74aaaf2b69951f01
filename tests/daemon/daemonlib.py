# SPDX-License-Identifier: Apache-2.0
"""Helpers for the daemon tests: a real airlockd with its own state
directory, run directory, socket and audit log, and grants made by
`airlock grant`."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
AIRLOCK = BUILD / "src/cli/airlock"
AIRLOCKD = BUILD / "src/daemon/airlockd"

sys.path.insert(0, str(REPO / "clients/python"))
from airlock_client import AirlockError, Client  # noqa: E402


def wait_for(pred, timeout=30.0, step=0.05, what="condition"):
    """Poll pred() until it is true; the bound is a safety net, not a
    measurement."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


class Daemon:
    def __init__(self, base, args=()):
        self.base = pathlib.Path(base)
        self.state = self.base / "state"
        self.run_dir = self.base / "run"
        self.socket = self.base / "airlockd.sock"
        self.audit = self.base / "audit.jsonl"
        self.log = self.base / "airlockd.log"
        self.args = list(args)
        self.proc = None

    def start(self, args=None):
        if args is not None:
            self.args = list(args)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [str(AIRLOCKD), "--socket", str(self.socket), "--state-dir", str(self.state),
             "--run-dir", str(self.run_dir), "--audit", str(self.audit),
             "--airlock", str(AIRLOCK)] + self.args,
            stdout=logf, stderr=subprocess.STDOUT)
        logf.close()

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("airlockd exited: " + self.log.read_text()[-2000:])
            if not self.socket.exists():
                return False
            status, _, _ = Client(socket_path=str(self.socket), token="-").request("GET", "/healthz")
            return status == 401
        wait_for(lambda: self._try(up), what="airlockd to listen")
        return self

    @staticmethod
    def _try(f):
        try:
            return f()
        except (ConnectionError, FileNotFoundError, OSError):
            return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill9(self):
        self.stop(signal.SIGKILL)

    def grant(self, name, *flags):
        p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", name,
                            "--state-dir", str(self.state)] + [str(f) for f in flags],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    def revoke(self, name):
        p = subprocess.run([str(AIRLOCK), "grant", "revoke", name, "--state-dir", str(self.state)],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr

    def client(self, token, **kw):
        return Client(socket_path=str(self.socket), token=token, **kw)

    def supervisors(self):
        """{sandbox id: supervisor pid} from the run directory."""
        out = {}
        if not self.run_dir.exists():
            return out
        for d in self.run_dir.iterdir():
            try:
                out[d.name] = json.loads((d / "supervisor.json").read_text())["pid"]
            except (OSError, ValueError, KeyError):
                pass
        return out

    def cleanup(self, token=None):
        """Destroy what is left, stop the daemon, and kill supervisors it
        started that are still there."""
        if token and self.proc and self.proc.poll() is None:
            c = self.client(token, timeout=30)
            try:
                for sb in c.list(state="running"):
                    try:
                        c.delete(sb["id"])
                    except (AirlockError, OSError):
                        pass
            except (AirlockError, OSError):
                pass
        pids = self.supervisors()
        self.stop()
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
