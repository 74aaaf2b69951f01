# SPDX-License-Identifier: Apache-2.0
"""Host edges of the filesystem (issue 10, items 2, 4, 5, 6, 10, 11): each
case is an attempt that must fail, run as root and as an ordinary user where
it means something. The deny list is resolved with the caller's view and
refused when it cannot be; broad workspaces are refused; secrets files are
masked; start-up files, git metadata and denyWrite paths are read-only;
mounts under /tmp and $HOME work; host sockets are masked."""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile

import pytest

OTHER_UID = 61234  # owns nothing else on the test machine
SECRET = "s3cr3t-f5gate-value"


def needs_root(airlock):
    if airlock.rootless:
        pytest.skip("the case is about what root's view sees")


def needs_user(airlock):
    if not airlock.rootless:
        pytest.skip("the case is about an ordinary user's view")


def owner_ids(airlock):
    if airlock.user:
        return airlock.user.pw_uid, airlock.user.pw_gid
    return os.geteuid(), os.getegid()


def write(path, text, mode=0o644):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def home_dir():
    """A directory in /home (every entry there is a home for the deny list)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory in /home")
    d = pathlib.Path(tempfile.mkdtemp(prefix="fsgate-", dir="/home"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


# A: the deny list is resolved with the caller's view.


def test_deny_ssh_in_0700_home_of_another_user(airlock, home_dir):
    needs_root(airlock)
    write(home_dir / ".ssh/id_test", SECRET, 0o600)
    write(home_dir / "project.txt", "ok")
    for root, dirs, files in os.walk(home_dir):
        os.chown(root, OTHER_UID, OTHER_UID)
        for f in files:
            os.chown(os.path.join(root, f), OTHER_UID, OTHER_UID)
    home_dir.chmod(0o700)
    p = airlock.sandbox(
        "cat /workspace/project.txt; cat /workspace/.ssh/id_test; ls -a /workspace/.ssh",
        workspace=home_dir,
        timeout=60,
    )
    assert "ok" in p.stdout, p.stderr
    assert SECRET not in p.stdout
    assert "id_test" not in p.stdout


def test_deny_read_file_in_0700_dir(airlock):
    needs_root(airlock)
    ws = airlock.make_dir()
    priv = ws / "private"
    priv.mkdir(mode=0o700)
    write(priv / "key", SECRET, 0o600)
    p = airlock.sandbox("cat /workspace/private/key", "--deny-read", priv / "key", workspace=ws,
                        timeout=60)
    assert SECRET not in p.stdout


def test_deny_read_unresolvable_is_refused(airlock):
    needs_user(airlock)
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory the user cannot search")
    ws = airlock.make_dir()
    locked = ws / "locked"
    locked.mkdir()
    write(locked / "key", SECRET, 0o600)
    os.chown(locked, 0, 0)
    locked.chmod(0o700)
    p = airlock.sandbox("echo ran", "--deny-read", locked / "key", workspace=ws,
                        check_setup=False, timeout=60)
    assert p.returncode == 125, (p.returncode, p.stdout, p.stderr)
    assert str(locked / "key") in p.stderr
    assert "ran" not in p.stdout


def test_deny_read_missing_entry_cannot_be_planted(airlock):
    ws = airlock.make_dir()
    p = airlock.sandbox(
        "echo planted > /workspace/future.key; cat /workspace/future.key",
        "--deny-read",
        ws / "future.key",
        workspace=ws,
        timeout=60,
    )
    assert "planted" not in p.stdout
    f = ws / "future.key"
    assert not f.exists() or "planted" not in f.read_text()


# B: broad workspaces.


def test_root_dir_as_default_workspace_is_refused(airlock, test_base):
    marker = test_base / f"fsgate-marker-{os.getpid()}"
    p = airlock.run(
        ["run", "-q", "--", "/bin/sh", "-c", f"echo x > /workspace{marker}"],
        cwd="/",
        check_setup=False,
        timeout=60,
    )
    assert p.returncode == 125, (p.returncode, p.stderr)
    assert "--allow-broad-workspace" in p.stderr
    assert not marker.exists()


@pytest.mark.parametrize("path", ["/", "/usr", "/etc", "/var", "/home", "/root", "/usr/local"])
def test_system_dirs_as_workspace_are_refused(airlock, path):
    if path == "/root" and airlock.rootless:
        pytest.skip("/root cannot be resolved by an ordinary user")
    p = airlock.run(["run", "-q", "-w", path, "--", "/bin/true"], check_setup=False, timeout=60)
    assert p.returncode == 125, (p.returncode, p.stderr)
    assert path in p.stderr and "--allow-broad-workspace" in p.stderr


def test_passwd_home_as_workspace_is_refused(airlock):
    import pwd

    home = pwd.getpwnam(os.environ.get("AIRLOCK_TEST_USER", "airlock-test")).pw_dir
    if not os.path.isdir(home):
        pytest.skip(f"{home} does not exist")
    for ws in (home, os.path.dirname(home)):
        p = airlock.run(["run", "-q", "-w", ws, "--", "/bin/true"], check_setup=False,
                        timeout=60)
        assert p.returncode == 125, (ws, p.returncode, p.stderr)
        assert "home" in p.stderr and "--allow-broad-workspace" in p.stderr


def test_broad_workspace_allowed_keeps_the_deny_list(airlock):
    needs_root(airlock)
    pol = airlock.make_dir("pol") / "ro.json"
    pol.write_text(json.dumps({"workspace": {"mode": "ro"}}))
    p = airlock.run(
        ["run", "-q", "-p", pol, "-w", "/", "--allow-broad-workspace", "--", "/bin/sh", "-c",
         "head -c 200 /workspace/etc/shadow; echo; ls /workspace/etc/hostname"],
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "root:" not in p.stdout
    assert "/workspace/etc/hostname" in p.stdout


# C: secrets files.


def secrets_file(path, airlock):
    f = write(path, f"GIT_TOKEN={SECRET}\n", 0o600)
    uid, gid = owner_ids(airlock)
    os.chown(f, uid, gid)
    return f


def test_secrets_file_in_workspace_is_masked(airlock):
    ws = airlock.make_dir()
    f = secrets_file(ws / "secrets.env", airlock)
    p = airlock.sandbox("cat /workspace/secrets.env", "--secrets", f, workspace=ws, timeout=60)
    assert SECRET not in p.stdout


def test_secrets_file_with_read_host_is_masked(airlock):
    d = pathlib.Path(tempfile.mkdtemp(prefix="fsgate-", dir="/var/tmp"))
    try:
        d.chmod(0o755)
        uid, gid = owner_ids(airlock)
        os.chown(d, uid, gid)
        f = secrets_file(d / "secrets.env", airlock)
        p = airlock.sandbox(f"cat {f}", "--read", "host", "--secrets", f, timeout=60)
        assert SECRET not in p.stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_supervise_secrets_file_is_masked(airlock):
    """`airlock supervise --secrets FILE` (what airlockd runs): FILE is masked."""
    import base64

    ws = airlock.make_dir()
    f = secrets_file(ws / "secrets.env", airlock)
    run_dir = airlock.make_dir("run")
    audit = airlock.make_dir("audit") / "audit.jsonl"
    pol = airlock.make_dir("policy") / "policy.json"
    pol.write_text(json.dumps({"workspace": {"path": str(ws)}}))
    airlock.chown(pol.parent)
    sid = os.urandom(8).hex()
    r, w = os.pipe()
    argv = airlock.cmd(["supervise", "--id", sid, "--policy", pol, "--run-dir", run_dir,
                        "--audit", audit, "--ready-fd", str(w), "--secrets", f,
                        "--keep-root", airlock.make_dir("keep")])
    proc = subprocess.Popen(argv, pass_fds=(w,), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)

    def request(obj):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(str(run_dir / sid / "control.sock"))
        s.sendall((json.dumps(obj) + "\n").encode())
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
        s.close()
        return [json.loads(line) for line in out.decode().splitlines()]

    try:
        with os.fdopen(r) as rf:
            ready = rf.readline().strip()
        assert ready == "ok", ready
        events = request({"op": "exec", "argv": ["sh", "-c", "cat /workspace/secrets.env"]})
        out = b"".join(base64.b64decode(e["data"]) for e in events if e.get("type") == "stdout")
        assert SECRET.encode() not in out
    finally:
        if proc.poll() is None:
            try:
                request({"op": "destroy"})
            except OSError:
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# D: the write-protect list and the filesystem keys.

PROTECTED = [".bashrc", ".profile", ".gitconfig", ".gitmodules", ".envrc", ".mcp.json",
             ".vscode/settings.json", ".claude/commands/x.md", ".idea/workspace.xml"]


def test_write_protect_list(airlock):
    ws = airlock.make_dir()
    for name in PROTECTED:
        write(ws / name, "original\n")
    airlock.chown(ws)
    script = "; ".join(
        [f"echo evil >> /workspace/{n}" for n in PROTECTED]
        + ["rm -f /workspace/.bashrc", "mv /workspace/.vscode /workspace/v2",
           "echo evil > /workspace/.vscode/tasks.json",
           "echo evil > /workspace/.claude/commands/new.md",
           "echo ok > /workspace/other.txt"]
    )
    p = airlock.sandbox(script, workspace=ws, timeout=60)
    for name in PROTECTED:
        assert (ws / name).read_text() == "original\n", name
    assert not (ws / "v2").exists()
    assert not (ws / ".vscode/tasks.json").exists()
    assert not (ws / ".claude/commands/new.md").exists()
    assert (ws / "other.txt").read_text() == "ok\n", p.stderr


def test_write_protect_symlinked_dotfile(airlock):
    """A dotfile that is a link (dotfile managers make them) cannot be
    unlinked and replaced by a file of the agent's."""
    ws = airlock.make_dir()
    write(ws / "dotfiles/bashrc", "original\n")
    os.symlink("dotfiles/bashrc", ws / ".bashrc")
    os.symlink("/nonexistent/profile", ws / ".profile")
    airlock.chown(ws)
    for n in (".bashrc", ".profile"):
        os.lchown(ws / n, *owner_ids(airlock))
    p = airlock.sandbox(
        "cat /workspace/.bashrc; rm -f /workspace/.bashrc /workspace/.profile;"
        "echo evil > /workspace/.bashrc; echo evil > /workspace/.profile",
        workspace=ws, timeout=60,
    )
    assert "original" in p.stdout, p.stderr
    assert os.readlink(ws / ".bashrc") == "dotfiles/bashrc"
    assert os.readlink(ws / ".profile") == "/nonexistent/profile"


