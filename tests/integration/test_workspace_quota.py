# SPDX-License-Identifier: Apache-2.0
"""limits.workspaceDisk: a read-write workspace's growth is bounded by a
project quota where its file system has them, and the run is refused,
naming the file system, where it has none (never pretended)."""

import array
import fcntl
import gzip
import json
import os
import shutil
import struct
import subprocess
import tempfile

import pytest

MIB = 1 << 20
FS_IOC_FSGETXATTR = 0x801C581F
FS_XFLAG_PROJINHERIT = 0x200


def policy(airlock, text):
    d = airlock.make_dir("pol")
    path = os.path.join(d, "p.json")
    with open(path, "w") as f:
        f.write(text)
    return path


def projid(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = array.array("B", bytes(28))
        fcntl.ioctl(fd, FS_IOC_FSGETXATTR, buf, True)
        xflags, _, _, proj = struct.unpack_from("IIII", buf)
        return proj, xflags
    finally:
        os.close(fd)


def kernel_config():
    """The running kernel's build options, or None when it does not say."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            text = f.read()
    except OSError:
        try:
            with open(f"/boot/config-{os.uname().release}") as f:
                text = f.read()
        except OSError:
            return None
    opts = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            opts[k] = v
    return opts


# What ext4's project quotas need from the kernel: the quota core, the
# quotactl call, and the v2 quota format that ext4's hidden quota inodes use.
EXT4_QUOTA_OPTIONS = ("CONFIG_QUOTA", "CONFIG_QUOTACTL", "CONFIG_QFMT_V2")


def ext4_quota_gap():
    """The options ext4 project quotas need that this kernel lacks ([] when
    it has them all or its configuration cannot be read)."""
    cfg = kernel_config()
    if cfg is None:
        return []
    return [o for o in EXT4_QUOTA_OPTIONS if cfg.get(o) not in ("y", "m")]


def mount_or_skip(args, what, why=""):
    r = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        dmesg = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
        last = dmesg.strip().splitlines()[-1:] if dmesg else []
        pytest.skip(f"{why}cannot mount {what}: {r.stderr.strip().splitlines()[0]} "
                    f"(kernel: {' '.join(last).strip()})")


def test_tmpfs_workspace_reports_quotas_unavailable(airlock):
    if airlock.rootless:
        pytest.skip("mounting a tmpfs needs root")
    d = airlock.make_dir("tmpfs")
    mount_or_skip(["-t", "tmpfs", "-o", "size=16m", "tmpfs", str(d)], "a tmpfs")
    try:
        pol = policy(airlock, '{"limits": {"workspaceDisk": "4M"}}')
        p = airlock.run(["run", "-q", "-w", d, "-p", pol, "--", "true"], check_setup=False,
                        timeout=60)
        assert p.returncode == 125, p.stderr
        assert "limits.workspaceDisk" in p.stderr and "tmpfs" in p.stderr, p.stderr
        assert "no project quotas" in p.stderr, p.stderr
        # ... and the fix: where the quota can be had, or what to drop.
        assert "prjquota" in p.stderr and "remove limits.workspaceDisk" in p.stderr, p.stderr
    finally:
        subprocess.run(["umount", "-l", str(d)], timeout=30)


def test_unsupported_file_system_is_refused_for_any_user(airlock):
    ws = airlock.make_dir()
    pol = policy(airlock, '{"limits": {"workspaceDisk": "4M"}}')
    p = airlock.run(["run", "-q", "-w", ws, "-p", pol, "--", "true"], check_setup=False,
                    timeout=60)
    if p.returncode == 0:
        pytest.skip("this workspace's file system has project quotas")
    assert p.returncode == 125, p.stderr
    assert "limits.workspaceDisk" in p.stderr, p.stderr


def test_review_mode_is_refused(airlock):
    ws = airlock.make_dir()
    pol = policy(airlock, '{"limits": {"workspaceDisk": "4M"}}')
    p = airlock.run(["run", "-q", "--review", "-w", ws, "-p", pol, "--", "true"],
                    check_setup=False, timeout=60)
    assert p.returncode == 125, p.stderr
    assert "needs a read-write workspace" in p.stderr, p.stderr


def test_writes_past_the_quota_fail_on_ext4_prjquota(airlock):
    if airlock.rootless:
        pytest.skip("project quotas are set by root")
    for tool in ("mkfs.ext4", "mount", "umount"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed")
    d = tempfile.mkdtemp(prefix="quota-", dir=airlock.base)
    img, mnt = os.path.join(d, "img"), os.path.join(d, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(64 * MIB)
    r = subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "quota,project", img],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"mkfs.ext4 -O quota,project failed: {r.stderr.strip()}")
    gap = ext4_quota_gap()
    why = (f"this kernel ({os.uname().release}) is built without {', '.join(gap)}, which "
           f"ext4 project quotas need (an ext4 made with -O quota,project is refused at "
           f"mount); " if gap else "")
    mount_or_skip(["-o", "loop,prjquota", img, mnt], "ext4 with prjquota", why)
    try:
        ws = os.path.join(mnt, "ws")
        os.mkdir(ws, 0o755)
        with open(os.path.join(ws, "before"), "wb") as f:
            f.write(b"x" * MIB)
        airlock.chown(ws)
        pol = policy(airlock, '{"limits": {"workspaceDisk": "4M"}}')
        p, res = airlock.result(
            ["-q", "-w", ws, "-p", pol, "--", "/bin/sh", "-c",
             "dd if=/dev/zero of=big bs=1M count=8 2>&1; echo dd=$?"],
            timeout=60)
        assert "dd=1" in p.stdout, p.stdout
        assert "No space left" in p.stdout or "quota exceeded" in p.stdout, p.stdout
        assert res["errorCode"] == "disk_limit", res
        assert os.path.getsize(os.path.join(ws, "big")) <= 4 * MIB + 64 * 1024
        assert 3 * MIB <= res["usage"]["workspaceAddedBytes"] <= 4 * MIB + 64 * 1024, res
        assert res["usage"]["diskPeakBytes"] >= res["usage"]["workspaceAddedBytes"], res
        # Released: no project id left on the tree.
        for name in ("", "before", "big"):
            proj, xflags = projid(os.path.join(ws, name))
            assert proj == 0 and not xflags & FS_XFLAG_PROJINHERIT, (name, proj, xflags)
        # Within the allowance a run is not marked.
        os.unlink(os.path.join(ws, "big"))
        p, res = airlock.result(
            ["-q", "-w", ws, "-p", pol, "--", "/bin/sh", "-c",
             "dd if=/dev/zero of=small bs=1M count=1 2>&1"], timeout=60)
        assert p.returncode == 0 and res["errorCode"] is None, (p.stdout, res)
    finally:
        subprocess.run(["umount", "-l", mnt], timeout=30)
        shutil.rmtree(d, ignore_errors=True)
