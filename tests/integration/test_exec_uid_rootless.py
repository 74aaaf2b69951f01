# SPDX-License-Identifier: Apache-2.0
"""Per-command users through `airlock supervise`, as root and as an ordinary
user: policy "users" maps inside uids 0..N-1, each to a host id of the
sandbox's own (a reserved range for root, the caller's /etc/subuid range
through newuidmap otherwise); exec "uid" runs as any of them."""

import array
import fcntl
import json
import os
import pathlib
import pwd
import shutil
import subprocess
import time

import pytest

from test_supervise import Supervisor

BASE, END = 0x70000000, 0x7FFE0000


def subid_range(name, path):
    with open(path) as f:
        for line in f:
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[0] == name:
                return int(parts[1]), int(parts[2])
    return None


@pytest.fixture
def multi(airlock):
    if airlock.rootless:
        if not shutil.which("newuidmap"):
            pytest.skip("needs newuidmap and newgidmap (package uidmap) as an ordinary user")
        if not subid_range(airlock.user.pw_name, "/etc/subuid"):
            pytest.skip(f"{airlock.user.pw_name} has no /etc/subuid range")
    sups = []

    def make(policy):
        s = Supervisor(airlock, policy=policy)
        sups.append(s)
        assert s.ready == "ok", s.proc.stderr.read().decode() if s.proc.poll() is not None \
            else s.ready
        return s
    yield make
    for s in sups:
        s.close()


def parse_map(text):
    return [tuple(int(x) for x in line.split()) for line in text.splitlines()]


def host_id(lines, inside):
    for first, out, count in lines:
        if first <= inside < first + count:
            return out + inside - first
    return None


def exit_code(events):
    return [e for e in events if e.get("type") == "exit"][0]["exitCode"]


def allowed_range(airlock):
    if not airlock.rootless:
        return BASE, END
    start, count = subid_range(airlock.user.pw_name, "/etc/subuid")
    return start, start + count


def test_exec_as_each_user_with_its_own_host_id(airlock, multi):
    a = multi({"users": 2048})
    b = multi({"users": 1024, "uid": 7, "gid": 7})
    for uid in (0, 2000):
        ev, out, err = a.exec(["sh", "-c", "id -u; id -g"], uid=uid)
        assert out.split() == [str(uid), str(uid)], (ev, err)
    ev = a.request({"op": "exec", "argv": ["true"], "uid": 2048})
    assert ev[0]["ok"] is False and "0 to 2047" in ev[0]["message"]
    _, ma, _ = a.exec(["cat", "/proc/self/uid_map"])
    _, mb, _ = b.exec(["cat", "/proc/self/uid_map"])
    la, lb = parse_map(ma), parse_map(mb)
    own = airlock.user.pw_uid if airlock.rootless else 65534
    assert host_id(la, 1000) == own and host_id(lb, 7) == own
    lo, hi = allowed_range(airlock)
    ids = [host_id(la, u) for u in (0, 999, 1001, 2047)] + \
        [host_id(lb, u) for u in (0, 6, 8, 1023)]
    for h in ids:
        assert lo <= h < hi, (hex(h), la, lb)
        if not airlock.rootless:
            with pytest.raises(KeyError):
                pwd.getpwuid(h)
    assert len(set(ids)) == len(ids), "two sandboxes share a host id"


def test_another_user_cannot_read_a_private_file(multi):
    s = multi({"users": 2048})
    ev, out, err = s.exec(["sh", "-c", "umask 077; echo s3cret > /tmp/private; "
                           "echo s3cret > $HOME/mine"])
    assert exit_code(ev) == 0, err
    for uid in (0, 2000):
        ev, out, err = s.exec(["sh", "-c", "cat /tmp/private; cat ~1000/mine /home/*/mine; "
                               "chmod 666 /tmp/private; cat /tmp/private"], uid=uid)
        assert "s3cret" not in out and "Permission denied" in err


def test_files_of_another_user_are_not_a_host_accounts(airlock, multi):
    s = multi({"users": 1024})
    _, m, _ = s.exec(["cat", "/proc/self/uid_map"])
    lines = parse_map(m)
    ev, _, err = s.exec(["chmod", "777", "/workspace"])  # the sandbox's user opens it to all
    assert exit_code(ev) == 0, err
    ev, out, err = s.exec(["sh", "-c", "mkdir /workspace/d500 && echo x > /workspace/d500/f"],
                          uid=500)
    made = s.ws / "d500"
    if not airlock.rootless:
        # The workspace is idmapped to the sandbox's user alone: another
        # user's id has no owner there, so nothing is made.
        assert exit_code(ev) != 0 and not made.exists()
        return
    # A plain bind: the files belong to inside uid 500's subordinate id.
    assert exit_code(ev) == 0, err
    lo, hi = allowed_range(airlock)
    for p in (made, made / "f"):
        st = os.lstat(p)
        assert st.st_uid == host_id(lines, 500) and lo <= st.st_uid < hi
        with pytest.raises(KeyError):
            pwd.getpwuid(st.st_uid)


