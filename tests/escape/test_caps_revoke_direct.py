# SPDX-License-Identifier: Apache-2.0
"""A network revoke also cuts the direct path's sockets already handed over.

The attack: in transparent mode with no rate and no byte budget, a
connection allowed by an IP rule is the host's own connected socket, put in
the sandbox's hands (the direct path: the gate holds no end of it). An
agent opens one, then the rule is revoked live. If only new connections
were decided, the open socket would keep the power the revoke took away.
It must be shut at the revoke (the next use finds it closed, well within
2 s) and recorded with reason "revoked"; a direct connection the rules
still allow keeps working."""

import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from controllib import ask, wait_file  # noqa: E402
import netns  # noqa: E402,F401
from netns import HTTP_PORT, OTHER_PORT, RANGE, SERVER_ADDR  # noqa: E402

from netns import net  # noqa: E402,F401  (the test network, one per module)

# Runs inside the sandbox: opens each connection (one handed down to a
# child process too), uses it once, waits for the revoke, uses it again.
CLIENT = r'''
import json, os, socket, sys, time
ADDR, PORT, KEEP = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
HIDE = len(sys.argv) > 4 and sys.argv[4] == "hide"

def get(s):
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        c = s.recv(4096)
        if not c:
            raise EOFError("closed")
        data += c
    head, rest = data.split(b"\r\n\r\n", 1)
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        c = s.recv(n - len(rest))
        if not c:
            raise EOFError("closed")
        rest += c
    return head.split(b"\r\n")[0].decode()

conns = {"direct": socket.create_connection((ADDR, PORT), timeout=10),
         "keep": socket.create_connection((ADDR, KEEP), timeout=10)}
out = {k: get(s) for k, s in conns.items()}
# A copy in another process (and another fd number) is cut as well.
child = os.fork()
if child == 0:
    os.dup2(conns["direct"].fileno(), 77)
    conns["direct"].close()
    if HIDE:
        # The only holder, its /proc entries closed to an unprivileged
        # supervisor: it must be cut all the same.
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        while not os.path.exists("/workspace/go"):
            time.sleep(0.02)
        t0 = time.monotonic()
        try:
            held = socket.socket(fileno=77)
            held.settimeout(10)
            r = "ok " + get(held)
        except Exception as e:
            r = "closed %r" % e
        with open("/workspace/c.tmp", "w") as f:
            json.dump({"direct": r, "direct_s": time.monotonic() - t0}, f)
        os.rename("/workspace/c.tmp", "/workspace/c")
        os._exit(0)
    time.sleep(60)
    os._exit(0)
if HIDE:
    conns["direct"].close()
with open("/workspace/r1.tmp", "w") as f:
    json.dump(out, f)
os.rename("/workspace/r1.tmp", "/workspace/r1")
t = time.monotonic()
while not os.path.exists("/workspace/go"):
    time.sleep(0.02)
    if time.monotonic() - t > 20:
        sys.exit(9)
out = {}
for key, s in conns.items():
    if HIDE and key == "direct":
        continue
    t0 = time.monotonic()
    try:
        out[key] = "ok " + get(s)
    except Exception as e:
        out[key] = "closed %r" % e
    out[key + "_s"] = time.monotonic() - t0
if HIDE:
    _, st = os.waitpid(child, 0)
    if os.path.exists("/workspace/c"):
        out.update(json.load(open("/workspace/c")))
    else:
        out["direct"] = "closed: its holder was killed (%d)" % st
        out["direct_s"] = 0
else:
    os.kill(child, 9)
with open("/workspace/r2.tmp", "w") as f:
    json.dump(out, f)
os.rename("/workspace/r2.tmp", "/workspace/r2")
'''


@pytest.mark.parametrize("holder", ["shared", "hidden"])
def test_revoke_cuts_a_handed_over_direct_socket(airlock, net, holder):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    ctl = airlock.make_dir("ctl")
    (ctl / "policy.json").write_text(json.dumps({"network": {"budget": {"rate": 0}}}))
    sock, audit = ctl / "c.sock", ctl / "audit.jsonl"
    airlock.chown(ctl)
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(
        ["run", "-q", "-w", ws, "-p", ctl / "policy.json", "--control", sock, "--audit", audit,
         "--allow-private", RANGE, "--allow", "placeholder.invalid", "--",
         "/bin/sh", "-c", f"while [ ! -e /workspace/go0 ]; do sleep 0.05; done; "
         f"exec python3 /workspace/client.py {SERVER_ADDR} {HTTP_PORT} {OTHER_PORT} "
         f"{'hide' if holder == 'hidden' else 'share'}"])]
    p = subprocess.Popen(argv, cwd=str(airlock.base), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while not sock.exists():
            assert p.poll() is None, p.communicate(timeout=5)
            assert time.monotonic() < deadline, "no control socket"
            time.sleep(0.05)
        rule, kept = f"{SERVER_ADDR}:{HTTP_PORT}", f"{SERVER_ADDR}:{OTHER_PORT}"
        r = ask(sock, {"op": "caps", "grant": [{"network": {"allow": rule}},
                                               {"network": {"allow": kept}}]})
        assert r["ok"], r
        (ws / "go0").write_text("")
        first = wait_file(ws / "r1", p)
        assert all(v.startswith("HTTP/1.1 200") for v in first.values()), first

        r = ask(sock, {"op": "caps", "revoke": [{"network": {"allow": rule}}]})
        assert r["ok"], r
        (ws / "go").write_text("")
        second = wait_file(ws / "r2", p)
        out, err = p.communicate(timeout=10)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=5)

    recs = [json.loads(x) for x in audit.read_text().splitlines()]
    allowed = [d for d in recs if d["kind"] == "net.decision"
               and d.get("protocol") == "transparent" and d.get("decision") == "allow"
               and not d.get("reason")]
    # Both went the direct path (the relay would have counted bytes).
    assert len(allowed) == 2 and all(d.get("bytesDown", 0) == 0 for d in allowed), allowed

    assert second["direct"].startswith("closed"), second
    assert second["direct_s"] < 2, second
    assert second["keep"].startswith("ok HTTP/1.1 200"), second

    cut = [d for d in recs if d["kind"] == "net.decision" and d.get("reason") == "revoked"]
    assert len(cut) == 1, (cut, second)
    assert cut[0]["protocol"] == "transparent" and cut[0]["port"] == HTTP_PORT, cut
    assert cut[0]["address"] == SERVER_ADDR, cut
    seqs = {d["kind"]: d["seq"] for d in recs if d["kind"] == "capability.revoked"}
    assert cut[0]["seq"] > seqs["capability.revoked"], (seqs, cut)
