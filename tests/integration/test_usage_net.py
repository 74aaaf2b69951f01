# SPDX-License-Identifier: Apache-2.0
"""The result's usage counts the bytes through the network gate each way,
and the class's network rate reaches the gate (medium: 10 MB/s)."""

import json
import subprocess
import time

import pytest

import netns
from netns import BIG_SIZE, HELLO, HTTP_PORT, RANGE, SERVER_ADDR

UPSTREAM = [
    "--allow-private", RANGE,
    "--host", f"upstream.test={SERVER_ADDR}",
    "--allow", f"upstream.test:{HTTP_PORT}",
]
URL = f"http://upstream.test:{HTTP_PORT}"


from netns import net  # noqa: E402,F401  (the test network, one per module)


def run(airlock, net, script, *opts):
    ws = airlock.make_dir()
    rdir = airlock.make_dir("result")
    args = ["run", "-q", "-w", ws, "--result", rdir / "r.json", *UPSTREAM, *opts, "--",
            "/bin/sh", "-c", script]
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)]
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True, timeout=90)
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    return p, json.loads((rdir / "r.json").read_text()), took


def test_usage_counts_network_bytes_each_way(airlock, net):
    sent = 5000  # a body made inside: the sandbox's own files differ from the host's
    p, res, _ = run(airlock, net, f"head -c {sent} /dev/zero > /tmp/body; "
                                  f"curl -sS --max-time 20 --data-binary @/tmp/body {URL}/upload; "
                                  f"curl -sS --max-time 20 {URL}/hello.txt")
    u = res["usage"]
    assert sent < u["netSentBytes"] < sent + 4096, u
    assert len(HELLO) < u["netReceivedBytes"] < len(HELLO) + 4096 + 1024, u


def test_class_rate_reaches_the_gate(airlock, net):
    """small: 1 MB/s, so the big file takes at least a good share of
    BIG_SIZE / 1 MB seconds; a ratio with slack, not a speed."""
    size = 4_000_000
    expected = size / 1_000_000
    p, res, took = run(airlock, net,
                       f"curl -s --max-time 60 {URL}/big.bin | head -c {size} | wc -c",
                       "--class", "small")
    assert p.stdout.strip() == str(size), p.stdout
    assert size <= res["usage"]["netReceivedBytes"] < BIG_SIZE + 4096
    assert took / expected >= 0.6, took
