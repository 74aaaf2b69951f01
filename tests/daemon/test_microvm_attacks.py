# SPDX-License-Identifier: Apache-2.0
"""Attacks on the microvm tier through the daemon. Each exec of a microvm
sandbox is a guest of its own, started from an initramfs written in the
sandbox's /tmp: those files (the command's spec, its environment, about a
megabyte of modules) were never removed, so a client's execs filled the
sandbox's memory-backed /tmp until its own runs failed; removing them at
the end still left them behind an exec killed at its timeout. Now they are
unnamed files. Two boots."""

import glob
import os

import pytest

QEMU = "/usr/bin/qemu-system-x86_64"
VM_DIR = os.environ.get("AIRLOCK_VM_DIR", "/usr/local/share/airlock/vm")


def _kvm_runs_stock_kernels():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return not os.path.exists("/sys/module/kvm_pvm")


def _sandbox_tmps(sid):
    """The /tmp of each process in the sandbox's cgroup, seen from the host."""
    seen = set()
    for cg in glob.glob("/proc/[0-9]*/cgroup"):
        try:
            with open(cg) as f:
                if sid not in f.read():
                    continue
            root = os.path.dirname(cg) + "/root/tmp"
            st = os.stat(root)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            yield root


def test_exec_leaves_no_initramfs_behind(make_daemon, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("looks into the sandbox's /tmp from the host: needs root")
    if not os.access(QEMU, os.X_OK) or not os.access(os.path.join(VM_DIR, "vmlinuz"), os.R_OK):
        pytest.skip("the microvm tier needs QEMU and its guest kernel (make deps)")
    if not _kvm_runs_stock_kernels():
        monkeypatch.setenv("AIRLOCK_MICROVM_ACCEL", "tcg")
    d = make_daemon()
    api = d.client(d.admin)
    sb = api.create(policy={"tier": "microvm"}, sandbox_class="medium")
    try:
        out = api.run(sb["id"], ["/bin/sh", "-c", "echo SECRET_ARG_$((6*7))"])
        assert b"SECRET_ARG_42" in out.stdout, (out.stdout, out.stderr)
        # An exec killed at its timeout (its process group, QEMU with it).
        out = api.run(sb["id"], ["/bin/sh", "-c", "echo up; sleep 120"], timeout=6)
        assert out.exit_code != 0, (out.stdout, out.stderr)
        tmps = list(_sandbox_tmps(sb["id"]))
        assert tmps, "no process of the sandbox found"
        left = [p for t in tmps for p in glob.glob(t + "/.airlock-vm-*")]
        assert left == [], left
    finally:
        api.delete(sb["id"])
