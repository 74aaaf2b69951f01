# SPDX-License-Identifier: Apache-2.0
"""Asking the operator (network.onUnlisted / tools.onUnlisted "ask"): a
request the lists do not name is held, published as an approval on the
supervisor's control socket, and resolved by a decision (allow-once,
allow-sandbox, deny, deny-sandbox) or the timeout; every ask and decision
is an audit event; pending asks are bounded; a held request blocks nobody
else. Runs `airlock supervise` as root and as an ordinary user."""

import http.server
import json
import socket
import socketserver
import threading
import time

import pytest

from test_supervise import Supervisor

FETCH = r'''
import socket, sys, time
host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
t0 = time.monotonic()
s = socket.create_connection(("127.0.0.1", 3128), timeout=60)
s.sendall(("GET http://%s:%d%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (host, port, path)).encode())
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
head, _, body = data.partition(b"\r\n\r\n")
print(head.split(b" ")[1].decode(), "%.1f" % (time.monotonic() - t0), body.decode().replace("\n", "|"))
'''

SOCKS = r'''
import socket, struct, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", 1080), timeout=60)
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00"
h = host.encode()
s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", port))
rep = s.recv(10)
print(rep[1])
'''


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def upstream():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Hello)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()


def policy(port, timeout=20, extra=None):
    doc = {
        "network": {"mode": "gated", "onUnlisted": "ask", "allow": [f"listed.test:{port}"],
                    "allowPrivate": ["127.0.0.0/8"],
                    "hosts": {"up.test": "127.0.0.1", "listed.test": "127.0.0.1",
                              "other.test": "127.0.0.1"}},
        "ask": {"timeout": timeout},
    }
    for k, v in (extra or {}).items():
        doc.setdefault(k, {}).update(v)
    return doc


@pytest.fixture
def make(airlock):
    made = []

    def mk(doc):
        s = Supervisor(airlock, policy=doc)
        assert s.ready == "ok", s.proc.stderr.read().decode() if s.proc.poll() is not None else s.ready
        made.append(s)
        return s

    yield mk
    for s in made:
        s.close()


class Bg:
    """A command run in the sandbox on a thread: its stdout when done."""

    def __init__(self, sup, argv):
        self.out = None
        self.t = threading.Thread(target=self._run, args=(sup, argv), daemon=True)
        self.t.start()

    def _run(self, sup, argv):
        _, self.out, self.err = sup.exec(argv)

    def result(self, timeout=40):
        self.t.join(timeout)
        assert not self.t.is_alive(), "the command did not finish"
        return self.out


def fetch(sup, host, port, path="/x"):
    return Bg(sup, ["python3", "-c", FETCH, host, str(port), path])


def pending(sup, n=1, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ans = sup.request({"op": "approvals"})[0]
        assert ans["ok"], ans
        if len(ans["approvals"]) >= n:
            return ans["approvals"]
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} approvals appeared: {ans}")


def decide(sup, aid, decision, by="test"):
    return sup.request({"op": "approve", "id": aid, "decision": decision, "by": by})[0]


def audit(sup, kind=None):
    time.sleep(0.3)  # the audit writer's batch
    lines = [json.loads(line) for line in sup.audit.read_text().splitlines()]
    return [e for e in lines if kind is None or e["kind"] == kind]


def test_allow_once(make, upstream):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream, "/once")
    [a] = pending(sup)
    assert a["kind"] == "network" and a["host"] == "up.test" and a["port"] == upstream
    assert a["protocol"] == "http" and a["sandbox"] == sup.id and a["id"].startswith(sup.id + "-")
    assert a["created"] < a["expires"]
    assert f.t.is_alive(), "the request waits for the decision"
    ans = decide(sup, a["id"], "allow-once", by="grant:ops")
    assert ans["ok"] and ans["approval"]["decision"] == "allow-once", ans
    status, _, body = f.result().split(" ", 2)
    assert status == "200" and "hello /once" in body
    # Once: the next request asks again.
    g = fetch(sup, "up.test", upstream, "/again")
    [b] = pending(sup)
    assert b["id"] != a["id"]
    decide(sup, b["id"], "deny")
    assert g.result().split()[0] == "403"
    req = audit(sup, "approval.requested")
    dec = audit(sup, "approval.decided")
    assert [r["id"] for r in req] == [a["id"], b["id"]]
    assert [(d["id"], d["decision"], d["by"]) for d in dec] == [
        (a["id"], "allow-once", "grant:ops"), (b["id"], "deny", "test")]
    assert decide(sup, a["id"], "deny")["error"] == "unknown_approval"


