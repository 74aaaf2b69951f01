# SPDX-License-Identifier: Apache-2.0
"""Review and git through the API: a copy-on-write workspace's diff, accept
and discard; a sandbox created from a repository, its export and push."""

import json
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import threading

import pytest

from daemonlib import AirlockError, Daemon

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "integration"))
from test_git import GitHTTP  # noqa: E402

GIT = ["git", "-c", "safe.directory=*", "-c", "user.name=Test", "-c", "user.email=t@example.com"]
AGENT_COMMIT = ("cd /workspace && echo one > agent1.txt && git add agent1.txt && "
                "git -c user.name=Agent -c user.email=agent@example.com commit -q -m 'agent: change'")


def git(*args, cwd=None):
    return subprocess.run([*GIT, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout


def error_of(excinfo):
    return excinfo.value.status, excinfo.value.body.get("error"), excinfo.value.body


@pytest.fixture
def host_ws(daemon_base):
    ws = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=daemon_base))
    ws.chmod(0o755)
    (ws / "keep.txt").write_text("keep\n")
    (ws / "edit.txt").write_text("old\n")
    (ws / "gone.txt").write_text("bye\n")
    return ws


def sh(api, sid, script):
    r = api.run(sid, ["sh", "-c", script])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return r


def test_review_diff_while_running_then_accept_after_destroy(api, host_ws):
    sb = api.create(sandbox_class="small", workspace=str(host_ws), review=True)
    sid = sb["id"]
    assert sb["workspaceMode"] == "overlay"
    sh(api, sid, "echo new > new.txt; echo changed > edit.txt; rm gone.txt; "
                 "printf '\\000\\001' > blob.bin")
    diff = api.diff(sid).decode()
    assert "+new" in diff and "-old" in diff and "+changed" in diff
    assert "deleted file mode" in diff and "Binary files" in diff
    # Nothing reached the host.
    assert (host_ws / "edit.txt").read_text() == "old\n" and (host_ws / "gone.txt").exists()
    assert not (host_ws / "new.txt").exists()

    # Changes are final only once the sandbox is gone.
    with pytest.raises(AirlockError) as e:
        api.accept(sid)
    assert error_of(e)[:2] == (409, "still_running")

    sh(api, sid, "echo later > later.txt")
    api.delete(sid)
    diff = api.diff(sid).decode()
    assert "+later" in diff

    part = api.accept(sid, ["new.txt", "edit.txt"])
    assert part["written"] == 2 and not part["complete"] and part["remaining"] > 0
    assert (host_ws / "new.txt").read_text() == "new\n"
    assert (host_ws / "edit.txt").read_text() == "changed\n"
    assert (host_ws / "gone.txt").exists() and not (host_ws / "later.txt").exists()

    rest = api.accept(sid)
    assert rest["complete"]
    assert not (host_ws / "gone.txt").exists()
    assert (host_ws / "later.txt").read_text() == "later\n"
    assert (host_ws / "blob.bin").read_bytes() == b"\0\1"

    with pytest.raises(AirlockError) as e:
        api.accept(sid)
    assert error_of(e)[:2] == (409, "already")
    kinds = [ev["kind"] for ev in api.audit(sid)]
    assert "review.snapshot" in kinds and "review.kept" in kinds and "api.accept" in kinds


def test_accept_refuses_a_file_changed_on_the_host(api, host_ws):
    sb = api.create(sandbox_class="small", workspace=str(host_ws), review=True)
    sh(api, sb["id"], "echo agent > edit.txt")
    api.delete(sb["id"])
    (host_ws / "edit.txt").write_text("user\n")
    with pytest.raises(AirlockError) as e:
        api.accept(sb["id"])
    status, code, body = error_of(e)
    assert (status, code) == (409, "conflict") and "edit.txt" in body["message"]
    assert (host_ws / "edit.txt").read_text() == "user\n"


def test_discard_leaves_the_host_as_it_was(api, host_ws):
    before = {p.name: p.read_bytes() for p in host_ws.iterdir()}
    sb = api.create(sandbox_class="small", workspace=str(host_ws), review=True)
    sh(api, sb["id"], "rm -f *; echo x > y")
    api.delete(sb["id"])
    assert api.discard(sb["id"])["state"] == "discarded"
    assert {p.name: p.read_bytes() for p in host_ws.iterdir()} == before
    with pytest.raises(AirlockError) as e:
        api.accept(sb["id"])
    assert error_of(e)[0] == 409


