# SPDX-License-Identifier: Apache-2.0
"""Per-command users: exec with "uid" in a sandbox whose policy has "users".

Each inside user is its own unprivileged host id, from a range Airlock
reserves per sandbox (src/lib/boundary/idrange.c): two users inside cannot
read each other's private files, two sandboxes never share an id, and no
file an extra user makes lands as a host account's."""

import os
import pwd
import shutil
import tempfile

import pytest

from daemonlib import AirlockError

BASE, END = 0x70000000, 0x7FFE0000
RECORDS = "/var/lib/airlock/idranges"


def refused(f, status=400):
    with pytest.raises(AirlockError) as e:
        f()
    assert e.value.status == status, e.value
    return e.value


def uid_map(api, sid):
    r = api.run(sid, ["cat", "/proc/self/uid_map"], timeout=20)
    assert r.exit_code == 0, r.stderr
    return [tuple(int(x) for x in line.split()) for line in r.stdout.decode().splitlines()]


def host_id(lines, inside):
    for first, out, count in lines:
        if first <= inside < first + count:
            return out + inside - first
    return None


@pytest.fixture
def multi(api):
    sb = api.create(sandbox_class="small", policy={"users": 2048})
    yield sb["id"]
    try:
        api.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def test_exec_as_another_user(api, multi):
    for uid in (0, 1000, 2000, 2047):
        r = api.run(multi, ["sh", "-c", "id -u; id -g"], uid=uid, timeout=20)
        assert r.exit_code == 0, r.stderr
        assert r.stdout.decode().split() == [str(uid), str(uid)]
    # The sandbox's own user, as before.
    r = api.run(multi, ["id", "-u"], timeout=20)
    assert r.stdout == b"1000\n"
    for bad in (2048, 65534, -1, "0", 1.5):
        e = refused(lambda: api.run(multi, ["true"], uid=bad))
        assert e.body["field"] == "uid" and "0 to 2047" in e.message, e.message


def test_one_user_sandbox_still_refuses_other_uids(api, sandbox):
    e = refused(lambda: api.run(sandbox["id"], ["true"], uid=0))
    assert "one user" in e.message and '"users"' in e.message


def test_second_user_cannot_read_the_first_users_private_file(api, multi):
    r = api.run(multi, ["sh", "-c", "umask 077; echo s3cret > /tmp/private; "
                        "mkdir -p $HOME/d; echo s3cret > $HOME/d/f; chmod 600 $HOME/d/f"],
                timeout=20)
    assert r.exit_code == 0, r.stderr
    for uid in (0, 2000):  # a fake root holds no capability to override modes
        r = api.run(multi, ["cat", "/tmp/private"], uid=uid, timeout=20)
        assert r.exit_code != 0 and b"s3cret" not in r.stdout
        assert b"Permission denied" in r.stderr
        r = api.run(multi, ["sh", "-c", "cat ~1000/d/f /home/*/d/f 2>&1; "
                            "chmod 644 /tmp/private 2>&1; cat /tmp/private 2>&1"],
                    uid=uid, timeout=20)
        assert b"s3cret" not in r.stdout


def test_each_user_is_its_own_unprivileged_host_id(api, multi):
    other = api.create(sandbox_class="small", policy={"users": 1024, "uid": 5 , "gid": 5})
    try:
        a, b = uid_map(api, multi), uid_map(api, other["id"])
        ids_a = [host_id(a, u) for u in (0, 1, 999, 1001, 2047)]
        ids_b = [host_id(b, u) for u in (0, 4, 6, 1023)]
        assert host_id(a, 1000) == 65534 and host_id(b, 5) == 65534
        assert host_id(a, 2048) is None and host_id(b, 1024) is None
        for h in ids_a + ids_b:
            assert BASE <= h < END, hex(h)
            with pytest.raises(KeyError):
                pwd.getpwuid(h)
        assert len(set(ids_a + ids_b)) == len(ids_a + ids_b)  # never shared
        # The same holds for gids.
        r = api.run(multi, ["cat", "/proc/self/gid_map"], timeout=20)
        g = [tuple(int(x) for x in line.split()) for line in r.stdout.decode().splitlines()]
        assert host_id(g, 0) == host_id(a, 0) and host_id(g, 1000) == 65534
    finally:
        api.delete(other["id"])


