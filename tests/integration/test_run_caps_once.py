# SPDX-License-Identifier: Apache-2.0
"""A cold `airlock run` empties the capability bounding set once: pid 1
empties it before it forks the command, which inherits it empty. The
command and pid 1 still end with no capability in any set."""

import re
import shutil
import subprocess

import pytest


def _last_cap():
    with open("/proc/sys/kernel/cap_last_cap") as f:
        return int(f.read())


def test_bounding_set_emptied_once(airlock, tmp_path):
    strace = shutil.which("strace")
    if not strace:
        pytest.skip("strace is not installed")
    out = tmp_path / "strace.txt"
    ws = airlock.make_dir()
    argv = [strace, "-f", "-qq", "-e", "trace=prctl", "-o", str(out)]
    argv += airlock.cmd(["run", "-q", "-w", ws, "--", "/bin/true"])
    p = subprocess.run(argv, cwd=str(ws), capture_output=True, text=True, timeout=60)
    if p.returncode != 0 and "ptrace" in p.stderr:
        pytest.skip(f"cannot trace here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    calls = re.findall(r"^(\d+) +prctl\(PR_CAPBSET_(READ|DROP)", out.read_text(), re.M)
    # The sandbox's processes are those that drop (the runas helper of
    # the unprivileged variant only reads its own).
    droppers = {pid for pid, op in calls if op == "DROP"}
    ours = [op for pid, op in calls if pid in droppers]
    # Before: pid 1 and the command each read and dropped every
    # capability, 4 * (last + 1) calls.
    assert ours, "no bounding set call was traced"
    assert len(ours) <= _last_cap() + 1, (len(ours), ours.count("READ"), len(droppers))


def test_command_and_pid1_hold_no_capability(airlock):
    for _ in range(3):
        p = airlock.sandbox(
            "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status;"
            "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/1/status | sed 's/^/1:/'"
        )
        assert p.returncode == 0, p.stderr
        for who in ("", "1:"):
            for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                assert f"{who}{cap}:\t0000000000000000" in p.stdout, p.stdout
        assert "NoNewPrivs:\t1" in p.stdout, p.stdout


def test_pid1_holds_no_capability_when_the_command_starts(airlock):
    # The command's first instruction may read pid 1 at once: pid 1 holds
    # nothing by then, whoever the scheduler runs first.
    ws = airlock.make_dir()
    for _ in range(10):
        p = airlock.run(["run", "-q", "-w", ws, "--", "/bin/grep", "-E",
                         "^Cap(Inh|Prm|Eff|Bnd|Amb):", "/proc/1/status"], timeout=30)
        assert p.returncode == 0, p.stderr
        caps = p.stdout.split()
        assert len(caps) == 10 and all(v == "0000000000000000" for v in caps[1::2]), p.stdout
