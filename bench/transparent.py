#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Transparent mode benchmark (docs/network.md), each figure against a
reference measured in the same run, interleaved:

  (a) the direct path: a 1 GiB download by curl with no proxy inside
      `airlock run` (no rate, no byte budget: the host connects the checked
      address and hands the socket over) against the same curl on the host;
  (b) the relay path: the same download with a byte budget (so the gate
      relays it, as it does under the classes' rates) against the same;
  (c) the gate's CONNECT relay (curl -p inside the sandbox) against
      tinyproxy's CONNECT relay on the host;
  (d) the latency each path adds per request, p50 and p99: sequential
      keep-alive requests taking turns over several connections in one
      client, so every path sees the same moments of a busy machine. Inside
      one sandbox: the direct path (an IP rule), the relay path (a name, to
      a second upstream), the gate's CONNECT relay and its HTTP proxy
      (absolute-URI requests, one record each); on the host: a
      direct connection and tinyproxy's CONNECT relay. Each relay is
      compared with the direct connection of the same client; the direct
      path is also compared with the host's.

  (e) the relay during the disk meter's walks of a read-write workspace:
      the command first grows its workspace to WALK_FILES files (a tree
      that the meter walks about once a second), then takes turns over the
      direct path, the relay path and the HTTP proxy as in (d). Reported:
      the requests over STALL_MS and the slowest, each path against the
      direct path of the same client (which never waits for the gate's
      loop). With BENCH_AGAINST=BIN, the same runs of that other airlock
      build are interleaved with these and reported beside them.

Keep-alive requests and the added latency against tinyproxy are in
netgate.py. The upstream is bench/upstream.c on the host's first
non-loopback IPv4 address (loopback inside a sandbox is its own). Reports,
never judges: exit 1 only when a tool is missing or a transfer fails."""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netgate import (AIRLOCK, LAT_REQUESTS, LAT_WARMUP, REPO, STEP_TIMEOUT, BenchError,  # noqa: E402
                     free_port, pct, run, wait_listening)

BYTES = int(os.environ.get("BENCH_TUNNEL_BYTES", str(1 << 30)))
RUNS = 3
AGAINST = os.environ.get("BENCH_AGAINST")
WALK_FILES = 9900  # under the meter's 10000 entries, so it is walked
STALL_MS = 10
WALK_TURNS = int(os.environ.get("BENCH_WALK_TURNS", "15000"))


def host_address():
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            return parts[parts.index("inet") + 1].split("/")[0]
    return None


def wait_on(addr, port, proc, what):
    import time
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with code {proc.returncode}")
        try:
            socket.create_connection((addr, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{what} is not listening on {addr}:{port}")


def main():
    cc = shutil.which("cc") or shutil.which("gcc")
    missing = [t for t, ok in (("cc", cc), ("curl", shutil.which("curl")),
                               ("tinyproxy", shutil.which("tinyproxy")),
                               (AIRLOCK, os.access(AIRLOCK, os.X_OK))) if not ok]
    if missing:
        print(f"bench: missing {', '.join(missing)} (make deps; make build)", file=sys.stderr)
        return 1
    addr = host_address()
    if not addr:
        print("transparent: skipped: the host has no non-loopback IPv4 address")
        return 0
    tmp = tempfile.mkdtemp(prefix="airlock-bench-tp-")
    os.chmod(tmp, 0o755)
    procs = []
    try:
        exe = os.path.join(tmp, "upstream")
        run([cc, "-O2", "-o", exe, os.path.join(REPO, "bench/upstream.c")], "compiling upstream.c")
        up = subprocess.Popen([exe, "0", addr], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        procs.append(up)
        port = int(up.stdout.readline())
        wait_on(addr, port, up, "upstream")
        url = f"http://{addr}:{port}/bytes/{BYTES}"
        # A second upstream, reached by a name: the relay path's latency.
        up2 = subprocess.Popen([exe, "0", addr], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        procs.append(up2)
        port2 = int(up2.stdout.readline())
        wait_on(addr, port2, up2, "second upstream")

        tp_port = free_port()
        conf = os.path.join(tmp, "tinyproxy.conf")
        with open(conf, "w") as f:
            if os.geteuid() == 0:
                f.write("User nobody\nGroup nogroup\n")
            f.write(f"Port {tp_port}\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 60\nMaxClients 64\n"
                    "LogLevel Critical\nDisableViaHeader Yes\n")
        os.chmod(conf, 0o644)
        tp = subprocess.Popen(["tinyproxy", "-d", "-c", conf], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(tp)
        wait_listening(tp_port, tp, "tinyproxy")

        ws = os.path.join(tmp, "ws")
        os.mkdir(ws)
        shutil.copy(os.path.join(REPO, "bench/netgate.py"), os.path.join(ws, "netgate.py"))
        pols = {}
        for name, direct, budget in (("direct", True, {"rate": 0}),
                                     ("relay", False, {"rate": 0, "bytes": "1000G"})):
            pols[name] = os.path.join(tmp, f"{name}.json")
            with open(pols[name], "w") as f:
                json.dump({"network": {"directPath": direct, "budget": budget}}, f)
        # No budget, names on the relay (the default): an IP rule's connection
        # takes the direct path, a name's the relay.
        pols["paths"] = os.path.join(tmp, "paths.json")
        with open(pols["paths"], "w") as f:
            json.dump({"network": {"budget": {"rate": 0}, "hosts": {"relay.test": addr}}}, f)

        fmt = ["-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_total}\\n", url]

        def rate(out, what):
            code, size, secs = out.split()
            if code != "200" or int(size) != BYTES:
                raise BenchError(f"{what}: incomplete transfer: HTTP {code}, {size} of {BYTES} bytes")
            return BYTES / float(secs) / 1e6

        def inside(policy, argv, what, extra=(), binary=AIRLOCK, workspace=ws):
            return run([binary, "run", "-q", "-p", pols[policy], "-w", workspace, "--timeout", str(STEP_TIMEOUT),
                        "--cpus", str(os.cpu_count() or 1), *extra,
                        "--allow", f"{addr}:{port}", "--allow-private", f"{addr}/32", "--", *argv], what)

        def sandbox(policy, argv, what):
            return rate(inside(policy, argv, what), what)

        plain = ["curl", "-sS", "--noproxy", "*"] + fmt
        viagate = ["curl", "-sS", "-p", "--noproxy", "", "-x", "http://127.0.0.1:3128"] + fmt
        viatp = ["curl", "-sS", "-p", "--noproxy", "", "-x", f"http://127.0.0.1:{tp_port}"] + fmt
        res = {k: [] for k in ("host", "direct", "relay", "connect", "tinyproxy")}
        for _ in range(RUNS):
            res["direct"].append(sandbox("direct", plain, "transparent direct path"))
            res["host"].append(rate(run(plain, "direct transfer"), "direct transfer"))
            res["relay"].append(sandbox("relay", plain, "transparent relay path"))
            res["connect"].append(sandbox("direct", viagate, "CONNECT through the gate"))
            res["tinyproxy"].append(rate(run(viatp, "CONNECT through tinyproxy"), "CONNECT through tinyproxy"))
        m = {k: statistics.median(v) for k, v in res.items()}
        gib = BYTES / (1 << 30)
        print(f"transparent: {gib:g} GiB, median of {RUNS} interleaved; host {addr}")
        print(f"transparent: direct path {m['direct']:.0f} MB/s, direct connection {m['host']:.0f} MB/s, "
              f"ratio {m['direct'] / m['host']:.2f}x (target >= 0.95x)")
        print(f"transparent: relay path {m['relay']:.0f} MB/s, ratio to a direct connection "
              f"{m['relay'] / m['host']:.2f}x")
        lat = {k: [] for k in ("host", "tinyproxy", "direct", "relay", "connect", "proxy")}
        n_args = [str(LAT_REQUESTS), str(LAT_WARMUP)]
        # The direct connection first: once relay.test is answered, the
        # address is the name's and only port2 is allowed for it.
        in_paths = [f"direct={addr}:{port}", f"relay=relay.test:{port2}",
                    f"connect={addr}:{port}@127.0.0.1:3128", f"proxy=http:{addr}:{port}@127.0.0.1:3128"]
        host_paths = [f"host={addr}:{port}", f"tinyproxy={addr}:{port}@127.0.0.1:{tp_port}"]
        for _ in range(RUNS):
            got = json.loads(inside("paths", ["/usr/bin/python3", "/workspace/netgate.py", "latency-paths",
                                              *n_args, *in_paths], "latency inside",
                                    ("--allow", f"relay.test:{port2}")))
            got.update(json.loads(run([sys.executable, os.path.join(REPO, "bench/netgate.py"), "latency-paths",
                                       *n_args, *host_paths], "latency on the host")))
            for k, v in got.items():
                lat[k] += v
        load = os.getloadavg()[0]

        def added(k, ref):
            return ", ".join(f"{n} {pct(lat[k], q) - pct(lat[ref], q):+.0f} us ({pct(lat[k], q):.0f} vs "
                             f"{pct(lat[ref], q):.0f})" for n, q in (("p50", 0.5), ("p99", 0.99)))

        samples = f"{len(lat['direct'])} samples each, {RUNS} runs, load average {load:.2f}"
        print(f"transparent: latency added, relay path against the direct path in the same client: "
              f"{added('relay', 'direct')}; {samples} (target p99 <= 100 us)")
        print(f"transparent: latency added, gate CONNECT relay against the direct path in the same client: "
              f"{added('connect', 'direct')}; {samples}")
        print(f"transparent: latency added, gate HTTP proxy (absolute URI, kept upstream) against the direct "
              f"path in the same client: {added('proxy', 'direct')}; {samples}")
        print(f"transparent: latency added, tinyproxy CONNECT relay against a direct connection in the same "
              f"client: {added('tinyproxy', 'host')}; {samples}")
        print(f"transparent: latency added, direct path (inside) against a direct connection (host), "
              f"separate clients: {added('direct', 'host')}")
        print(f"transparent: gate CONNECT relay {m['connect']:.0f} MB/s, tinyproxy CONNECT {m['tinyproxy']:.0f} MB/s, "
              f"ratio {m['connect'] / m['tinyproxy']:.2f}x (target >= 1.5x)")
        walks(inside, in_paths, port2, tmp)
    except BenchError as e:
        print(f"bench: transparent: {e}", file=sys.stderr)
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def walks(inside, in_paths, port2, tmp):
    """(e): the relay while the disk meter walks a growing workspace."""
    builds = [("this build", AIRLOCK)] + ([("BENCH_AGAINST", AGAINST)] if AGAINST else [])
    paths = [p for p in in_paths if p.split("=")[0] in ("direct", "relay", "proxy")]
    grow = (f"import os\nos.mkdir('/workspace/many')\nfor i in range({WALK_FILES}): "
            "open('/workspace/many/%d' % i, 'w').close()")
    lat = {b: {} for b, _ in builds}
    for r in range(RUNS):
        for name, binary in (builds if r % 2 == 0 else builds[::-1]):
            w = os.path.join(tmp, f"walk-{r}-{len(lat[name])}")
            os.mkdir(w)
            shutil.copy(os.path.join(REPO, "bench/netgate.py"), w)
            # Long enough (some seconds) for several walks, one a second.
            script = (f"/usr/bin/python3 -c \"{grow}\" && exec /usr/bin/python3 /workspace/netgate.py "
                      f"latency-paths {WALK_TURNS} {LAT_WARMUP} {' '.join(paths)}")
            got = json.loads(inside("paths", ["/bin/sh", "-c", script], f"walk latency ({name})",
                                    ("--allow", f"relay.test:{port2}"), binary=binary, workspace=w))
            shutil.rmtree(w, ignore_errors=True)
            for k, v in got.items():
                lat[name].setdefault(k, []).extend(v)
    load = os.getloadavg()[0]
    for name, _ in builds:
        d = lat[name]
        slow = {k: sum(1 for x in v if x > STALL_MS * 1000) for k, v in d.items()}
        print(f"transparent: during the disk meter's walks ({WALK_FILES} files), {name}: requests over "
              f"{STALL_MS} ms, slowest: " + ", ".join(f"{k} {slow[k]}, {max(d[k]) / 1000:.1f} ms" for k in d)
              + f"; {len(d['direct'])} samples each, {RUNS} runs, load average {load:.2f}")


if __name__ == "__main__":
    sys.exit(main())
