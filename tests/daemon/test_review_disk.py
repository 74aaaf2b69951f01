# SPDX-License-Identifier: Apache-2.0
"""Review through the API at the host's edge: the copy of a sandbox's
changes costs the host at most its limits.disk, hard links once."""

import pathlib
import subprocess
import tempfile

import pytest

from daemonlib import AirlockError


def _du(path):
    out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return int(out.split()[0])


@pytest.fixture
def host_ws(daemon_base):
    ws = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=daemon_base))
    ws.chmod(0o755)
    (ws / "keep.txt").write_text("keep\n")
    return ws


def test_api_capture_bounded_by_disk_limit(shared_daemon, api, host_ws):
    policy = {"limits": {"disk": "16M", "fileSize": "4G"}}
    sb = api.create(policy=policy, workspace=str(host_ws), review=True)
    sid = sb["id"]
    r = api.run(sid, ["sh", "-c", "dd if=/dev/urandom of=big bs=1M count=12 2>/dev/null; "
                                  "i=0; while [ $i -lt 30 ]; do ln big l$i; i=$((i+1)); done"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    diff = api.diff(sid).decode()
    assert "l29" in diff
    kept = pathlib.Path(shared_daemon.state) / "kept" / "sandboxes" / sid
    assert _du(kept) <= 17 << 20

    # A sparse gigabyte passes the limit: the final copy keeps nothing.
    r = api.run(sid, ["sh", "-c", "truncate -s 1G huge"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    api.delete(sid)
    with pytest.raises(AirlockError) as e:
        api.diff(sid)
    assert e.value.status == 409 and "limits.disk" in str(e.value.body)
    with pytest.raises(AirlockError) as e:
        api.accept(sid)
    assert e.value.status == 409 and e.value.body.get("error") == "not_kept"
    assert not (host_ws / "big").exists()
    assert _du(kept) < 1 << 20
    failed = [ev for ev in api.audit(sid) if ev["kind"] == "review.failed"]
    assert failed and failed[0].get("reason") == "disk_limit", failed
