# SPDX-License-Identifier: Apache-2.0
"""Each resource class's values reach what enforces them (docs/policy.md,
the design's table): memory and the CPU quota in the sandbox's cgroup, CPU
time as the command's RLIMIT_CPU, the maximum duration as the supervisor's
timeout (the sandbox.created record), and the network rate in the gate's
budget (a download through the gate takes at least a good share of the time
the rate implies: a ratio with slack, never a timed assertion of speed)."""

import json
import os
import subprocess
import time

import pytest

import netns
from netns import BIG_SIZE, HTTP_PORT, RANGE, SERVER_ADDR

MIB = 1 << 20
# name: memory bytes, CPU seconds, network bytes/s, timeout ms, cpus (milli)
CLASSES = {
    "small": (256 * MIB, 30, 1_000_000, 5 * 60_000, 500),
    "medium": (512 * MIB, 60, 10_000_000, 15 * 60_000, 1000),
    "large": (1024 * MIB, 120, 50_000_000, 30 * 60_000, 2000),
    "xlarge": (4096 * MIB, 300, 100_000_000, 60 * 60_000, 4000),
}


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def audit_lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def sandbox_init(owner_pid):
    try:
        with open(f"/proc/{owner_pid}/task/{owner_pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return None
    for c in kids:
        try:
            with open(f"/proc/{c}/status") as f:
                for line in f:
                    if line.startswith("NSpid:") and len(line.split()) > 2:
                        return c
        except OSError:
            pass
    return None


def cgroup_files(pid):
    """controller -> the directory of pid's cgroup for it, as the host sees it."""
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if not ctrls:
                out["v2"] = f"/sys/fs/cgroup{path}"
                continue
            for c in ctrls.split(","):
                d = f"/sys/fs/cgroup/{ctrls}{path}"
                out[c] = d if os.path.isdir(d) else f"/sys/fs/cgroup/{c}{path}"
    return out


def read(path):
    with open(path) as f:
        return f.read().strip()


def memory_limit(cg):
    if "memory" in cg and os.path.exists(f"{cg['memory']}/memory.limit_in_bytes"):
        return int(read(f"{cg['memory']}/memory.limit_in_bytes"))
    return int(read(f"{cg['v2']}/memory.max"))


def cpu_milli(cg):
    if "cpu" in cg and os.path.exists(f"{cg['cpu']}/cpu.cfs_quota_us"):
        quota = int(read(f"{cg['cpu']}/cpu.cfs_quota_us"))
        period = int(read(f"{cg['cpu']}/cpu.cfs_period_us"))
    else:
        q, p = read(f"{cg['v2']}/cpu.max").split()
        quota, period = int(q), int(p)
    return quota * 1000 // period


@pytest.mark.parametrize("name", list(CLASSES))
def test_class_reaches_the_cgroup_rlimit_and_timeout(airlock, name):
    memory, cpu_s, _, timeout_ms, cpus = CLASSES[name]
    ws = airlock.make_dir()
    audit = airlock.make_dir("audit") / "audit.jsonl"
    argv = airlock.cmd(["run", "-q", "--audit", audit, "-w", ws, "--class", name, "--",
                        "/bin/sh", "-c", "ulimit -t > ulimit; exec sleep 30"])
    proc = subprocess.Popen(argv, cwd=str(airlock.base), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(ws / "ulimit") and read(ws / "ulimit"), 15,
                 "the command")
        init = wait_for(lambda: sandbox_init(proc.pid), 10, "the sandbox's pid 1")
        cg = cgroup_files(init)
        assert memory_limit(cg) == memory, cg
        assert cpu_milli(cg) == cpus, cg
        assert read(ws / "ulimit") == str(cpu_s)
        created = [e for e in audit_lines(audit) if e["kind"] == "sandbox.created"]
        assert created[0]["summary"]["limits"]["timeoutMs"] == timeout_ms, created
        assert created[0]["summary"]["limits"]["memory"] == memory, created
    finally:
        proc.kill()
        proc.wait(timeout=10)


UPSTREAM = ["--allow-private", RANGE, "--host", f"upstream.test={SERVER_ADDR}",
            "--allow", f"upstream.test:{HTTP_PORT}"]
URL = f"http://upstream.test:{HTTP_PORT}"


from netns import net  # noqa: E402,F401  (the test network, one per module)


def download(airlock, net, size, policy):
    ws = airlock.make_dir()
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text(json.dumps(policy))
    # Timed inside, around the download alone: the sandbox's start is no
    # part of the rate.
    args = ["run", "-q", "-w", ws, "-p", pol, *UPSTREAM, "--", "/bin/sh", "-c",
            f"s=$(date +%s%N); curl -s --max-time 50 {URL}/big.bin | head -c {size} | wc -c; "
            "e=$(date +%s%N); echo $((e - s))"]
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)]
    p = subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True, timeout=60)
    got, ns = p.stdout.split()
    assert p.returncode == 0 and got == str(size), (p.stdout, p.stderr)
    return int(ns) / 1e9


@pytest.mark.parametrize("name", list(CLASSES))
def test_class_rate_reaches_the_gate(airlock, net, name):
    rate = CLASSES[name][2]
    size = min(rate, BIG_SIZE - MIB)  # about a second's worth
    expected = size / rate
    # Without a rate the same download must be clearly faster, or this
    # machine cannot tell the class's rate apart from its own speed.
    free = download(airlock, net, size, {"class": name, "network": {"budget": {"rate": 0}}})
    if free >= 0.5 * expected:
        pytest.skip(f"{size} bytes take {free:.2f}s through the gate without a rate here; "
                    f"{name}'s {rate} B/s ({expected:.2f}s) cannot be told apart")
    took = download(airlock, net, size, {"class": name})
    assert took / expected >= 0.6, f"{took:.2f}s for {size} bytes at {rate} B/s"
