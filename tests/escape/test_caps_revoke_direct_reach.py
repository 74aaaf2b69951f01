# SPDX-License-Identifier: Apache-2.0
"""A revoke cuts a direct-path socket wherever the sandbox keeps it, and
kills no bystander.

The direct path hands the host's own connected socket to the sandbox; a
revoke must cut every such socket the new rules refuse. Two places the
supervisor's search of the sandbox's fd tables did not reach:

* hidden: the only holder made itself non-dumpable (as ssh does). As an
  ordinary user the supervisor could not list its fds, so it killed every
  non-dumpable process of the sandbox, a bystander holding only an allowed
  connection too. Now the holder's socket is cut (it sees the connection
  closed, itself alive) and the bystander's connection still works.
* transit: the socket sits inside an SCM_RIGHTS message that no process has
  received yet. It was forgotten as closed, and the receiver then used the
  revoked connection. Now it is cut too (as root the socket itself is
  aborted; as an ordinary user the processes that could receive it are
  killed)."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from controllib import ask, wait_file  # noqa: E402
import netns  # noqa: E402,F401
from netns import HTTP_PORT, OTHER_PORT, RANGE, SERVER_ADDR  # noqa: E402

from netns import net  # noqa: E402,F401  (the test network, one per module)

CLIENT = r'''
import ctypes, json, os, socket, sys, time
ADDR, PORT, KEEP, MODE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

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

def wait_go():
    t = time.monotonic()
    while not os.path.exists("/workspace/go"):
        time.sleep(0.02)
        if time.monotonic() - t > 20:
            os._exit(9)

def ready(name):
    open("/workspace/ready-" + name, "w").close()

def wait_ready(names):
    t = time.monotonic()
    while not all(os.path.exists("/workspace/ready-" + n) for n in names):
        time.sleep(0.01)
        if time.monotonic() - t > 20:
            os._exit(8)

def report(name, r, t0):
    with open("/workspace/%s.tmp" % name, "w") as f:
        json.dump({name: r, name + "_s": time.monotonic() - t0}, f)
    os.rename("/workspace/%s.tmp" % name, "/workspace/%s" % name)

def use(name, s):
    t0 = time.monotonic()
    try:
        s.settimeout(10)
        r = "ok " + get(s)
    except Exception as e:
        r = "closed %r" % e
    report(name, r, t0)
    os._exit(0)

conns = {"direct": socket.create_connection((ADDR, PORT), timeout=10),
         "keep": socket.create_connection((ADDR, KEEP), timeout=10)}
out = {k: get(s) for k, s in conns.items()}
kids = {}
if MODE == "execonly":
    # The holder runs a program it may execute but not read, owned by
    # an id the sandbox does not map: not even its fdinfo can be read.
    # The bystander (non-dumpable, an allowed connection) must live.
    pid = os.fork()
    if pid == 0:
        conns["direct"].close()
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
        ready("keep")
        wait_go()
        use("keep", conns["keep"])
    kids["keep"] = pid
    holder = os.fork()
    if holder == 0:
        conns["keep"].close()
        os.dup2(conns["direct"].fileno(), 77)
        os.execv("/workspace/xsleep", ["xsleep", "30"])
    conns["direct"].close()
    conns["keep"].close()
    wait_ready(["keep"])
    t = time.monotonic()
    while open("/proc/%d/comm" % holder).read().strip() != "xsleep":
        time.sleep(0.01)
        if time.monotonic() - t > 20:
            os._exit(8)
elif MODE == "hidden":
    for name in ("direct", "keep"):
        pid = os.fork()
        if pid == 0:
            for k, s in conns.items():
                if k != name:
                    s.close()
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
            ready(name)
            wait_go()
            use(name, conns[name])
        kids[name] = pid
    conns["direct"].close()
    conns["keep"].close()
    wait_ready(kids)
else:
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close()
        conns["direct"].close()
        ready("direct")
        wait_go()
        _, fds, _, _ = socket.recv_fds(b, 16, 4)
        use("direct", socket.socket(fileno=fds[0]))
    kids["direct"] = pid
    b.close()
    wait_ready(["direct"])
    socket.send_fds(a, [b"x"], [conns["direct"].fileno()])
    conns["direct"].close()
with open("/workspace/r1.tmp", "w") as f:
    json.dump(out, f)
os.rename("/workspace/r1.tmp", "/workspace/r1")
wait_go()
out = {}
if MODE != "hidden":
    t0 = time.monotonic()
    use_keep = conns["keep"]
    try:
        out["keep"] = "ok " + get(use_keep)
    except Exception as e:
        out["keep"] = "closed %r" % e
if MODE == "execonly":
    time.sleep(0.3)
    done, st = os.waitpid(holder, os.WNOHANG)
    out["holder"] = "killed %d" % st if done else "alive"
    if not done:
        os.kill(holder, 9)
        os.waitpid(holder, 0)
for name, pid in kids.items():
    _, st = os.waitpid(pid, 0)
    if os.path.exists("/workspace/" + name):
        out.update(json.load(open("/workspace/" + name)))
    else:
        out[name] = "killed %d" % st
with open("/workspace/r2.tmp", "w") as f:
    json.dump(out, f)
os.rename("/workspace/r2.tmp", "/workspace/r2")
'''


def run_revoke(airlock, net, mode):
    ws = airlock.make_dir()
    (ws / "client.py").write_text(CLIENT)
    airlock.chown(ws)
    if mode == "execonly":
        # Root's, executable and not readable by anyone else.
        shutil.copy("/bin/sleep", ws / "xsleep")
        os.chmod(ws / "xsleep", 0o711)
    ctl = airlock.make_dir("ctl")
    (ctl / "policy.json").write_text(json.dumps({"network": {"budget": {"rate": 0}}}))
    sock, audit = ctl / "c.sock", ctl / "audit.jsonl"
    airlock.chown(ctl)
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(
        ["run", "-q", "-w", ws, "-p", ctl / "policy.json", "--control", sock, "--audit", audit,
         "--allow-private", RANGE, "--allow", "placeholder.invalid", "--",
         "/bin/sh", "-c", f"while [ ! -e /workspace/go0 ]; do sleep 0.05; done; "
         f"exec python3 /workspace/client.py {SERVER_ADDR} {HTTP_PORT} {OTHER_PORT} {mode}"])]
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
    cut = [d for d in recs if d["kind"] == "net.decision"
           and (d.get("reason") or "").startswith("revoked")]
    return second, cut


def test_revoke_cuts_a_hidden_holder_and_spares_a_bystander(airlock, net):
    second, cut = run_revoke(airlock, net, "hidden")
    # The holder is alive and finds its connection closed; the bystander,
    # also non-dumpable, keeps its allowed connection.
    assert second["direct"].startswith("closed"), second
    assert second["direct_s"] < 2, second
    assert second["keep"].startswith("ok HTTP/1.1 200"), second
    assert [d["reason"] for d in cut] == ["revoked"], cut
    assert cut[0]["port"] == HTTP_PORT, cut


def test_revoke_cuts_a_socket_in_transit(airlock, net):
    second, cut = run_revoke(airlock, net, "transit")
    assert second["keep"].startswith("ok HTTP/1.1 200"), second
    if airlock.mode == "root":
        # Aborted where it lies: the receiver gets it dead.
        assert second["direct"].startswith("closed"), second
        assert [d["reason"] for d in cut] == ["revoked"], cut
    else:
        # Out of an ordinary user's reach: the process that would
        # receive it is killed.
        assert second["direct"].startswith(("closed", "killed")), second
        assert len(cut) == 1 and cut[0]["reason"] in ("revoked", "revoked_killed"), cut
    assert cut[0]["port"] == HTTP_PORT, cut


def test_revoke_kills_only_an_unreadable_holder(airlock, net):
    if os.geteuid() != 0:
        pytest.skip("needs root to own the execute-only program")
    second, cut = run_revoke(airlock, net, "execonly")
    assert second["keep"].startswith("ok HTTP/1.1 200"), second
    if airlock.mode == "root":
        # Root reads every process: the socket itself is shut.
        assert second["holder"] == "alive", second
        assert [d["reason"] for d in cut] == ["revoked"], cut
    else:
        # Fail closed, narrowly: the one process that cannot be read.
        assert second["holder"].startswith("killed"), second
        assert [d["reason"] for d in cut] == ["revoked_killed"], cut
