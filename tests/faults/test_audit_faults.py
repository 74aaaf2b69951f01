# SPDX-License-Identifier: Apache-2.0
"""The audit log under faults: a full disk, a torn last line, rotation.
An action is reported as done only when its audit line is written; when it
cannot be, the action is refused, never done silently."""

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "daemon"))
from daemonlib import AirlockError, Daemon, wait_for  # noqa: E402


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def full_tmpfs(airlock):
    """A 64 KiB tmpfs, filled to the last byte, writable by the identity
    airlock runs as."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = airlock.make_dir("fulldisk")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs: " + r.stderr.strip())
    try:
        airlock.chown(d)

        def fill():
            fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                for size in (4096, 512, 1):
                    try:
                        while True:
                            os.write(fd, b"x" * size)
                    except OSError:
                        pass
            finally:
                os.close(fd)
        yield d, fill
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def test_run_refused_when_the_audit_disk_is_full(airlock, full_tmpfs):
    d, fill = full_tmpfs
    log = d / "audit.jsonl"
    ws = airlock.make_dir()
    # A log that already has lines, then the disk fills. Runs go on while
    # the space already allocated to the log lasts; then one is refused
    # before its command starts, and every run that was answered has its
    # whole record.
    p = airlock.sandbox("true", "--audit", log, workspace=ws)
    assert p.returncode == 0, p.stderr
    fill()
    answered = []
    for i in range(40):
        marker = ws / f"marker-{i}"
        p = airlock.run(["run", "-w", ws, "--audit", log, "--", "/bin/sh", "-c",
                         f"touch /workspace/marker-{i}"], check_setup=False)
        if p.returncode == 125:
            assert "audit_failed" in p.stderr and "No space left on device" in p.stderr, p.stderr
            assert not marker.exists(), "the command ran although its end could not be recorded"
            break
        assert p.returncode == 0, (p.returncode, p.stderr)
        assert marker.exists()
        answered.append(i)
    else:
        pytest.fail("40 runs on a full disk were all answered")
    ended = [e for e in _lines(log) if e["kind"] == "process.ended" and e["exitCode"] == 0]
    assert len(ended) == 1 + len(answered)
    (d / "filler").unlink()
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout


def test_run_refused_when_the_audit_log_cannot_be_created(airlock, full_tmpfs):
    d, fill = full_tmpfs
    fill()
    ws = airlock.make_dir()
    log = d / "new" / "audit.jsonl"
    p = airlock.run(["run", "-w", ws, "--audit", log, "--", "/bin/sh", "-c",
                     "touch /workspace/marker"], check_setup=False)
    assert p.returncode == 125, (p.returncode, p.stderr)
    assert "audit" in p.stderr, p.stderr
    assert not (ws / "marker").exists()


def _tear(log, cut):
    """A crash mid-write: the last line loses its last `cut` bytes."""
    size = log.stat().st_size
    os.truncate(log, size - cut)


def test_torn_last_line_is_named_then_repaired(airlock):
    d = airlock.make_dir("audit")
    log = d / "audit.jsonl"
    ws = airlock.make_dir()
    for _ in range(2):
        assert airlock.sandbox("true", "--audit", log, workspace=ws).returncode == 0
    assert len(_lines(log)) == 8
    _tear(log, 40)

    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 1
    assert "line 8 (seq 8)" in v.stdout and "torn record" in v.stdout, v.stdout
    assert "not a JSON object" not in v.stdout

    # The next run repairs it, records what was cut, and runs.
    p = airlock.sandbox("touch /workspace/after", "--audit", log, workspace=ws)
    assert p.returncode == 0, p.stderr
    assert (ws / "after").exists()
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout
    lines = _lines(log)
    torn = [e for e in lines if e["kind"] == "audit.torn"]
    assert len(torn) == 1
    assert torn[0]["tornSeq"] == 8 and torn[0]["sandbox"] == "-" and torn[0]["bytes"] > 0
    assert torn[0]["seq"] == 8 == lines[7]["seq"]  # the cut record's seq is taken by audit.torn
    assert [e["kind"] for e in lines[8:]] == ["sandbox.created", "process.started",
                                             "process.ended", "sandbox.destroyed"]


def test_corrupt_line_is_named_as_corrupt(airlock):
    d = airlock.make_dir("audit")
    log = d / "audit.jsonl"
    assert airlock.sandbox("true", "--audit", log).returncode == 0
    raw = log.read_bytes().split(b"\n")
    raw[1] = raw[1].replace(b'"kind"', b'"kind', 1)
    log.write_bytes(b"\n".join(raw))
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 1
    assert "line 2 (seq 2)" in v.stdout and "corrupt record" in v.stdout, v.stdout


@pytest.fixture
def daemon_on(tmp_path_factory):
    """daemon_on(audit_path) starts a real airlockd writing its audit log
    there, as root; all are cleaned up."""
    if os.geteuid() != 0:
        pytest.skip("the daemon runs as root in these tests")
    made = []

    def make(audit_path):
        d = Daemon(tmp_path_factory.mktemp("airlockd"))
        d.audit = pathlib.Path(audit_path)
        d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec", "--allow-host-workspace")
        d.start()
        made.append(d)
        return d
    yield make
    for d in made:
        d.cleanup(d.admin)


def _status(f):
    try:
        f()
    except AirlockError as e:
        return e.status, e.body
    return 200, None


def test_daemon_refuses_create_and_exec_when_the_audit_disk_is_full(airlock, full_tmpfs,
                                                                  daemon_on):
    if airlock.mode != "root":
        pytest.skip("the daemon runs as root")
    d_fs, fill = full_tmpfs
    d = daemon_on(d_fs / "audit.jsonl")
    api = d.client(d.admin, timeout=60)
    ws = airlock.make_dir()
    sb = api.create(sandbox_class="small", workspace=str(ws))
    r = api.collect(api.exec(sb["id"], ["true"]))
    assert r.exit_code == 0
    assert api.health()["ok"] is True

    fill()
    # Execs go on while the room reserved for the log lasts, then one is
    # refused before it starts.
    for i in range(60):
        status, body = _status(
            lambda: api.collect(api.exec(sb["id"], ["touch", f"/workspace/marker-{i}"])))
        if status != 200:
            break
        assert (ws / f"marker-{i}").exists()
    assert status == 503, (status, body)
    assert body["error"] == "audit_failed" and "No space left" in body["message"], body
    assert not (ws / f"marker-{i}").exists(), "the exec ran although it could not be recorded"

    status, body = _status(lambda: api.create(sandbox_class="small"))
    assert status == 503, (status, body)
    assert body["error"] == "audit_failed", body

    status, _, data = api.request("GET", "/healthz")
    health = json.loads(data)
    assert status == 503 and health["ok"] is False, health
    assert "audit" in health["reason"] and "No space left" in health["reason"], health

    # Room again: the daemon recovers by itself.
    (d_fs / "filler").unlink()
    assert api.health()["ok"] is True
    r = api.collect(api.exec(sb["id"], ["touch", "/workspace/marker"]))
    assert r.exit_code == 0 and (ws / "marker").exists()
    assert api.create(sandbox_class="small")["id"]
    api.delete(sb["id"])
    v = airlock.run(["audit", "verify", d.audit])
    assert v.returncode == 0, v.stdout


def test_daemon_exec_after_a_torn_line_is_recorded(airlock, daemon_on):
    if airlock.mode != "root":
        pytest.skip("the daemon runs as root")
    log = airlock.make_dir("audit") / "audit.jsonl"
    d = daemon_on(log)
    api = d.client(d.admin, timeout=60)
    sb = api.create(sandbox_class="small")
    assert api.collect(api.exec(sb["id"], ["true"])).exit_code == 0
    wait_for(lambda: log.read_bytes().endswith(b"\n"), what="the log to end in a whole line")
    n = len(_lines(log))
    _tear(log, 25)  # a writer died mid-line

    r = api.collect(api.exec(sb["id"], ["echo", "after"]))
    assert r.exit_code == 0 and r.stdout == b"after\n"
    lines = _lines(log)
    torn = [e for e in lines if e["kind"] == "audit.torn"]
    assert len(torn) == 1 and torn[0]["tornSeq"] == n
    kinds = [e["kind"] for e in lines[n:]]
    assert "api.exec" in kinds and "process.started" in kinds, kinds
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout


UNIQUE_REFUSALS = r'''
import socket, sys
for i in range(int(sys.argv[1])):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(b"GET http://host-%d.denied.example/ HTTP/1.1\r\nHost: x\r\n\r\n" % i)
        s.recv(64)
        s.close()
    except OSError:
        pass
'''


def _refusals_run(airlock, log, n, *flags):
    d = airlock.make_dir("policy")
    pfile = d / "policy.json"
    # Every refusal its own line: no budget, and a new host each time.
    pfile.write_text(json.dumps({"network": {"mode": "gated", "budget": {"refusals": 0}}}))
    airlock.chown(d)
    p = airlock.run(["run", "-q", "--policy", pfile, "--audit", log, *flags, "--",
                     "python3", "-c", UNIQUE_REFUSALS, str(n)], timeout=120)
    assert p.returncode == 0, p.stderr


def test_rotation_bounds_the_log_and_keeps_the_chain(airlock):
    d = airlock.make_dir("audit")
    log = d / "audit.jsonl"
    _refusals_run(airlock, log, 600, "--audit-rotate", "8K:3")
    files = sorted(d.glob("audit.jsonl*"))
    assert [f.name for f in files] == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2",
                                       "audit.jsonl.3"], files
    total = sum(f.stat().st_size for f in files)
    assert total <= 4 * 8192, total
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout
    assert "in 4 files" in v.stdout and "rotated away" in v.stdout, v.stdout
    # Each file's first line chains onto the last line of the one before.
    for older, newer in (("audit.jsonl.1", "audit.jsonl"), ("audit.jsonl.2", "audit.jsonl.1")):
        last = (d / older).read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        first = json.loads((d / newer).read_bytes().split(b"\n", 1)[0])
        assert first["prev"] == hashlib.sha256(last).hexdigest()


def test_audit_rotate_flag_is_checked(airlock):
    d = airlock.make_dir("audit")
    log = d / "audit.jsonl"
    p = airlock.run(["help", "run"])
    assert "--audit-rotate" in p.stdout and "64M:8" in p.stdout
    p = airlock.run(["run", "-q", "--audit", log, "--audit-rotate", "1K:", "--", "true"],
                    check_setup=False)
    assert p.returncode == 125 and "--audit-rotate" in p.stderr, p.stderr


def test_verify_reports_a_missing_rotated_file(airlock):
    d = airlock.make_dir("audit")
    log = d / "audit.jsonl"
    _refusals_run(airlock, log, 300, "--audit-rotate", "8K:all")
    assert (d / "audit.jsonl.3").exists()
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0 and "rotated away" not in v.stdout, v.stdout
    (d / "audit.jsonl.2").unlink()
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 1
    assert "audit.jsonl.2: missing" in v.stdout, v.stdout


def test_show_walks_the_rotated_files(airlock):
    d = airlock.make_dir("audit")
    log = d / "audit.jsonl"
    _refusals_run(airlock, log, 100, "--audit-rotate", "8K:all")
    assert (d / "audit.jsonl.1").exists()
    total = sum(len(f.read_bytes().splitlines()) for f in d.glob("audit.jsonl*"))
    p = airlock.run(["audit", "show", "--json", log])
    assert p.returncode == 0, p.stderr
    seqs = [json.loads(line)["seq"] for line in p.stdout.splitlines()]
    assert seqs == list(range(1, total + 1))
