# SPDX-License-Identifier: Apache-2.0
"""The host edges of git (issue 10, items 2 and 3).

Item 3: host-side git (export, push, the report at the end of
`run --repo`) reads the agent's repository without following its symbolic
links, without opening its FIFOs, with object sizes capped, and with the
agent's bytes escaped on a terminal.

Item 2: at the end of a run, anything in the workspace that would make the
host's next `git status` run code is reported and neutralised: a planted
`.git/commondir`, a nested repository staged as a gitlink, a submodule's
`.git/modules/NAME/config`, a worktree's rewritten `.git` file, and a `.git`
the agent makes in a workspace that is a subdirectory of a host
repository."""

import json
import os
import pathlib
import pty
import re
import select
import shutil
import subprocess
import time

import pytest

from test_git import al, audit_file, git, make_remote, run_agent, workspace_of

COMMIT = "git -c user.name=Agent -c user.email=agent@example.com commit -q"


def private_repo(airlock, bare, repack):
    """A repository on the host the sandbox never saw: the remote plus one
    private commit, in a 0700 directory."""
    d = airlock.make_dir("private")
    repo = d / "repo"
    git("clone", "-q", bare, repo)
    (repo / "secret.txt").write_text("PRIVATE-SECRET\n")
    git("add", "secret.txt", cwd=repo)
    git("commit", "-q", "-m", "PRIVATE-SECRET commit", cwd=repo)
    if repack:
        git("repack", "-q", "-a", "-d", cwd=repo)
    airlock.chown(d)
    d.chmod(0o700)
    return repo


def export_refused(airlock, sid, what):
    p = al(airlock, ["export", sid])
    assert "PRIVATE-SECRET" not in p.stdout
    assert p.returncode == 1, p.stdout[:500] + p.stderr
    assert what in p.stderr, p.stderr
    return p


def test_symlinked_pack_and_ref_into_a_host_repository(airlock):
    bare, base = make_remote(airlock)
    priv = private_repo(airlock, bare, repack=True)
    p, sid = run_agent(airlock, f"file://{bare}", audit_file(airlock))
    assert p.returncode == 0 and sid, p.stderr
    gd = workspace_of(p) / ".git"
    shutil.rmtree(gd / "objects/pack")
    (gd / "objects/pack").symlink_to(priv / ".git/objects/pack")
    (gd / "refs/heads/main").unlink()
    (gd / "refs/heads/main").symlink_to(priv / ".git/refs/heads/main")

    export_refused(airlock, sid, "symbolic link")
    push = al(airlock, ["push", sid, "--branch", "agent/leak"])
    assert push.returncode == 1 and "symbolic link" in push.stderr, push.stderr
    assert git("-C", bare, "rev-parse", "-q", "--verify", "refs/heads/agent/leak",
               check=False).returncode != 0


def test_symlinked_packed_refs_and_loose_objects(airlock):
    bare, base = make_remote(airlock)
    priv = private_repo(airlock, bare, repack=False)
    git("pack-refs", "--all", cwd=priv)
    p, sid = run_agent(airlock, f"file://{bare}", audit_file(airlock))
    assert p.returncode == 0 and sid, p.stderr
    gd = workspace_of(p) / ".git"
    for f in (priv / ".git/objects").glob("[0-9a-f][0-9a-f]/*"):
        d = gd / "objects" / f.parent.name
        if not d.exists():
            d.symlink_to(f.parent)
        elif not (d / f.name).exists():
            (d / f.name).symlink_to(f)
    for ref in (gd / "refs/heads").iterdir():
        ref.unlink()
    (gd / "packed-refs").unlink(missing_ok=True)
    (gd / "packed-refs").symlink_to(priv / ".git/packed-refs")

    export_refused(airlock, sid, "symbolic link")


def test_fifo_ref_does_not_hang_run_or_export(airlock):
    bare, base = make_remote(airlock)
    script = "cd /workspace/.git/refs/heads && rm main && mkfifo main && echo PLANTED"
    t0 = time.monotonic()
    p, sid = run_agent(airlock, f"file://{bare}", audit_file(airlock), script=script)
    assert time.monotonic() - t0 < 60
    assert "PLANTED" in p.stdout, p.stderr
    assert sid and "FIFO" in p.stderr, p.stderr
    t0 = time.monotonic()
    e = airlock.run(["export", sid], input="", timeout=60)
    assert time.monotonic() - t0 < 30
    assert e.returncode == 1 and "FIFO" in e.stderr, e.stderr


def test_object_inflating_past_the_cap_is_refused_with_bounded_memory(airlock):
    bare, base = make_remote(airlock)
    # 65 MiB of zeros: a loose object of about 64 KiB, just above the
    # 64 MiB cap on one object.
    script = ("set -e; cd /workspace; truncate -s 65M big; git add big; "
              f"{COMMIT} -m 'a big one'; ls -l .git/objects/*/ | head -3")
    p, sid = run_agent(airlock, f"file://{bare}", audit_file(airlock), script=script)
    assert p.returncode == 0 and sid, p.stderr
    status, rss, err = run_measured(airlock.cmd(["export", sid]), airlock.base)
    assert os.waitstatus_to_exitcode(status) == 1, err
    assert "more than the 64 MiB" in err, err
    assert rss < 60 * 1024, f"export used {rss} KiB"


def run_measured(argv, cwd, timeout=60):
    """Run argv; its wait status, peak RSS in KiB and stderr."""
    errf = open(os.path.join(cwd, f"stderr-{os.getpid()}-{time.monotonic_ns()}"), "w+")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=errf, cwd=cwd)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = 0  # reaped here; keep Popen from waiting again
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{argv} did not finish in {timeout} s")
        time.sleep(0.05)
    errf.seek(0)
    return status, usage.ru_maxrss, errf.read()


def test_export_escapes_the_agents_bytes_on_a_terminal(airlock):
    bare, base = make_remote(airlock)
    script = ("set -e; cd /workspace; echo x > x; git add x; "
              f"{COMMIT} -m \"$(printf 'evil \\033]0;owned\\007 \\302\\2332J \\033[31mred')\" "
              "-m \"$(printf 'body \\033[2J\\302\\233m end')\"")
    p, sid = run_agent(airlock, f"file://{bare}", audit_file(airlock), script=script)
    assert p.returncode == 0 and sid, p.stderr

    # Into a file: byte-exact, for git am.
    out = airlock.make_dir("out") / "x.mbox"
    f = al(airlock, ["export", sid, "-o", out])
    assert f.returncode == 0, f.stderr
    raw = out.read_bytes()
    assert b"\x1b[2J" in raw and b"\xc2\x9bm" in raw

    # To a terminal: no escape sequence gets through.
    master, slave = pty.openpty()
    proc = subprocess.Popen(airlock.cmd(["export", sid]), stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=subprocess.PIPE, cwd=airlock.base)
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read()
    assert b"From " in shown and b"body" in shown
    assert b"\x1b" not in shown and b"\xc2\x9b" not in shown and b"\x9b" not in shown
    assert b"\\x1b[2J" in shown and b"\\u{009b}m" in shown
