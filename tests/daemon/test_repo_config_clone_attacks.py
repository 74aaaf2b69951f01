# SPDX-License-Identifier: Apache-2.0
"""A sandbox created from a repository ("repo": the daemon clones it) reads
the clone's .airlock/isolation.json as a host workspace's is read
(docs/tiers.md): the repository's minimumTier is enforced (409
repo_config_refused), a bad file refused naming the key (400
invalid_repo_config), and what widens applies only when trusted. Before,
the clone's file was never read: a repository asking for a stronger tier
ran in the namespace tier."""

import json
import pathlib
import secrets
import subprocess
import tempfile

import pytest

GIT = ["git", "-c", "safe.directory=*", "-c", "user.name=Test", "-c", "user.email=t@example.com"]


def git(*args, cwd=None):
    return subprocess.run([*GIT, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          check=True, timeout=30).stdout


def remote_with(daemon_base, cfg):
    d = pathlib.Path(tempfile.mkdtemp(prefix="remote-", dir=daemon_base))
    bare = d / "remote.git"
    git("init", "-q", "--bare", "-b", "main", bare)
    seed = d / "seed"
    git("clone", "-q", bare, seed)
    (seed / ".airlock").mkdir()
    (seed / ".airlock/isolation.json").write_text(json.dumps(cfg))
    git("add", ".airlock", cwd=seed)
    git("commit", "-q", "-m", "initial", cwd=seed)
    git("push", "-q", "origin", "main", cwd=seed)
    return bare


@pytest.fixture
def git_api(shared_daemon):
    return shared_daemon.client(shared_daemon.grant(
        "gitrc-" + secrets.token_hex(4), "--allow-sandbox", "--allow-exec", "--allow-git",
        "--allow-host-workspace"))


def test_clone_minimum_tier_enforced(git_api, daemon_base):
    bare = remote_with(daemon_base, {"minimumTier": "microvm"})
    status, _, body = git_api.request("POST", "/v1/sandboxes",
                                      {"class": "small", "repo": f"file://{bare}"})
    b = json.loads(body)
    if status == 201:
        git_api.delete(b["id"])
    assert status == 409, body
    assert b["error"] == "repo_config_refused" and "microvm" in b["message"], b


def test_clone_bad_config_refused_and_untrusted_adds_nothing(git_api, daemon_base):
    bare = remote_with(daemon_base, {"surprise": 1})
    status, _, body = git_api.request("POST", "/v1/sandboxes",
                                      {"class": "small", "repo": f"file://{bare}"})
    b = json.loads(body)
    if status == 201:
        git_api.delete(b["id"])
    assert status == 400 and b["error"] == "invalid_repo_config", body
    assert "surprise" in b["message"], b

    # Untrusted: neither env nor allowedDomains apply.
    bare = remote_with(daemon_base, {"env": {"REPO_ASKED": "yes"},
                                     "allowedDomains": ["example.com"]})
    sb = git_api.create(sandbox_class="small", repo=f"file://{bare}")
    try:
        out = git_api.run(sb["id"], ["/bin/sh", "-c",
                                     "echo $REPO_ASKED; echo ${HTTPS_PROXY:-none}"])
        assert out.stdout.split() == [b"none"], (out.stdout, out.stderr)
    finally:
        git_api.delete(sb["id"])
