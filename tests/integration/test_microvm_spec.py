# SPDX-License-Identifier: Apache-2.0
"""The microvm tier hands the command to the guest's init in a spec; the
init keeps at most 4095 arguments and 4095 variables. More were dropped
silently: the guest ran a shorter command than the one asked for (the
last arguments gone). The host refuses such a command with the reason,
before any boot."""

import os
import subprocess

import pytest

QEMU = "/usr/bin/qemu-system-x86_64"
VM_DIR = os.environ.get("AIRLOCK_VM_DIR", "/usr/local/share/airlock/vm")


def test_microvm_too_many_arguments_refused(airlock):
    if not os.access(QEMU, os.X_OK) or not os.access(os.path.join(VM_DIR, "vmlinuz"), os.R_OK):
        pytest.skip("the microvm tier needs QEMU and its guest kernel (make deps)")
    if airlock.user:
        pytest.skip("the host-side check is the same for both callers")
    args = [str(i) for i in range(5000)]
    env = dict(os.environ, AIRLOCK_MICROVM_ACCEL="tcg")
    p = subprocess.run(airlock.cmd(["run", "-q", "--tier", "microvm", "--", "/bin/sh", "-c",
                                    'echo "n=$# last=$(eval echo \\${$#})"', "sh", *args]),
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 125, (p.returncode, p.stdout[-200:], p.stderr[-500:])
    assert "arguments" in p.stderr and "4095" in p.stderr, p.stderr[-500:]
