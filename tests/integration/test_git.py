# SPDX-License-Identifier: Apache-2.0
"""Host-side git: `airlock run --repo` clones on the host, the agent commits
in the sandbox, `airlock export` and `airlock push` take the commits out,
against local bare repositories over file:// and over smart HTTP served by
`git http-backend` behind a server that requires a credential only the host
holds."""

import base64
import hmac
import http.server
import json
import os
import pathlib
import re
import secrets
import shutil
import subprocess
import tempfile
import threading

import pytest

GIT = ["git", "-c", "safe.directory=*", "-c", "user.name=Test", "-c", "user.email=test@example.com"]

AGENT = (
    "set -e; cd /workspace; "
    "echo one > agent1.txt; git add agent1.txt; "
    "git -c user.name=Agent -c user.email=agent@example.com commit -q -m 'agent: first change'; "
    "echo two > agent2.txt; git add agent2.txt; "
    "git -c user.name=Agent -c user.email=agent@example.com commit -q -m 'agent: second change' "
    "-m 'with a body'; "
    "echo AGENT-DONE"
)


def git_env():
    """The test's own git reads repositories owned by the test user too (git
    honours safe.directory for upload-pack only from a global config)."""
    cfg = pathlib.Path(tempfile.gettempdir()) / f"airlock-test-gitconfig-{os.getpid()}"
    if not cfg.exists():
        cfg.write_text("[safe]\n\tdirectory = *\n")
    return dict(os.environ, GIT_CONFIG_GLOBAL=str(cfg), GIT_TERMINAL_PROMPT="0")


def git(*args, cwd=None, check=True, input=None):
    return subprocess.run(
        [*GIT, *map(str, args)], cwd=cwd, capture_output=True, text=True, check=check,
        env=git_env(), input=input,
    )


def make_remote(airlock, own=True):
    """A bare repository with one commit on main; returns (path, base id)."""
    d = airlock.make_dir("remote")
    bare = d / "remote.git"
    git("init", "-q", "--bare", "-b", "main", bare)
    seed = d / "seed"
    git("clone", "-q", bare, seed)
    (seed / "README").write_text("hello\n")
    git("add", "README", cwd=seed)
    git("commit", "-q", "-m", "initial", cwd=seed)
    git("push", "-q", "origin", "main", cwd=seed)
    base = git("rev-parse", "HEAD", cwd=seed).stdout.strip()
    shutil.rmtree(seed)
    if own:
        airlock.chown(d)
    return bare, base


def al(airlock, args, check_setup=True):
    """Run airlock with stdin not a terminal: no credential prompt can wait."""
    return airlock.run(args, input="", check_setup=check_setup)


def audit_file(airlock):
    return airlock.make_dir("audit") / "audit.jsonl"


def run_agent(airlock, repo, audit, *opts, script=AGENT, setup_fails=False):
    argv = ["run", "--audit", audit, "--repo", repo, *opts, "--", "/bin/sh", "-c", script]
    p = al(airlock, argv, check_setup=not setup_fails)
    m = re.search(r"airlock push (\w+) --branch", p.stderr)
    return p, (m.group(1) if m else None)


def sandboxes_dir(airlock):
    home = airlock.user.pw_dir if airlock.user else None
    if airlock.user or os.geteuid() != 0:
        home = home or os.path.expanduser("~")
        return pathlib.Path(home) / ".local/state/airlock/sandboxes"
    return pathlib.Path("/var/lib/airlock/sandboxes")


def workspace_of(p):
    m = re.search(r" in (/\S+/sandboxes/\w+/repo)\n", p.stderr)
    assert m, p.stderr
    return pathlib.Path(m.group(1))


def branch_commits(bare, base, branch):
    """Subjects of base..branch, oldest first, and the branch's first-parent
    chain down to base."""
    log = git("-C", bare, "log", "--reverse", "--format=%s", f"{base}..refs/heads/{branch}")
    chain = git("-C", bare, "rev-list", "--first-parent", f"refs/heads/{branch}").stdout.split()
    return log.stdout.splitlines(), chain


def audit_events(airlock, audit):
    v = al(airlock, ["audit", "verify", audit])
    assert v.returncode == 0, v.stdout + v.stderr
    return [json.loads(line) for line in pathlib.Path(audit).read_text().splitlines()]


