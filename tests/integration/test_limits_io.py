# SPDX-License-Identifier: Apache-2.0
"""limits.io: block I/O throttled on the disk behind the workspace.

A `dd oflag=direct` of 10 MiB under a 5 MiB/s write limit must take at least
a good share of the 2 s the limit implies (a ratio with slack, never a
timed assertion of speed); without the limit it must not. Where the limit
cannot be applied, the run is refused, naming why."""

import contextlib
import os
import shutil
import subprocess
import tempfile
import time

import pytest

MIB = 1 << 20
SIZE_MIB = 10
RATE = 5 * MIB
EXPECTED_S = SIZE_MIB * MIB / RATE  # 2 s


def has_block_device(path):
    return os.major(os.stat(path).st_dev) != 0


@contextlib.contextmanager
def loop_ext4(base):
    """A loop-mounted ext4 image (root only); yields its mount point."""
    if os.geteuid() != 0:
        pytest.skip("a loop device needs root")
    for tool in ("mkfs.ext4", "mount", "umount"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed")
    d = tempfile.mkdtemp(prefix="loop-", dir=base)
    img, mnt = os.path.join(d, "img"), os.path.join(d, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(64 * MIB)
    r = subprocess.run(["mkfs.ext4", "-q", "-F", img], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {r.stderr.strip()}")
    r = subprocess.run(["mount", "-o", "loop", img, mnt], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], timeout=30)
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def throttleable_workspace(airlock):
    ws = airlock.make_dir()
    if has_block_device(ws):
        yield ws
        return
    # The test directory lives on a memory or layered file system: use a disk
    # image of our own.
    with loop_ext4(airlock.base) as mnt:
        d = os.path.join(mnt, "ws")
        os.mkdir(d, 0o755)
        airlock.chown(d)
        yield d


DD = f"dd if=/dev/zero of=out bs=1M count={SIZE_MIB} oflag=direct 2>&1"


def timed(airlock, *opts, workspace):
    t0 = time.monotonic()
    p, res = airlock.result(
        ["-q", "-w", workspace, *opts, "--", "/bin/sh", "-c", DD], timeout=60
    )
    return time.monotonic() - t0, p, res


def root_only(airlock):
    if airlock.rootless:
        pytest.skip("the blkio controller is delegated to root only here")


def test_write_limit_slows_direct_writes(airlock):
    root_only(airlock)
    with throttleable_workspace(airlock) as ws:
        took, p, res = timed(airlock, "--io-write-bps", "5M", workspace=ws)
        assert p.returncode == 0, p.stderr
        # The kernel lets the first slice through at once: allow 40% slack.
        assert took / EXPECTED_S >= 0.6, f"{took:.2f}s for {SIZE_MIB} MiB at 5 MiB/s: {p.stdout}"
        assert res["usage"]["ioWriteBytes"] >= SIZE_MIB * MIB, res["usage"]


def test_unlimited_direct_writes_are_not_slowed(airlock):
    root_only(airlock)
    with throttleable_workspace(airlock) as ws:
        took, p, res = timed(airlock, workspace=ws)
        assert p.returncode == 0, p.stderr
        assert took / EXPECTED_S < 0.5, f"{took:.2f}s unlimited: {p.stdout}"
        assert res["usage"]["ioWriteBytes"] >= SIZE_MIB * MIB, res["usage"]


def test_policy_io_reaches_the_cgroup(airlock):
    """The policy key, not only the flag, throttles (read and write)."""
    root_only(airlock)
    with throttleable_workspace(airlock) as ws:
        pol = os.path.join(airlock.make_dir("pol"), "p.json")
        with open(pol, "w") as f:
            f.write('{"limits": {"io": {"writeBps": "5M", "writeIops": 1000}}}')
        took, p, _ = timed(airlock, "-p", pol, workspace=ws)
        assert p.returncode == 0, p.stderr
        assert took / EXPECTED_S >= 0.6, f"{took:.2f}s: {p.stdout}"


def test_tmpfs_workspace_is_refused_not_pretended(airlock):
    root_only(airlock)
    d = airlock.make_dir("tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(d)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        p = airlock.run(["run", "-q", "-w", d, "--io-write-bps", "5M", "--", "true"],
                        check_setup=False, timeout=60)
        assert p.returncode == 125, p.stderr
        assert "limits.io" in p.stderr and "no block device" in p.stderr, p.stderr
    finally:
        subprocess.run(["umount", "-l", str(d)], timeout=30)


def test_undelegated_blkio_is_refused(airlock):
    if not airlock.rootless or not os.path.isdir("/sys/fs/cgroup/blkio"):
        pytest.skip("only an ordinary user on a v1 host lacks the blkio controller")
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--io-write-bps", "5M", "--", "true"],
                    check_setup=False, timeout=60)
    assert p.returncode == 125, p.stderr
    assert "limits.io" in p.stderr, p.stderr


@pytest.mark.parametrize(
    "flag,value,why",
    [
        ("--io-write-bps", "5x", "limits.io.writeBps"),
        ("--io-read-bps", "-1", "limits.io.readBps"),
        ("--io-read-iops", "4294967295", "limits.io.readIops"),
        ("--io-write-iops", "lots", "limits.io.writeIops"),
    ],
)
def test_bad_values_name_the_field(airlock, flag, value, why):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, flag, value, "--", "true"], check_setup=False,
                    timeout=60)
    assert p.returncode == 125, p.stderr
    assert why in p.stderr, p.stderr
