#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Network gate benchmark, each figure against a reference measured in the
same run, interleaved:

  (a) a 1 GiB CONNECT tunnel through the gate (curl -p inside `airlock run`)
      against the same curl downloading directly on loopback;
  (b) keep-alive HTTP requests per second through the gate against tinyproxy
      with an equivalent allow rule, both driven by the same wrk and script
      (absolute-URI requests), wrk inside the sandbox for the gate; and the
      CPU time each proxy spends per request (less sensitive to a busy machine);
  (c) the latency the gate adds per request, p50 and p99: sequential
      keep-alive requests on one connection through the gate and directly.

The upstream is bench/upstream.c (a small epoll HTTP/1.1 server), compiled
here; its own rate under the same wrk is printed to show it is not the
bottleneck. Everything is on 127.0.0.1. Reports, never judges: exit 1 only
when a tool is missing or a transfer or request fails."""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK_BIN", os.path.join(REPO, "build/src/cli/airlock"))
TUNNEL_BYTES = int(os.environ.get("BENCH_TUNNEL_BYTES", str(1 << 30)))
TUNNEL_RUNS = 3
WRK_ROUNDS = 3
WRK_SECONDS = 4
WRK_ARGS = ["-t1", "-c32", f"-d{WRK_SECONDS}s"]
LAT_ROUNDS = 3
LAT_REQUESTS = 2000
LAT_WARMUP = 100
STEP_TIMEOUT = 60


class BenchError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, what):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with code {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{what} is not listening on 127.0.0.1:{port}")


def run(argv, what, during=None):
    """Run argv and return its output; `during(popen)` is called while it runs."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        if during:
            during(p)
        out, err = p.communicate(timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise BenchError(f"{what}: timed out after {STEP_TIMEOUT} s")
    except BaseException:
        p.kill()
        p.wait()
        raise
    if p.returncode != 0:
        raise BenchError(f"{what}: exit code {p.returncode}: {err.strip()[-500:]}")
    return out


def cpu_seconds(pid):
    """User plus system time of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- the latency client; also runs inside the sandbox (a copy of this file) ----

def _open(host, port, via=None):
    """A keep-alive connection to host:port, or a CONNECT tunnel to it through
    the proxy via = (host, port)."""
    s = socket.create_connection(via or (host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    if via:
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        status = f.readline()
        while f.readline() not in (b"\r\n", b""):
            pass
        if not status.split(b" ")[1:2] == [b"200"]:
            raise OSError(f"CONNECT {host}:{port} through {via}: {status!r}")
    return s, f


def _get(s, f, req):
    """One request on a kept connection; its duration in microseconds."""
    t0 = time.perf_counter()
    s.sendall(req)
    status = f.readline()
    length = None
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        if h.lower().startswith(b"content-length:"):
            length = int(h.split(b":", 1)[1])
    if not status.startswith(b"HTTP/1.1 200 ") or length is None or len(f.read(length)) != length:
        raise OSError(f"answer {status!r}")
    return (time.perf_counter() - t0) * 1e6


def latency_client(host, port, target, host_header, n, warmup):
    """Sequential GETs on one keep-alive connection; prints the durations of
    the last n in microseconds as a JSON list."""
    s, f = _open(host, port)
    req = f"GET {target} HTTP/1.1\r\nHost: {host_header}\r\n\r\n".encode()
    out = []
    for i in range(warmup + n):
        try:
            us = _get(s, f, req)
        except OSError as e:
            print(f"latency client: request {i}: {e}", file=sys.stderr)
            return 1
        if i >= warmup:
            out.append(us)
    print(json.dumps(out))
    return 0


def latency_paths(n, warmup, paths):
    """Sequential GETs over several kept connections opened in the order
    given, one request on each in turn (the first of each turn rotating), so
    that every path sees the same moments of a busy machine. paths are
    NAME=HOST:PORT, NAME=HOST:PORT@PROXYHOST:PROXYPORT (a CONNECT tunnel)
    or NAME=http:HOST:PORT@PROXYHOST:PROXYPORT (absolute-URI requests to the
    proxy). Prints {NAME: [microseconds, ...]} for the last n turns."""
    conns = []
    for spec in paths:
        name, rest = spec.split("=", 1)
        dest, _, via = rest.partition("@")
        absolute = dest.startswith("http:")
        h, p = dest.removeprefix("http:").rsplit(":", 1)
        v = None
        if via:
            vh, vp = via.rsplit(":", 1)
            v = (vh, int(vp))
        try:
            s, f = _open(*v) if absolute else _open(h, int(p), v)
        except OSError as e:
            print(f"latency client: {name}: {e}", file=sys.stderr)
            return 1
        target = f"http://{h}:{p}/" if absolute else "/"
        conns.append((name, s, f, f"GET {target} HTTP/1.1\r\nHost: {h}:{p}\r\n\r\n".encode()))
    out = {c[0]: [] for c in conns}
    for i in range(warmup + n):
        for k in range(len(conns)):
            name, s, f, req = conns[(i + k) % len(conns)]
            try:
                us = _get(s, f, req)
            except OSError as e:
                print(f"latency client: {name}, request {i}: {e}", file=sys.stderr)
                return 1
            if i >= warmup:
                out[name].append(us)
    print(json.dumps(out))
    return 0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


# ---- the bench ----

class Bench:
    def __init__(self, tmp):
        self.tmp = tmp
        self.ws = os.path.join(tmp, "ws")
        self.procs = []
        self.audit = os.path.join(tmp, "audit.jsonl")
        self.gate_cpu_per_req = []

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def setup(self, cc):
        os.chmod(self.tmp, 0o755)  # tinyproxy reads its filter after dropping to nobody
        os.mkdir(self.ws)
        shutil.copy(os.path.abspath(__file__), os.path.join(self.ws, "netgate.py"))

        exe = os.path.join(self.tmp, "upstream")
        run([cc, "-O2", "-o", exe, os.path.join(REPO, "bench/upstream.c")], "compiling upstream.c")
        up = self.start([exe, "0"], stdout=subprocess.PIPE, text=True)
        line = up.stdout.readline()
        if not line.strip().isdigit():
            raise BenchError("upstream did not report its port")
        self.port = int(line)
        wait_listening(self.port, up, "upstream")
        self.url = f"http://127.0.0.1:{self.port}/"

        # The same absolute-URI request for the gate and for tinyproxy.
        with open(os.path.join(self.ws, "req.lua"), "w") as f:
            f.write(f'wrk.path = "{self.url}"\nwrk.headers["Host"] = "127.0.0.1:{self.port}"\n')

        # tinyproxy: this destination only (filter on the host, default deny).
        self.tp_port = free_port()
        filt = os.path.join(self.tmp, "filter")
        with open(filt, "w") as f:
            f.write("^127\\.0\\.0\\.1$\n")
        conf = os.path.join(self.tmp, "tinyproxy.conf")
        with open(conf, "w") as f:
            if os.geteuid() == 0:
                f.write("User nobody\nGroup nogroup\n")
            f.write(f"Port {self.tp_port}\nListen 127.0.0.1\nAllow 127.0.0.1\n"
                    f"Timeout 60\nMaxClients 256\nLogLevel Critical\nDisableViaHeader Yes\n"
                    f'Filter "{filt}"\nFilterType ere\nFilterDefaultDeny Yes\n')
        for p in (filt, conf):
            os.chmod(p, 0o644)
        self.tinyproxy = self.start(["tinyproxy", "-d", "-c", conf],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(self.tp_port, self.tinyproxy, "tinyproxy")

    def sandbox(self, argv, what, during=None):
        """Run argv in a gated sandbox allowed to reach the upstream only."""
        # The class's network rate (docs/policy.md) is lifted: this measures
        # the gate itself, not a limit it enforces.
        pol = os.path.join(self.tmp, "unlimited-rate.json")
        if not os.path.exists(pol):
            with open(pol, "w") as f:
                f.write('{"network": {"budget": {"rate": 0}}}\n')
        return run([AIRLOCK, "run", "-q", "-p", pol, "-w", self.ws, "--cpus", str(os.cpu_count() or 1),
                    "--timeout", str(STEP_TIMEOUT), "--audit", self.audit,
                    "--allow", f"127.0.0.1:{self.port}", "--allow-private", "127.0.0.0/8",
                    "--", *argv], what, during)

    def decisions(self):
        """Requests the gates of this run have recorded so far."""
        try:
            with open(self.audit, "rb") as f:
                return f.read().count(b'"kind":"net.decision"')
        except FileNotFoundError:
            return 0

    def gate_cpu(self, p):
        """While wrk runs through the gate: the supervisor's (`airlock run`'s)
        CPU time per request, over a window inside wrk's run."""
        base = self.decisions()
        deadline = time.monotonic() + 5
        while self.decisions() == base:
            if p.poll() is not None or time.monotonic() > deadline:
                return
            time.sleep(0.05)
        time.sleep(0.5)
        try:
            c0, n0 = cpu_seconds(p.pid), self.decisions()
            time.sleep(WRK_SECONDS - 1.5)
            c1, n1 = cpu_seconds(p.pid), self.decisions()
        except OSError:
            return
        if n1 > n0:
            self.gate_cpu_per_req.append((c1 - c0) / (n1 - n0))

    # (a)
    def tunnel(self):
        url = f"{self.url}bytes/{TUNNEL_BYTES}"
        fmt = ["-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_total}\\n", url]
        gate_cmd = ["curl", "-sS", "-p", "--noproxy", "", "-x", "http://127.0.0.1:3128"] + fmt
        direct_cmd = ["curl", "-sS", "--noproxy", "*"] + fmt

        def rate(out, what):
            code, size, secs = out.split()
            if code != "200" or int(size) != TUNNEL_BYTES:
                raise BenchError(f"{what}: incomplete transfer: HTTP {code}, {size} of {TUNNEL_BYTES} bytes")
            return TUNNEL_BYTES / float(secs) / 1e6

        gate, direct = [], []
        for _ in range(TUNNEL_RUNS):
            gate.append(rate(self.sandbox(gate_cmd, "tunnel through the gate"), "tunnel through the gate"))
            direct.append(rate(run(direct_cmd, "direct transfer"), "direct transfer"))
        g, d = statistics.median(gate), statistics.median(direct)
        print(f"netgate: tunnel {TUNNEL_BYTES / (1 << 30):g} GiB: gate {g:.0f} MB/s, direct {d:.0f} MB/s, "
              f"ratio {g / d:.2f}x (target >= 0.9x), median of {TUNNEL_RUNS} interleaved")

    # (b)
    @staticmethod
    def wrk_rate(out, what):
        rate = errors = None
        total = 0
        for line in out.splitlines():
            line = line.strip()
            if " requests in " in line:
                total = int(line.split()[0])
            elif line.startswith("Requests/sec:"):
                rate = float(line.split()[1])
            elif line.startswith("Non-2xx or 3xx responses:"):
                raise BenchError(f"{what}: {line}")
            elif line.startswith("Socket errors:"):
                # connect N, read N, write N, timeout N
                parts = line.split(":", 1)[1].replace(",", "").split()
                errors = dict(zip(parts[::2], map(int, parts[1::2])))
                if errors["connect"] or errors["write"] or errors["timeout"]:
                    raise BenchError(f"{what}: {line}")
        if not rate:
            raise BenchError(f"{what}: no requests completed")
        # wrk counts a connection the server closed as a read error.
        return rate, (errors or {}).get("read", 0), total

    def requests(self):
        script = os.path.join(self.ws, "req.lua")
        direct, _, _ = self.wrk_rate(run(["wrk", *WRK_ARGS, self.url], "wrk direct"), "wrk direct")
        gate, tp, gate_closed, tp_closed, tp_cpu = [], [], 0, 0, []
        for _ in range(WRK_ROUNDS):
            r, c, _ = self.wrk_rate(self.sandbox(["wrk", *WRK_ARGS, "-s", "/workspace/req.lua",
                                                  "http://127.0.0.1:3128/"], "wrk through the gate",
                                                 self.gate_cpu),
                                    "wrk through the gate")
            gate.append(r)
            gate_closed += c
            c0 = cpu_seconds(self.tinyproxy.pid)
            r, c, n = self.wrk_rate(run(["wrk", *WRK_ARGS, "-s", script,
                                         f"http://127.0.0.1:{self.tp_port}/"], "wrk through tinyproxy"),
                                    "wrk through tinyproxy")
            tp_cpu.append((cpu_seconds(self.tinyproxy.pid) - c0) / n)
            tp.append(r)
            tp_closed += c
        g, t = statistics.median(gate), statistics.median(tp)
        print(f"netgate: upstream (bench/upstream.c, epoll) direct {direct:.0f} req/s, wrk {' '.join(WRK_ARGS)}")
        print(f"netgate: keep-alive requests: gate {g:.0f} req/s, tinyproxy {t:.0f} req/s, "
              f"ratio {g / t:.2f}x (target >= 3x), wrk {' '.join(WRK_ARGS)}, "
              f"median of {WRK_ROUNDS} interleaved; connections closed by the proxy: "
              f"gate {gate_closed}, tinyproxy {tp_closed}")
        if self.gate_cpu_per_req:
            gc, tc = statistics.median(self.gate_cpu_per_req) * 1e6, statistics.median(tp_cpu) * 1e6
            print(f"netgate: CPU per keep-alive request: gate {gc:.1f} us, tinyproxy {tc:.1f} us, "
                  f"tinyproxy/gate {tc / gc:.2f}x (user+system time of the proxy's process)")
        else:
            print("netgate: CPU per keep-alive request: no sample of the gate (wrk ended too soon)")

    # (c)
    def latency(self):
        args = [str(LAT_REQUESTS), str(LAT_WARMUP)]
        gate, direct = [], []
        for _ in range(LAT_ROUNDS):
            gate += json.loads(self.sandbox(
                ["/usr/bin/python3", "/workspace/netgate.py", "latency-client", "127.0.0.1", "3128",
                 self.url, f"127.0.0.1:{self.port}", *args], "latency through the gate"))
            direct += json.loads(run(
                [sys.executable, os.path.abspath(__file__), "latency-client", "127.0.0.1",
                 str(self.port), "/", f"127.0.0.1:{self.port}", *args], "latency direct"))

        parts = []
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            g, d = pct(gate, q), pct(direct, q)
            parts.append(f"{name} {g - d:+.0f} us (gate {g:.0f}, direct {d:.0f})")
        print(f"netgate: latency added per request: {', '.join(parts)}; "
              f"{len(gate)} and {len(direct)} samples ({LAT_ROUNDS}x{LAT_REQUESTS} sequential keep-alive "
              f"requests each way, interleaved runs), load average {os.getloadavg()[0]:.2f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "latency-client":
        h, p, target, hh, n, w = sys.argv[2:8]
        return latency_client(h, int(p), target, hh, int(n), int(w))
    if len(sys.argv) > 1 and sys.argv[1] == "latency-paths":
        return latency_paths(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])

    cc = shutil.which("cc") or shutil.which("gcc")
    missing = [t for t, ok in (("cc", cc), ("curl", shutil.which("curl")), ("wrk", shutil.which("wrk")),
                               ("tinyproxy", shutil.which("tinyproxy")),
                               (AIRLOCK, os.access(AIRLOCK, os.X_OK))) if not ok]
    if missing:
        print(f"bench: missing {', '.join(missing)} (make deps; make build)", file=sys.stderr)
        return 1

    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="airlock-bench-net-")
    b = Bench(tmp)
    try:
        b.setup(cc)
        print(f"netgate: load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs at the start")
        b.tunnel()
        b.requests()
        b.latency()
    except BenchError as e:
        print(f"bench: netgate: {e}", file=sys.stderr)
        return 1
    finally:
        b.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"netgate: {time.monotonic() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
