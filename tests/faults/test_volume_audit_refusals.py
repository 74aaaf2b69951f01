# SPDX-License-Identifier: Apache-2.0
"""A volume made or removed through the API has its audit line, or the
request is refused (503 audit_failed) and nothing is made or removed: a
full disk under the audit log must not leave a volume behind (or take one
away) with no line saying which grant did it."""

import json
import uuid

import pytest

from test_audit_faults import _status, daemon_on, full_tmpfs  # noqa: F401  (fixtures)
from daemonlib import AirlockError  # noqa: E402  (on the path test_audit_faults sets)


def _lines(path, kind):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("kind") == kind:
                    out.append(e)
    except OSError:
        pass
    return out


def test_volumes_are_not_made_or_removed_without_their_line(  # noqa: F811
        airlock, full_tmpfs, daemon_on):
    if airlock.mode != "root":
        pytest.skip("the daemon runs as root")
    d_fs, fill = full_tmpfs
    d = daemon_on(d_fs / "audit.jsonl")
    api = d.client(d.admin, timeout=30)
    prefix = "ta-" + uuid.uuid4().hex[:8]
    keep = f"{prefix}-keep"
    api.create_volume(keep, "16M")
    made = [keep]
    try:
        fill()
        refused = None
        for i in range(60):
            name = f"{prefix}-{i:02d}"
            status, body = _status(lambda: api.create_volume(name, "16M"))
            if status == 201 or status == 200:
                made.append(name)
                continue
            refused = (name, status, body)
            break
        assert refused, "60 volumes made with the audit disk full: none refused"
        name, status, body = refused
        assert status == 503 and body["error"] == "audit_failed", refused
        listed = {v["name"] for v in api.volumes()}
        assert name not in listed, "the volume was made although it could not be recorded"
        logged = {e.get("volume") for e in _lines(d.audit, "api.volume_created")}
        assert not [n for n in made if n not in logged], (made, logged)
        # A removal while the log is full: done with its line, or refused
        # and the volume still there.
        status, body = _status(lambda: api.delete_volume(keep))
        if status == 200:
            assert any(e.get("volume") == keep for e in _lines(d.audit, "api.volume_removed"))
            made.remove(keep)
        else:
            assert status == 503 and body["error"] == "audit_failed", (status, body)
            assert keep in {v["name"] for v in api.volumes()}, "removed with no audit line"
    finally:
        (d_fs / "filler").unlink(missing_ok=True)
        for n in set(made) | {v["name"] for v in api.volumes() if v["name"].startswith(prefix)}:
            try:
                api.delete_volume(n)
            except AirlockError:
                pass
