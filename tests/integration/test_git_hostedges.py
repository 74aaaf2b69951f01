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
    # The run moved the FIFO out of refs/ (to .git/main.airlock-quarantine),
    # so the branch is gone; were it still there, export names the FIFO.
    assert e.returncode == 1 and ("FIFO" in e.stderr or "not found" in e.stderr), e.stderr
    refs = pathlib.Path(re.search(r"(/\S+/repo)/\.git/", p.stderr).group(1)) / ".git/refs"
    left = [os.path.join(d, f) for d, _, fs in os.walk(refs) for f in fs
            if not os.path.isfile(os.path.join(d, f))]
    assert not left, left


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


# ---- item 2: what the host's next `git status` runs ----


def host_git_env(airlock, home):
    """The workspace owner's git, as a user who trusts the directory: the
    ownership check is not what is tested here."""
    cfg = home / "gitconfig"
    cfg.write_text("[safe]\n\tdirectory = *\n[protocol \"file\"]\n\tallow = always\n")
    airlock.chown(home)
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_CONFIG_GLOBAL": str(cfg),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}


def as_owner(airlock, argv, cwd, env):
    if airlock.user:
        argv = ["setpriv", f"--reuid={airlock.user.pw_uid}", f"--regid={airlock.user.pw_gid}",
                "--init-groups", "--", *argv]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def owner_git(airlock, env, cwd, *args):
    p = as_owner(airlock, ["git", "-c", "user.name=T", "-c", "user.email=t@example.com",
                           *map(str, args)], cwd, env)
    assert p.returncode == 0, p.stderr
    return p


class Scene:
    def __init__(self, airlock):
        self.airlock = airlock
        self.home = airlock.make_dir("home")
        self.env = host_git_env(airlock, self.home)
        self.marker = self.home / "RAN"
        # What the agent plants: a command that leaves the marker.
        self.cmd = f"touch {self.marker}; false"

    def git(self, cwd, *args):
        return owner_git(self.airlock, self.env, cwd, *args)

    def repo(self, path, files=("README",)):
        path.mkdir(parents=True, exist_ok=True)
        self.airlock.chown(path)
        self.git(path, "init", "-q", "-b", "main")
        for f in files:
            (path / f).parent.mkdir(parents=True, exist_ok=True)
            (path / f).write_text(f + "\n")
        self.airlock.chown(path)
        self.git(path, "add", ".")
        self.git(path, "commit", "-q", "-m", "init")
        return path

    def run(self, ws, script):
        audit = audit_file(self.airlock)
        p = self.airlock.run(["run", "-q", "--audit", audit, "-w", ws, "--",
                              "/bin/sh", "-c", "set -e; " + script + "; echo AGENT-OK"])
        assert "AGENT-OK" in p.stdout, p.stdout + p.stderr
        return p, audit

    def attempt(self, ws, script, *opts):
        """Run an attack that the start-time protection (read-only git
        metadata) should refuse inside the sandbox."""
        audit = audit_file(self.airlock)
        p = self.airlock.run(["run", "-q", "--audit", audit, "-w", ws, *opts, "--",
                              "/bin/sh", "-c", "set -e; " + script + "; echo AGENT-OK"])
        return p, audit

    def refused(self, p, status_dir):
        """The write was refused inside, and host git runs nothing."""
        assert "AGENT-OK" not in p.stdout, p.stdout + p.stderr
        assert re.search(r"Read-only file system|Device or resource busy|Permission denied",
                         p.stderr), p.stderr
        st, ran = self.status(status_dir)
        assert not ran, "host git ran the agent's command: " + p.stderr + st.stderr

    def status(self, cwd):
        p = as_owner(self.airlock, ["git", "status", "--short"], cwd, self.env)
        ran = self.marker.exists()
        self.marker.unlink(missing_ok=True)
        return p, ran

    def check(self, p, audit, status_dir, moved):
        st, ran = self.status(status_dir)
        assert not ran, "host git ran the agent's command: " + p.stderr + st.stderr
        assert "airlock: warning: " in p.stderr and "moved to" in p.stderr, p.stderr
        events = [json.loads(line) for line in pathlib.Path(audit).read_text().splitlines()]
        found = [e for e in events if e["kind"] == "git.neutralised"]
        assert found and all(e["movedTo"] for e in found), found
        for m in moved:
            assert m.exists(), (m, p.stderr)
        return found


AGENT_GIT = "git -c user.name=A -c user.email=a@example.com"


