#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Daemon benchmark, through the API on one keep-alive connection: create +
exec(`true`) + destroy, cold and from the warm pool, and exec(`true`) in a
running sandbox, against `airlock run -- /bin/true` and a bare fork+exec of
/bin/true measured in the same run, interleaved; sandboxes started per second
by 2 concurrent clients against 2 clients of `airlock run`, in interleaved
windows; then the memory of idle sandboxes (supervisor RSS plus what the
sandbox's cgroup charges). The load average and what an fdatasync costs in
the state directory are printed first: every create and exec waits for
synced records (BENCH_STATE_DIR puts the state elsewhere).

The floors are measured in the same run: a bare fork+exec of /bin/true from
here, and an HTTP round trip on the same connection that does nothing (an
authenticated GET the router answers 404). An exec costs at least both, and
a synced write (the process's end) on top.

  --against BUILD
            only the exec and warm create + exec figures, of this build and
            of another build directory (e.g. main's), on two daemons, one
            request of each in turn: a comparison the other load on the
            machine cannot skew.
  --trace   also run BENCH_TRACE_RUNS (default 40) traced execs in a running
            sandbox and traced warm creates on a daemon of their own, and
            print the median time of each step (AIRLOCK_TRACE, across the
            daemon, the supervisor, pid 1 and the command's process) from
            the client's request; the trace of the first exec in a sandbox
            just taken from the pool is printed apart ("first exec").
  --trace-only
            only the traces of --trace, on this build.
"""

import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, os.environ.get("AIRLOCK_BUILD", "build"))
AIRLOCK = os.path.join(BUILD, "src/cli/airlock")
AIRLOCKD = os.path.join(BUILD, "src/daemon/airlockd")
RUNS = int(os.environ.get("BENCH_RUNS", "100"))
IDLE = int(os.environ.get("BENCH_IDLE", "100"))
TPUT_S = float(os.environ.get("BENCH_TPUT_SECONDS", "2"))
TPUT_ROUNDS = int(os.environ.get("BENCH_TPUT_ROUNDS", "3"))
TRACE_RUNS = int(os.environ.get("BENCH_TRACE_RUNS", "40"))
TRACE_LINE = re.compile(r"airlock-trace pid=\d+ at=\d+us step=(\S+) \+\d+us mono=(\d+)us")

sys.path.insert(0, os.path.join(REPO, "clients/python"))
from airlock_client import Client  # noqa: E402


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


class Daemon:
    def __init__(self, base, *args, env=None, build=None):
        self.base = base
        self.sock = os.path.join(base, "d.sock")
        state = os.path.join(base, "state")
        airlock = os.path.join(build, "src/cli/airlock") if build else AIRLOCK
        airlockd = os.path.join(build, "src/daemon/airlockd") if build else AIRLOCKD
        tok = subprocess.run([airlock, "grant", "create", "--name", "bench", "--allow-sandbox",
                              "--allow-exec", "--state-dir", state],
                             check=True, capture_output=True, text=True).stdout.strip()
        self.proc = subprocess.Popen(
            [airlockd, "--quiet", "--socket", self.sock, "--state-dir", state, "--run-dir",
             os.path.join(base, "run"), "--audit", os.path.join(base, "audit.jsonl"),
             "--airlock", airlock, "--max-sandboxes", str(IDLE + 50)] + list(args),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        self.token = tok
        self.c = Client(socket_path=self.sock, token=tok, timeout=300)
        end = time.monotonic() + 30
        while True:
            try:
                self.c.health()
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)

    def pool_ready(self):
        for line in self.c.metrics().splitlines():
            if line.startswith("airlock_pool_ready "):
                return int(float(line.split()[1]))
        return 0

    def stop(self):
        """Destroy what is left, pooled ones included (a restart without
        --pool lets them go), and stop."""
        if self.proc.poll() is not None:
            return
        try:
            for sb in self.c.list(state="running"):
                self.c.delete(sb["id"])
        finally:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait()


def drain_pool(d, base):
    """A stopped daemon's pool: a daemon started without --pool destroys
    the pooled sandboxes."""
    d.proc = subprocess.Popen([a for a in d.proc.args if a not in ("--pool", "small=2", "small=4")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while os.listdir(os.path.join(base, "run")) and time.monotonic() < end:
        time.sleep(0.05)
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait()


def one_shot(ws):
    t0 = time.perf_counter()
    subprocess.run([AIRLOCK, "run", "-q", "-w", ws, "--", "/bin/true"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def bare_true():
    """The floor: a bare fork+exec of /bin/true and its wait, from here."""
    t0 = time.perf_counter()
    pid = os.posix_spawn("/bin/true", ["true"], {})
    os.waitpid(pid, 0)
    return time.perf_counter() - t0


class Conn:
    """One keep-alive connection to the API, raw HTTP/1.1: what the daemon
    costs, not what a general client library adds per request."""

    def __init__(self, sock_path, token):
        self.path = sock_path
        self.auth = "Bearer " + token
        self.s = None
        self.buf = b""

    def _connect(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(60)
        self.s.connect(self.path)
        self.buf = b""

    def _fill(self):
        b = self.s.recv(65536)
        if not b:
            raise ConnectionError("the daemon closed the connection")
        self.buf += b

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def request(self, method, path, body=None):
        """(status, body bytes); a chunked body is returned whole."""
        if self.s is None:
            self._connect()
        data = json.dumps(body).encode() if body is not None else b""
        head = ("%s %s HTTP/1.1\r\nHost: airlock\r\nAuthorization: %s\r\n"
                "Content-Length: %d\r\n" % (method, path, self.auth, len(data)))
        if body is not None:
            head += "Content-Type: application/json\r\n"
        self.s.sendall(head.encode() + b"\r\n" + data)
        status = int(self._line().split()[1])
        headers = {}
        while True:
            line = self._line()
            if not line:
                break
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            out = b""
            while True:
                n = int(self._line().split(b";")[0], 16)
                if n == 0:
                    self._line()
                    break
                out += self._take(n)
                self._take(2)
        else:
            out = self._take(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.s.close()
            self.s = None
        return status, out

    def close(self):
        if self.s:
            self.s.close()
            self.s = None


def http_nothing(conn):
    """The floor of an API call: one authenticated round trip on the same
    connection that the router answers 404 without touching the store or
    the log."""
    t0 = time.perf_counter()
    st, _ = conn.request("GET", "/v1/nothing")
    assert st == 404, st
    return time.perf_counter() - t0


def api_exec(conn, sid, argv=("true",)):
    st, body = conn.request("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": list(argv)})
    last = json.loads(body.splitlines()[-1]) if st == 200 and body else {}
    assert st == 200 and last.get("type") == "exit" and last.get("exitCode") == 0, (st, body)


def api_cycle(conn, wait_pool=None):
    """Warm create + exec(true), then destroy, on one keep-alive connection;
    returns the two times."""
    if wait_pool:
        end = time.monotonic() + 30
        while wait_pool() < 1 and time.monotonic() < end:
            time.sleep(0.005)
    t0 = time.perf_counter()
    st, body = conn.request("POST", "/v1/sandboxes", {"class": "small"})
    assert st == 201, (st, body)
    sid = json.loads(body)["id"]
    api_exec(conn, sid)
    t1 = time.perf_counter()
    st, body = conn.request("DELETE", "/v1/sandboxes/" + sid)
    assert st == 200, (st, body)
    return t1 - t0, time.perf_counter() - t1


def append_sync_cost(d, n=30):
    """Median fdatasync of a small append in directory d: what each synced
    record costs on this file system."""
    p = os.path.join(d, "sync-probe")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    ts = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 200 + b"\n")
            t0 = time.perf_counter()
            os.fdatasync(fd)
            ts.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(p)
    return statistics.median(ts)


def rate(fn, clients, seconds):
    """Completions per second of fn() run by `clients` threads for `seconds`."""
    done = [0] * clients
    errors = []
    stop = time.monotonic() + seconds

    def loop(i):
        try:
            state = {}
            while time.monotonic() < stop:
                fn(state)
                done[i] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            if state.get("conn"):
                state["conn"].close()

    t0 = time.perf_counter()
    ts = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return sum(done) / (time.perf_counter() - t0)


def ms(v):
    return "p50 %.2f ms  p99 %.2f ms" % (statistics.median(v) * 1e3, pct(v, 0.99) * 1e3)


def cgroup_memory(pid, sid):
    """Bytes the sandbox's memory cgroup charges (v2 or v1)."""
    with open("/proc/%d/cgroup" % pid) as f:
        lines = f.read().splitlines()
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if ctrls == "":
            p = "/sys/fs/cgroup%s/airlock-%s/memory.current" % (path.rstrip("/"), sid)
            if os.path.exists(p):
                return int(open(p).read())
        if "memory" in ctrls.split(","):
            p = "/sys/fs/cgroup/memory%s/airlock-%s/memory.usage_in_bytes" % (path.rstrip("/"), sid)
            if os.path.exists(p):
                return int(open(p).read())
    return 0


def rss(pid, field="Rss:"):
    """Rss, or Pss (shared pages divided among their users), in bytes."""
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def trace_steps(base, runs):
    """Per-step medians, from the client's request, of `runs` traced execs
    in a running sandbox and `runs` traced warm creates; spans cross
    processes through the trace's monotonic clock."""
    path = os.path.join(base, "trace")
    d = Daemon(base, "--pool", "small=2", env=dict(os.environ, AIRLOCK_TRACE=path))
    conn = Conn(d.sock, d.token)
    spans = {"exec": [], "create": [], "first exec": []}
    try:
        st, body = conn.request("POST", "/v1/sandboxes", {"class": "small"})
        assert st == 201, (st, body)
        sid = json.loads(body)["id"]
        for _ in range(5):
            api_exec(conn, sid)
        for _ in range(runs):
            time.sleep(0.01)
            t0 = time.monotonic_ns() // 1000
            api_exec(conn, sid)
            spans["exec"].append((t0, time.monotonic_ns() // 1000))
        for _ in range(runs):
            end = time.monotonic() + 30
            while d.pool_ready() < 2 and time.monotonic() < end:
                time.sleep(0.005)
            time.sleep(0.02)
            t0 = time.monotonic_ns() // 1000
            st, body = conn.request("POST", "/v1/sandboxes", {"class": "small"})
            spans["create"].append((t0, time.monotonic_ns() // 1000))
            assert st == 201, (st, body)
            t0 = time.monotonic_ns() // 1000
            api_exec(conn, json.loads(body)["id"])
            spans["first exec"].append((t0, time.monotonic_ns() // 1000))
            conn.request("DELETE", "/v1/sandboxes/" + json.loads(body)["id"])
        conn.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        conn.close()
        d.stop()
        drain_pool(d, base)
    marks = []
    with open(path) as f:
        for line in f:
            m = TRACE_LINE.search(line)
            if m:
                marks.append((int(m.group(2)), m.group(1)))
    marks.sort()
    for what, windows in spans.items():
        steps = {}
        for t0, t1 in windows:
            seen = {}
            for t, step in marks:
                if t0 <= t <= t1 and step not in seen:
                    seen[step] = t - t0
            seen["client.answer"] = t1 - t0
            for step, v in seen.items():
                steps.setdefault(step, []).append(v)
        rows = sorted((statistics.median(v), step) for step, v in steps.items()
                      if len(v) >= len(windows) // 2)
        print("daemon: trace of %s (%d runs), median us from the request: %s"
              % (what, len(windows), "  ".join("%s %.0f" % (step, med) for med, step in rows)))


def against(other):
    """Exec and warm create + exec on this build and on `other`, one
    request of each in turn."""
    base = tempfile.mkdtemp(prefix="airlock-bench-against-", dir=os.environ.get("BENCH_STATE_DIR"))
    ds, conns, runs = [], [], []
    try:
        print("daemon: load average %s; an fdatasync of an append in %s: %.2f ms median"
              % (" ".join("%.2f" % x for x in os.getloadavg()), base, append_sync_cost(base) * 1e3))
        for i, build in enumerate((BUILD, other)):
            b = os.path.join(base, str(i))
            os.makedirs(b)
            ds.append(Daemon(b, "--pool", "small=2", build=build))
            conns.append(Conn(ds[-1].sock, ds[-1].token))
            st, body = conns[-1].request("POST", "/v1/sandboxes", {"class": "small"})
            assert st == 201, (st, body)
            runs.append(json.loads(body)["id"])
        for _ in range(10):
            for c, sid in zip(conns, runs):
                api_exec(c, sid)
        ex, ce = ([], []), ([], [])
        # Each build goes first in every other round, and a create waits
        # for both pools to be full: neither is measured while the
        # other's refill (a cold start) runs.
        for k in range(RUNS):
            for i in ((0, 1) if k % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                api_exec(conns[i], runs[i])
                ex[i].append(time.perf_counter() - t0)
        for k in range(max(RUNS // 4, 10)):
            for i in ((0, 1) if k % 2 == 0 else (1, 0)):
                for dd in ds:
                    end = time.monotonic() + 30
                    while dd.pool_ready() < 2 and time.monotonic() < end:
                        time.sleep(0.005)
                a, _ = api_cycle(conns[i])
                ce[i].append(a)
        for name, v in (("exec(true) in a running sandbox", ex), ("warm create + exec(true)", ce)):
            print("daemon: %-32s this build %s | %s %s | p50 ratio %.2f"
                  % (name, ms(v[0]), other, ms(v[1]),
                     statistics.median(v[0]) / statistics.median(v[1])))
        print("daemon: load average at the end %s"
              % " ".join("%.2f" % x for x in os.getloadavg()))
    finally:
        for c in conns:
            c.close()
        for d in ds:
            d.stop()
        for i, d in enumerate(ds):
            drain_pool(d, os.path.join(base, str(i)))
        shutil.rmtree(base, ignore_errors=True)
    return 0


def main():
    if os.geteuid() != 0:
        print("bench: daemon: needs root", file=sys.stderr)
        return 1
    if "--against" in sys.argv[1:]:
        return against(os.path.abspath(sys.argv[sys.argv.index("--against") + 1]))
    if "--trace-only" in sys.argv[1:]:
        base = tempfile.mkdtemp(prefix="airlock-bench-trace-",
                                dir=os.environ.get("BENCH_STATE_DIR"))
        try:
            print("daemon: load average %s"
                  % " ".join("%.2f" % x for x in os.getloadavg()))
            trace_steps(base, max(TRACE_RUNS, 1))
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return 0
    base = tempfile.mkdtemp(prefix="airlock-bench-daemon-", dir=os.environ.get("BENCH_STATE_DIR"))
    ws = tempfile.mkdtemp(prefix="airlock-bench-ws-")
    cold = warm = None
    conns = []
    try:
        print("daemon: load average %s; state and audit log in %s (an fdatasync of an append "
              "there: %.2f ms median)" % (" ".join("%.2f" % x for x in os.getloadavg()), base,
                                           append_sync_cost(base) * 1e3))
        os.makedirs(os.path.join(base, "cold"))
        cold = Daemon(os.path.join(base, "cold"))
        warm_dir = os.path.join(base, "warm")
        os.makedirs(warm_dir)
        warm = Daemon(warm_dir, "--pool", "small=4")
        cc = Conn(cold.sock, cold.token)
        wc = Conn(warm.sock, warm.token)
        conns += [cc, wc]
        st, body = wc.request("POST", "/v1/sandboxes", {"class": "small"})
        assert st == 201, (st, body)
        running = json.loads(body)["id"]
        for _ in range(5):
            api_cycle(cc)
            api_cycle(wc, warm.pool_ready)
            api_exec(wc, running)
            one_shot(ws)
            bare_true()
        bare, ref, c_ce, c_d, w_ce, w_d, ex, nothing = [], [], [], [], [], [], [], []
        def pool_full():
            # The refill after a take is a cold start of its own: measure
            # nothing while it runs.
            end = time.monotonic() + 30
            while warm.pool_ready() < 4 and time.monotonic() < end:
                time.sleep(0.005)

        for _ in range(RUNS):
            bare.append(bare_true())
            nothing.append(http_nothing(wc))
            ref.append(one_shot(ws))
            a, b = api_cycle(cc)
            c_ce.append(a)
            c_d.append(b)
            pool_full()
            t0 = time.perf_counter()
            api_exec(wc, running)
            ex.append(time.perf_counter() - t0)
            a, b = api_cycle(wc)
            w_ce.append(a)
            w_d.append(b)
            pool_full()
        r, f = statistics.median(ref), statistics.median(bare)
        print("daemon: bare fork+exec of /bin/true          %s (floor)" % ms(bare))
        print("daemon: HTTP round trip doing nothing       %s (floor)" % ms(nothing))
        print("daemon: airlock run -- /bin/true            %s (reference)" % ms(ref))
        print("daemon: cold create + exec(true)            %s  %.2fx airlock run"
              % (ms(c_ce), statistics.median(c_ce) / r))
        print("daemon: cold destroy                        %s" % ms(c_d))
        print("daemon: warm create + exec(true)            %s  %.2fx airlock run, %.1fx bare"
              % (ms(w_ce), statistics.median(w_ce) / r, statistics.median(w_ce) / f))
        print("daemon: warm destroy                        %s" % ms(w_d))
        wced = [a + b for a, b in zip(w_ce, w_d)]
        print("daemon: warm create + exec + destroy        %s  %.2fx airlock run"
              % (ms(wced), statistics.median(wced) / r))
        print("daemon: exec(true) in a running sandbox     %s  %.1fx bare"
              % (ms(ex), statistics.median(ex) / f))
        floor = f + statistics.median(nothing)
        print("daemon: exec floor (bare fork+exec + HTTP round trip) p50 %.2f ms; exec is %.2fx "
              "the floor, %.2f ms above it" % (floor * 1e3, statistics.median(ex) / floor,
                                               (statistics.median(ex) - floor) * 1e3))
        print("daemon: targets: warm create + exec p50 < 1 ms: %.2f ms; exec in a running "
              "sandbox p50 < 0.5 ms: %.2f ms"
              % (statistics.median(w_ce) * 1e3, statistics.median(ex) * 1e3))

        # Sandboxes started per second by 2 clients, each a create (from the
        # pool while it lasts) + exec(true) + destroy, against 2 clients
        # running `airlock run -- true`; windows interleaved.
        def api_one(state):
            if "conn" not in state:
                state["conn"] = Conn(warm.sock, warm.token)
            api_cycle(state["conn"])

        def run_one(state):
            one_shot(ws)

        api_rates, run_rates = [], []
        for _ in range(TPUT_ROUNDS):
            run_rates.append(rate(run_one, 2, TPUT_S))
            end = time.monotonic() + 30
            while warm.pool_ready() < 4 and time.monotonic() < end:
                time.sleep(0.01)
            api_rates.append(rate(api_one, 2, TPUT_S))
        print("daemon: 2 clients: airlock run -- true      %.1f/s (reference)"
              % statistics.median(run_rates))
        print("daemon: 2 clients: create + exec + destroy  %.1f/s  %.2fx airlock run "
              "(pool of 4, refilled as it goes)"
              % (statistics.median(api_rates),
                 statistics.median(api_rates) / statistics.median(run_rates)))
        wc.request("DELETE", "/v1/sandboxes/" + running)
        for c in conns:
            c.close()
        warm.stop()

        # Idle sandboxes.
        t0 = time.perf_counter()
        ids = [cold.c.create(sandbox_class="small")["id"] for _ in range(IDLE)]
        made = time.perf_counter() - t0
        sups = {}
        rund = os.path.join(base, "cold", "run")
        for i in ids:
            with open(os.path.join(rund, i, "supervisor.json")) as f:
                sups[i] = json.load(f)["pid"]
        sup_rss = [rss(sups[i]) for i in ids]
        sup_pss = [rss(sups[i], "Pss:") for i in ids]
        cg = [cgroup_memory(sups[i], i) for i in ids]
        per = [a + b for a, b in zip(sup_pss, cg)]
        print("daemon: %d idle sandboxes created in %.1f s; all answer: %s"
              % (IDLE, made, all(cold.c.run(i, ["true"]).exit_code == 0 for i in ids[:10])))
        print("daemon: per idle sandbox (median): supervisor RSS %.2f MiB, PSS %.2f MiB; "
              "sandbox cgroup %.2f MiB; PSS + cgroup %.2f MiB; daemon RSS %.1f MiB"
              % (statistics.median(sup_rss) / 2**20, statistics.median(sup_pss) / 2**20,
                 statistics.median(cg) / 2**20, statistics.median(per) / 2**20,
                 rss(cold.proc.pid) / 2**20))
        print("daemon: load average at the end %s"
              % " ".join("%.2f" % x for x in os.getloadavg()))
        cold.stop()
        if "--trace" in sys.argv[1:] and TRACE_RUNS > 0:
            os.makedirs(os.path.join(base, "trace"))
            trace_steps(os.path.join(base, "trace"), TRACE_RUNS)
    finally:
        for c in conns:
            c.close()
        for d in (warm, cold):
            if d:
                d.stop()
        if warm:
            drain_pool(warm, os.path.join(base, "warm"))
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