def test_deny_write_and_allow_read(airlock):
    ws = airlock.make_dir()
    write(ws / "keep.txt", "original\n")
    write(ws / "secret/private.txt", SECRET)
    write(ws / "secret/public.txt", "public-part")
    airlock.chown(ws)
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text(json.dumps({"filesystem": {
        "denyWrite": [str(ws / "keep.txt")],
        "denyRead": [str(ws / "secret")],
        "allowRead": [str(ws / "secret/public.txt")],
    }}))
    pol.chmod(0o644)
    p = airlock.sandbox(
        "echo evil > /workspace/keep.txt; cat /workspace/secret/private.txt; echo;"
        "cat /workspace/secret/public.txt",
        "-p", pol, workspace=ws, timeout=60,
    )
    assert (ws / "keep.txt").read_text() == "original\n"
    assert SECRET not in p.stdout
    assert "public-part" in p.stdout, p.stderr


def test_allow_read_cannot_reopen_the_mandatory_list(airlock):
    ws = airlock.make_dir()
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text(json.dumps({"filesystem": {"denyRead": ["/etc"],
                                              "allowRead": ["/etc/shadow"]}}))
    pol.chmod(0o644)
    p = airlock.sandbox("cat /etc/shadow", "-p", pol, workspace=ws, check_setup=False,
                        timeout=60)
    assert p.returncode == 125, (p.returncode, p.stdout)
    assert "filesystem.allowRead" in p.stderr