def test_review_refusals(api, host_ws, sandbox, shared_daemon):
    # A plain sandbox has nothing to review.
    with pytest.raises(AirlockError) as e:
        api.diff(sandbox["id"])
    assert error_of(e)[:2] == (409, "not_reviewable")
    # Review needs a host directory to propose changes for.
    with pytest.raises(AirlockError) as e:
        api.create(sandbox_class="small", review=True)
    assert error_of(e)[0] == 400 and e.value.body["field"] == "review"
    sb = api.create(sandbox_class="small", workspace=str(host_ws), review=True)
    try:
        # The files endpoints work on the host's copy: they would bypass review.
        with pytest.raises(AirlockError) as e:
            api.write_file(sb["id"], "x.txt", "x")
        assert error_of(e)[:2] == (409, "review_workspace")
        assert not (host_ws / "x.txt").exists()
        # Deciding needs allowExec.
        reader = shared_daemon.client(shared_daemon.grant("reader-" + secrets.token_hex(4)))
        with pytest.raises(AirlockError) as e:
            reader.discard(sb["id"])
        assert error_of(e)[:2] == (403, "authz_denied")
        with pytest.raises(AirlockError) as e:
            api.accept(sb["id"], ["../etc/passwd"])
        assert error_of(e)[0] == 409  # still running comes first
    finally:
        api.delete(sb["id"])
    with pytest.raises(AirlockError) as e:
        api.accept(sb["id"], ["../etc/passwd"])
    assert error_of(e)[0] == 400
    with pytest.raises(AirlockError) as e:
        api.accept(sb["id"], ["nothing-here.txt"])
    assert error_of(e)[:2] == (404, "not_found")


# ---- repositories ----


@pytest.fixture
def remote(daemon_base):
    d = pathlib.Path(tempfile.mkdtemp(prefix="remote-", dir=daemon_base))
    bare = d / "remote.git"
    git("init", "-q", "--bare", "-b", "main", bare)
    seed = d / "seed"
    git("clone", "-q", bare, seed)
    (seed / "README").write_text("hello\n")
    git("add", "README", cwd=seed)
    git("commit", "-q", "-m", "initial", cwd=seed)
    git("push", "-q", "origin", "main", cwd=seed)
    return bare, git("rev-parse", "HEAD", cwd=seed).strip()


@pytest.fixture
def git_api(shared_daemon):
    return shared_daemon.client(shared_daemon.grant(
        "git-" + secrets.token_hex(4), "--allow-sandbox", "--allow-exec", "--allow-git",
        "--allow-host-workspace"))


def test_repo_clone_export_push(git_api, remote, shared_daemon):
    bare, base = remote
    sb = git_api.create(sandbox_class="small", repo=f"file://{bare}", rev="main")
    sid = sb["id"]
    assert sb["repo"]["base"] == base and sb["repo"]["rev"] == "main"
    assert not sb["workspaceOwned"]
    sh(git_api, sid, AGENT_COMMIT)

    mbox = git_api.export(sid).decode()
    assert mbox.count("\nSubject: [PATCH") == 1 and "agent: change" in mbox

    res = git_api.push(sid, "agent/change")
    assert res["commits"] == 1 and res["branch"] == "agent/change" and not res["replaced"]
    log = git("--git-dir", bare, "log", "--format=%s", f"{base}..agent/change")
    assert log.split("\n")[0] == "agent: change"

    with pytest.raises(AirlockError) as e:
        git_api.push(sid, "agent/change")
    assert error_of(e)[:2] == (409, "branch_exists")
    sh(git_api, sid, "cd /workspace && echo two > b && git add b && "
                     "git -c user.name=A -c user.email=a@example.com commit -q -m second")
    res = git_api.push(sid, "agent/change", force=True)
    assert res["replaced"] and res["commits"] == 2

    # The clone outlives the sandbox, for a later export or push.
    git_api.delete(sid)
    assert "Subject: [PATCH 2/2] second" in git_api.export(sid).decode()
    events = [e for e in git_api.audit(sid)]
    kinds = [e["kind"] for e in events]
    assert "git.clone" in kinds and "git.push" in kinds and "api.push" in kinds


def test_repo_refusals(git_api, api, remote, shared_daemon, sandbox):
    bare, _ = remote
    # The grant must allow git.
    with pytest.raises(AirlockError) as e:
        api.create(sandbox_class="small", repo=f"file://{bare}")
    assert error_of(e)[:2] == (403, "authz_denied") and e.value.body["permission"] == "allowGit"
    # A repository on the host needs allowHostWorkspace too.
    no_host = shared_daemon.client(shared_daemon.grant(
        "nohost-" + secrets.token_hex(4), "--allow-sandbox", "--allow-git"))
    with pytest.raises(AirlockError) as e:
        no_host.create(sandbox_class="small", repo=str(bare))
    assert error_of(e)[:2] == (403, "limit_exceeded")
    # The daemon's credentials go only to --git-host hosts.
    with pytest.raises(AirlockError) as e:
        git_api.create(sandbox_class="small", repo="https://evil.example.com/x.git")
    status, code, body = error_of(e)
    assert (status, code) == (403, "repo_refused") and "evil.example.com" in body["message"]
    with pytest.raises(AirlockError) as e:
        git_api.create(sandbox_class="small", repo="https://u:pw@evil.example.com/x.git")
    assert error_of(e)[0] == 400 and "pw" not in e.value.body["message"]
    for body in ({"repo": f"file://{bare}", "review": True},
                 {"repo": f"file://{bare}", "workspace": str(bare.parent)},
                 {"rev": "main"}, {"repo": f"file://{bare}", "rev": "--upload-pack=x"}):
        status, _, data = git_api.request("POST", "/v1/sandboxes", body)
        assert status == 400, (body, data)
    # A rev that does not exist fails the clone, and nothing is left.
    with pytest.raises(AirlockError) as e:
        git_api.create(sandbox_class="small", repo=f"file://{bare}", rev="no-such-branch")
    assert error_of(e)[0] in (400, 502) and "no-such-branch" in e.value.body["message"]
    # Another grant's sandbox is not this grant's to export (it does not
    # exist for it); its own that was not cloned has nothing to export; bad
    # branch names.
    with pytest.raises(AirlockError) as e:
        git_api.export(sandbox["id"])
    assert error_of(e)[:2] == (404, "not_found")
    own = git_api.create(sandbox_class="small")["id"]
    with pytest.raises(AirlockError) as e:
        git_api.export(own)
    assert error_of(e)[:2] == (409, "no_repository")
    for branch in ("", "-x", "a..b", "a b", "x.lock"):
        with pytest.raises(AirlockError) as e:
            git_api.push(own, branch)
        assert error_of(e)[0] == 400
    git_api.delete(own)
    with pytest.raises(AirlockError) as e:
        api.push(sandbox["id"], "ok")
    assert error_of(e)[:2] == (403, "authz_denied")


