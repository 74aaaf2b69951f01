# SPDX-License-Identifier: Apache-2.0
"""Host-side git through the API (issue 10, item 3): POST …/export reads
the agent's repository without opening its FIFOs or following its symbolic
links, and a job that runs past its time is stopped and answered with 504."""

import pathlib
import secrets
import subprocess
import tempfile
import time

import pytest

from daemonlib import AirlockError, Daemon
from test_changes import AGENT_COMMIT, error_of, git, sh


def make_remote(base):
    d = pathlib.Path(tempfile.mkdtemp(prefix="remote-", dir=base))
    bare = d / "remote.git"
    git("init", "-q", "--bare", "-b", "main", bare)
    seed = d / "seed"
    git("clone", "-q", bare, seed)
    (seed / "README").write_text("hello\n")
    git("add", "README", cwd=seed)
    git("commit", "-q", "-m", "initial", cwd=seed)
    git("push", "-q", "origin", "main", cwd=seed)
    return bare, seed


@pytest.fixture
def git_daemon(daemon_base, monkeypatch):
    # The job bound is read from the daemon's environment; the forge command
    # outlives it on purpose, holding the job's pipes open.
    monkeypatch.setenv("AIRLOCK_JOB_TIMEOUT", "4")
    monkeypatch.setenv("AIRLOCK_FORGE_COMMAND", "sleep 120")
    d = Daemon(tempfile.mkdtemp(prefix="gj-", dir=daemon_base))
    tok = d.grant("git", "--allow-sandbox", "--allow-exec", "--allow-git",
                  "--allow-host-workspace")
    d.start()
    yield d, d.client(tok, timeout=60)
    d.cleanup(tok)


def test_export_refuses_a_fifo_ref_and_a_symlinked_pack(git_daemon, daemon_base):
    d, c = git_daemon
    bare, seed = make_remote(daemon_base)
    sb = c.create(sandbox_class="small", repo=f"file://{bare}")
    sh(c, sb["id"], AGENT_COMMIT + " && cd .git/refs/heads && rm main && mkfifo main")
    t0 = time.monotonic()
    with pytest.raises(AirlockError) as e:
        c.export(sb["id"])
    assert time.monotonic() - t0 < 20
    status, code, body = error_of(e)
    assert status == 409 and "FIFO" in body["message"], body

    # A private repository on the host, linked in by the agent.
    git("commit", "-q", "--allow-empty", "-m", "PRIVATE-SECRET", cwd=seed)
    git("repack", "-q", "-a", "-d", cwd=seed)
    sb2 = c.create(sandbox_class="small", repo=f"file://{bare}")
    sh(c, sb2["id"], AGENT_COMMIT + f" && rm -rf .git/objects/pack && "
                     f"ln -s {seed}/.git/objects/pack .git/objects/pack && "
                     f"ln -sf {seed}/.git/refs/heads/main .git/refs/heads/main")
    with pytest.raises(AirlockError) as e:
        c.export(sb2["id"])
    status, code, body = error_of(e)
    assert status == 409 and "symbolic link" in body["message"], body
    with pytest.raises(AirlockError) as e:
        c.push(sb2["id"], "agent/leak")
    assert "symbolic link" in error_of(e)[2]["message"]
    assert "PRIVATE" not in git("--git-dir", bare, "log", "--all", "--format=%s")


def test_a_job_past_its_time_is_stopped_with_504(git_daemon, daemon_base):
    d, c = git_daemon
    bare, _ = make_remote(daemon_base)
    sb = c.create(sandbox_class="small", repo=f"file://{bare}")
    sh(c, sb["id"], AGENT_COMMIT)
    t0 = time.monotonic()
    with pytest.raises(AirlockError) as e:
        c.push(sb["id"], "agent/slow", open_pr=True)
    took = time.monotonic() - t0
    status, code, body = error_of(e)
    assert (status, code) == (504, "timeout"), body
    assert "took longer than 4 s" in body["message"]
    assert took < 30, took
    # The daemon still serves, and the job's process group is gone.
    assert c.get(sb["id"])["id"] == sb["id"]


def test_supervised_sandbox_end_neutralises_host_git_hooks(git_daemon, daemon_base):
    """Issue 10, item 2, for a sandbox the daemon supervises: when it ends,
    what would make host git run code in its workspace is moved aside."""
    d, c = git_daemon
    ws = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=daemon_base))
    ws.chmod(0o755)
    git("init", "-q", "-b", "main", ws)
    marker = ws.parent / f"RAN-{secrets.token_hex(4)}"
    sb = c.create(sandbox_class="small", workspace=str(ws))
    sh(c, sb["id"], "cd /workspace && mkdir sub && cd sub && git init -q && "
                    f"git config core.fsmonitor 'touch {marker}; false' && "
                    "printf '#!/bin/sh\\ntouch /tmp/x\\n' > .git/hooks/post-checkout && "
                    "chmod +x .git/hooks/post-checkout")
    c.delete(sb["id"])

    def moved():
        return (ws / "sub/.git/config.airlock-quarantine").exists()
    from daemonlib import wait_for
    wait_for(moved, timeout=30, what="the nested repository's config to be moved aside")
    assert (ws / "sub/.git/hooks/post-checkout.airlock-quarantine").exists()
    assert not (ws / "sub/.git/config").exists()
    subprocess.run(["git", "-c", "safe.directory=*", "status"], cwd=ws / "sub",
                   capture_output=True, timeout=30)
    assert not marker.exists()
    kinds = wait_for(lambda: [e for e in c.audit(sb["id"]) if e["kind"] == "git.neutralised"],
                     timeout=30, what="git.neutralised in the audit")
    assert {pathlib.Path(e["path"]).name for e in kinds} >= {"config", "post-checkout"}
