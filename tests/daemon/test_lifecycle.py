# SPDX-License-Identifier: Apache-2.0
"""Sandboxes outlive the daemon; TTLs, idle timeouts and the warm pool;
many creates at once."""

import concurrent.futures
import os
import signal
import sqlite3


from daemonlib import wait_for


def records(d):
    db = sqlite3.connect(str(d.state / "airlockd.db"))
    try:
        return {row[0]: row[1] for row in db.execute("SELECT id, state FROM sandboxes")}
    finally:
        db.close()


def test_kill9_and_restart_reattaches_every_running_sandbox(make_daemon):
    d = make_daemon()
    c = d.client(d.admin)
    ids = [c.create(sandbox_class="small", metadata={"n": str(i)})["id"] for i in range(5)]
    c.write_file(ids[0], "kept.txt", b"still here")
    pid = c.exec_background(ids[1], ["sh", "-c", "echo before; read x; echo after $x"])
    before = {sb["id"]: sb for sb in c.list()}
    sups = d.supervisors()
    assert set(sups) == set(ids)

    d.kill9()
    # The sandboxes do not notice.
    for i in ids:
        os.kill(sups[i], 0)
    d.start()

    after = {sb["id"]: sb for sb in c.list()}
    assert set(after) == set(before)
    for i in ids:
        assert after[i]["state"] == "running", after[i]
        assert after[i]["metadata"] == before[i]["metadata"]
        assert after[i]["createdAt"] == before[i]["createdAt"]
        assert c.run(i, ["echo", "alive"]).stdout == b"alive\n"
    assert d.supervisors() == sups
    assert c.read_file(ids[0], "kept.txt") == b"still here"
    # A background process started before the restart is still reachable.
    c.stdin(ids[1], pid, b"x\n", eof=True)
    r = c.collect(c.events(ids[1], pid))
    assert r.stdout == b"before\nafter x\n" and r.exit_code == 0
    # And destroy still works on re-attached ones.
    c.delete(ids[2])
    assert c.get(ids[2])["state"] == "destroyed"
    assert "re-attached 5" in d.log.read_text()


def test_restart_cleans_up_a_sandbox_whose_supervisor_died(make_daemon):
    d = make_daemon()
    c = d.client(d.admin)
    keep = c.create(sandbox_class="small")["id"]
    dead = c.create(sandbox_class="small")["id"]
    sups = d.supervisors()
    ws = d.state / "workspaces" / dead
    assert ws.is_dir()

    d.kill9()
    os.kill(sups[dead], signal.SIGKILL)
    wait_for(lambda: not os.path.exists("/proc/%d" % sups[dead]) or
             open("/proc/%d/stat" % sups[dead]).read().split()[2] == "Z",
             what="the supervisor to die")
    d.start()

    rec = c.get(dead)
    assert rec["state"] == "failed" and rec["reason"] == "supervisor_lost"
    assert not (d.run_dir / dead).exists()
    wait_for(lambda: not ws.exists(), what="the workspace to be removed")
    leftovers = [os.path.join(root, n) for root, dirs, _ in os.walk("/sys/fs/cgroup")
                 for n in dirs if n == "airlock-" + dead]
    assert leftovers == []
    assert c.get(keep)["state"] == "running"
    assert c.run(keep, ["true"]).exit_code == 0


def test_a_supervisor_that_dies_under_a_running_daemon(make_daemon):
    d = make_daemon()
    c = d.client(d.admin)
    sid = c.create(sandbox_class="small")["id"]
    os.kill(d.supervisors()[sid], signal.SIGKILL)
    wait_for(lambda: c.get(sid)["state"] == "destroyed", what="the record to end")
    assert c.get(sid)["reason"] == "supervisor_died"
    wait_for(lambda: not (d.run_dir / sid).exists(), what="the run dir to go")
    wait_for(lambda: not (d.state / "workspaces" / sid).exists(), what="the workspace to go")


def test_ttl_collection(make_daemon):
    d = make_daemon("--gc-interval", "0.2")
    c = d.client(d.admin)
    short = c.create(sandbox_class="small", ttl=1)["id"]
    long = c.create(sandbox_class="small", ttl=3600)["id"]
    wait_for(lambda: c.get(short)["state"] == "destroyed", timeout=30, what="the TTL")
    assert c.get(short)["reason"] == "ttl"
    assert c.get(long)["state"] == "running"
    # A TTL set later counts from then.
    c.set_ttl(long, 0.5)
    wait_for(lambda: c.get(long)["state"] == "destroyed", timeout=30, what="the new TTL")