def test_files_of_another_user_never_belong_to_a_host_account(api):
    """In a workspace idmapped to the sandbox's user, another user cannot
    create anything (its id is not in the mount's map); where the tree is
    the sandbox user's own (a plain bind) the file belongs to the reserved
    host id of that inside user."""
    ws = tempfile.mkdtemp(prefix="uidws-", dir="/tmp")
    plain = tempfile.mkdtemp(prefix="uidplain-", dir="/tmp")
    os.chmod(ws, 0o777)
    os.chmod(plain, 0o777)
    os.chown(plain, 65534, 65534)
    sb = api.create(sandbox_class="small", workspace=ws,
                    policy={"users": 1024, "filesystem": {"mounts": [
                        {"source": plain, "target": "/plain", "readonly": False}]}})
    try:
        lines = uid_map(api, sb["id"])
        r = api.run(sb["id"], ["sh", "-c", "touch /workspace/by500"], uid=500, timeout=20)
        assert r.exit_code != 0
        assert not os.path.exists(os.path.join(ws, "by500"))
        r = api.run(sb["id"], ["sh", "-c", "touch /workspace/bymain"], timeout=20)
        assert r.exit_code == 0, r.stderr
        assert os.stat(os.path.join(ws, "bymain")).st_uid == 0  # the tree's owner, as before
        r = api.run(sb["id"], ["sh", "-c", "echo x > /plain/by500; mkdir /plain/d500"], uid=500,
                    timeout=20)
        assert r.exit_code == 0, r.stderr
        for name in ("by500", "d500"):
            st = os.stat(os.path.join(plain, name))
            assert st.st_uid == host_id(lines, 500) and BASE <= st.st_uid < END
            with pytest.raises(KeyError):
                pwd.getpwuid(st.st_uid)
            assert st.st_mode & 0o6000 == 0
    finally:
        api.delete(sb["id"])
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(plain, ignore_errors=True)
    # It had a writable host tree: its ids stay retired, never handed out again.
    first = (host_id(lines, 0) - BASE) // 1024
    with open(os.path.join(RECORDS, str(first))) as f:
        assert f.read().split() == ["1", "1"]


def test_bad_users_key_is_refused(api):
    for bad in ({"users": 1}, {"users": 1000}, {"users": 65537}, {"users": "many"},
                {"users": 10, "uid": 0, "gid": 20}):
        e = refused(lambda: api.create(sandbox_class="small", policy=bad))
        assert "users" in e.message, e.message


def test_cli_exec_uid(shared_daemon, api, multi):
    from test_cli import cli
    p = cli(shared_daemon, shared_daemon.admin, "exec", "--uid", "0", multi, "--", "id", "-u")
    assert p.returncode == 0 and p.stdout == b"0\n", p.stderr
    p = cli(shared_daemon, shared_daemon.admin, "exec", "--uid", "4096", multi, "--", "true")
    assert p.returncode == 125 and b"0 to 2047" in p.stderr, p.stderr
    p = cli(shared_daemon, shared_daemon.admin, "exec", "--uid", "x", multi, "--", "true")
    assert p.returncode != 0 and b"--uid" in p.stderr


def test_no_capability_in_any_user(api, multi):
    """pid 1 keeps setuid/setgid to start other users' processes; none of
    them (root inside included) keeps any capability past its execve."""
    for uid in (None, 0, 1000, 2000):
        kw = {} if uid is None else {"uid": uid}
        r = api.run(multi, ["grep", "^Cap", "/proc/self/status"], timeout=20, **kw)
        caps = dict(line.split(":\t") for line in r.stdout.decode().splitlines())
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(caps[k], 16) == 0, (uid, k, caps[k])
