# SPDX-License-Identifier: Apache-2.0
"""Every command an idle sandbox's pid 1 starts is confined as fully as the
first, however many came before it: pid 1 prepares the confinement once (the
signal dispositions reset, the bounding set emptied, one Landlock ruleset)
and each command still ends with no capability, no_new_privs, the seccomp
filter, default signal handling, and Landlock in force on its own."""

import pytest

from daemonlib import AirlockError

ROUNDS = 4


def status(api, sid, **kw):
    r = api.run(sid, ["cat", "/proc/self/status"], timeout=20, **kw)
    assert r.exit_code == 0, r.stderr
    out = {}
    for line in r.stdout.decode().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


@pytest.fixture
def multi(api):
    sb = api.create(sandbox_class="small", policy={"users": 2048})
    yield sb["id"]
    try:
        api.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def check_confined(st):
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[k], 16) == 0, (k, st[k])
    assert st["NoNewPrivs"] == "1", st["NoNewPrivs"]
    assert st["Seccomp"] == "2", st["Seccomp"]
    # Nothing of the supervisor's or pid 1's signal state reaches a command.
    for k in ("SigBlk", "SigIgn", "SigCgt"):
        assert int(st[k], 16) == 0, (k, st[k])


def test_every_exec_is_confined(api, sandbox):
    sid = sandbox["id"]
    for _ in range(ROUNDS):
        check_confined(status(api, sid))


def test_every_exec_as_another_user_is_confined(api, multi):
    # pid 1 of a sandbox with "users" keeps CAP_SETUID/CAP_SETGID to start
    # commands as other users: none of it may reach the command.
    for uid in (0, 1000, 0, 2000):
        check_confined(status(api, multi, uid=uid))


def test_landlock_in_force_on_every_exec(api, sandbox):
    # A process may rename itself through /proc/self/comm (its own file, by
    # the file modes); only Landlock (writes beneath the write list alone)
    # stops it. /tmp is on the list and takes a file.
    sid = sandbox["id"]
    for i in range(ROUNDS):
        r = api.run(sid, ["sh", "-c", "echo x > /proc/self/comm; echo comm=$?; touch /tmp/y%d; echo tmp=$?" % i],
                    timeout=20)
        out = r.stdout.decode().split()
        assert "tmp=0" in out, (out, r.stderr)
        assert "comm=0" not in out, (out, r.stderr)
        assert b"ermission denied" in r.stderr, r.stderr


def test_pid1_runs_under_the_filter(api, sandbox):
    # pid 1 loads the filter once on itself and each command inherits it:
    # pid 1 holds no capability and no_new_privs, and the filter is in force
    # there too.
    r = api.run(sandbox["id"], ["cat", "/proc/1/status"], timeout=20)
    assert r.exit_code == 0, r.stderr
    st = dict(line.split(":", 1) for line in r.stdout.decode().splitlines() if ":" in line)
    assert st["Name"].strip() == "airlock-init", st["Name"]
    assert st["Seccomp"].strip() == "2", st["Seccomp"]
    assert st["NoNewPrivs"].strip() == "1", st["NoNewPrivs"]
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[k], 16) == 0, (k, st[k])