def fsmonitor_config(cmd):
    return f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {cmd}\n"


def test_planted_commondir(airlock):
    s = Scene(airlock)
    ws = s.repo(airlock.make_dir("ws") / "proj")
    cfg = fsmonitor_config(s.cmd).replace("\n", "\\n").replace("\t", "\\t")
    p, audit = s.run(ws, "cd /workspace; mkdir -p evil/objects evil/refs/heads; "
                         "cp -r .git/objects/. evil/objects/; cp .git/HEAD evil/HEAD; "
                         "cp -r .git/refs/. evil/refs/; "
                         f"printf '{cfg}' > evil/config; printf '../evil\\n' > .git/commondir")
    s.check(p, audit, ws, [ws / ".git/commondir.airlock-quarantine",
                           ws / "evil/config.airlock-quarantine"])


def test_nested_repository_staged_as_a_gitlink(airlock):
    s = Scene(airlock)
    ws = s.repo(airlock.make_dir("ws") / "proj")
    p, audit = s.run(ws, f"cd /workspace; mkdir sub; cd sub; git init -q; echo x > x; "
                         f"git add x; {AGENT_GIT} commit -q -m x; "
                         f"git config core.fsmonitor '{s.cmd}'; cd ..; git add sub")
    s.check(p, audit, ws, [ws / "sub/.git/config.airlock-quarantine"])


def test_submodule_config_in_dot_git_modules(airlock):
    s = Scene(airlock)
    lib = s.repo(airlock.make_dir("lib") / "lib")
    ws = s.repo(airlock.make_dir("ws") / "proj")
    s.git(ws, "submodule", "add", "-q", lib, "mod")
    s.git(ws, "commit", "-q", "-m", "sub")
    assert (ws / ".git/modules/mod/config").exists()
    p, audit = s.attempt(ws, f"cd /workspace; git config -f .git/modules/mod/config "
                             f"core.fsmonitor '{s.cmd}'")
    s.refused(p, ws)
    assert not (ws / ".git/modules/mod/config.airlock-quarantine").exists()


def test_worktree_pointer_rewritten(airlock):
    s = Scene(airlock)
    main = s.repo(airlock.make_dir("main") / "main")
    ws = main.parent / "wt"
    s.git(main, "worktree", "add", "-q", ws)
    assert (ws / ".git").is_file()
    cfg = fsmonitor_config(s.cmd).replace("\n", "\\n").replace("\t", "\\t")
    p, audit = s.attempt(ws, "cd /workspace; mkdir -p evil/objects evil/refs; "
                             "printf 'ref: refs/heads/main\\n' > evil/HEAD; "
                             f"printf '{cfg}' > evil/config; printf 'gitdir: evil\\n' > .git")
    s.refused(p, ws)
    # The pointer cannot be removed and replaced either.
    p, audit = s.attempt(ws, "cd /workspace; mkdir -p evil/objects evil/refs; "
                             "printf 'ref: refs/heads/main\\n' > evil/HEAD; "
                             f"printf '{cfg}' > evil/config; rm -f .git; "
                             "printf 'gitdir: evil\\n' > .git")
    s.refused(p, ws)
    assert (ws / ".git").read_text().startswith("gitdir: ") and "evil" not in (ws / ".git").read_text()
    # The host's own worktree pointer, untouched, is left alone.
    s2 = Scene(airlock)
    ws2 = main.parent / "wt2"
    s.git(main, "worktree", "add", "-q", ws2)
    p2, _ = s2.run(ws2, "true")
    assert "airlock: warning" not in p2.stderr, p2.stderr
    assert (ws2 / ".git").is_file()


def test_dot_git_created_in_a_subdirectory_of_a_host_repository(airlock):
    s = Scene(airlock)
    host = s.repo(airlock.make_dir("host") / "host", files=("README", "sub/file"))
    ws = host / "sub"
    p, audit = s.run(ws, f"cd /workspace; git init -q; git config core.fsmonitor '{s.cmd}'")
    s.check(p, audit, ws, [ws / ".git.airlock-quarantine"])
    assert not (ws / ".git").exists()
    # The host repository is what git finds there again.
    top = s.git(ws, "rev-parse", "--show-toplevel").stdout.strip()
    assert top == str(host)