def test_repo_over_http_with_the_daemons_credential(daemon_base, remote):
    bare, base = remote
    token = "tok-" + secrets.token_hex(16)
    srv = GitHTTP(bare.parent, "x-access-token", token)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sec = pathlib.Path(tempfile.mkdtemp(prefix="sec-", dir=daemon_base)) / "secrets.env"
    sec.write_text(f"GIT_TOKEN={token}\n")
    sec.chmod(0o600)
    d = Daemon(tempfile.mkdtemp(prefix="g-", dir=daemon_base),
               ["--secrets", str(sec), "--git-host", "127.0.0.1", "--no-git-helper"])
    tok = d.grant("git", "--allow-sandbox", "--allow-exec", "--allow-git")
    d.start()
    try:
        c = d.client(tok)
        url = f"http://127.0.0.1:{srv.server_address[1]}/{bare.name}"
        sb = c.create(sandbox_class="small", repo=url)
        assert sb["repo"]["base"] == base
        # The sandbox holds no credential: not in its environment, not in
        # the clone's config.
        r = c.run(sb["id"], ["sh", "-c", "env; cat /workspace/.git/config"])
        assert token.encode() not in r.stdout and r.exit_code == 0
        sh(c, sb["id"], AGENT_COMMIT)
        assert c.push(sb["id"], "agent/http")["commits"] == 1
        assert git("--git-dir", bare, "rev-parse", "agent/http").strip() != base
        assert srv.granted > 0
        c.delete(sb["id"])
    finally:
        d.cleanup(tok)
        srv.shutdown()
        srv.server_close()


def test_discard_while_the_state_is_in_use_is_a_conflict(api, host_ws, shared_daemon):
    """Another airlock holding the review state (an accept or a diff under
    way) makes a discard answer 409 conflict, not a server fault, and leaves
    the changes to discard later."""
    import fcntl
    sb = api.create(sandbox_class="small", workspace=str(host_ws), review=True)
    sh(api, sb["id"], "echo x > busy.txt")
    api.delete(sb["id"])
    fd = os.open(shared_daemon.state / "kept" / "sandboxes" / sb["id"], os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(AirlockError) as e:
            api.discard(sb["id"])
        status, code, body = error_of(e)
        assert (status, code) == (409, "conflict"), body
        assert "in use" in body["message"]
    finally:
        os.close(fd)
    assert api.discard(sb["id"])["state"] == "discarded"


def test_discard_some_paths_keeps_the_rest_pending(api, host_ws):
    (host_ws / "a.txt").write_text("host a\n")
    sb = api.create(sandbox_class="small", workspace=str(host_ws), review=True)
    sh(api, sb["id"], "echo agent > a.txt; echo b > b.txt; mkdir d; echo c > d/c.txt")
    api.delete(sb["id"])
    doc = api.discard(sb["id"], ["a.txt", "d"])
    assert doc["state"] == "pending" and doc["remaining"] >= 1, doc
    diff = api.diff(sb["id"])
    assert b"b.txt" in diff and b"a.txt" not in diff and b"d/c.txt" not in diff
    # A path that names no pending change refuses the whole, naming it.
    with pytest.raises(AirlockError) as e:
        api.discard(sb["id"], ["b.txt", "nothing"])
    status, code, body = error_of(e)
    assert (status, code) == (404, "not_found") and "nothing" in body["message"]
    assert b"b.txt" in api.diff(sb["id"])
    api.accept(sb["id"])
    assert (host_ws / "a.txt").read_text() == "host a\n"
    assert (host_ws / "b.txt").read_text() == "b\n" and not (host_ws / "d").exists()