def check_export(airlock, sid, bare, base):
    p = al(airlock, ["export", sid])
    assert p.returncode == 0, p.stderr
    mbox = p.stdout
    froms = re.findall(r"^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001$", mbox, re.M)
    assert len(froms) == 2, mbox
    subjects = re.findall(r"^Subject: (.*)$", mbox, re.M)
    assert subjects == ["[PATCH 1/2] agent: first change", "[PATCH 2/2] agent: second change"]

    applied = airlock.make_dir("am") / "am"
    git("clone", "-q", bare, applied)
    git("checkout", "-q", base, cwd=applied)
    am = git("am", "-q", cwd=applied, input=mbox, check=False)
    assert am.returncode == 0, am.stderr
    log = git("log", "--reverse", "--format=%s%n%b", f"{base}..HEAD", cwd=applied).stdout
    assert [l for l in log.splitlines() if l] == [
        "agent: first change",
        "agent: second change",
        "with a body",
    ]
    assert (applied / "agent2.txt").read_text() == "two\n"


def test_file_clone_export_push(airlock):
    bare, base = make_remote(airlock)
    audit = audit_file(airlock)
    p, sid = run_agent(airlock, f"file://{bare}", audit)
    assert p.returncode == 0, p.stderr
    assert "AGENT-DONE" in p.stdout
    assert sid and re.fullmatch(r"[0-9a-f]{16}", sid), p.stderr
    assert "made 2 new commit(s)" in p.stderr
    ws = workspace_of(p)
    assert ws.name == "repo" and ws.parent.name == sid
    state = json.loads((ws.parent / "git.json").read_text())
    assert state["url"] == f"file://{bare}" and state["base"] == base
    assert state["workspace"] == str(ws)

    check_export(airlock, sid, bare, base)

    p = al(airlock, ["push", sid, "--branch", "agent/x"])
    assert p.returncode == 0, p.stderr
    subjects, chain = branch_commits(bare, base, "agent/x")
    assert subjects == ["agent: first change", "agent: second change"]
    assert len(chain) == 3 and chain[-1] == base
    refs = git("-C", bare, "for-each-ref", "--format=%(refname)").stdout.split()
    assert sorted(refs) == ["refs/heads/agent/x", "refs/heads/main"]

    again = al(airlock, ["push", sid, "--branch", "agent/x"])
    assert again.returncode == 1
    assert "agent/x" in again.stderr and again.stderr.startswith("airlock: ")
    forced = al(airlock, ["push", sid, "--branch", "agent/x", "--force"])
    assert forced.returncode == 0, forced.stderr

    bad = al(airlock, ["push", sid, "--branch", "bad..name"])
    assert bad.returncode == 2
    unknown = al(airlock, ["push", "0123456789abcdef", "--branch", "x"])
    assert unknown.returncode == 2
    nopr = al(airlock, ["push", sid, "--branch", "y", "--open-pr"])
    assert nopr.returncode == 2 and "AIRLOCK_FORGE_COMMAND" in nopr.stderr

    kinds = [e["kind"] for e in audit_events(airlock, audit) if e["sandbox"] == sid]
    assert kinds[0] == "git.clone"
    assert "sandbox.created" in kinds and "git.export" in kinds
    pushes = [e for e in audit_events(airlock, audit) if e["kind"] == "git.push"]
    assert pushes[0]["branch"] == "agent/x" and pushes[0]["commits"] == 2 and pushes[0]["ok"]
    assert pushes[0]["url"] == f"file://{bare}"
    assert not pushes[1]["ok"] and "agent/x" in pushes[1]["error"]


def test_push_refuses_history_not_descending_from_base(airlock):
    bare, base = make_remote(airlock)
    audit = audit_file(airlock)
    script = (
        "set -e; cd /workspace; git checkout -q --orphan other; echo x > x; git add x; "
        "git -c user.name=A -c user.email=a@example.com commit -q -m unrelated"
    )
    p, sid = run_agent(airlock, f"file://{bare}", audit, script=script)
    assert p.returncode == 0 and sid, p.stderr
    push = al(airlock, ["push", sid, "--branch", "agent/orphan"])
    assert push.returncode == 1
    assert "does not descend" in push.stderr
    assert git("-C", bare, "rev-parse", "--verify", "-q", "refs/heads/agent/orphan", check=False).returncode != 0
    export = al(airlock, ["export", sid])
    assert export.returncode == 1


