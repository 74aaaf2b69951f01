# SPDX-License-Identifier: Apache-2.0
"""One grant's sandboxes are not another grant's power. A sandbox is made
with what its grant may give it (host tools, daemon secrets in its routes);
another grant that may run commands must not run them in it, write its
files, signal its processes, open its terminal, forward its ports, change
its TTL or destroy it: to that grant the sandbox does not exist (404).
Reading stays open to every grant, as docs/api.md's reading grant says."""

from daemonlib import AirlockError


def _status(f):
    try:
        f()
    except AirlockError as e:
        return e.status
    return 200


def test_another_grant_cannot_act_on_a_sandbox(make_daemon):
    d = make_daemon()
    owner = d.client(d.grant("owner", "--allow-sandbox", "--allow-exec", "--tool", "core.time"))
    other = d.client(d.grant("other", "--allow-sandbox", "--allow-exec"))
    sid = owner.create(policy={"tools": {"allow": ["core.time"]}})["id"]
    owner.write_file(sid, "note.txt", b"mine")
    pid = owner.exec_background(sid, ["sleep", "60"])

    acting = {
        "exec": lambda: other.run(sid, ["airlock-tool", "call", "core.time"]),
        "background exec": lambda: other.exec_background(sid, ["true"]),
        "stdin": lambda: other.stdin(sid, pid, b"x"),
        "signal": lambda: other.signal(sid, pid, "KILL"),
        "write": lambda: other.write_file(sid, "note.txt", b"theirs"),
        "delete file": lambda: other.delete_file(sid, "note.txt"),
        "mkdir": lambda: other.mkdir(sid, "d"),
        "rename": lambda: other.rename(sid, "note.txt", "moved.txt"),
        "port": lambda: other.open_port(sid, 8000),
        "ttl": lambda: other.set_ttl(sid, 1),
        "destroy": lambda: other.delete(sid),
    }
    for what, f in acting.items():
        assert _status(f) == 404, what

    # A terminal's stream carries input: also the maker's only.
    status, _, _ = other.request("GET", f"/v1/sandboxes/{sid}/processes/{pid}/pty")
    assert status == 404

    # Nothing happened: the process runs, the file is the owner's.
    assert owner.read_file(sid, "note.txt") == b"mine"
    assert any(p["pid"] == pid and p["state"] == "running" for p in owner.processes(sid)), \
        owner.processes(sid)
    assert owner.get(sid)["state"] == "running"

    # Reading is every grant's.
    assert other.get(sid)["id"] == sid
    assert other.read_file(sid, "note.txt") == b"mine"

    # The maker still acts on it.
    out = owner.run(sid, ["airlock-tool", "call", "core.time"])
    assert out.exit_code == 0, out
    owner.delete(sid)