def test_idle_timeout_spares_a_busy_sandbox(make_daemon):
    d = make_daemon("--gc-interval", "0.2")
    c = d.client(d.admin)
    idle = c.create(sandbox_class="small", idle_timeout=1)["id"]
    busy = c.create(sandbox_class="small", idle_timeout=1)["id"]
    pid = c.exec_background(busy, ["sh", "-c", "while [ ! -e /workspace/stop ]; do sleep 0.1; done"])
    wait_for(lambda: c.get(idle)["state"] == "destroyed", timeout=30, what="the idle timeout")
    assert c.get(idle)["reason"] == "idle"
    # The busy one runs a process: not idle, whatever the clock says.
    assert c.get(busy)["state"] == "running"
    c.write_file(busy, "stop", b"")
    assert c.collect(c.events(busy, pid)).exit_code == 0
    wait_for(lambda: c.get(busy)["state"] == "destroyed", timeout=30, what="idle once done")


def test_fifty_concurrent_creates(make_daemon):
    d = make_daemon("--max-sandboxes", "60")
    c = d.client(d.admin, timeout=180)

    def create(i):
        return c.create(sandbox_class="small", metadata={"batch": "50", "i": str(i)})

    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        made = list(pool.map(create, range(50), timeout=300))
    ids = [sb["id"] for sb in made]
    assert len(set(ids)) == 50 and all(sb["state"] == "running" for sb in made)
    assert len(c.list(metadata={"batch": "50"})) == 50
    assert set(d.supervisors()) == set(ids)
    recs = records(d)
    assert all(recs[i] == "running" for i in ids)
    # Each one works.
    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        outs = list(pool.map(lambda i: c.run(i, ["echo", i]).stdout, ids, timeout=300))
    assert outs == [(i + "\n").encode() for i in ids]
    with concurrent.futures.ThreadPoolExecutor(max_workers=25) as pool:
        gone = list(pool.map(lambda i: c.delete(i)["state"], ids, timeout=300))
    assert gone == ["destroyed"] * 50
    assert d.supervisors() == {}


def test_warm_pool(make_daemon):
    d = make_daemon("--pool", "small=2")
    c = d.client(d.admin)

    def ready():
        for line in c.metrics().splitlines():
            if line.startswith("airlock_pool_ready "):
                return float(line.split()[1]) == 2
    wait_for(ready, what="the pool to fill")
    pooled = set(d.supervisors())
    assert len(pooled) == 2
    assert c.list() == []  # pooled sandboxes are not the clients'

    sb = c.create(sandbox_class="small", metadata={"from": "pool"}, ttl=600)
    assert sb["id"] in pooled and sb["metadata"] == {"from": "pool"}
    assert sb["expiresAt"] is not None and sb["grant"] == "admin"
    assert c.run(sb["id"], ["sh", "-c", "ls -A /workspace | wc -l"]).stdout == b"0\n"
    wait_for(ready, what="the pool to refill")
    # A create that asks for more than a class starts cold.
    cold = c.create(sandbox_class="small", policy={"env": {"X": "1"}})
    assert cold["id"] not in pooled
    assert c.run(cold["id"], ["sh", "-c", "echo $X"]).stdout == b"1\n"
    metrics = c.metrics()
    assert "airlock_pool_hits_total 1" in metrics
    # The pool survives a restart.
    before = set(d.supervisors())
    d.kill9()
    d.start()
    wait_for(ready, what="the pool after a restart")
    assert set(d.supervisors()) == before
    # Restarted without a pool, the daemon lets the pooled ones go.
    d.stop()
    d.start([])
    wait_for(lambda: set(d.supervisors()) == {sb["id"], cold["id"]}, what="the pool to go")
    # A pooled sandbox let go is listed until its supervisor's end is recorded.
    wait_for(lambda: {s["id"] for s in c.list()} == {sb["id"], cold["id"]},
             what="the pooled sandboxes' records to end")