def test_rev_and_url_checks(airlock):
    bare, base = make_remote(airlock)
    audit = audit_file(airlock)
    p, sid = run_agent(airlock, f"file://{bare}", audit, "--rev", "main",
                       script="cd /workspace && git symbolic-ref HEAD && git rev-parse HEAD")
    assert p.returncode == 0, p.stderr
    assert "refs/heads/main" in p.stdout and base in p.stdout

    missing, _ = run_agent(airlock, f"file://{bare}", audit, "--rev", "no-such-rev", script="true",
                            setup_fails=True)
    assert missing.returncode == 125 and "no-such-rev" in missing.stderr

    pw, _ = run_agent(airlock, "https://alice:hunter2@127.0.0.1:9/r.git", audit, script="true",
                      setup_fails=True)
    assert pw.returncode == 125
    assert "password" in pw.stderr and "hunter2" not in pw.stderr

    ws = airlock.make_dir()
    both = al(airlock, ["run", "-w", ws, "--repo", f"file://{bare}", "--", "true"], check_setup=False)
    assert both.returncode == 125 and "--repo" in both.stderr


# ---- what airlockd runs: git-clone --state-root --id, push --json ----


def tools(airlock, args, env=None):
    """Run `airlock-git ARGS...` (beside airlock) as the test's identity."""
    argv = airlock.cmd([])
    argv[-1] = str(pathlib.Path(argv[-1]).parent / "airlock-git")
    return subprocess.run(argv + [str(a) for a in args], cwd=str(airlock.base), input="",
                          capture_output=True, text=True, timeout=120, env=env)


def json_line(p):
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout + p.stderr
    return json.loads(lines[0])


def clone_at(airlock, url, root, sid, *opts):
    p = tools(airlock, ["git-clone", "--repo", url, "--state-root", root, "--id", sid,
                        "--audit", root / "audit.jsonl", *opts])
    return p, json_line(p)


def agent_commit(airlock, ws, name, orphan=False):
    """Commit in the clone as the agent would, without a sandbox."""
    if orphan:
        git("checkout", "-q", "--orphan", "other", cwd=ws)
    (ws / name).write_text(name + "\n")
    git("add", name, cwd=ws)
    git("commit", "-q", "-m", "agent: " + name, cwd=ws)
    airlock.chown(ws.parent)
    return git("rev-parse", "HEAD", cwd=ws).stdout.strip()


def test_git_clone_at_a_given_state_root_and_id(airlock):
    bare, base = make_remote(airlock)
    root = airlock.make_dir("state")
    sid = secrets.token_hex(8)
    p, doc = clone_at(airlock, f"file://{bare}", root, sid, "--no-helper")
    assert p.returncode == 0, p.stdout + p.stderr
    ws = root / "sandboxes" / sid / "repo"
    assert doc == {"id": sid, "workspace": str(ws), "base": base}
    assert (ws / "README").read_text() == "hello\n"
    state = json.loads((ws.parent / "git.json").read_text())
    assert state["base"] == base and state["workspace"] == str(ws)
    assert state["audit"] == str(root / "audit.jsonl")
    assert not sandboxes_dir(airlock).joinpath(sid).exists()

    # A taken id is refused, and what holds it is left alone.
    p, doc = clone_at(airlock, f"file://{bare}", root, sid)
    assert p.returncode == 1 and sid in doc["error"] and "exists" in doc["error"]
    assert (ws.parent / "git.json").exists() and (ws / "README").exists()

    for bad in ["0123", "0123456789ABCDEF", "0123456789abcdeg", "../../../../tmp/x",
                "0123456789abcdef0"]:
        p, doc = clone_at(airlock, f"file://{bare}", root, bad)
        assert p.returncode == 1 and "error" in doc, bad
    assert sorted(os.listdir(root / "sandboxes")) == [sid]

    rel = tools(airlock, ["git-clone", "--repo", f"file://{bare}", "--state-root", "rel",
                          "--id", secrets.token_hex(8)])
    assert rel.returncode == 2 and "error" in json_line(rel)

    # export and push find it with --state-root.
    head = agent_commit(airlock, ws, "one.txt")
    ex = al(airlock, ["export", "--state-root", root, sid])
    assert ex.returncode == 0, ex.stderr
    assert re.search(r"^Subject: \[PATCH[^\]]*\] agent: one.txt$", ex.stdout, re.M), ex.stdout
    pushed = al(airlock, ["push", "--state-root", root, "--json", sid, "--branch", "agent/one"])
    assert pushed.returncode == 0, pushed.stderr
    assert json_line(pushed)["head"] == head