def test_allow_sandbox_is_remembered(make, upstream):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream)
    [a] = pending(sup)
    decide(sup, a["id"], "allow-sandbox")
    assert f.result().split()[0] == "200"
    # Later requests to the same host and port pass without asking.
    _, out, _ = sup.exec(["python3", "-c", FETCH, "up.test", str(upstream), "/later"])
    assert out.split()[0] == "200", out
    assert len(audit(sup, "approval.requested")) == 1
    nets = [e for e in audit(sup, "net.decision") if e.get("host") == "up.test"]
    assert all(e["decision"] == "allow" and e["rule"] == "ask" for e in nets), nets


def test_deny_sandbox_is_remembered_and_explained(make, upstream):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream)
    [a] = pending(sup)
    decide(sup, a["id"], "deny-sandbox")
    status, _, body = f.result().split(" ", 2)
    assert status == "403" and "ask_denied" in body and "the operator denied" in body, body
    t0 = time.monotonic()
    _, out, _ = sup.exec(["python3", "-c", FETCH, "up.test", str(upstream), "/later"])
    assert out.split()[0] == "403" and time.monotonic() - t0 < 10
    assert len(audit(sup, "approval.requested")) == 1, "a remembered denial asks no more"
    # SOCKS5 gets "not allowed" (2) for the same host and port.
    _, out, _ = sup.exec(["python3", "-c", SOCKS, "up.test", str(upstream)])
    assert out.strip() == "2"


def test_timeout_denies(make, upstream):
    sup = make(policy(upstream, timeout=2))
    f = fetch(sup, "up.test", upstream)
    pending(sup)
    status, secs, body = f.result().split(" ", 2)
    assert status == "403" and "ask_timeout" in body, body
    assert 1.5 <= float(secs) < 15
    [d] = audit(sup, "approval.decided")
    assert d["by"] == "timeout" and d["reason"] == "ask_timeout"
    assert sup.request({"op": "approvals"})[0]["approvals"] == []


def test_flood_is_bounded(make, upstream):
    sup = make(policy(upstream))
    flood = r'''
import socket, sys, time
port = int(sys.argv[1])
socks = []
for i in range(24):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(("GET http://h%d.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % (i, port)).encode())
    socks.append(s)
time.sleep(1.5)
fast = 0
for s in socks:
    s.settimeout(0.2)
    try:
        d = s.recv(4096)
        if b"ask_pending_limit" in d:
            fast += 1
    except socket.timeout:
        pass
print(fast)
'''
    _, out, err = sup.exec(["python3", "-c", flood, str(upstream)])
    assert out.strip() == "8", (out, err)
    # The 16 held asks were let go when the client left.
    assert len(audit(sup, "approval.requested")) == 16


def test_held_request_blocks_nobody(make, upstream):
    one = make(policy(upstream))
    two = make(policy(upstream))
    held = fetch(one, "up.test", upstream)
    pending(one)
    # Another connection of the same sandbox, and another sandbox, go on.
    t0 = time.monotonic()
    _, out, _ = one.exec(["python3", "-c", FETCH, "listed.test", str(upstream), "/same"])
    assert out.split()[0] == "200" and time.monotonic() - t0 < 10, out
    _, out, _ = two.exec(["python3", "-c", FETCH, "listed.test", str(upstream), "/other"])
    assert out.split()[0] == "200", out
    assert held.t.is_alive()
    [a] = pending(one)
    decide(one, a["id"], "allow-once")
    assert held.result().split()[0] == "200"


def test_socks5_and_connect_are_asked(make, upstream):
    sup = make(policy(upstream))
    s = Bg(sup, ["python3", "-c", SOCKS, "up.test", str(upstream)])
    [a] = pending(sup)
    assert a["protocol"] == "socks5"
    decide(sup, a["id"], "allow-once")
    assert s.result().strip() == "0"


