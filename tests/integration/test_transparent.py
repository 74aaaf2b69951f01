# SPDX-License-Identifier: Apache-2.0
"""Transparent mode: with no proxy variables, clients inside a gated sandbox
resolve names through the gate's name server and their connect() is caught
by the supervisor (seccomp notification), decided on the name the address
was answered for, and, when allowed, replaced by a socket the host connected
to exactly the checked address. Refusals are ECONNREFUSED and audited with
their reason. Runs against the private test network of netns.py."""

import json
import os
import secrets
import shutil
import subprocess

import pytest

import netns
from netns import HELLO, HTTP_PORT, OTHER_PORT, RANGE, SERVER_ADDR, TLS_PORT

NAME = "upstream.test"
ALLOW = ["--allow-private", RANGE, "--host", f"{NAME}={SERVER_ADDR}",
         "--host", f"other.test={SERVER_ADDR}",
         "--allow", f"{NAME}:{HTTP_PORT}", "--allow", f"{NAME}:{TLS_PORT}"]
URL = f"http://{NAME}:{HTTP_PORT}/hello.txt"
# Nothing of the proxy's: every client below goes straight to the address.
NOPROXY = "unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY; "


from netns import net  # noqa: E402,F401  (the test network, one per module)


class Run:
    def __init__(self, proc, logdir):
        self.proc = proc
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        log = logdir / "net.jsonl"
        self.records = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

    def of(self, protocol, decision=None):
        return [r for r in self.records if r.get("protocol") == protocol
                and (decision is None or r.get("decision") == decision)]


def run(airlock, net, script, *opts, files=None, timeout=60, policy=None):
    ws = airlock.make_dir()
    for name, text in (files or {}).items():
        (ws / name).write_text(text)
    airlock.chown(ws)
    logdir = airlock.make_dir("netlog")
    if policy is not None:
        (logdir / "policy.json").write_text(json.dumps(policy))
        airlock.chown(logdir)
        opts = ("-p", logdir / "policy.json", *opts)
    args = ["run", "-q", "-w", ws, "--net-log", logdir / "net.jsonl", *ALLOW, *opts,
            "--", "/bin/sh", "-c", NOPROXY + script]
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)]
    p = subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True, timeout=timeout)
    if p.returncode == 125:
        raise AssertionError(f"sandbox setup failed: {p.stderr.strip()}")
    return Run(p, logdir)


def test_curl_noproxy_reaches_allowed_and_is_refused_unlisted(airlock, net):
    r = run(airlock, net,
            f"curl -sS --noproxy '*' --max-time 20 {URL}; echo rc=$?; "
            f"curl -sS --noproxy '*' --max-time 20 http://other.test:{HTTP_PORT}/hello.txt; echo rc=$?; "
            f"curl -sS --noproxy '*' --max-time 20 http://{NAME}:{OTHER_PORT}/hello.txt; echo rc=$?")
    out = r.stdout
    assert HELLO in out, (out, r.stderr)
    assert out.count("rc=0") == 1, out
    allowed = r.of("transparent", "allow")
    assert any(a["host"] == NAME and a["port"] == HTTP_PORT and a["address"] == SERVER_ADDR
               for a in allowed), r.records
    # other.test is not listed: the name server refuses it and says why.
    dns = r.of("dns", "deny")
    assert any(d["host"] == "other.test" and d["reason"] == "not_allowed" for d in dns), r.records
    # upstream.test on an unlisted port: the name resolves, the connect is refused.
    denied = r.of("transparent", "deny")
    assert any(d["host"] == NAME and d["port"] == OTHER_PORT and d["reason"] == "port_not_allowed"
               for d in denied), r.records


PY_CLIENT = r'''
import socket, sys, urllib.request, json
out = {}
# An address the gate never answered for (nothing resolved yet): refused.
s = socket.socket()
s.settimeout(20)
try:
    s.connect((sys.argv[2], int(sys.argv[3])))
    out["literal"] = "connected"
except OSError as e:
    out["literal"] = e.errno
try:
    out["urllib"] = urllib.request.urlopen(sys.argv[1], timeout=20).read().decode()
except Exception as e:
    out["urllib"] = "error: %r" % e
# UDP to the outside: nothing but the gate's name server is reached.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.connect((sys.argv[2], 53))
    u.send(b"x")
    out["udp"] = "sent"
except OSError as e:
    out["udp"] = e.errno
# IPv6: no address is offered and none is reached.
try:
    s6 = socket.socket(socket.AF_INET6)
    s6.settimeout(20)
    s6.connect(("fd7a:1e57:7::2", int(sys.argv[3])))
    out["v6"] = "connected"
except OSError as e:
    out["v6"] = e.errno
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    out["raw"] = "opened"
except OSError as e:
    out["raw"] = e.errno
print(json.dumps(out))
'''


