# SPDX-License-Identifier: Apache-2.0
"""Sandboxes through the API: create, exec with streaming, files, processes,
audit, destroy."""

import os

import pytest

from daemonlib import AirlockError, wait_for


def test_create_get_list_destroy(shared_daemon, api):
    sb = api.create(sandbox_class="small", metadata={"task": "t-1", "team": "x"}, ttl=600)
    assert sb["state"] == "running" and sb["class"] == "small"
    assert sb["metadata"] == {"task": "t-1", "team": "x"}
    assert sb["limits"]["memory"] == 256 << 20 and sb["limits"]["cpus"] == 0.5
    assert sb["expiresAt"] is not None and sb["grant"] == "admin"
    ws = shared_daemon.state / "workspaces" / sb["id"]
    assert ws.is_dir() and sb["workspace"] == str(ws)

    got = api.get(sb["id"])
    assert got["state"] == "running"
    assert "usage" in got and "network" in got  # from the supervisor's status

    assert [s["id"] for s in api.list(metadata={"task": "t-1"})] == [sb["id"]]
    assert api.list(metadata={"task": "t-1", "team": "y"}) == []
    assert sb["id"] in [s["id"] for s in api.list(state="running")]

    gone = api.delete(sb["id"])
    assert gone["state"] == "destroyed" and gone["reason"] == "api"
    assert gone["endedAt"] is not None
    assert not ws.exists()
    assert not (shared_daemon.run_dir / sb["id"]).exists()
    assert api.get(sb["id"])["state"] == "destroyed"
    assert sb["id"] in [s["id"] for s in api.list(state="destroyed")]
    # Deleting again answers with the record.
    assert api.delete(sb["id"])["state"] == "destroyed"
    with pytest.raises(AirlockError) as e:
        api.run(sb["id"], ["true"])
    assert e.value.status == 409 and e.value.body["state"] == "destroyed"


def test_exec_output_and_exit(api, sandbox):
    r = api.run(sandbox["id"], ["sh", "-c", "echo out; echo err >&2; printf '\\001\\377'; exit 3"])
    assert r.exit_code == 3 and r.error_code is None
    assert r.stdout == b"out\n\x01\xff" and r.stderr == b"err\n"
    assert [e["type"] for e in r.events][0] == "started"
    assert r.events[-1]["type"] == "exit" and "usage" in r.events[-1]


def test_exec_runs_confined_in_the_workspace(api, sandbox):
    r = api.run(sandbox["id"], ["sh", "-c", "id -u; pwd; cat /proc/self/status | grep CapEff; "
                                            "echo x > /workspace/made; echo $FOO"],
                env={"FOO": "bar"})
    uid, cwd, cap, foo = r.stdout.decode().splitlines()
    assert uid == "1000" and cwd == "/workspace" and foo == "bar"
    assert cap.split()[1] == "0000000000000000"
    assert api.read_file(sandbox["id"], "made") == b"x\n"
    # Not the host: the host's root is not the sandbox's.
    r = api.run(sandbox["id"], ["sh", "-c", "ls /root 2>&1; echo $?"])
    assert r.stdout.decode().strip().endswith("2") or b"No such file" in r.stdout


def test_exec_streams_as_it_happens(api, sandbox):
    """The first line arrives while the command still waits for us: it can
    only go on once we have read it and answered through the files API."""
    script = ("echo ready; while [ ! -e /workspace/go ]; do sleep 0.02; done; "
              "cat /workspace/go")
    events = api.exec(sandbox["id"], ["sh", "-c", script])
    seen = []
    for ev in events:
        seen.append(ev)
        if ev["type"] == "stdout" and ev["data"] == b"ready\n":
            api.write_file(sandbox["id"], "go", b"going\n")
    types = [e["type"] for e in seen]
    assert types[0] == "started" and types[-1] == "exit"
    out = b"".join(e["data"] for e in seen if e["type"] == "stdout")
    assert out == b"ready\ngoing\n"


def test_exec_stdin_cwd_and_timeout(api, sandbox):
    r = api.run(sandbox["id"], ["sh", "-c", "pwd; cat"], cwd="/tmp", stdin=b"in put")
    assert r.stdout == b"/tmp\nin put"
    r = api.run(sandbox["id"], ["sleep", "30"], timeout=0.5)
    assert (r.exit_code, r.error_code) == (124, "timeout")


def test_exec_not_found(api, sandbox):
    r = api.run(sandbox["id"], ["/nonexistent/cmd"])
    assert r.exit_code == 127 and r.error_code == "exec_failed"


def test_exec_schema(api, sandbox):
    for body, field in [({"argv": []}, "argv"), ({"argv": "ls"}, "argv"),
                        ({"argv": ["ls", 1]}, "argv[1]"),
                        ({"argv": ["ls"], "env": {"A-B": "x"}}, "env.A-B"),
                        ({"argv": ["ls"], "cwd": "rel"}, "cwd"),
                        ({"argv": ["ls"], "timeout": 0}, "timeout"),
                        ({"argv": ["ls"], "oops": 1}, "oops")]:
        status, _, data = api.request("POST", "/v1/sandboxes/%s/exec" % sandbox["id"], body)
        assert status == 400 and ('"field":"%s"' % field).encode() in data, (body, data)