def test_denied_by_rule_is_never_asked(make, upstream):
    sup = make(policy(upstream, extra={"network": {"deny": ["up.test"]}}))
    _, out, _ = sup.exec(["python3", "-c", FETCH, "up.test", str(upstream), "/"])
    assert out.split()[0] == "403" and "denied_by_rule" in out
    assert audit(sup, "approval.requested") == []


def test_bad_decisions(make, upstream):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream)
    [a] = pending(sup)
    assert decide(sup, a["id"], "allow")["error"] == "bad_request"
    assert decide(sup, a["id"], "allow-once", by="x\n")["error"] == "bad_request"
    assert decide(sup, "0000000000000000-1", "deny")["error"] == "unknown_approval"
    decide(sup, a["id"], "deny")
    assert f.result().split()[0] == "403"


def test_cli_lists_and_decides(make, upstream, airlock):
    sup = make(policy(upstream))
    f = fetch(sup, "up.test", upstream)
    [a] = pending(sup)
    p = airlock.run(["approvals", "--run-dir", sup.run_dir, "--json"])
    assert p.returncode == 0, p.stderr
    assert [x["id"] for x in json.loads(p.stdout)["approvals"]] == [a["id"]]
    p = airlock.run(["approvals", "--run-dir", sup.run_dir])
    assert a["id"] in p.stdout and f"up.test:{upstream}" in p.stdout, p.stdout
    p = airlock.run(["approvals", "allow", a["id"], "--remember", "--run-dir", sup.run_dir])
    assert p.returncode == 0 and "allow-sandbox" in p.stdout, p.stderr
    assert f.result().split()[0] == "200"
    p = airlock.run(["approvals", "deny", a["id"], "--run-dir", sup.run_dir])
    assert p.returncode == 3 and "not pending" in p.stderr, (p.returncode, p.stderr)
    p = airlock.run(["approvals", "deny", "nonsense", "--run-dir", sup.run_dir])
    assert p.returncode == 2 and "not an approval id" in p.stderr
    p = airlock.run(["approvals", "maybe", a["id"], "--run-dir", sup.run_dir])
    assert p.returncode == 2 and "allow or deny" in p.stderr
    [d] = audit(sup, "approval.decided")
    assert d["decision"] == "allow-sandbox" and d["by"].startswith("cli:uid="), d


TOOL_POLICY = {
    "tools": {
        "onUnlisted": "ask",
        "define": {
            "echo.v": {"description": "echo", "command": ["/bin/echo", "${args.v}"],
                       "args": {"type": "object", "properties": {"v": {"type": "string"}},
                                "required": ["v"], "additionalProperties": False}},
        },
    },
    "ask": {"timeout": 20},
}


def tool_call(sup, v):
    return Bg(sup, ["sh", "-c", f"airlock-tool call echo.v v={v}; echo rc=$?"])


def test_tool_asks(make):
    sup = make(TOOL_POLICY)
    c = tool_call(sup, "one")
    [a] = pending(sup)
    assert a["kind"] == "tool" and a["tool"] == "echo.v" and len(a["argsDigest"]) == 64, a
    decide(sup, a["id"], "allow-once")
    out = c.result()
    assert "one" in out and "rc=0" in out, out
    c = tool_call(sup, "two")
    [b] = pending(sup)
    decide(sup, b["id"], "deny")
    out = c.result()
    assert "rc=0" not in out
    assert "the operator denied" in c.err, c.err
    # allow-sandbox: by the tool's name, whatever its arguments.
    c = tool_call(sup, "three")
    [d] = pending(sup)
    decide(sup, d["id"], "allow-sandbox")
    assert "three" in c.result()
    _, out, _ = sup.exec(["sh", "-c", "airlock-tool call echo.v v=four; echo rc=$?"])
    assert "four" in out and "rc=0" in out, out
    calls = [e for e in audit(sup, "tool.call") if e.get("tool") == "echo.v"]
    assert [e["decision"] for e in calls] == ["allow", "deny", "allow", "allow"], calls
    assert len(audit(sup, "approval.requested")) == 3


