# SPDX-License-Identifier: Apache-2.0
"""Every stream a grant holds open is its reading, and a revocation ends
it within a second or two: a background process's event stream (GET
.../processes/{pid}/events), a files watch, and an exec stream whose
command prints nothing (its check does not wait for output)."""

import json
import threading
import time

ENDS_WITHIN = 2.5


class Reader:
    """Read a stream's events on a thread, each with the time it came."""

    def __init__(self, gen):
        self.events = []
        self.done = threading.Event()
        self.gen = gen
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            for ev in self.gen:
                self.events.append((time.monotonic(), ev))
        except Exception as e:  # noqa: BLE001 - shown by the asserts
            self.events.append((time.monotonic(), {"type": "exception", "error": repr(e)}))
        finally:
            self.done.set()

    def wait_for(self, pred, timeout=15):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(pred(ev) for _, ev in list(self.events)):
                return
            time.sleep(0.05)
        raise AssertionError(f"not seen in {[e for _, e in self.events]}")

    def ended_after(self, t_rev, timeout=8):
        assert self.done.wait(timeout), \
            f"the stream goes on after the revocation: {[e for _, e in self.events][-5:]}"
        return time.monotonic() - t_rev


def _wait_stopped(d, sid, word):
    admin = d.client(d.admin, timeout=30)
    deadline = time.monotonic() + 10
    procs = []
    while time.monotonic() < deadline:
        procs = [p for p in admin.processes(sid) if word in json.dumps(p.get("argv"))]
        if procs and all(p["state"] != "running" for p in procs):
            return
        time.sleep(0.2)
    raise AssertionError(f"the revoked grant's command goes on: {procs}")


def test_revoked_grant_process_events_end(make_daemon):
    d = make_daemon()
    tok = d.grant("rvpev", "--allow-sandbox", "--allow-exec")
    c = d.client(tok, timeout=30)
    sid = c.create(sandbox_class="small")["id"]
    pid = c.exec_background(sid, ["sh", "-c", "while :; do echo pev-tick; sleep 0.1; done"])
    r = Reader(c.events(sid, pid))
    r.wait_for(lambda ev: ev.get("type") == "stdout")
    d.revoke("rvpev")
    t_rev = time.monotonic()
    took = r.ended_after(t_rev)
    assert took < ENDS_WITHIN, took
    last = r.events[-1][1]
    assert last.get("type") == "error" and last.get("error") == "grant_revoked", last


def test_revoked_grant_files_watch_ends(make_daemon):
    d = make_daemon()
    tok = d.grant("rvwatch", "--allow-sandbox", "--allow-exec")
    c = d.client(tok, timeout=30)
    sid = c.create(sandbox_class="small")["id"]
    r = Reader(c.watch(sid, ".", timeout=60))
    r.wait_for(lambda ev: ev.get("type") == "ready")
    d.revoke("rvwatch")
    t_rev = time.monotonic()
    took = r.ended_after(t_rev)
    assert took < ENDS_WITHIN, took
    last = r.events[-1][1]
    assert last.get("type") == "end" and "revoked" in last.get("reason", ""), last


def test_revoked_grant_silent_exec_is_stopped(make_daemon):
    d = make_daemon()
    tok = d.grant("rvquiet", "--allow-sandbox", "--allow-exec")
    c = d.client(tok, timeout=30)
    sid = c.create(sandbox_class="small")["id"]
    r = Reader(c.exec(sid, ["sh", "-c", "exec sleep 47"]))
    r.wait_for(lambda ev: ev.get("type") == "started")
    d.revoke("rvquiet")
    t_rev = time.monotonic()
    took = r.ended_after(t_rev)
    assert took < ENDS_WITHIN, took
    evs = [e for _, e in r.events]
    assert any(e.get("type") == "error" and e.get("error") == "grant_revoked" for e in evs), evs
    _wait_stopped(d, sid, "sleep 47")
