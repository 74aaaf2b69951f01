# SPDX-License-Identifier: Apache-2.0
"""The airlock CLI against a real daemon: grant, create, ls, exec, cp, logs, rm."""

import json
import os
import subprocess

from daemonlib import AIRLOCK


def cli(d, token, *args, input=None):
    env = dict(os.environ, AIRLOCK_SOCKET=str(d.socket))
    if token is not None:
        env["AIRLOCK_TOKEN"] = token
    else:
        env.pop("AIRLOCK_TOKEN", None)
    return subprocess.run([str(AIRLOCK)] + [str(a) for a in args], capture_output=True,
                          input=input, env=env, timeout=120)


def test_cli_round_trip(make_daemon, tmp_path):
    d = make_daemon()
    tok = d.grant("cli", "--allow-sandbox", "--allow-exec", "--max-sandboxes", "3")
    p = cli(d, tok, "create", "--class", "small", "--meta", "who=cli", "--ttl", "10m")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.decode().strip()
    assert len(sid) == 16

    p = cli(d, tok, "ls", "--meta", "who=cli")
    assert p.returncode == 0 and sid in p.stdout.decode()
    p = cli(d, tok, "ls", "--json")
    assert [s["id"] for s in json.loads(p.stdout)] == [sid]

    p = cli(d, tok, "exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 4")
    assert (p.returncode, p.stdout, p.stderr) == (4, b"out\n", b"err\n")
    p = cli(d, tok, "exec", "-i", sid, "--", "wc", "-c", input=b"12345")
    assert p.stdout.strip() == b"5"
    p = cli(d, tok, "exec", "--timeout", "0.3", sid, "--", "sleep", "20")
    assert p.returncode == 124 and b"timeout" in p.stderr

    src = tmp_path / "in.bin"
    src.write_bytes(bytes(range(256)) * 10)
    assert cli(d, tok, "cp", src, sid + ":data/in.bin").returncode == 0
    out = tmp_path / "out.bin"
    assert cli(d, tok, "cp", sid + ":/workspace/data/in.bin", out).returncode == 0
    assert out.read_bytes() == src.read_bytes()
    p = cli(d, tok, "cp", sid + ":../etc/passwd", tmp_path / "x")
    assert p.returncode == 1 and b"path_refused" in p.stderr

    p = cli(d, tok, "exec", "--background", sid, "--", "sh", "-c", "echo bg; exit 6")
    pid = p.stdout.decode().strip()
    p = cli(d, tok, "logs", sid, pid)
    assert (p.returncode, p.stdout) == (6, b"bg\n")
    p = cli(d, tok, "logs", sid)
    kinds = [json.loads(l)["kind"] for l in p.stdout.splitlines()]
    assert "sandbox.created" in kinds and "api.exec" in kinds

    assert cli(d, tok, "rm", sid).returncode == 0
    p = cli(d, tok, "exec", sid, "--", "true")
    assert p.returncode == 125 and b"not_running" in p.stderr


def test_cli_errors(make_daemon):
    d = make_daemon()
    p = cli(d, None, "ls")
    assert p.returncode == 1 and b"unauthorized" in p.stderr
    ro = d.grant("ro")
    p = cli(d, ro, "create")
    assert p.returncode == 1 and b"authz_denied" in p.stderr
    p = cli(d, ro, "exec", "nothex", "--", "true")
    assert p.returncode == 2
    p = cli(d, ro, "rm", "0123456789abcdef")
    assert p.returncode == 1 and b"authz_denied" in p.stderr


def test_grant_cli(make_daemon):
    d = make_daemon()
    st = ["--state-dir", str(d.state)]
    p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "bad name"] + st,
                       capture_output=True)
    assert p.returncode == 2
    p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "x", "--classes", "huge"] + st,
                       capture_output=True)
    assert p.returncode == 2 and b"huge" in p.stderr
    d.grant("dup")
    p = subprocess.run([str(AIRLOCK), "grant", "create", "--name", "dup"] + st, capture_output=True)
    assert p.returncode == 1 and b"exists" in p.stderr
    p = subprocess.run([str(AIRLOCK), "grant", "ls", "--json"] + st, capture_output=True)
    grants = {g["name"]: g for g in json.loads(p.stdout)}
    assert grants["admin"]["allowSandbox"] and grants["admin"]["allowHostWorkspace"]
    assert not grants["dup"]["allowExec"]
    p = subprocess.run([str(AIRLOCK), "grant", "revoke", "dup"] + st, capture_output=True)
    assert p.returncode == 0
    p = subprocess.run([str(AIRLOCK), "grant", "revoke", "dup"] + st, capture_output=True)
    assert p.returncode == 1
    p = subprocess.run([str(AIRLOCK), "grant", "ls"] + st, capture_output=True)
    assert b"revoked" in p.stdout


def test_cli_create_review_and_repo(make_daemon, tmp_path):
    d = make_daemon()
    tok = d.grant("rv", "--allow-sandbox", "--allow-exec", "--allow-host-workspace", "--allow-git")
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o755)
    (ws / "a.txt").write_text("a\n")
    p = cli(d, tok, "create", "--class", "small", "--review", "-w", ws, "--json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["workspaceMode"] == "overlay"
    p = cli(d, tok, "exec", rec["id"], "--", "sh", "-c", "echo b > a.txt")
    assert p.returncode == 0 and (ws / "a.txt").read_text() == "a\n"
    assert cli(d, tok, "rm", rec["id"]).returncode == 0
    # The host's own review commands read what the daemon kept.
    p = subprocess.run([str(AIRLOCK), "diff", "--state-root", str(d.state / "kept"), rec["id"]],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "+b" in p.stdout

    bare = tmp_path / "r.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    p = cli(d, tok, "create", "--class", "small", "--repo", bare, "--rev", "main", "--json")
    # An empty repository has no main to check out: the clone's own words.
    assert p.returncode != 0 and b"main" in p.stderr
    p = cli(d, tok, "create", "--rev", "main")
    assert p.returncode != 0 and b"rev" in p.stderr