def test_undefined_tool_is_not_asked(make):
    sup = make(TOOL_POLICY)
    _, out, err = sup.exec(["sh", "-c", "airlock-tool call no.such x=1; echo rc=$?"])
    assert "rc=0" not in out and "not allowed" in err, (out, err)
    assert audit(sup, "approval.requested") == []


# `airlock run --ask`: the prompt on the user's terminal, driven through a pty.

def _pty_run(airlock, argv, answers, timeout=40):
    """Run argv on a fresh pty (its controlling terminal); each time the
    prompt shows, send the next answer. Returns (exit code, everything the
    terminal showed)."""
    import os
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(str(airlock.base))
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    out = b""
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.5)
            if r:
                try:
                    d = os.read(fd, 4096)
                except OSError:
                    break
                if not d:
                    break
                out += d
            prompts = out.count(b"allow it? [o]nce / [a]lways / [d]eny / [n]ever")
            if prompts > seen and seen < len(answers):
                # A person reads the prompt first: keys sooner than 500 ms
                # after it never count (test_ask_forgery.py).
                time.sleep(0.7)
                os.write(fd, answers[seen].encode())
                seen += 1
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


@pytest.mark.parametrize("tty", ["-T", "-t"])
def test_run_ask_prompts_on_the_terminal(airlock, upstream, tty):
    d = airlock.make_dir("ask")
    pol = d / "policy.json"
    # No allow rule and no mode: --ask turns the gate on itself.
    pol.write_text(json.dumps({"network": {"allowPrivate": ["127.0.0.0/8"],
                                           "hosts": {"up.test": "127.0.0.1"}},
                               "ask": {"timeout": 20}}))
    airlock.chown(d)
    script = (f"python3 -c '{FETCH}' up.test {upstream} /one; "
              f"python3 -c '{FETCH}' up.test {upstream} /two; "
              f"python3 -c '{FETCH}' up.test {upstream} /three")
    # The FETCH script holds single quotes nowhere, so it goes in as is.
    assert "'" not in FETCH
    argv = [str(x) for x in airlock.cmd(["run", "-q", tty, "--ask", "-p", pol, "--audit",
                                         d / "audit.jsonl", "--", "sh", "-c", script])]
    # once: asked again; always: not asked the third time.
    # A line each in the terminal's cooked mode (-T); keys in raw mode (-t).
    nl = "\n" if tty == "-T" else ""
    code, shown = _pty_run(airlock, argv, ["o" + nl, "a" + nl])
    assert code == 0, shown
    assert shown.count("the sandbox asks to connect to up.test:%d (http)" % upstream) == 2, shown
    assert "(denied in 20 s)" in shown
    assert shown.count("200 ") == 3, shown
    log = [json.loads(line) for line in (d / "audit.jsonl").read_text().splitlines()]
    dec = [e for e in log if e["kind"] == "approval.decided"]
    assert [(e["decision"], e["by"]) for e in dec] == [("allow-once", "terminal"),
                                                        ("allow-sandbox", "terminal")], dec


def test_run_ask_needs_a_terminal(airlock):
    p = airlock.run(["run", "-q", "--ask", "--", "true"], check_setup=False)
    assert p.returncode == 125 and "--ask needs a terminal" in p.stderr, (p.returncode, p.stderr)


def test_run_ask_passes_typed_input_to_the_command(airlock):
    """-T --ask: the prompt is the terminal's one reader; what is typed
    while no prompt is up reaches the command, and ^D ends its stdin."""
    import os
    import pty
    import select
    argv = [str(x) for x in airlock.cmd(["run", "-q", "-T", "--ask", "--", "sh", "-c",
                                         "read x; echo got-$x; cat; echo eof"])]
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(str(airlock.base))
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    out = b""
    sent = 0
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.3)
            if r:
                try:
                    d = os.read(fd, 4096)
                except OSError:
                    break
                if not d:
                    break
                out += d
            elif sent == 0:
                os.write(fd, b"hello\n")
                sent = 1
            elif sent == 1 and b"got-hello" in out:
                os.write(fd, b"more\n\x04")
                sent = 2
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "got-hello" in text and "eof" in text, text