def test_range_released_or_retired(airlock):
    """Root's ranges: free again when the sandbox ends, unless its other
    users could leave files on a host tree that outlives it (then never
    handed out again): not a read-write workspace idmapped to the sandbox's
    user (root's here), where they can make nothing; a plain one (the
    sandbox user's own, 65534's) is such a tree."""
    if airlock.rootless:
        pytest.skip("root's reserved range")
    ws = airlock.make_dir()
    plain = airlock.make_dir()
    os.chown(plain, 65534, 65534)
    pol = airlock.make_dir("policy") / "p.json"
    for mode, path, kept in (("ro", ws, False), ("rw", ws, False), ("rw", plain, True)):
        pol.write_text(json.dumps({"workspace": {"path": str(path), "mode": mode},
                                   "users": 1024}))
        p = airlock.run(["run", "-q", "--policy", pol, "--", "cat", "/proc/self/uid_map"],
                        timeout=60)
        assert p.returncode == 0, p.stderr
        base = host_id(parse_map(p.stdout), 0)
        record = pathlib.Path("/var/lib/airlock/idranges") / str((base - BASE) // 1024)
        if kept:
            assert record.read_text().split() == ["1", "1"]
            continue
        # Free: unlocked and not retired (removed by the next allocation),
        # so the next sandbox gets the same first free block.
        assert record.read_text().split() == ["1", "0"]
        with open(record) as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = airlock.run(["run", "-q", "--policy", pol, "--", "cat", "/proc/self/uid_map"],
                        timeout=60)
        assert host_id(parse_map(p.stdout), 0) == base


def test_without_a_subordinate_range_refused(airlock):
    """An ordinary user with no /etc/subuid range gets the reason, not a
    sandbox whose users share its own id."""
    if airlock.rootless or os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("runs a uid without a range through setpriv, as root")
    uid = next(u for u in range(4242, 4300) if not _named(u))
    home = airlock.make_dir("h")
    (home / "ws").mkdir()
    for p in (home, home / "ws"):
        os.chown(p, uid, uid)
    p = subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                        "env", f"HOME={home}"] +
                       airlock.cmd(["run", "-q", "--users", "1024", "-w", home / "ws", "--",
                                    "true"]),
                       capture_output=True, text=True, timeout=60, cwd=str(home))
    assert p.returncode == 125
    assert "no range in /etc/subuid" in p.stderr and "usermod --add-subuids" in p.stderr


def _named(uid):
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def test_seen_from_the_host(airlock, multi):
    """A process of inside uid 2000 is, on the host, the range's id (not an
    account's), and its user namespace is still owned by the supervisor's
    user: newuidmap wrote the map, it did not create the namespace."""
    s = multi({"users": 2048})
    _, m, _ = s.exec(["cat", "/proc/self/uid_map"])
    want = host_id(parse_map(m), 2000)
    ev = s.request({"op": "exec", "argv": ["sleep", "30"], "uid": 2000, "background": True})
    assert ev[0].get("type") == "started", ev
    owner = airlock.user.pw_uid if airlock.rootless else 0
    found = []
    for _ in range(100):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/status") as f:
                    st = dict(line.split(":", 1) for line in f if ":" in line)
                if int(st["Uid"].split()[0]) != want or "sleep" not in st["Name"]:
                    continue
                fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
                try:
                    buf = array.array("I", [0xFFFFFFFF])
                    fcntl.ioctl(fd, 0xB704, buf)  # NS_GET_OWNER_UID
                finally:
                    os.close(fd)
                found.append(buf[0])
            except (OSError, KeyError, ValueError):
                continue
        if found:
            break
        time.sleep(0.05)
    assert found == [owner], found
    with pytest.raises(KeyError):
        pwd.getpwuid(want)


def test_another_user_has_no_group_of_the_first(multi):
    """The caller's supplementary groups map to the sandbox user's group
    inside: another user must not carry them (a 0640 file stays closed)."""
    s = multi({"users": 2048})
    ev, _, err = s.exec(["sh", "-c", "umask 027; echo s3cret > /tmp/grp"])
    assert exit_code(ev) == 0, err
    for uid in (0, 500):
        ev, out, err = s.exec(["sh", "-c", "grep ^Groups /proc/self/status; cat /tmp/grp"],
                              uid=uid)
        assert out.split() == ["Groups:"], (uid, out)
        assert "s3cret" not in out and "Permission denied" in err