def test_background_process_stdin_events_signal(api, sandbox):
    sid = sandbox["id"]
    pid = api.exec_background(sid, ["sh", "-c", "echo begin; cat; echo end"])
    api.stdin(sid, pid, b"hello\n")
    api.stdin(sid, pid, b"world\n", eof=True)
    r = api.collect(api.events(sid, pid))
    assert r.stdout == b"begin\nhello\nworld\nend\n" and r.exit_code == 0
    # Attaching after the end replays what was kept.
    assert api.collect(api.events(sid, pid)).stdout == r.stdout

    pid2 = api.exec_background(sid, ["sleep", "60"])
    api.signal(sid, pid2, "TERM")
    r2 = api.collect(api.events(sid, pid2))
    assert r2.signal == 15 and r2.exit_code == 143

    procs = {p["pid"]: p for p in api.processes(sid)}
    assert procs[pid]["background"] and procs[pid]["argv"][0] == "sh"
    with pytest.raises(AirlockError) as e:
        api.signal(sid, 999, "TERM")
    assert e.value.status == 404
    with pytest.raises(AirlockError) as e:
        api.signal(sid, pid, "NOPE")
    assert e.value.status == 400 and e.value.body["field"] == "signal"


def test_a_client_that_leaves_kills_its_foreground_command(api, sandbox):
    sid = sandbox["id"]
    events = api.exec(sid, ["sh", "-c", "echo up; sleep 60"])
    for ev in events:
        if ev["type"] == "stdout":
            break
    events.close()  # the connection goes, the command with it

    def ended():
        procs = api.get(sid).get("processes", [])
        return not any(p["running"] for p in procs)
    wait_for(ended, what="the orphaned command to be killed")


def test_files_roundtrip(api, sandbox):
    sid = sandbox["id"]
    data = os.urandom(100000)
    assert api.write_file(sid, "deep/er/blob.bin", data)["size"] == len(data)
    assert api.read_file(sid, "/workspace/deep/er/blob.bin") == data
    r = api.run(sid, ["sha256sum", "/workspace/deep/er/blob.bin"])
    import hashlib
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    names = {e["name"]: e for e in api.list_files(sid, "deep/er")["entries"]}
    assert names["blob.bin"]["type"] == "file" and names["blob.bin"]["size"] == len(data)
    assert {e["name"] for e in api.list_files(sid)["entries"]} >= {"deep"}
    # What the sandbox writes, the API reads, and the other way round.
    api.write_file(sid, "in.txt", b"to the sandbox")
    r = api.run(sid, ["sh", "-c", "cat in.txt; echo back > out.txt; chmod 700 out.txt"])
    assert r.stdout == b"to the sandbox"
    assert api.read_file(sid, "out.txt") == b"back\n"
    api.write_file(sid, "out.txt", b"replaced")
    assert api.run(sid, ["cat", "out.txt"]).stdout == b"replaced"
    api.delete_file(sid, "in.txt")
    with pytest.raises(AirlockError) as e:
        api.read_file(sid, "in.txt")
    assert e.value.status == 404
    with pytest.raises(AirlockError) as e:
        api.delete_file(sid, "deep")
    assert e.value.status == 409
    api.delete_file(sid, "deep", recursive=True)
    assert "deep" not in {e["name"] for e in api.list_files(sid)["entries"]}
    with pytest.raises(AirlockError) as e:
        api.write_file(sid, "no/parents/here", b"x", parents=False)
    assert e.value.status == 404


def test_files_size_limit(api, sandbox):
    """One request carries at most 16 MiB (the client writes more in pieces);
    reads are streamed, of any size (test_files_api2.py)."""
    sid = sandbox["id"]
    with pytest.raises(AirlockError) as e:
        api._put(sid, "big", b"\0" * ((16 << 20) + 1), parents="true")
    assert e.value.status == 413
    api.run(sid, ["sh", "-c", "head -c 17000000 /dev/zero > big"])
    assert len(api.read_file(sid, "big")) == 17000000
    api.write_file(sid, "exact", b"\1" * (16 << 20))
    assert len(api.read_file(sid, "exact")) == 16 << 20


def test_audit_has_the_sandbox_and_its_api_calls(api, sandbox):
    sid = sandbox["id"]
    api.run(sid, ["true"])
    api.write_file(sid, "a", b"1")
    lines = api.audit(sid)
    kinds = [l["kind"] for l in lines]
    assert all(l["sandbox"] == sid for l in lines)
    for k in ("sandbox.created", "api.create", "api.exec", "process.started", "process.ended",
              "api.file_written"):
        assert k in kinds, kinds
    assert [l for l in lines if l["kind"] == "api.exec"][0]["grant"] == "admin"


def test_ttl_can_be_set(api, sandbox):
    sid = sandbox["id"]
    assert api.get(sid)["expiresAt"] is None
    assert api.set_ttl(sid, 3600)["expiresAt"] is not None
    assert api.set_ttl(sid, 0)["expiresAt"] is None
    with pytest.raises(AirlockError) as e:
        api.set_ttl(sid, -5)
    assert e.value.status == 400


def test_host_workspace(make_daemon, tmp_path):
    d = make_daemon()
    c = d.client(d.admin)
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "README").write_text("hello\n")
    sb = c.create(sandbox_class="small", workspace=str(ws))
    assert sb["workspaceOwned"] is False
    assert c.run(sb["id"], ["cat", "README"]).stdout == b"hello\n"
    c.write_file(sb["id"], "new.txt", b"n")
    assert (ws / "new.txt").read_bytes() == b"n"
    c.delete(sb["id"])
    assert (ws / "README").exists() and (ws / "new.txt").exists()
    with pytest.raises(AirlockError) as e:
        c.create(workspace=str(tmp_path / "missing"))
    assert e.value.status == 400 and e.value.body["field"] == "workspace"