def test_push_json(airlock):
    bare, base = make_remote(airlock)
    root = airlock.make_dir("state")
    sid = secrets.token_hex(8)
    url = f"file://{bare}"
    assert clone_at(airlock, url, root, sid)[0].returncode == 0
    ws = root / "sandboxes" / sid / "repo"

    def push(*args, env=None):
        p = airlock.run(["push", "--state-root", root, "--json", *args], input="", env=env)
        return p, json_line(p)

    p, doc = push(sid, "--branch", "agent/x")
    assert (p.returncode, doc["error"]) == (1, "nothing_to_push"), doc
    assert set(doc) == {"error", "message"} and p.stderr == ""

    head = agent_commit(airlock, ws, "a.txt")
    p, doc = push(sid[:6], "--branch", "agent/x")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert doc == {"sandbox": sid, "branch": "agent/x", "url": url, "base": base, "head": head,
                   "commits": 1, "replaced": False, "pr": None}
    assert git("-C", bare, "rev-parse", "refs/heads/agent/x").stdout.strip() == head

    p, doc = push(sid, "--branch", "agent/x")
    assert (p.returncode, doc["error"]) == (1, "branch_exists") and p.stderr == ""
    assert "agent/x" in doc["message"] and "--force" not in doc["message"]
    head2 = agent_commit(airlock, ws, "b.txt")
    p, doc = push(sid, "--branch", "agent/x", "--force")
    assert p.returncode == 0, p.stderr
    assert (doc["replaced"], doc["commits"], doc["head"]) == (True, 2, head2)

    for args, status, code in [
        ([sid, "--branch", "bad..name"], 2, "bad_branch"),
        (["0123456789abcdef", "--branch", "x"], 2, "not_found"),
        ([sid], 2, "failed"),
    ]:
        p, doc = push(*args)
        assert (p.returncode, doc["error"]) == (status, code), (args, doc)

    if airlock.mode == "root":
        # The forge command's output stays off stdout; its status is in the line.
        env = dict(os.environ, AIRLOCK_FORGE_COMMAND='echo "pr for $AIRLOCK_BRANCH"; exit 3')
        p, doc = push(sid, "--branch", "agent/pr", "--open-pr", env=env)
        assert p.returncode == 1
        assert doc["pr"] == {"exitCode": 3} and doc["branch"] == "agent/pr"
        assert "pr for agent/pr" in p.stderr
        env["AIRLOCK_FORGE_COMMAND"] = "true"
        p, doc = push(sid, "--branch", "agent/pr2", "--open-pr", env=env)
        assert p.returncode == 0 and doc["pr"] == {"exitCode": 0}

    agent_commit(airlock, ws, "c.txt", orphan=True)
    p, doc = push(sid, "--branch", "agent/orphan")
    assert (p.returncode, doc["error"]) == (1, "not_descendant")
    assert "does not descend" in doc["message"]

    # A sandbox without git.json is unknown to push.
    other = airlock.make_dir("state")
    (other / "sandboxes" / "0123456789abcdef").mkdir(parents=True)
    airlock.chown(other)
    p = airlock.run(["push", "--state-root", other, "--json", "0123456789abcdef", "--branch", "x"],
                    input="")
    assert p.returncode == 2 and json_line(p)["error"] == "not_found"


# ---- smart HTTP with a credential only the host holds ----


class GitHTTP(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root, user, token):
        super().__init__(("127.0.0.1", 0), GitHandler)
        self.root = str(root)
        self.expect = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()
        self.user = user
        self.denied = 0
        self.granted = 0


class GitHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self):
        body = self._body() if self.command == "POST" else b""
        auth = self.headers.get("Authorization", "")
        if not hmac.compare_digest(auth.encode(), self.server.expect.encode()):
            self.server.denied += 1
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.server.granted += 1
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": self.server.user,
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        cgi = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        head, _, out = cgi.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = cgi.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = _serve
    do_POST = _serve


