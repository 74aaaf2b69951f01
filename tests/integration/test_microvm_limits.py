# SPDX-License-Identifier: Apache-2.0
"""The microvm tier and the per-process limits (docs/tiers.md): fileSize and
openFiles bind the command in the guest, as in the namespace tier. They
were put on QEMU instead, where fileSize killed the run with SIGXFSZ while
the initramfs was written (exit 153, no message) and a small openFiles left
QEMU without descriptors. One boot."""

import json
import os
import subprocess

import pytest

QEMU = "/usr/bin/qemu-system-x86_64"
VM_DIR = os.environ.get("AIRLOCK_VM_DIR", "/usr/local/share/airlock/vm")
ACCEL = "AIRLOCK_MICROVM_ACCEL"


def _kvm_runs_stock_kernels():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return not os.path.exists("/sys/module/kvm_pvm")


def test_microvm_file_size_and_open_files_bind_the_guest_command(airlock):
    if not os.access(QEMU, os.X_OK) or not os.access(os.path.join(VM_DIR, "vmlinuz"), os.R_OK):
        pytest.skip("the microvm tier needs QEMU and its guest kernel (make deps)")
    if airlock.user:
        pytest.skip("one boot: the limits take the same path for both callers")
    ws = airlock.make_dir()
    pol = ws.parent / (ws.name + ".json")
    pol.write_text(json.dumps({"limits": {"fileSize": "64K", "openFiles": 32}}))
    argv = airlock.cmd(["run", "-q", "--tier", "microvm", "--policy", pol, "-w", ws, "--",
                        "/bin/sh", "-c",
                        "trap '' XFSZ; head -c 100000 /dev/zero > /workspace/big; "
                        "echo w=$?; echo n=$(ulimit -n)"])
    env = dict(os.environ)
    env.pop(ACCEL, None)
    if not _kvm_runs_stock_kernels():
        env[ACCEL] = "tcg"
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert "w=0" not in p.stdout and "n=32" in p.stdout, p.stdout
    assert (ws / "big").stat().st_size == 64 * 1024