# E: git metadata in every repository of the workspace.


def git(*args, cwd):
    subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "safe.directory=*", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=30)


def make_repo(path):
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=path)
    write(path / "f.txt", "x")
    git("add", "f.txt", cwd=path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", cwd=path)


GIT_ATTACKS = [
    ("config", "printf '[core]\\n\\tfsmonitor = touch /tmp/pwn\\n' >> /workspace/.git/config"),
    ("hook", "echo evil > /workspace/.git/hooks/post-checkout"),
    ("info", "echo evil > /workspace/.git/info/attributes"),
    ("module-config", "echo evil >> /workspace/.git/modules/m/config"),
    ("module-hook", "echo evil > /workspace/.git/modules/m/hooks/pre-commit"),
    ("nested-config", "echo evil >> /workspace/sub/.git/config"),
    ("nested-hook", "echo evil > /workspace/sub/.git/hooks/pre-commit"),
    ("nested-rename", "mv /workspace/sub/.git /workspace/sub/g"),
    ("worktree-pointer", "echo 'gitdir: /tmp/evil' > /workspace/wt/.git"),
    ("worktree-pointer-rm", "rm -f /workspace/wt/.git"),
    ("commondir", "echo evil >> /workspace/.git/commondir"),
    pytest.param("commondir-create", "echo /tmp/evil > /workspace/.git/commondir",
                 id="commondir-create", marks=pytest.mark.xfail(strict=True, reason="a missing .git/commondir can "
                                         "still be created; the end-of-run scan neutralises it")),
]


@pytest.mark.parametrize("name,attack", GIT_ATTACKS,
                         ids=[a[0] if isinstance(a, tuple) else None for a in GIT_ATTACKS])
def test_git_metadata_protected(airlock, name, attack):
    if not shutil.which("git"):
        pytest.skip("needs git")
    ws = airlock.make_dir()
    make_repo(ws)
    make_repo(ws / "sub")
    mod = ws / ".git/modules/m"
    make_repo(mod.parent / "m-src")
    shutil.move(str(mod.parent / "m-src/.git"), str(mod))
    shutil.rmtree(mod.parent / "m-src")
    (mod / "hooks").mkdir(exist_ok=True)
    write(ws / "wt/.git", f"gitdir: {ws}/.git/worktrees/wt\n")
    write(ws / ".git/commondir", ".\n") if name == "commondir" else None
    airlock.chown(ws)
    before = {}
    for root, dirs, files in os.walk(ws):
        for f in files:
            fp = os.path.join(root, f)
            if "/objects/" not in fp:
                before[fp] = pathlib.Path(fp).read_bytes()
    airlock.sandbox(attack, workspace=ws, timeout=60)
    after = {}
    for root, dirs, files in os.walk(ws):
        for f in files:
            fp = os.path.join(root, f)
            if "/objects/" not in fp:
                after[fp] = pathlib.Path(fp).read_bytes()
    changed = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    changed = [k for k in changed if "/.git/" in k or k.endswith("/.git")]
    assert not changed, changed


def test_bare_repository_config_protected(airlock):
    if not shutil.which("git"):
        pytest.skip("needs git")
    ws = airlock.make_dir()
    src = airlock.make_dir("src")
    make_repo(src)
    git("clone", "-q", "--bare", str(src), str(ws / "mirror.git"), cwd=ws)
    airlock.chown(ws)
    cfg = (ws / "mirror.git/config").read_bytes()
    airlock.sandbox(
        "printf '[core]\\n\\tpager = touch /tmp/pwn\\n' >> /workspace/mirror.git/config;"
        "echo evil > /workspace/mirror.git/hooks/post-update",
        workspace=ws, timeout=60,
    )
    assert (ws / "mirror.git/config").read_bytes() == cfg
    assert not (ws / "mirror.git/hooks/post-update").exists()


def test_git_link_cannot_be_repointed(airlock):
    if not shutil.which("git"):
        pytest.skip("needs git")
    ws = airlock.make_dir()
    make_repo(ws / "real")
    (ws / "co").mkdir()
    os.symlink("../real/.git", ws / "co/.git")
    airlock.chown(ws)
    os.lchown(ws / "co/.git", *owner_ids(airlock))
    airlock.sandbox(
        "mkdir -p /workspace/evil && rm -f /workspace/co/.git;"
        "ln -s ../evil /workspace/co/.git",
        workspace=ws, timeout=60,
    )
    assert os.readlink(ws / "co/.git") == "../real/.git"


def test_git_still_commits(airlock):
    if not shutil.which("git"):
        pytest.skip("needs git")
    ws = airlock.make_dir()
    make_repo(ws)
    airlock.chown(ws)
    p = airlock.sandbox(
        "cd /workspace && echo y > g.txt && git add g.txt && "
        "git -c user.name=a -c user.email=a@a commit -qm agent && git log --oneline | wc -l",
        workspace=ws, timeout=60,
    )
    assert p.stdout.strip().endswith("2"), (p.stdout, p.stderr)


def test_rw_mount_repository_protected(airlock):
    if not shutil.which("git"):
        pytest.skip("needs git")
    ws = airlock.make_dir()
    repo = airlock.make_dir("repo")
    make_repo(repo)
    airlock.chown(repo)
    cfg = (repo / ".git/config").read_bytes()
    airlock.sandbox(
        "echo evil >> /mnt/r/.git/config; echo evil > /mnt/r/.git/hooks/pre-commit",
        "--rw", f"{repo}:/mnt/r", workspace=ws, timeout=60,
    )
    assert (repo / ".git/config").read_bytes() == cfg
    assert not (repo / ".git/hooks/pre-commit").exists()


# F: mounts under /tmp and $HOME, messages that say what to do, sockets.


@pytest.mark.parametrize("target", ["/tmp/data", "/home/agent/data"])
def test_mount_under_tmpfs_is_visible(airlock, target):
    src = airlock.make_dir("src")
    write(src / "f.txt", "visible")
    airlock.chown(src)
    p = airlock.sandbox(f"cat {target}/f.txt", "--ro", f"{src}:{target}", timeout=60)
    assert p.stdout == "visible", p.stderr


def test_mount_errors_say_what_to_do(airlock):
    base = airlock.make_dir("cwd")
    p = airlock.run(["run", "-q", "--ro", "nothere:/opt/x", "--", "/bin/true"], cwd=base,
                    check_setup=False, timeout=60)
    assert p.returncode == 125
    assert "nothere" in p.stderr and "give an existing path" in p.stderr, p.stderr
    src = airlock.make_dir("src")
    p = airlock.run(["run", "-q", "--ro", f"{src}:/usr/x", "--", "/bin/true"], cwd=base,
                    check_setup=False, timeout=60)
    assert p.returncode == 125
    assert "choose a target" in p.stderr, p.stderr


def test_mount_source_under_root(airlock):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory in /root")
    d = pathlib.Path(tempfile.mkdtemp(prefix="fsgate-", dir="/root"))
    try:
        d.chmod(0o755)
        write(d / "f.txt", "from-root")
        p = airlock.sandbox("cat /data/f.txt", "--ro", f"{d}:/data", check_setup=False,
                            timeout=60)
        if airlock.rootless:
            assert p.returncode == 125
            assert "you cannot reach it" in p.stderr, p.stderr
        else:
            assert p.stdout == "from-root", p.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_host_unix_socket_is_masked(airlock):
    d = pathlib.Path(tempfile.mkdtemp(prefix="fsgate-", dir="/var/tmp"))
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        d.chmod(0o755)
        path = d / "svc.sock"
        srv.bind(str(path))
        path.chmod(0o777)
        srv.listen(4)
        ws = airlock.make_dir()
        write(ws / "probe.py",
              "import socket, sys\n"
              "s = socket.socket(socket.AF_UNIX)\n"
              "try:\n"
              "    s.connect(sys.argv[1])\n"
              "    print('CONNECTED')\n"
              "except OSError as e:\n"
              "    print('refused', e)\n")
        p = airlock.sandbox(f"python3 /workspace/probe.py {path}", "--read", "host",
                            workspace=ws, timeout=60)
        assert "CONNECTED" not in p.stdout, p.stdout
    finally:
        srv.close()
        shutil.rmtree(d, ignore_errors=True)
