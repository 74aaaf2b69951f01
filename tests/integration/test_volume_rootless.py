# SPDX-License-Identifier: Apache-2.0
"""Volumes of an ordinary user (src/lib/volume/dirvol.c): a directory of
files in the user's state, given to the sandbox as a tmpfs of the volume's
size and saved back, whole, when the sandbox ends. The same commands and
promises as a root caller's ext4 volumes: kept across runs, the size the
kernel enforces, one writer at a time, nothing dangerous carried out."""

import json
import os
import pathlib
import stat
import time
import uuid

import pytest

from test_volumes import _start, _stop


def _name():
    return "r-" + uuid.uuid4().hex[:12]


@pytest.fixture
def uvol(airlock):
    """A fresh 8M volume of an ordinary user, removed afterwards."""
    if not airlock.rootless:
        pytest.skip("a root caller's volumes are ext4 images (test_volumes.py)")
    name = _name()
    p = airlock.run(["volume", "create", name, "--size", "8M"], timeout=30)
    assert p.returncode == 0, p.stderr
    yield name
    for _ in range(50):
        p = airlock.run(["volume", "rm", name], timeout=30)
        if p.returncode != 4:
            break
        time.sleep(0.1)


def _ls(airlock):
    p = airlock.run(["volume", "ls", "--json"], timeout=30)
    assert p.returncode == 0, p.stderr
    return {v["name"]: v for v in json.loads(p.stdout)}


def _data(airlock, name):
    return pathlib.Path(airlock.user.pw_dir) / ".local/state/airlock/volumes" / name / "data"


def test_home_and_path_keep_files_across_runs(airlock, uvol):
    ws = airlock.make_dir()
    p = airlock.sandbox('mkdir -p "$HOME/.cfg/sub" && echo kept > "$HOME/.cfg/sub/note" && '
                        'ln -s .cfg/sub/note "$HOME/link" && chmod 640 "$HOME/.cfg/sub/note"',
                        "--home", uvol, workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    p = airlock.sandbox('cat "$HOME/link"; stat -c %a "$HOME/.cfg/sub/note"; df -k "$HOME" | '
                        "tail -1", "--home", uvol, workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[:2] == ["kept", "640"]
    assert int(lines[2].split()[1]) == 8192  # a tmpfs of exactly the volume's size
    # The same volume at a path, read-only: seen, not changed.
    p = airlock.sandbox("cat /v/.cfg/sub/note; echo x > /v/new", "--volume", f"{uvol}:/v:ro",
                        workspace=ws, timeout=60)
    assert p.stdout == "kept\n" and p.returncode != 0
    info = _ls(airlock)[uvol]
    assert info["size"] == 8 << 20 and info["attached"] is None and info["used"] > 0
    assert not (_data(airlock, uvol) / "new").exists()


def test_a_volume_over_its_size(airlock, uvol):
    ws = airlock.make_dir()
    p = airlock.sandbox("dd if=/dev/zero of=/v/big bs=1M count=20 2>&1; echo rc=$?",
                        "--volume", f"{uvol}:/v", workspace=ws, timeout=60)
    assert "No space left on device" in p.stdout and "rc=0" not in p.stdout
    # What was saved is at most the size, on the host too.
    big = _data(airlock, uvol) / "big"
    assert big.stat().st_size <= 8 << 20
    assert _ls(airlock)[uvol]["used"] <= (8 << 20) + (64 << 10)  # and its directories


def test_two_writers_refused_readers_shared(airlock, uvol):
    ws = airlock.make_dir()
    first = _start(airlock, ws, "--volume", f"{uvol}:/v")
    try:
        assert _ls(airlock)[uvol]["attached"] == "rw"
        for how in (f"{uvol}:/v", f"{uvol}:/v:ro"):
            p = airlock.run(["run", "-q", "-w", ws, "--volume", how, "--", "true"],
                            check_setup=False, timeout=30)
            assert p.returncode == 125 and "attached" in p.stderr, p.stderr
    finally:
        _stop(first)
    r1 = _start(airlock, ws, "--volume", f"{uvol}:/v:ro")
    try:
        p = airlock.run(["run", "-q", "-w", ws, "--volume", f"{uvol}:/v:ro", "--", "true"],
                        timeout=30)
        assert p.returncode == 0, p.stderr
        p = airlock.run(["run", "-q", "-w", ws, "--volume", f"{uvol}:/v", "--", "true"],
                        check_setup=False, timeout=30)
        assert p.returncode == 125
    finally:
        _stop(r1)


def test_nothing_dangerous_is_saved(airlock, uvol):
    """Links are kept as links and never followed, FIFOs and devices are
    left out, set-id bits are dropped, and hard links cannot make the saved
    files larger than the volume: such a save is refused whole."""
    ws = airlock.make_dir()
    p = airlock.sandbox("echo ok > /v/f; chmod 4755 /v/f; mkfifo /v/fifo; "
                        "mkdir -p /v/closed/in && chmod 0 /v/closed; "
                        "ln -s /etc/shadow /v/shadow; ln -s ../../../../.. /v/up; chmod 500 /v",
                        "--volume", f"{uvol}:/v", workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    d = _data(airlock, uvol)
    assert (d / "f").read_text() == "ok\n"
    assert stat.S_IMODE((d / "f").stat().st_mode) & 0o7000 == 0
    assert not (d / "fifo").exists()
    assert os.readlink(d / "shadow") == "/etc/shadow" and (d / "shadow").is_symlink()
    assert os.readlink(d / "up") == "../../../../.."
    # Directories the agent closed stay open to their owner on the host.
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / "closed").stat().st_mode) == 0o700
    assert uvol in _ls(airlock)
    # 3 MiB and 9 hard links to it: 30 MiB to copy into an 8 MiB volume.
    p = airlock.sandbox("rm /v/f; head -c 3000000 /dev/zero > /v/a && "
                        "for i in 1 2 3 4 5 6 7 8 9; do ln /v/a /v/l$i; done",
                        "--volume", f"{uvol}:/v", workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (d / "f").exists() and not (d / "a").exists()  # the earlier save stands
    audit = pathlib.Path(airlock.user.pw_dir) / ".local/state/airlock/audit/audit.jsonl"
    kinds = [e["kind"] for e in map(json.loads, audit.read_text().splitlines()[-400:])
             if e.get("volume") == uvol]
    assert kinds[-2:] == ["volume.saved", "volume.save_failed"], kinds
    assert sum(f.stat().st_size for f in d.iterdir() if f.is_file() and not f.is_symlink()) \
        <= 8 << 20


def test_ls_du_rm(airlock, uvol):
    p = airlock.run(["volume", "du", uvol], timeout=30)
    assert p.returncode == 0 and uvol in p.stdout, p.stderr
    p = airlock.run(["volume", "create", uvol, "--size", "8M"], timeout=30)
    assert p.returncode == 5
    p = airlock.run(["volume", "rm", uvol], timeout=30)
    assert p.returncode == 0, p.stderr
    assert uvol not in _ls(airlock)
    assert not _data(airlock, uvol).exists()