@pytest.fixture
def http_remote(airlock):
    bare, base = make_remote(airlock, own=False)
    token = "tok-" + secrets.token_hex(16)
    srv = GitHTTP(bare.parent, "x-access-token", token)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv, bare, base, token, f"http://127.0.0.1:{srv.server_address[1]}/{bare.name}"
    srv.shutdown()
    srv.server_close()


def secrets_file(airlock, token, extra=""):
    d = airlock.make_dir("secrets")
    f = d / "secrets.env"
    f.write_text(f"GIT_TOKEN={token}\n{extra}")
    f.chmod(0o600)
    airlock.chown(d)
    return f


def test_http_clone_and_push_with_a_host_only_credential(airlock, http_remote):
    srv, bare, base, token, url = http_remote
    audit = audit_file(airlock)
    sec = secrets_file(airlock, token)

    # Without the credential the clone is refused, and nothing is left of
    # its sandbox (named by the audit: other tests' come and go meanwhile).
    denied, _ = run_agent(airlock, url, audit, script="true", setup_fails=True)
    assert denied.returncode == 125
    clones = [e for e in audit_events(airlock, audit) if e["kind"] == "git.clone"]
    assert len(clones) == 1 and not clones[0]["ok"] and clones[0]["sandbox"], clones
    assert not (sandboxes_dir(airlock) / clones[0]["sandbox"]).exists()
    assert "credential" in denied.stderr and token not in denied.stderr
    assert srv.denied > 0 and srv.granted == 0

    leak = (
        AGENT + "; env; echo ENVIRON:; tr '\\0' '\\n' < /proc/self/environ; "
        "echo CONFIG:; cat .git/config; "
        "if git -c credential.helper= fetch -q origin 2>/dev/null; then echo FETCH-WORKED; "
        "else echo FETCH-FAILED; fi"
    )
    p, sid = run_agent(airlock, url, audit, "--secrets", sec, script=leak)
    assert p.returncode == 0, p.stderr
    assert "AGENT-DONE" in p.stdout and "FETCH-FAILED" in p.stdout
    # The agent saw neither the token nor a redacted copy of it.
    assert token not in p.stdout and "[REDACTED]" not in p.stdout
    assert f"url = {url}\n" in p.stdout
    ws = workspace_of(p)
    for root, dirs, files in os.walk(ws):
        for name in files:
            data = pathlib.Path(root, name).read_bytes()
            assert token.encode() not in data, os.path.join(root, name)
            assert base64.b64encode(f"x-access-token:{token}".encode()) not in data
    assert token not in (ws.parent / "git.json").read_text()

    check_export(airlock, sid, bare, base)

    granted = srv.granted
    nocred = al(airlock, ["push", sid, "--branch", "agent/x"])
    assert nocred.returncode == 1 and "credential" in nocred.stderr
    assert srv.granted == granted

    pushed = al(airlock, ["push", sid, "--branch", "agent/x", "--secrets", sec])
    assert pushed.returncode == 0, pushed.stderr
    subjects, chain = branch_commits(bare, base, "agent/x")
    assert subjects == ["agent: first change", "agent: second change"]
    assert len(chain) == 3 and chain[-1] == base
    refs = git("-C", bare, "for-each-ref", "--format=%(refname)").stdout.split()
    assert sorted(refs) == ["refs/heads/agent/x", "refs/heads/main"]

    again = al(airlock, ["push", sid, "--branch", "agent/x", "--secrets", sec])
    assert again.returncode == 1
    assert '"agent/x"' in again.stderr and "--force" in again.stderr

    events = audit_events(airlock, audit)
    kinds = [e["kind"] for e in events if e["sandbox"] == sid]
    assert "git.clone" in kinds and "git.push" in kinds
    assert all(token not in json.dumps(e) for e in events)
    ok = [e for e in events if e["kind"] == "git.push" and e["ok"]]
    assert ok and ok[0]["branch"] == "agent/x" and ok[0]["commits"] == 2 and ok[0]["url"] == url


