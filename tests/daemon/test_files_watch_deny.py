# SPDX-License-Identifier: Apache-2.0
"""A files-API watch of a directory that directly holds a denied file (the
daemon's secrets file, a filesystem.denyRead entry) reports nothing about
that file: not its writes, its renames or its removal. Inside, the same
file is masked, so its timing is no business of the watch either."""

import os
import pathlib
import secrets
import sys
import tempfile
import threading
import time

import pytest

from daemonlib import AirlockError


@pytest.fixture
def setup(make_daemon, daemon_base):
    ws = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=daemon_base))
    os.chmod(ws, 0o755)
    sec = ws / "secrets.env"
    sec.write_text(f"API_KEY=sk-{secrets.token_hex(8)}\n")
    os.chmod(sec, 0o600)
    (ws / "deny.key").write_text("private key\n")
    d = make_daemon("--secrets", str(sec))
    api = d.client(d.admin)
    sb = api.create(sandbox_class="small", workspace=str(ws),
                    policy={"filesystem": {"denyRead": [str(ws / "deny.key")]}})
    yield api, sb["id"], ws
    try:
        api.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def _collect(gen, events, ready):
    try:
        for ev in gen:
            if ev["type"] == "ready":
                ready.set()
                continue
            events.append(ev)
    except Exception as e:  # noqa: BLE001 - seen by the assertions
        events.append({"type": "error", "error": repr(e)})


def test_a_watch_says_nothing_of_denied_files(setup):
    api, sid, ws = setup
    events, ready = [], threading.Event()
    t = threading.Thread(target=_collect, args=(api.watch(sid, ".", recursive=False, timeout=15), events, ready),
                         daemon=True)
    t.start()
    assert ready.wait(10), ("the watch did not start", events)
    # The host writes, renames and replaces the denied files meanwhile.
    with open(ws / "secrets.env", "a") as f:
        f.write("OTHER=1\n")
    with open(ws / "deny.key", "a") as f:
        f.write("more\n")
    os.rename(ws / "deny.key", ws / "moved.key")
    with open(ws / "moved.key", "a") as f:
        f.write("still denied\n")
    os.rename(ws / "moved.key", ws / "deny.key")
    (ws / "visible.txt").write_text("x\n")
    end = time.monotonic() + 10
    while time.monotonic() < end and not any(e.get("path") == "visible.txt" for e in events):
        time.sleep(0.05)
    assert any(e.get("path") == "visible.txt" for e in events), events
    named = [e for e in events
             if {e.get("path"), e.get("from")} & {"secrets.env", "deny.key", "moved.key"}]
    assert not named, named
