# SPDX-License-Identifier: Apache-2.0
"""airlockd under faults: abandoned exec streams, a full or lost state
database, kill -9 of the daemon, retention. Each test runs a real daemon
(tests/daemon/daemonlib.py) and asserts that nothing is left behind and that
every answer given is still true after a restart."""

import json
import os
import pathlib
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "daemon"))
from daemonlib import AIRLOCK, AIRLOCKD, BUILD, Daemon, wait_for  # noqa: E402

# Output limits well above what a test streams: the bounds under test are
# the stream's own, not the policy's.
BIG_OUTPUT = {"limits": {"output": "1G"}}


@pytest.fixture
def fault_daemon():
    """fault_daemon(*args, base=None) starts a fresh daemon; all are
    cleaned up, their supervisors too."""
    if os.geteuid() != 0:
        pytest.skip("the daemon fault tests run as root")
    for b in (AIRLOCK, AIRLOCKD):
        if not b.exists():
            pytest.skip(f"{b} is not built (run 'ninja -C {BUILD}')")
    made = []
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="airlockd-faults-", dir="/tmp"))

    def make(*args, base=None):
        d = Daemon(base or tempfile.mkdtemp(prefix="d-", dir=tmp), args)
        d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec", "--allow-host-workspace")
        d.start()
        made.append(d)
        return d
    yield make
    for d in made:
        d.cleanup(getattr(d, "admin", None))
    if not os.environ.get("AIRLOCK_KEEP_TMP"):
        shutil.rmtree(tmp, ignore_errors=True)


# helpers

def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kb(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descendants(pid):
    """Every process below pid (by parent links)."""
    children = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{e}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(e))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def comms(pids):
    out = []
    for p in pids:
        try:
            out.append(pathlib.Path(f"/proc/{p}/comm").read_text().strip())
        except OSError:
            pass
    return out


def raw_exec(d, sandbox_id, argv, extra=None):
    """Start an exec over a raw socket and read nothing from it."""
    body = dict(argv=argv)
    body.update(extra or {})
    data = json.dumps(body).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(str(d.socket))
    s.sendall(("POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: airlockd\r\n"
               "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n" % (sandbox_id, d.admin, len(data))).encode() + data)
    return s


def process_records(d, sandbox_id):
    db = sqlite3.connect(str(d.state / "airlockd.db"))
    try:
        return db.execute("SELECT pid, state, exit_code, error_code FROM processes "
                          "WHERE sandbox = ?", (sandbox_id,)).fetchall()
    finally:
        db.close()


# abandoned streams (issue 11 item 2)

@pytest.mark.parametrize("argv", [["yes"], ["head", "-c", "100M", "/dev/zero"]],
                         ids=["yes", "head"])
def test_abandoned_stream_is_bounded_killed_and_recorded(fault_daemon, argv):
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(policy=BIG_OUTPUT, sandbox_class="small")["id"]
    assert c.run(sb, ["true"]).exit_code == 0
    sup = d.supervisors()[sb]
    daemon_fds = fd_count(d.proc.pid)
    sup_rss = rss_kb(sup)

    s = raw_exec(d, sb, argv)
    # The command runs, then blocks on its pipe: nobody reads its output.
    wait_for(lambda: argv[0] in comms(descendants(sup)), timeout=10, what="the command to start")
    time.sleep(3)
    grown = rss_kb(sup) - sup_rss
    assert grown < 24 * 1024, "the supervisor buffered %d KiB of unread output" % grown
    assert rss_kb(d.proc.pid) < 64 * 1024
    s.close()

    # The client is gone: its command is killed, its record is final, and
    # the daemon lets the connection go.
    wait_for(lambda: argv[0] not in comms(descendants(sup)), timeout=15,
             what="the abandoned command to be killed")
    wait_for(lambda: process_records(d, sb) and
             all(r[1] == "exited" for r in process_records(d, sb)), timeout=10,
             what="the process record to be final")
    wait_for(lambda: fd_count(d.proc.pid) <= daemon_fds, timeout=10,
             what="the daemon's fds to come back to %d" % daemon_fds)
    rec = [r for r in process_records(d, sb) if r[0] != 1][0]
    assert rec[3] == "abandoned", rec
    # The sandbox still works.
    assert c.run(sb, ["echo", "ok"]).stdout == b"ok\n"