def test_http_user_in_url_is_kept_out_of_the_clone(airlock, http_remote):
    srv, bare, base, token, url = http_remote
    srv.expect = "Basic " + base64.b64encode(f"alice:{token}".encode()).decode()
    audit = audit_file(airlock)
    sec = secrets_file(airlock, token)
    with_user = url.replace("http://", "http://alice@")
    p, sid = run_agent(airlock, with_user, audit, "--secrets", sec,
                       script="cat /workspace/.git/config")
    assert p.returncode == 0, p.stderr
    assert "alice" not in p.stdout and f"url = {url}\n" in p.stdout
    state = json.loads((workspace_of(p).parent / "git.json").read_text())
    assert state["url"] == url and state["user"] == "alice"
    assert srv.granted > 0


def credential_helper(airlock):
    """A git credential helper that logs each call and gives the password in
    a file; returns the environment that configures it, the log and that
    file."""
    d = airlock.make_dir("helper")
    log = d / "log"
    helper = d / "helper.sh"
    password = d / "password"
    helper.write_text(
        "#!/bin/sh\n"
        f"echo \"$1\" >> {log}\n"
        "cat > /dev/null\n"
        f"if [ \"$1\" = get ]; then echo username=x-access-token; echo password=$(cat {password}); fi\n"
    )
    helper.chmod(0o700)
    cfg = d / "gitconfig"
    cfg.write_text(f"[credential]\n\thelper = {helper}\n")
    return dict(os.environ, GIT_CONFIG_GLOBAL=str(cfg)), log, password


def test_http_credential_helper(airlock, http_remote):
    """Without a token, the host's git credential helper is asked once, and
    told whether its credential worked."""
    if airlock.mode != "root":
        pytest.skip("the helper is configured through the caller's environment, which the "
                    "ordinary-user runner resets")
    srv, bare, base, token, url = http_remote
    env, log, password = credential_helper(airlock)
    audit = audit_file(airlock)

    password.write_text("wrong\n")
    argv = ["run", "--audit", audit, "--repo", url, "--", "/bin/sh", "-c", AGENT]
    bad = airlock.run(argv, input="", env=env, check_setup=False)
    assert bad.returncode == 125
    assert "refused the credential from the git credential helper" in bad.stderr
    assert log.read_text().split() == ["get", "erase"]

    log.unlink()
    password.write_text(token + "\n")
    p = airlock.run(argv, input="", env=env)
    assert p.returncode == 0, p.stderr
    assert log.read_text().split() == ["get", "store"]
    sid = re.search(r"airlock push (\w+) --branch", p.stderr).group(1)

    pushed = airlock.run(["push", sid, "--branch", "agent/helper"], input="", env=env)
    assert pushed.returncode == 0, pushed.stderr
    subjects, _ = branch_commits(bare, base, "agent/helper")
    assert subjects == ["agent: first change", "agent: second change"]


def test_no_helper(airlock, http_remote):
    """--no-helper: git-clone and push never ask the credential helper, and
    push --json says auth_failed."""
    if airlock.mode != "root":
        pytest.skip("the helper is configured through the caller's environment, which the "
                    "ordinary-user runner resets")
    srv, bare, base, token, url = http_remote
    env, log, password = credential_helper(airlock)
    password.write_text(token + "\n")
    root = airlock.make_dir("state")

    sid = secrets.token_hex(8)
    p = tools(airlock, ["git-clone", "--repo", url, "--state-root", root, "--id", sid,
                        "--no-helper"], env=env)
    assert p.returncode == 1 and "credential" in json_line(p)["error"]
    assert not log.exists() and not (root / "sandboxes" / sid).exists()

    p = tools(airlock, ["git-clone", "--repo", url, "--state-root", root, "--id", sid], env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json_line(p)["base"] == base
    assert log.read_text().split() == ["get", "store"]
    agent_commit(airlock, root / "sandboxes" / sid / "repo", "a.txt")

    log.unlink()
    p = airlock.run(["push", "--state-root", root, "--json", "--no-helper", sid, "--branch", "x"],
                    input="", env=env)
    assert p.returncode == 1 and json_line(p)["error"] == "auth_failed"
    assert not log.exists()
    p = airlock.run(["push", "--state-root", root, "--json", sid, "--branch", "x"], input="",
                    env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json_line(p)["commits"] == 1 and log.read_text().split() == ["get", "store"]
