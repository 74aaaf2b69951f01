# SPDX-License-Identifier: Apache-2.0
"""The escape suite's representative cases inside the microvm tier's guest,
in one boot: the command runs on the guest's own kernel, as the sandbox's
uid with no capability, no_new_privs and the namespace tier's seccomp
filter, over the sandbox's root shared read-only, in a guest whose init
closed its kernel's module loading, user namespaces and ptrace; QEMU runs
inside the namespace tier's sandbox. Every case of the probe is blocked, as
in the namespace tier, with no stated difference."""

import os
import pathlib
import socket
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
PROBE = REPO / os.environ.get("AIRLOCK_ESCAPE_PROBE", BUILD / "tests/escape/escape-probe")
QEMU = "/usr/bin/qemu-system-x86_64"
VM_DIR = os.environ.get("AIRLOCK_VM_DIR", "/usr/local/share/airlock/vm")
ACCEL = "AIRLOCK_MICROVM_ACCEL"

def cases():
    out = subprocess.run([str(PROBE), "--list"], capture_output=True, text=True, timeout=30)
    return [c for c in out.stdout.split() if c != "reach-host-loopback"]


def _kvm_runs_stock_kernels():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return not os.path.exists("/sys/module/kvm_pvm")


def test_escape_inside_the_microvm(airlock):
    if not PROBE.exists():
        pytest.skip(f"{PROBE} is not built")
    if not os.access(QEMU, os.X_OK) or not os.access(os.path.join(VM_DIR, "vmlinuz"), os.R_OK):
        pytest.skip("the microvm tier needs QEMU and its guest kernel (make deps)")
    if airlock.user:
        pytest.skip("the guest is the same for both identities; one boot is enough")
    ws = airlock.make_dir("vm-ws")
    hooks = ws / ".git/hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (ws / ".git/config").write_text("[core]\n")
    airlock.chown(ws)
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen(4)
    port = host.getsockname()[1]
    names = cases()
    assert len(names) > 50, names
    script = "".join(f'/probe {c}; echo "{c} rc=$?"\n' for c in names)
    script += f'/probe reach-host-loopback {port}; echo "reach-host-loopback rc=$?"\n'
    argv = airlock.cmd(["run", "-q", "-w", ws, "--timeout", "55", "--tier", "microvm",
                        "--ro", f"{PROBE}:/probe", "--", "/bin/sh", "-c", script])
    if not _kvm_runs_stock_kernels():
        at = next(i for i, a in enumerate(argv) if a.endswith("/airlock"))
        argv[at:at] = ["/usr/bin/env", f"{ACCEL}=tcg"]
    try:
        p = subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True,
                           timeout=60)
    finally:
        host.close()
    report = (p.stdout + p.stderr).strip()
    assert p.returncode == 0, report
    assert "ESCAPED" not in p.stdout, report
    for c in names + ["reach-host-loopback"]:
        assert f"{c} rc=0" in p.stdout, (c, report)
        assert any(line.startswith(c + ": ") for line in p.stdout.splitlines()), (c, report)
    assert (ws / ".git/hooks/pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