def test_python_urllib_socket_udp_ipv6_raw(airlock, net):
    r = run(airlock, net, f"python3 /workspace/c.py {URL} {SERVER_ADDR} {HTTP_PORT}",
            files={"c.py": PY_CLIENT})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["urllib"] == HELLO, out
    import errno
    assert out["literal"] == errno.ECONNREFUSED, out
    assert out["udp"] in (errno.ENETUNREACH, errno.ECONNREFUSED), out
    assert out["v6"] != "connected", out
    assert out["raw"] != "opened", out
    denied = r.of("transparent", "deny")
    assert any(d["address"] == SERVER_ADDR and d["reason"] == "not_resolved" for d in denied), r.records
    assert any(d["reason"] == "not_stream" for d in denied), r.records
    assert any(d["reason"] == "ipv6_not_offered" for d in denied), r.records


NODE_CLIENT = r'''
const http = require("http");
const [url, bad] = process.argv.slice(2);
const out = {};
function get(u) {
  return new Promise((res) => {
    const req = http.get(u, (r) => { let b = ""; r.on("data", (d) => b += d); r.on("end", () => res(b)); });
    req.on("error", (e) => res("error: " + e.code));
    req.setTimeout(20000, () => req.destroy(new Error("timeout")));
  });
}
(async () => {
  out.bad = await get(bad);  // before any name was answered
  out.get = await get(url);
  try { out.fetch = await (await fetch(url)).text(); } catch (e) { out.fetch = "error: " + (e.cause ? e.cause.code : e); }
  console.log(JSON.stringify(out));
})();
'''


def test_node_http_get_and_fetch(airlock, net):
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    r = run(airlock, net, f"node /workspace/c.js {URL} http://{SERVER_ADDR}:{HTTP_PORT}/hello.txt",
            files={"c.js": NODE_CLIENT})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["get"] == HELLO, out
    assert out["fetch"] == HELLO, out
    assert out["bad"] == "error: ECONNREFUSED", out


RACE = r'''
import ctypes, json, mmap, os, signal, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
good = (sys.argv[1], int(sys.argv[2]))   # answered by the gate for an allowed name
bad = (sys.argv[3], int(sys.argv[4]))    # an unlisted port
mark = sys.argv[5]
def sa(addr):
    return (struct.pack("=H", socket.AF_INET) + struct.pack("!H", addr[1])
            + socket.inet_aton(addr[0]) + bytes(8))
gb, bb = sa(good), sa(bad)
# The argument lives in memory shared with a second process that flips it
# all the time, on its own CPU, unhindered by this one.
mm = mmap.mmap(-1, 4096)
mm[0:16] = gb
buf = ctypes.c_char.from_buffer(mm)
pid = os.fork()
if pid == 0:
    while True:
        mm[0:16] = bb
        mm[0:16] = gb
res = {"ok": 0, "refused": 0}
i = 0
while i < 3000 and (i < 40 or res["ok"] < 5):
    i += 1
    s = socket.socket()  # blocking: a connect answers when it is done
    r = libc.connect(s.fileno(), ctypes.byref(buf), 16)
    if r == 0:
        res["ok"] += 1
        s.settimeout(10)
        try:
            s.sendall(b"GET /hello.txt?m=%s-%d HTTP/1.0\r\n\r\n" % (mark.encode(), i))
            while s.recv(65536):
                pass
        except OSError:
            pass
    else:
        res["refused"] += 1
        e = os.strerror(ctypes.get_errno())
        res.setdefault("errors", {})[e] = res.get("errors", {}).get(e, 0) + 1
    s.close()
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
print(json.dumps(res))
'''


# No rate and no byte budget, and the policy asks for it: the direct path.
NORATE = {"network": {"directPath": True, "budget": {"rate": 0}}}
# The flipper wins most connects (more so on a slow build): each loss is a
# refusal, and the default refusal budget (1000) would close the gate before
# five connects got through. The race tests lift it.
RACE_REFUSALS = 100000