def test_stalled_stream_is_killed_after_the_stall_time(fault_daemon):
    """A client that keeps the connection but never reads: the command is
    paused, then killed after the stall time, and recorded."""
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(policy=BIG_OUTPUT, sandbox_class="small")["id"]
    sup = d.supervisors()[sb]
    s = raw_exec(d, sb, ["yes"], {"stallTimeout": 3})
    try:
        wait_for(lambda: "yes" in comms(descendants(sup)), timeout=10, what="yes to start")
        wait_for(lambda: "yes" not in comms(descendants(sup)), timeout=20,
                 what="the stalled command to be killed")
        wait_for(lambda: any(r[1] == "exited" for r in process_records(d, sb)), timeout=10,
                 what="the record to be final")
        assert [r[3] for r in process_records(d, sb)] == ["abandoned"]
        assert c.get(sb)["state"] == "running"
    finally:
        s.close()


def test_plain_disconnects_always_kill_the_command(fault_daemon):
    """A client that leaves at any point of an exec, before or after
    "started", never leaves its command running."""
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    sup = d.supervisors()[sb]
    daemon_fds = fd_count(d.proc.pid)
    for i in range(16):
        s = raw_exec(d, sb, ["sh", "-c", "echo hi; exec sleep 60"])
        if i % 2:
            s.settimeout(10)
            got = b""
            while b'"started"' not in got:
                got += s.recv(4096)
        elif i % 4 == 2:
            time.sleep(0.05)
        s.close()
    wait_for(lambda: "sleep" not in comms(descendants(sup)) and "sh" not in comms(descendants(sup)),
             timeout=15, what="every abandoned command to be killed")
    wait_for(lambda: len(process_records(d, sb)) == 16 and
             all(r[1] == "exited" for r in process_records(d, sb)), timeout=10,
             what="every record to be final")
    assert {r[3] for r in process_records(d, sb)} == {"abandoned"}
    wait_for(lambda: fd_count(d.proc.pid) <= daemon_fds, timeout=10,
             what="the daemon's fds to come back")


# the state store (issue 11 items 5 and 7)

