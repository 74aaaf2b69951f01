# SPDX-License-Identifier: Apache-2.0
"""The microvm tier through the daemon: a sandbox created with "tier":
"microvm" runs each exec in a guest of its own kernel (docs/tiers.md).
airlockd hands AIRLOCK_MICROVM_ACCEL, the operator's consent to emulation,
on to its supervisors."""

import os
import platform

import pytest

QEMU = "/usr/bin/qemu-system-x86_64"
VM_DIR = os.environ.get("AIRLOCK_VM_DIR", "/usr/local/share/airlock/vm")


def _kvm_runs_stock_kernels():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return not os.path.exists("/sys/module/kvm_pvm")


def test_microvm_exec_through_the_api(make_daemon, monkeypatch):
    if not os.access(QEMU, os.X_OK) or not os.access(os.path.join(VM_DIR, "vmlinuz"), os.R_OK):
        pytest.skip("the microvm tier needs QEMU and its guest kernel (make deps)")
    if not _kvm_runs_stock_kernels():
        monkeypatch.setenv("AIRLOCK_MICROVM_ACCEL", "tcg")
    d = make_daemon()
    api = d.client(d.admin)
    sb = api.create(policy={"tier": "microvm"}, sandbox_class="medium")
    try:
        assert sb["tier"] == "microvm" and sb["state"] == "running"
        out = api.run(sb["id"], ["/bin/sh", "-c", "uname -r; echo hi > /workspace/x; cat x; exit 3"])
        lines = out.stdout.decode().split()
        assert lines[0] != platform.release() and lines[1] == "hi", (out.stdout, out.stderr)
        assert out.exit_code == 3, (out.stdout, out.stderr)
    finally:
        api.delete(sb["id"])