def race(airlock, net, policy=None):
    # The flipped-to address is the test server's own on an unlisted port:
    # were the argument read again after the check, the request would reach
    # it and be logged there. Every CPU: under a quota the flipping process
    # is throttled and the argument stands still.
    mark = secrets.token_hex(6)
    policy = json.loads(json.dumps(policy or {"network": {}}))
    policy["network"].setdefault("budget", {})["refusals"] = RACE_REFUSALS
    r = run(airlock, net,
            f"getent hosts {NAME} >/dev/null; python3 /workspace/r.py {SERVER_ADDR} {HTTP_PORT} "
            f"{SERVER_ADDR} {OTHER_PORT} {mark}", "--cpus", str(os.cpu_count() or 1),
            files={"r.py": RACE}, timeout=60, policy=policy)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    reasons = {}
    for d in r.records:
        k = f'{d.get("decision")} {d.get("reason")}'
        reasons[k] = reasons.get(k, 0) + 1
    assert out["ok"] >= 5, (out, reasons, r.stderr)
    seen = net.requests(mark)
    assert seen and all(line.startswith(f"{HTTP_PORT} ") for line in seen), seen
    for d in r.of("transparent", "allow"):
        assert d["port"] == HTTP_PORT, d
    return r


def test_racing_connect_argument_gets_only_what_was_checked(airlock, net):
    r = race(airlock, net)  # the relay path (the class's rate applies)
    assert any(d["bytesDown"] > 0 for d in r.of("transparent", "allow")), r.records


def test_racing_connect_argument_direct_path(airlock, net):
    r = race(airlock, net, policy=NORATE)
    assert all(d["bytesDown"] == 0 for d in r.of("transparent", "allow")), r.records


def test_no_direct_path_unless_asked(airlock, net):
    """Without network.directPath, a connection allowed by a name goes
    through the gate's relay (counted bytes, SNI-checked) even with no rate
    and no byte budget."""
    r = run(airlock, net, f"curl -s -o /dev/null --noproxy '*' http://{NAME}:{HTTP_PORT}/",
            policy={"network": {"budget": {"rate": 0}}}, timeout=60)
    assert r.returncode == 0, r.stderr
    allowed = r.of("transparent", "allow")
    assert allowed and all(d["bytesDown"] > 0 for d in allowed), r.records


def test_private_answer_and_rebinding_refused_by_the_name_server(airlock, net):
    # loop.test is allowed by rule but maps to the sandbox host's loopback
    # range: the name server refuses it (private_address), and nothing is
    # remembered for a later connect.
    r = run(airlock, net,
            "getent hosts loop.test; echo rc=$?; "
            f"curl -sS --noproxy '*' --max-time 10 http://loop.test:{HTTP_PORT}/; echo rc=$?",
            "--host", "loop.test=127.0.0.1", "--allow", f"loop.test:{HTTP_PORT}")
    assert "rc=0" not in r.stdout, r.stdout
    dns = r.of("dns", "deny")
    assert any(d["host"] == "loop.test" and d["reason"] == "private_address" for d in dns), r.records


JAVA_CLIENT = r'''
import java.net.URI;
import java.net.http.*;
public class G {
    public static void main(String[] a) throws Exception {
        HttpClient c = HttpClient.newHttpClient();
        HttpResponse<String> r = c.send(HttpRequest.newBuilder(URI.create(a[0])).build(),
                                        HttpResponse.BodyHandlers.ofString());
        System.out.print(r.body());
        try (java.net.Socket s = new java.net.Socket(a[1], Integer.parseInt(a[2]))) {
            System.out.println("bad connected");
        } catch (Exception e) {
            System.out.println("bad refused");
        }
    }
}
'''


def test_jvm_http_client(airlock, net):
    # The JVM's sockets are IPv6 ones carrying IPv4-mapped addresses.
    if not shutil.which("java"):
        pytest.skip("java is not installed")
    r = run(airlock, net, f"java -Xmx64m /workspace/G.java {URL} {NAME} {OTHER_PORT}",
            files={"G.java": JAVA_CLIENT}, timeout=60)
    assert r.stdout == HELLO + "bad refused\n", (r.stdout, r.stderr)
    assert any(d["port"] == OTHER_PORT and d["reason"] == "port_not_allowed"
               for d in r.of("transparent", "deny")), r.records
