# SPDX-License-Identifier: Apache-2.0
"""kill -9 of the supervisor of a run under limits.workspaceDisk leaves the
workspace labelled with Airlock's project id and the id's limit set; the
next Airlock command's sweep reclaims both (boundary/quota.c quota_sweep()),
so the workspace can be limited again and carries no id.

Needs root and a kernel with ext4 project quotas (CONFIG_QUOTA,
CONFIG_QUOTACTL, CONFIG_QFMT_V2); where they are missing the test skips
naming what is. The lease bookkeeping itself is unit-tested
(tests/unit/test-quota-lease.c)."""

import array
import fcntl
import gzip
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import pytest

MIB = 1 << 20
FS_IOC_FSGETXATTR = 0x801C581F
EXT4_QUOTA_OPTIONS = ("CONFIG_QUOTA", "CONFIG_QUOTACTL", "CONFIG_QFMT_V2")


def kernel_gap():
    for opener, path in ((gzip.open, "/proc/config.gz"),
                         (open, f"/boot/config-{os.uname().release}")):
        try:
            with opener(path, "rt") as f:
                cfg = dict(l.split("=", 1) for l in f.read().splitlines()
                           if l.startswith("CONFIG_") and "=" in l)
            return [o for o in EXT4_QUOTA_OPTIONS if cfg.get(o) not in ("y", "m")]
        except OSError:
            continue
    return []


def projid(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = array.array("B", bytes(28))
        fcntl.ioctl(fd, FS_IOC_FSGETXATTR, buf, True)
        return struct.unpack_from("IIII", buf)[3]
    finally:
        os.close(fd)


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def prjquota_fs(airlock):
    if airlock.rootless:
        pytest.skip("project quotas are set by root")
    for tool in ("mkfs.ext4", "mount", "umount"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed")
    gap = kernel_gap()
    if gap:
        pytest.skip(f"this kernel ({os.uname().release}) is built without {', '.join(gap)}, "
                    "which ext4 project quotas need")
    d = tempfile.mkdtemp(prefix="quota-", dir=airlock.base)
    img, mnt = os.path.join(d, "img"), os.path.join(d, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(64 * MIB)
    r = subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "quota,project", img],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"mkfs.ext4 -O quota,project failed: {r.stderr.strip()}")
    r = subprocess.run(["mount", "-o", "loop,prjquota", img, mnt], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"cannot mount ext4 with prjquota: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], timeout=30)
        shutil.rmtree(d, ignore_errors=True)


def test_kill_9_leaves_a_project_id_the_next_run_reclaims(airlock, prjquota_fs):
    ws = os.path.join(prjquota_fs, "ws")
    os.mkdir(ws, 0o755)
    with open(os.path.join(ws, "kept"), "wb") as f:
        f.write(b"x" * 4096)
    state = airlock.make_dir("state")
    pol = os.path.join(airlock.make_dir("pol"), "p.json")
    with open(pol, "w") as f:
        f.write('{"limits": {"workspaceDisk": "4M"}}')
    argv = airlock.cmd(["run", "-q", "--state-root", state, "-w", ws, "-p", pol, "--timeout", "60",
                        "--", "/bin/sh", "-c", "touch started; exec sleep 1000"])
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(os.path.join(ws, "started")), 15, "the command")
        pid = projid(ws)
        assert pid != 0 and projid(os.path.join(ws, "kept")) == pid
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    # Left behind: the supervisor could not release it.
    assert projid(ws) == pid
    leases = os.listdir(os.path.join(state, "quota"))
    assert leases == [f"{pid:08x}"], leases

    # The next run sweeps: the tree is unlabelled and the workspace can be
    # limited again (before the sweep it was refused: "already belongs to
    # project").
    other = airlock.make_dir()
    p = airlock.run(["run", "-q", "--state-root", state, "-w", other, "--", "true"], timeout=30)
    assert p.returncode == 0, p.stderr
    assert projid(ws) == 0 and projid(os.path.join(ws, "kept")) == 0
    assert os.listdir(os.path.join(state, "quota")) == []
    p = airlock.run(["run", "-q", "--state-root", state, "-w", ws, "-p", pol, "--", "true"],
                    timeout=30)
    assert p.returncode == 0, p.stderr