def test_the_hosts_own_hooks_and_settings_are_left_alone(airlock):
    s = Scene(airlock)
    ws = s.repo(airlock.make_dir("ws") / "proj")
    # The user's own: an editor setting and a hook, there before the run.
    s.git(ws, "config", "core.editor", "vi")
    hook = ws / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    airlock.chown(hook)
    p, audit = s.run(ws, f"cd /workspace; echo y > y; git add y; {AGENT_GIT} commit -q -m y")
    assert "airlock: warning" not in p.stderr, p.stderr
    assert (ws / ".git/config").exists() and hook.exists()


def test_repository_given_with_rw_is_neutralised_too(airlock):
    s = Scene(airlock)
    ws = airlock.make_dir("ws")
    repo = s.repo(airlock.make_dir("rwrepo") / "repo")
    audit = audit_file(airlock)
    # The config itself is read-only inside ...
    p, audit = s.attempt(ws, f"git config -f /mnt/repo/.git/config core.fsmonitor '{s.cmd}'",
                         "--rw", f"{repo}:/mnt/repo")
    s.refused(p, repo)
    # ... and a hook the agent adds where none was is moved aside at the end.
    p, audit = s.attempt(ws, "printf '#!/bin/sh\\ntouch %s\\n' > /mnt/repo/.git/hooks/pre-commit; "
                             "chmod +x /mnt/repo/.git/hooks/pre-commit" % s.marker,
                         "--rw", f"{repo}:/mnt/repo")
    if "AGENT-OK" in p.stdout:
        s.check(p, audit, repo, [repo / ".git/hooks/pre-commit.airlock-quarantine"])
    else:
        s.refused(p, repo)


def test_a_read_only_git_directory_does_not_stop_the_move(airlock):
    s = Scene(airlock)
    ws = s.repo(airlock.make_dir("ws") / "proj")
    p, audit = s.run(ws, f"cd /workspace; mkdir sub; cd sub; git init -q; "
                         f"git config core.fsmonitor '{s.cmd}'; chmod 0555 .git")
    s.check(p, audit, ws / "sub", [ws / "sub/.git/config.airlock-quarantine"])


def test_push_to_a_remote_that_never_answers_is_stopped(airlock):
    """A network read libgit2 would wait on for ever ends at the deadline
    (AIRLOCK_GIT_TIMEOUT) plus the alarm's grace, with a clear error."""
    import socket
    import threading

    bare, base = make_remote(airlock)
    p, sid = run_agent(airlock, f"file://{bare}", audit_file(airlock))
    assert p.returncode == 0 and sid, p.stderr
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    held = []

    def hold():
        try:
            for _ in range(4):
                held.append(srv.accept())
        except OSError:
            pass  # the test closed the socket

    threading.Thread(target=hold, daemon=True).start()
    state = workspace_of(p).parent / "git.json"
    st = json.loads(state.read_text())
    st["url"] = f"http://127.0.0.1:{srv.getsockname()[1]}/x.git"
    state.write_text(json.dumps(st))
    argv = airlock.cmd(["push", sid, "--branch", "x", "--no-helper"])
    # The environment reaches airlock past runas.sh through env(1).
    at = argv.index(str(airlock.cmd([])[-1]))
    argv[at:at] = ["/usr/bin/env", "AIRLOCK_GIT_TIMEOUT=1"]
    t0 = time.monotonic()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60, cwd=airlock.base)
    took = time.monotonic() - t0
    srv.close()
    assert r.returncode == 1, r.stderr
    assert "took longer than 1 s" in r.stderr, r.stderr
    assert took < 40, took


def test_accepted_review_changes_are_neutralised(airlock):
    """A review workspace is written on the host only by accept: what accept
    writes is scanned like the end of a read-write run."""
    s = Scene(airlock)
    ws = s.repo(airlock.make_dir("ws") / "proj")
    p = airlock.run(["run", "-q", "--review", "-w", ws, "--", "/bin/sh", "-c",
                     f"cd /workspace; mkdir sub; cd sub; git init -q; "
                     f"git config core.fsmonitor '{s.cmd}'"])
    assert p.returncode == 0, p.stderr
    sid = re.search(r"airlock (?:diff|accept) (\S+)", p.stderr).group(1)
    a = airlock.run(["accept", sid])
    assert a.returncode == 0, a.stderr
    assert "moved to" in a.stderr and "core.fsmonitor" in a.stderr, a.stderr
    assert (ws / "sub/.git/config.airlock-quarantine").exists()
    st, ran = s.status(ws / "sub")
    assert not ran, "host git ran the agent's command: " + st.stderr
