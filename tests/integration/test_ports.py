# SPDX-License-Identifier: Apache-2.0
"""Port forwards (`airlock run -P`, the control op "ports"): a real HTTP
server inside the sandbox, served to curl on the host, in network modes none
and gated, audited per connection, and gone with the sandbox."""

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def curl(port, path="/", timeout=3):
    return subprocess.run(["curl", "-sS", "-m", str(timeout), f"http://127.0.0.1:{port}{path}"],
                          capture_output=True, text=True, timeout=timeout + 5)


def curl_until(port, path, deadline_s=20):
    """The server inside takes a moment to start: until then the forward
    closes each connection (nothing listens inside)."""
    end = time.monotonic() + deadline_s
    while True:
        r = curl(port, path)
        if r.returncode == 0 or time.monotonic() > end:
            return r
        time.sleep(0.3)


def refused(port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", port))
        return False
    except ConnectionRefusedError:
        return True
    finally:
        s.close()


class Served:
    """`airlock run -P` with python3 -m http.server inside, in the background."""

    def __init__(self, airlock, *opts, inner=8000, host_port=0):
        self.airlock = airlock
        self.ws = airlock.make_dir()
        (self.ws / "hello.txt").write_text("hello from inside\n")
        airlock.chown(self.ws)
        self.audit = airlock.make_dir("audit") / "audit.jsonl"
        argv = airlock.cmd(["run", "-w", self.ws, "--audit", self.audit, "-P",
                            f"{inner}:{host_port}", "--timeout", "40", *opts, "--",
                            "python3", "-m", "http.server", "--bind", "127.0.0.1", str(inner)])
        self.proc = subprocess.Popen(argv, cwd=str(self.ws), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"sandbox port (\d+) is served at 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            rest = self.proc.communicate(timeout=30)[1]
            raise AssertionError(f"no forward announced: {line!r} {rest!r}")
        assert int(m.group(1)) == inner
        self.port = int(m.group(2))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc.stderr.close()

    def events(self, kind):
        out = []
        with open(self.audit) as f:
            for line in f:
                e = json.loads(line)
                if e["kind"] == kind:
                    out.append(e)
        return out


@pytest.mark.parametrize("net", [["--net", "none"], ["--allow", "example.com"]],
                         ids=["none", "gated"])
def test_http_server_inside_served_to_curl(airlock, net):
    s = Served(airlock, *net)
    try:
        r = curl_until(s.port, "/hello.txt")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "hello from inside\n"
    finally:
        s.stop()
    # The listener went with the sandbox.
    assert refused(s.port)
    conns = [e for e in s.events("port.connect") if e["result"] == "closed"]
    assert conns, s.events("port.connect")
    last = conns[-1]
    assert last["port"] == 8000 and last["hostPort"] == s.port
    assert last["peer"].startswith("127.0.0.1:")
    assert last["bytesToSandbox"] > 0 and last["bytesFromSandbox"] > len("hello from inside\n")
    assert last["durationMs"] >= 0
    closed = s.events("port.closed")
    assert closed and closed[-1]["reason"] == "sandbox_ended"
    assert s.events("port.opened")[0]["bind"] == "127.0.0.1"


def test_listener_gone_when_command_ends(airlock):
    """A command that ends by itself takes its forward with it."""
    port = free_port()
    ws = airlock.make_dir()
    p = subprocess.Popen(airlock.cmd(["run", "-q", "-w", ws, "-P", f"9000:{port}", "--",
                                      "/bin/sh", "-c", "sleep 2"]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    assert p.poll() is None
    assert not refused(port), "the forward did not listen while the sandbox ran"
    p.wait(timeout=30)
    assert p.returncode == 0, p.stderr.read()
    p.stderr.close()
    assert refused(port)


def test_nothing_listening_inside_closes_the_client(airlock):
    """A forward to a port nothing listens on inside: the host's client is
    closed, and the connection is recorded as refused."""
    s = Served(airlock, "-P", "8001:0")
    try:
        line = s.proc.stderr.readline()
        m = re.search(r"sandbox port 8001 is served at 127\.0\.0\.1:(\d+)", line)
        assert m, line
        empty = int(m.group(1))
        assert curl_until(s.port, "/hello.txt").returncode == 0
        r = curl(empty, "/hello.txt")
        assert r.returncode in (52, 56), (r.returncode, r.stderr)  # empty reply / reset
    finally:
        s.stop()
    refusals = [e for e in s.events("port.connect") if e["port"] == 8001]
    assert refusals and refusals[0]["result"] == "refused"
    assert refusals[0]["bytesFromSandbox"] == 0


def test_bad_specs_refused(airlock):
    ws = airlock.make_dir()
    for spec, why in [("0", "from 1 to 65535"), ("70000", "from 1 to 65535"),
                      ("80:x", "host port"), ("", "expected PORT")]:
        r = airlock.run(["run", "-q", "-w", ws, "-P", spec, "--", "/bin/true"],
                        check_setup=False)
        assert r.returncode == 125, (spec, r.stderr)
        assert "-P" in r.stderr and why in r.stderr, (spec, r.stderr)
    r = airlock.run(["run", "-q", "-w", ws, "-P", "80", "--port-bind", "localhost", "--",
                     "/bin/true"], check_setup=False)
    assert r.returncode == 125 and "--port-bind" in r.stderr


def test_gate_listener_port_refused(airlock):
    ws = airlock.make_dir()
    r = airlock.run(["run", "-q", "-w", ws, "--allow", "example.com", "-P", "3128:0", "--",
                     "/bin/true"], check_setup=False)
    assert r.returncode == 125
    assert "network gate's own listener" in r.stderr


def test_host_port_taken_is_a_setup_error(airlock):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        ws = airlock.make_dir()
        r = airlock.run(["run", "-q", "-w", ws, "-P", f"8000:{port}", "--", "/bin/true"],
                        check_setup=False, timeout=60)
        assert r.returncode == 125
        assert f"port {port}" in r.stderr and "Address already in use" in r.stderr
    finally:
        busy.close()


def closing(port):
    """Connections to the host's port 127.0.0.1:PORT their client ended and
    the gate has yet to close (CLOSE_WAIT)."""
    n = 0
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            n += local == "0100007F:%04X" % port and state == "08"
    return n


def test_connections_per_port_bounded(airlock):
    """Past the bound a connection is closed at once, and only the first
    refusal is written down."""
    s = Served(airlock)
    held = []
    try:
        assert curl_until(s.port, "/hello.txt").returncode == 0
        # curl's connection holds a slot until the gate has seen it end (its
        # socket in CLOSE_WAIT until then): on a loaded machine, later.
        end = time.monotonic() + 20
        while closing(s.port) and time.monotonic() < end:
            time.sleep(0.05)
        assert not closing(s.port), "the gate never closed curl's connection"
        for _ in range(32):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            held.append(c)
        time.sleep(0.5)
        extra = []
        for _ in range(5):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            c.settimeout(5)
            extra.append(c)
        for c in extra:
            assert c.recv(1) == b"", "a connection past the bound was not closed"
            c.close()
    finally:
        for c in held:
            c.close()
        s.stop()
    assert len(s.events("port.refused")) == 1
    assert s.events("port.closed")[-1]["refused"] == 5


class Supervised:
    """`airlock supervise` with its control socket."""

    def __init__(self, airlock):
        self.ws = airlock.make_dir()
        (self.ws / "hello.txt").write_text("hi from a long-lived sandbox\n")
        airlock.chown(self.ws)
        run_dir = airlock.make_dir("run")
        self.audit = airlock.make_dir("audit") / "audit.jsonl"
        pol = airlock.make_dir("policy") / "policy.json"
        pol.write_text(json.dumps({"workspace": {"path": str(self.ws)}}))
        airlock.chown(pol.parent)
        self.id = os.urandom(8).hex()
        r, w = os.pipe()
        argv = airlock.cmd(["supervise", "--id", self.id, "--policy", pol, "--run-dir", run_dir,
                            "--audit", self.audit, "--ready-fd", str(w)])
        self.proc = subprocess.Popen(argv, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(w)
        with os.fdopen(r) as f:
            assert f.readline().strip() == "ok"
        self.sock = str(run_dir / self.id / "control.sock")

    def request(self, obj):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(self.sock)
        s.sendall((json.dumps(obj) + "\n").encode())
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
        s.close()
        return [json.loads(line) for line in out.decode().splitlines()]

    def stop(self):
        try:
            self.request({"op": "destroy"})
        except OSError:
            pass
        self.proc.wait(timeout=30)


def test_control_ports_open_list_close(airlock):
    sv = Supervised(airlock)
    try:
        ev = sv.request({"op": "exec", "background": True,
                         "argv": ["python3", "-m", "http.server", "--bind", "127.0.0.1", "8000"]})
        assert ev[0].get("type") == "started", ev
        [a] = sv.request({"op": "ports", "action": "open", "port": 8000})
        assert a["ok"], a
        port = a["port"]["hostPort"]
        assert a["port"]["bind"] == "127.0.0.1" and port > 0
        [lst] = sv.request({"op": "ports", "action": "list"})
        assert [p["port"] for p in lst["ports"]] == [8000]
        [dup] = sv.request({"op": "ports", "action": "open", "port": 8000})
        assert dup["error"] == "port_unavailable"
        r = curl_until(port, "/hello.txt")
        assert r.stdout == "hi from a long-lived sandbox\n", r.stderr
        [c] = sv.request({"op": "ports", "action": "close", "port": 8000})
        assert c["ok"]
        assert refused(port)
        [c] = sv.request({"op": "ports", "action": "close", "port": 8000})
        assert c["error"] == "unknown_port"
        [b] = sv.request({"op": "ports", "action": "open", "port": 8000, "bind": "example.com"})
        assert b["error"] == "bad_request"
        [a] = sv.request({"op": "ports", "action": "open", "port": 8000})
        port = a["port"]["hostPort"]
    finally:
        sv.stop()
    assert refused(port)


ECHO_SERVER = r"""
import hashlib, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8100))
s.listen(4)
while True:
    c, _ = s.accept()
    h = hashlib.sha256()
    n = 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        h.update(d)
        n += len(d)
    # Only after the client's end of stream: a half-close must get through.
    c.sendall(f"{n} {h.hexdigest()}\n".encode() + b"z" * (8 << 20))
    c.close()
"""


def test_half_close_and_bulk_both_ways(airlock):
    """8 MiB each way through bounded queues, the client's half-close passed
    on, and the byte counts in the audit line."""
    ws = airlock.make_dir()
    (ws / "echo.py").write_text(ECHO_SERVER)
    airlock.chown(ws)
    audit = airlock.make_dir("audit") / "audit.jsonl"
    p = subprocess.Popen(airlock.cmd(["run", "-w", ws, "--audit", audit, "-P", "8100:0",
                                      "--timeout", "40", "--", "python3", "echo.py"]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        m = re.search(r"served at 127\.0\.0\.1:(\d+)", p.stderr.readline())
        assert m
        port = int(m.group(1))
        payload = os.urandom(8 << 20)
        import hashlib
        want = f"{len(payload)} {hashlib.sha256(payload).hexdigest()}\n".encode()
        end = time.monotonic() + 20
        while True:
            c = socket.create_connection(("127.0.0.1", port), timeout=20)
            try:
                c.sendall(payload)
                c.shutdown(socket.SHUT_WR)
                got = b""
                while True:
                    d = c.recv(1 << 20)
                    if not d:
                        break
                    got += d
            except (ConnectionResetError, BrokenPipeError):
                got = b""
            c.close()
            if got or time.monotonic() > end:
                break
            time.sleep(0.3)  # the server inside was not up yet
        assert got.startswith(want), got[:100]
        assert len(got) == len(want) + (8 << 20)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)
        p.stderr.close()
    conns = []
    with open(audit) as f:
        for line in f:
            e = json.loads(line)
            if e["kind"] == "port.connect" and e["result"] == "closed":
                conns.append(e)
    assert conns[-1]["bytesToSandbox"] == 8 << 20
    assert conns[-1]["bytesFromSandbox"] == len(want) + (8 << 20)


def test_ipv6_bind(airlock):
    if not socket.has_ipv6 or not os.path.exists("/proc/net/if_inet6"):
        pytest.skip("no IPv6 on this host")
    ws = airlock.make_dir()
    p = subprocess.Popen(airlock.cmd(["run", "-w", ws, "-P", "8000:0", "--port-bind", "::1",
                                      "--timeout", "30", "--", "python3", "-m", "http.server",
                                      "--bind", "127.0.0.1", "8000"]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"served at \[::1\]:(\d+)", line)
        assert m, line
        port = int(m.group(1))
        end = time.monotonic() + 20
        while True:
            r = subprocess.run(["curl", "-sS", "-m", "3", f"http://[::1]:{port}/"],
                               capture_output=True, text=True, timeout=10)
            if r.returncode == 0 or time.monotonic() > end:
                break
            time.sleep(0.3)
        assert r.returncode == 0 and "Directory listing" in r.stdout, r.stderr
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)
        p.stderr.close()


PROBE = r"""
import socket, sys
host_port = int(sys.argv[1])
out = []
for addr in [("127.0.0.1", host_port), ("10.0.2.2", 80), ("1.1.1.1", 53)]:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(addr)
        out.append("open")
    except OSError as e:
        out.append(type(e).__name__)
    s.close()
ifaces = sorted(name for _, name in socket.if_nameindex())
print(" ".join(out), ",".join(ifaces))
"""


def test_a_forward_gives_the_sandbox_no_network(airlock):
    """With a forward open the sandbox still has only its loopback: the host's
    listener is not reachable from inside, nor is anything else."""
    ws = airlock.make_dir()
    (ws / "probe.py").write_text(PROBE)
    airlock.chown(ws)
    port = free_port()
    r = airlock.run(["run", "-q", "-w", ws, "-P", f"8000:{port}", "--net", "none", "--",
                     "python3", "probe.py", str(port)], timeout=60)
    assert r.returncode == 0, r.stderr
    *probes, ifaces = r.stdout.split()
    assert probes[0] == "ConnectionRefusedError", r.stdout  # nothing of the host's inside
    assert "open" not in probes, r.stdout
    assert ifaces == "lo", r.stdout
