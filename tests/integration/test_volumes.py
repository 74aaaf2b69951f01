# SPDX-License-Identifier: Apache-2.0
"""Named volumes (issue 15 item 3): `airlock run --home NAME` keeps $HOME
across runs, `--volume NAME:/PATH[:ro]`, one writer at a time, a size the
kernel enforces, and `airlock volume ls|create|rm|du`."""

import json
import os
import signal
import subprocess
import time
import uuid

import pytest


def _name():
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def vol(airlock):
    """A fresh 16M volume, removed afterwards; root only (loop devices)."""
    if airlock.rootless:
        pytest.skip("an ordinary user's volumes are directories (test_volume_rootless.py)")
    name = _name()
    p = airlock.run(["volume", "create", name, "--size", "16M"], timeout=60)
    assert p.returncode == 0, p.stderr
    yield name
    for _ in range(50):
        p = airlock.run(["volume", "rm", name], timeout=30)
        if p.returncode != 4:  # attached: a sandbox still ending
            break
        time.sleep(0.1)


def _ls(airlock):
    p = airlock.run(["volume", "ls", "--json"], timeout=30)
    assert p.returncode == 0, p.stderr
    return {v["name"]: v for v in json.loads(p.stdout)}


def _start(airlock, ws, *args):
    """Start `airlock run` in the background; wait until its command runs."""
    marker = ws / ("started-" + uuid.uuid4().hex[:6])
    proc = subprocess.Popen(
        airlock.cmd(["run", "-q", "-w", ws, *args, "--", "/bin/sh", "-c",
                     f"touch /workspace/{marker.name}; exec sleep 30"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if marker.exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert marker.exists(), proc.communicate(timeout=10)
    return proc


def _stop(proc):
    proc.kill()
    proc.communicate(timeout=10)


def test_home_keeps_a_file_across_runs(airlock, vol):
    ws = airlock.make_dir()
    p = airlock.sandbox('echo kept > "$HOME/note"; echo "$HOME"', "--home", vol,
                        workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "/home/agent"
    p = airlock.sandbox('cat "$HOME/note"', "--home", vol, workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "kept\n"
    info = _ls(airlock)[vol]
    assert info["size"] == 16 << 20 and info["attached"] is None


def test_volume_at_a_path_and_read_only(airlock, vol):
    ws = airlock.make_dir()
    p = airlock.sandbox("echo data > /data/f", "--volume", f"{vol}:/data", workspace=ws,
                        timeout=60)
    assert p.returncode == 0, p.stderr
    p = airlock.sandbox("cat /data/f; echo x > /data/g", "--volume", f"{vol}:/data:ro",
                        workspace=ws, timeout=60)
    assert p.stdout == "data\n"
    assert p.returncode != 0 and "Read-only file system" in p.stderr


def test_second_concurrent_writer_refused(airlock, vol):
    ws = airlock.make_dir()
    first = _start(airlock, ws, "--home", vol)
    try:
        assert _ls(airlock)[vol]["attached"] == "rw"
        p = airlock.run(["run", "-q", "-w", ws, "--home", vol, "--", "true"],
                        check_setup=False, timeout=60)
        assert p.returncode == 125
        assert f"volume {vol} is attached to another sandbox" in p.stderr
        # Nor a reader while it is written.
        p = airlock.run(["run", "-q", "-w", ws, "--volume", f"{vol}:/v:ro", "--", "true"],
                        check_setup=False, timeout=60)
        assert p.returncode == 125 and "attached read-write" in p.stderr
    finally:
        _stop(first)


def test_readers_share(airlock, vol):
    ws = airlock.make_dir()
    first = _start(airlock, ws, "--volume", f"{vol}:/v:ro")
    try:
        assert _ls(airlock)[vol]["attached"] == "ro"
        p = airlock.sandbox("ls /v", "--volume", f"{vol}:/v:ro", workspace=ws, timeout=60)
        assert p.returncode == 0, p.stderr
        p = airlock.run(["run", "-q", "-w", ws, "--volume", f"{vol}:/v", "--", "true"],
                        check_setup=False, timeout=60)
        assert p.returncode == 125 and "attached to another sandbox" in p.stderr
    finally:
        _stop(first)


def test_size_limit_is_enospc_inside(airlock, vol):
    ws = airlock.make_dir()
    p = airlock.sandbox("dd if=/dev/zero of=$HOME/big bs=1M count=32; echo rc=$?",
                        "--home", vol, workspace=ws, timeout=60)
    assert "No space left on device" in p.stderr
    assert "rc=1" in p.stdout
    # The host disk it takes is bounded by the size, whatever was asked.
    assert _ls(airlock)[vol]["used"] <= (16 << 20) + (1 << 20)


def test_rm_while_attached_refused(airlock, vol):
    ws = airlock.make_dir()
    first = _start(airlock, ws, "--home", vol)
    try:
        p = airlock.run(["volume", "rm", vol], timeout=30)
        assert p.returncode == 4
        assert "attached to a running sandbox" in p.stderr
        assert vol in _ls(airlock)
    finally:
        _stop(first)


def test_kill9_of_the_holder_releases_the_lock(airlock, vol):
    ws = airlock.make_dir()
    first = _start(airlock, ws, "--home", vol)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=10)
    p = airlock.sandbox('echo after > "$HOME/f"; cat "$HOME/f"', "--home", vol, workspace=ws,
                        timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "after\n"


def test_nosuid_nodev_and_no_setid(airlock, vol):
    ws = airlock.make_dir()
    p = airlock.sandbox('grep " /home/agent " /proc/self/mountinfo | grep ext4; '
                        'touch "$HOME/x"; chmod u+s "$HOME/x"; echo chmod=$?; '
                        'mknod "$HOME/n" c 1 3; echo mknod=$?',
                        "--home", vol, workspace=ws, timeout=60)
    line = p.stdout.splitlines()[0]
    assert "nosuid" in line and "nodev" in line
    assert "chmod=1" in p.stdout and "mknod=1" in p.stdout


def test_bad_names_and_missing_volume(airlock):
    if airlock.rootless:
        pytest.skip("root only")
    p = airlock.run(["volume", "create", "../x", "--size", "16M"], timeout=30)
    assert p.returncode != 0 and "volume name" in p.stderr
    p = airlock.run(["volume", "create", _name(), "--size", "1M"], timeout=30)
    assert p.returncode != 0 and "from 8M to 1T" in p.stderr
    ws = airlock.make_dir()
    missing = _name()
    p = airlock.run(["run", "-q", "-w", ws, "--home", missing, "--", "true"],
                    check_setup=False, timeout=30)
    assert p.returncode == 125 and f'no volume "{missing}"' in p.stderr
    p = airlock.run(["run", "-q", "-w", ws, "--volume", "Bad/Name:/x", "--", "true"],
                    check_setup=False, timeout=30)
    assert p.returncode == 125 and "volume" in p.stderr


def test_mount_over_the_parent_of_home_is_refused(airlock):
    """It used to hide the sandbox's $HOME without a word."""
    src = airlock.make_dir("src")
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--ro", f"{src}:/home", "--", "true"],
                    check_setup=False, timeout=30)
    assert p.returncode == 125
    assert "would hide /home/agent" in p.stderr
    # At $HOME itself it works: what was mounted is what $HOME shows.
    (src / "f").write_text("x")
    airlock.chown(src)
    p = airlock.sandbox('cat "$HOME/f"', "--ro", f"{src}:/home/agent", workspace=ws, timeout=30)
    assert p.returncode == 0 and p.stdout == "x", p.stderr