def supervisor_procs(d):
    """{pid: sandbox id} of every `airlock supervise` serving d's run dir."""
    out = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            argv = pathlib.Path(f"/proc/{e}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"supervise" in argv and b"--run-dir" in argv:
            i = argv.index(b"--run-dir")
            if i + 1 < len(argv) and argv[i + 1] == str(d.run_dir).encode():
                out[int(e)] = argv[argv.index(b"--id") + 1].decode()
    return out


def recorded(d):
    db = sqlite3.connect(str(d.state / "airlockd.db"))
    try:
        return {row[0]: row[1] for row in db.execute("SELECT id, state FROM sandboxes")}
    finally:
        db.close()


def cgroups_named(prefix):
    out = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for n in dirs:
            if n.startswith(prefix):
                out.append(os.path.join(root, n))
        dirs[:] = [n for n in dirs if not n.startswith("airlock-")][:200]
    return out


def health(d):
    status, _, body = d.client(d.admin).request("GET", "/healthz")
    return status, json.loads(body)


def assert_no_orphans(d, c):
    """Every supervisor is one the records say runs, and every running record
    has its supervisor."""
    sups = supervisor_procs(d)
    recs = recorded(d)
    live = {i for i, s in recs.items() if s in ("running", "pooled", "starting", "stopping")}
    assert set(sups.values()) <= live, (sups, recs)
    for i in live:
        assert i in sups.values(), (i, recs[i], sups)
    # A failed or destroyed sandbox's cgroups are reclaimed on the daemon's
    # timer (sandbox-cleanup.c: again every 2 ms while cgroup.kill takes
    # effect): gone within a bound, not at the instant the record says so.
    for i, s in recs.items():
        if s in ("failed", "destroyed"):
            wait_for(lambda: not cgroups_named("airlock-" + i), timeout=10,
                     what=f"the cgroups of {s} sandbox {i} to go")


@pytest.fixture
def small_state(tmp_path):
    """A daemon base whose state directory is a 24 MiB tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    base = tmp_path / "d"
    (base / "state").mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs",
                        str(base / "state")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs: " + r.stderr.strip())
    yield base
    subprocess.run(["umount", "-l", str(base / "state")], capture_output=True)


def fill(path):
    """Fill the file system of path; returns the filler's path."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (1 << 20, 4096):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


class FullStore:
    """The database's file system filled so that no record fits, whatever
    the database's log could take back: the log, once checkpointed, is
    written over from its start, so a small record may still fit in it
    after fill(). Blobs of shrinking sizes are added (from outside the
    daemon) until none fits, and a read kept open stops the log being
    written over from its start until unhold(). release() gives it all
    back."""

    def __init__(self, d, fsdir):
        self.db = sqlite3.connect(str(d.state / "airlockd.db"), timeout=10, isolation_level=None)
        self.db.execute("CREATE TABLE IF NOT EXISTS test_spend (b BLOB)")
        self.filler = fill(fsdir)
        for size in (1 << 20, 1 << 16, 1 << 12, 1 << 9, 1 << 6):
            for _ in range(10000):
                try:
                    self.db.execute("INSERT INTO test_spend VALUES (?)", (b"\0" * size,))
                except sqlite3.OperationalError as e:
                    if "locked" in str(e) or "busy" in str(e):
                        continue
                    break
        self.db.execute("BEGIN")
        self.db.execute("SELECT count(*) FROM sandboxes").fetchall()

    def unhold(self):
        """The read let go (the daemon's checkpoints wait for it), the disk
        still full: once the record under test has failed."""
        if self.db and self.db.in_transaction:
            self.db.execute("ROLLBACK")

    def release(self):
        if self.db:
            self.unhold()
            self.filler.unlink(missing_ok=True)
            self.db.execute("DROP TABLE test_spend")
            self.db.close()
            self.db = None


def test_full_state_disk_refuses_creates_and_leaves_nothing_behind(fault_daemon, small_state):
    d = fault_daemon(base=small_state)
    c = d.client(d.admin)
    keep = c.create(sandbox_class="small")["id"]
    filler = fill(d.state)
    for _ in range(4):
        status, _, body = c.request("POST", "/v1/sandboxes", {"class": "small"})
        body = json.loads(body)
        assert status == 503, (status, body)
        assert body.get("error") == "store_unavailable", body
        st, h = health(d)
        assert st == 503 and h["ok"] is False and "store" in h.get("reasons", {}), h
    wait_for(lambda: set(supervisor_procs(d).values()) == {keep}, timeout=15,
             what="the refused sandboxes' supervisors to stop")

    # What the daemon answered holds after a crash and a restart.
    d.kill9()
    d.start()
    assert_no_orphans(d, c)
    assert recorded(d)[keep] == "running"

    # Space comes back, and so does the store, the WAL truncated.
    filler.unlink()
    wait_for(lambda: health(d)[1]["ok"], timeout=10, what="healthz to say ok again")
    wal = d.state / "airlockd.db-wal"
    assert not wal.exists() or wal.stat().st_size <= 4 << 20
    sb = c.create(sandbox_class="small")["id"]
    assert c.run(sb, ["echo", "ok"]).stdout == b"ok\n"
    assert_no_orphans(d, c)


@pytest.fixture
def small_db(tmp_path):
    """A daemon base whose database lives on a 4 MiB tmpfs of its own, so
    that the record is what fails, not the sandbox's files."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    base = tmp_path / "d"
    (base / "state").mkdir(parents=True)
    (base / "dbfs").mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs",
                        str(base / "dbfs")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs: " + r.stderr.strip())
    (base / "state" / "airlockd.db").symlink_to(base / "dbfs" / "airlockd.db")
    yield base
    subprocess.run(["umount", "-l", str(base / "dbfs")], capture_output=True)


def test_a_create_whose_record_fails_is_undone(fault_daemon, small_db):
    d = fault_daemon(base=small_db)
    c = d.client(d.admin)
    keep = c.create(sandbox_class="small")["id"]
    full = FullStore(d, small_db / "dbfs")
    status, _, body = c.request("POST", "/v1/sandboxes", {"class": "small", "metadata": {"x": "y" * 200}})
    body = json.loads(body)
    assert status == 503 and body["error"] == "store_unavailable", (status, body)
    assert "record" in body["message"], body
    full.unhold()
    st, h = health(d)
    assert st == 503 and "store" in h["reasons"], h
    # Refused at once while the store cannot write.
    status, _, _ = c.request("POST", "/v1/sandboxes", {"class": "small"})
    assert status == 503
    wait_for(lambda: set(supervisor_procs(d).values()) == {keep}, timeout=15,
             what="the unrecorded sandbox's supervisor to stop")
    refused = {line.split()[2].rstrip(":") for line in d.log.read_text().splitlines()
               if ": recording it: " in line} - {keep}
    assert refused
    wait_for(lambda: not [i for i in refused if cgroups_named("airlock-" + i)], timeout=10,
             what="the refused sandbox's cgroups to go")

    d.kill9()
    full.release()
    d.start()
    assert_no_orphans(d, c)
    wait_for(lambda: health(d)[1]["ok"], timeout=10, what="healthz to say ok again")
    assert c.run(keep, ["echo", "ok"]).stdout == b"ok\n"


def test_an_exec_whose_record_fails_is_stopped(fault_daemon, small_db):
    d = fault_daemon(base=small_db)
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    sup = d.supervisors()[sb]
    full = FullStore(d, small_db / "dbfs")
    status, _, body = c.request("POST", "/v1/sandboxes/%s/exec" % sb,
                                {"argv": ["sh", "-c", "exec sleep 60"] + ["x" * 1000] * 8})
    assert status == 503 and json.loads(body)["error"] == "store_unavailable", (status, body)
    full.unhold()
    wait_for(lambda: "sleep" not in comms(descendants(sup)), timeout=10,
             what="the unrecorded command to be stopped")
    st, h = health(d)
    assert st == 503 and "store" in h["reasons"], h
    full.release()


def test_a_deleted_database_stops_writes_and_says_why(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    (d.state / "airlockd.db").unlink()
    wait_for(lambda: not health(d)[1]["ok"], timeout=10, what="healthz to notice")
    st, h = health(d)
    assert st == 503 and "deleted" in h["reasons"]["database"], h
    status, _, body = c.request("POST", "/v1/sandboxes", {"class": "small"})
    assert status == 503 and json.loads(body)["error"] == "store_unavailable", body
    status, _, _ = c.request("POST", "/v1/sandboxes/%s/exec" % sb, {"argv": ["true"]})
    assert status == 503
    assert set(supervisor_procs(d).values()) == {sb}


def test_a_corrupted_database_stops_writes_and_says_why(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    c.create(sandbox_class="small")
    with open(d.state / "airlockd.db", "r+b") as f:
        f.write(b"this is no database any more" * 100)
    wait_for(lambda: not health(d)[1]["ok"], timeout=10, what="healthz to notice")
    st, h = health(d)
    assert st == 503 and "database" in h["reasons"], h
    status, _, _ = c.request("POST", "/v1/sandboxes", {"class": "small"})
    assert status == 503


# failed starts and kill -9 (issue 11 item 9, and the daemon's own crash)

def create_in_background(c, **kw):
    import threading
    out = {}

    def run():
        try:
            out["answer"] = c.request("POST", "/v1/sandboxes", kw)
        except OSError as e:
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def catch_supervisor(d, known, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        new = {p: i for p, i in supervisor_procs(d).items() if i not in known}
        if new:
            return new
        time.sleep(0.001)
    return {}


def test_a_start_that_dies_records_its_cause_and_a_final_state(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    for attempt in range(10):
        known = set(recorded(d))
        t, out = create_in_background(c, **{"class": "small"})
        new = catch_supervisor(d, known)
        for pid in new:
            os.kill(pid, signal.SIGKILL)
        t.join(30)
        status, _, body = out["answer"]
        if status == 201:
            c.delete(json.loads(body)["id"])
            continue
        body = json.loads(body)
        assert status == 500 and body["error"] == "setup_failed", (status, body)
        assert "killed by signal 9" in body["message"], body
        failed = [i for i, s in recorded(d).items() if i in new.values()]
        assert failed, recorded(d)
        db = sqlite3.connect(str(d.state / "airlockd.db"))
        state, reason = db.execute("SELECT state, reason FROM sandboxes WHERE id = ?",
                                   (failed[0],)).fetchone()
        db.close()
        assert state == "failed" and "killed by signal 9" in reason, (state, reason)
        wait_for(lambda: not cgroups_named("airlock-" + failed[0]), timeout=10,
                 what="the failed start's cgroups to go")
        return
    pytest.skip("every start was ready before its supervisor could be killed")


def test_kill9_of_the_daemon_mid_create_leaves_nothing(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    keep = c.create(sandbox_class="small")["id"]
    t, out = create_in_background(c, **{"class": "small"})
    new = catch_supervisor(d, {keep})
    d.kill9()
    t.join(10)
    answered = out.get("answer")
    d.start()
    if answered and answered[0] == 201:
        # An answer given holds: the sandbox is there and runs.
        made = json.loads(answered[2])["id"]
        assert c.get(made)["state"] == "running"
        assert c.run(made, ["true"]).exit_code == 0
    else:
        # Nobody learnt its id: destroyed, or kept running under a record
        # (the daemon died after recording it and before answering); never
        # running unknown.
        def settled():
            recs = recorded(d)
            return all(recs.get(i) in (None, "destroyed", "failed", "running")
                       for i in new.values()) and \
                set(supervisor_procs(d).values()) <= {keep} | {
                    i for i in new.values() if recs.get(i) == "running"}
        wait_for(settled, timeout=20, what="the half-made sandbox to be settled")
    assert_no_orphans(d, c)
    for i in new.values():
        if recorded(d).get(i) != "running":
            wait_for(lambda: not cgroups_named("airlock-" + i), timeout=10,
                     what="its cgroups to go")
    assert c.run(keep, ["true"]).exit_code == 0


def test_kill9_of_the_daemon_mid_stream(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    sup = d.supervisors()[sb]
    s = raw_exec(d, sb, ["sh", "-c", "while :; do echo x; sleep 0.01; done"])
    wait_for(lambda: "sh" in comms(descendants(sup)), timeout=10, what="the command to start")
    d.kill9()
    s.close()
    # The daemon that started it is gone: so is the command (its client).
    wait_for(lambda: "sh" not in comms(descendants(sup)), timeout=15,
             what="the command whose daemon died to be killed")
    d.start()
    assert_no_orphans(d, c)
    assert c.run(sb, ["echo", "ok"]).stdout == b"ok\n"


def backup_db(d, dest):
    src = sqlite3.connect(str(d.state / "airlockd.db"))
    dst = sqlite3.connect(str(dest))
    src.backup(dst)
    src.close()
    dst.close()


def restore_db(d, copy):
    for suffix in ("", "-wal", "-shm"):
        try:
            (d.state / ("airlockd.db" + suffix)).unlink()
        except FileNotFoundError:
            pass
    shutil.copy(copy, d.state / "airlockd.db")


def test_restart_on_a_restored_database_leaves_no_orphan(fault_daemon, tmp_path):
    d = fault_daemon()
    c = d.client(d.admin)
    old = c.create(sandbox_class="small")["id"]
    backup_db(d, tmp_path / "copy.db")
    new = c.create(sandbox_class="small")["id"]
    (d.state / "airlockd.db").unlink()
    wait_for(lambda: not health(d)[1]["ok"], timeout=10, what="healthz to notice")
    d.kill9()
    restore_db(d, tmp_path / "copy.db")
    d.start()
    # The grants came back with the copy; the sandbox it knew is re-attached.
    assert c.get(old)["state"] == "running"
    assert c.run(old, ["echo", "ok"]).stdout == b"ok\n"
    # The one it did not know is stopped, not left running unreachable.
    wait_for(lambda: new not in supervisor_procs(d).values(), timeout=20,
             what="the unrecorded sandbox's supervisor to stop")
    wait_for(lambda: recorded(d).get(new) == "destroyed", timeout=10,
             what="a record of what became of it")
    wait_for(lambda: not cgroups_named("airlock-" + new), timeout=10, what="its cgroups to go")
    assert not (d.state / "workspaces" / new).exists()
    assert_no_orphans(d, c)
    assert any('"sandbox.unrecorded"' in line and new in line
               for line in d.audit.read_text().splitlines())


# retention (issue 11 item 14)

def test_daemon_prunes_ended_records_after_retain(fault_daemon):
    d = fault_daemon("--retain", "2s")
    c = d.client(d.admin)
    live = c.create(sandbox_class="small")["id"]
    gone = c.create(sandbox_class="small")["id"]
    assert c.run(gone, ["true"]).exit_code == 0
    c.delete(gone)
    assert recorded(d)[gone] == "destroyed"
    wait_for(lambda: gone not in recorded(d), timeout=15, what="the ended record to be pruned")
    assert process_records(d, gone) == []
    assert recorded(d)[live] == "running"
    assert c.run(live, ["true"]).exit_code == 0


def airlock(*args, timeout=60):
    return subprocess.run([str(AIRLOCK)] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout)


def test_gc_removes_reviewed_changes_and_old_records(fault_daemon, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("runs sandboxes as root")
    root = tmp_path / "root"
    ws = tmp_path / "ws"
    ws.mkdir()
    ids = []
    for i in range(2):
        r = airlock("run", "-q", "--review", "--state-root", root, "-w", ws, "--", "sh", "-c",
                    "echo %d > f%d" % (i, i))
        assert r.returncode == 0, r.stderr
        ids.append(sorted(set(os.listdir(root / "sandboxes")) - set(ids))[0])
    r = airlock("discard", "--state-root", root, ids[0])
    assert r.returncode == 0, r.stderr
    # Within the retention period nothing goes.
    r = airlock("gc", "--state-root", root)
    assert r.returncode == 0 and (root / "sandboxes" / ids[0]).exists(), r
    r = airlock("gc", "--state-root", root, "--retain", "0")
    assert r.returncode == 0, r.stderr
    assert not (root / "sandboxes" / ids[0]).exists()
    # Changes nobody reviewed yet are not the collector's to drop.
    assert (root / "sandboxes" / ids[1]).exists()

    # A daemon's state directory: ended records go, live ones stay.
    d = fault_daemon()
    c = d.client(d.admin)
    live = c.create(sandbox_class="small")["id"]
    gone = c.create(sandbox_class="small")["id"]
    c.delete(gone)
    r = airlock("gc", "--state-dir", d.state, "--retain", "0")
    assert r.returncode == 0, r.stderr
    assert "1 record(s)" in r.stdout, r.stdout
    assert gone not in recorded(d) and recorded(d)[live] == "running"
    r = airlock("gc", "--retain", "soon")
    assert r.returncode == 2 and "--retain" in r.stderr
    r = airlock("run", "--state-root", "relative", "--", "true")
    assert r.returncode == 125 and "absolute" in r.stderr


# resumable output (issue 11 item 8)

def events(c, sb, pid, frm=None):
    path = "/v1/sandboxes/%s/processes/%d/events" % (sb, pid)
    if frm is not None:
        path += "?from=%d" % frm
    return list(c._stream("GET", path))


def test_events_from_replays_exactly_what_was_missed(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    pid = c.exec_background(sb, ["sh", "-c", "for i in 1 2 3 4 5; do echo $i; done"])
    wait_for(lambda: [p for p in c.processes(sb) if p["pid"] == pid and p["state"] == "exited"],
             timeout=10, what="the process to end")
    every = events(c, sb, pid)
    seqs = [e["seq"] for e in every]
    assert seqs == list(range(1, len(seqs) + 1)), every
    assert every[0]["type"] == "started" and every[-1]["type"] == "exit"
    for k in range(1, len(seqs) + 2):
        assert events(c, sb, pid, k) == every[k - 1:], k
    status, _, body = c.request("GET", "/v1/sandboxes/%s/processes/%d/events?from=x" % (sb, pid))
    assert status == 400 and json.loads(body)["field"] == "from"


def test_a_reconnecting_client_gets_the_rest_and_the_result(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    s = raw_exec(d, sb, ["sh", "-c", "echo one; echo two; exec sleep 60"])
    s.settimeout(10)
    got = b""
    while b"two" not in base64_lines(got):
        got += s.recv(65536)
    s.close()
    seen = [json.loads(line) for line in chunks(got)]
    last = max(e["seq"] for e in seen)
    pid = seen[0]["pid"]
    rest = events(c, sb, pid, last + 1)
    assert rest and rest[0]["seq"] == last + 1, (seen, rest)
    assert rest[-1]["type"] == "exit" and rest[-1]["errorCode"] == "abandoned", rest
    assert [p for p in c.processes(sb) if p["pid"] == pid][0]["errorCode"] == "abandoned"


def test_results_reached_while_the_daemon_was_down_are_recorded(fault_daemon):
    d = fault_daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")["id"]
    bg = c.exec_background(sb, ["sh", "-c", "sleep 1; echo done; exit 3"])
    s = raw_exec(d, sb, ["sh", "-c", "echo a; exec sleep 60"])
    time.sleep(0.3)
    d.kill9()
    s.close()
    time.sleep(1.5)
    d.start()
    wait_for(lambda: all(p["state"] == "exited" for p in c.processes(sb)), timeout=15,
             what="every process record to be final")
    procs = {p["pid"]: p for p in c.processes(sb)}
    assert procs[bg]["exitCode"] == 3, procs
    fg = [p for p in procs.values() if p["pid"] != bg][0]
    assert fg["errorCode"] == "abandoned", procs
    replay = events(c, sb, bg, 1)
    assert replay[-1]["type"] == "exit" and replay[-1]["exitCode"] == 3


def chunks(raw):
    """The NDJSON lines of a raw chunked HTTP answer."""
    body = raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else b""
    out, buf = [], b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        try:
            size = int(size_line, 16)
        except ValueError:
            break
        if size == 0 or len(rest) < size:
            buf += rest[:size]
            break
        buf += rest[:size]
        body = rest[size + 2:]
    for line in buf.split(b"\n"):
        if line.strip():
            try:
                out.append(line)
                json.loads(line)
            except ValueError:
                out.pop()
    return out


def base64_lines(raw):
    import base64
    data = b""
    for line in chunks(raw):
        e = json.loads(line)
        if e.get("type") == "stdout":
            data += base64.b64decode(e["data"])
    return data
