# SPDX-License-Identifier: Apache-2.0
"""What a new user reads: each message names the fix, and the docs agree
with what Airlock does."""

import json
import os
import re
import shutil
import subprocess

import pytest

import pathlib

# As tests/conftest.py has them (a module of that name may be another
# suite's when several are collected together).
REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
AIRLOCK_BIN = REPO / os.environ.get("AIRLOCK_BIN", BUILD / "src/cli/airlock")
TEST_USER = os.environ.get("AIRLOCK_TEST_USER", "airlock-test")

DOCS = REPO / "docs"


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# --- rootless: the exit-125 error names the recipe for this host -----------

def _cgroup_version():
    return "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1"


def test_rootless_without_delegated_cgroup_names_the_recipe(test_base):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to start an ordinary user outside a delegated cgroup")
    import pwd
    try:
        user = pwd.getpwnam(TEST_USER)
    except KeyError:
        pytest.skip("no test user")
    # Root's own cgroup is not the user's: no delegation.
    ws = test_base / "rootless-ws"
    ws.mkdir(exist_ok=True)
    os.chown(ws, user.pw_uid, user.pw_gid)
    p = subprocess.run(["setpriv", "--reuid", str(user.pw_uid), "--regid", str(user.pw_gid),
                        "--init-groups", "--reset-env", "--", str(AIRLOCK_BIN), "run", "-q",
                        "-w", str(ws), "--audit", str(ws / "audit.jsonl"), "--", "true"],
                       capture_output=True, text=True, timeout=60, cwd=str(ws))
    if p.returncode == 0:
        pytest.skip("this host lets the user make cgroups here (already delegated)")
    assert p.returncode == 125, p.stderr
    version = _cgroup_version()
    assert "cgroup %s" % version in p.stderr, p.stderr
    assert 'docs/rootless.md, "cgroup %s"' % version in p.stderr, p.stderr
    if version == "v2":
        assert "Delegate=yes" in p.stderr
    # The recipe it names is in the docs.
    text = (DOCS / "rootless.md").read_text()
    assert "## cgroup %s" % version in text


def test_rootless_v1_recipe_from_the_docs_works(test_base):
    """The cgroup v1 recipe of docs/rootless.md, run as written."""
    if _cgroup_version() != "v1":
        pytest.skip("this host has cgroup v2; the v1 recipe needs a v1 host")
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root for the recipe's root half")
    import pwd
    user = pwd.getpwnam(TEST_USER)
    text = (DOCS / "rootless.md").read_text()
    v1 = text[text.index("## cgroup v1"):]
    blocks = re.findall(r"```sh\n(.*?)```", v1, re.S)
    root_part, user_part = blocks[0].replace("alice", TEST_USER), blocks[1]
    ws = test_base / "rootless-v1"
    ws.mkdir(exist_ok=True)
    os.chown(ws, user.pw_uid, user.pw_gid)
    user_part = user_part.replace("airlock run -w ~/src/project -- ./agent.sh",
                                  "%s run -q -w %s --audit %s/a.jsonl -- echo ok"
                                  % (AIRLOCK_BIN, ws, ws))
    try:
        subprocess.run(["sh", "-ec", root_part], check=True, timeout=30)
        p = subprocess.run(["setpriv", "--reuid", str(user.pw_uid), "--regid", str(user.pw_gid),
                            "--init-groups", "--reset-env", "--", "sh", "-ec", user_part],
                           capture_output=True, text=True, timeout=60, cwd=str(ws))
        assert p.returncode == 0, p.stderr
        assert p.stdout == "ok\n"
    finally:
        for c in ["memory", "pids", "cpu", "cpuacct"]:
            d = "/sys/fs/cgroup/%s/airlock-%d" % (c, user.pw_uid)
            if os.path.isdir(d):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


# --- routes and injects -------------------------------------------------------

CALL = ("import urllib.request, urllib.error\n"
        "try:\n"
        "    urllib.request.urlopen('http://127.0.0.1:8080/up/x', timeout=20)\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code, e.read().decode())\n")


def test_loopback_route_upstream_names_the_flag(airlock):
    ws = airlock.make_dir()
    (ws / "call.py").write_text(CALL)
    airlock.chown(ws)
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl",
                     "--route", "up=http://127.0.0.1:9", "--", "python3", "/workspace/call.py"],
                    timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("403 "), p.stdout
    assert "network.allowPrivate" in p.stdout
    assert "--allow-private 127.0.0.1" in p.stdout, p.stdout


def test_inject_before_its_route_is_taken(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl",
                     "--inject", "up:x-test=yes", "--route", "up=http://127.0.0.1:9",
                     "--", "true"], timeout=60)
    assert p.returncode == 0, p.stderr


def test_inject_naming_no_route_says_how(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--inject", "up:x-test=yes", "--", "true"],
                    check_setup=False, timeout=60)
    assert p.returncode == 125
    assert "--route up=URL" in p.stderr, p.stderr


@pytest.mark.parametrize("value", ["up:x-api-key=", "up:authorization=Bearer "])
def test_inject_value_expanded_to_empty_is_refused(airlock, value):
    # What bash leaves of --inject "up:x-api-key=${secret:KEY}".
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--route", "up=http://127.0.0.1:9",
                     "--inject", value, "--", "true"], check_setup=False, timeout=60)
    assert p.returncode == 125, p.stderr
    assert "empty" in p.stderr and "single quotes" in p.stderr, p.stderr
    assert "${secret:KEY}" in p.stderr


# --- audit verify of separate logs -------------------------------------------

def test_audit_verify_of_separate_logs_says_what_file_means(airlock):
    d = airlock.make_dir("audit")
    logs = []
    for i in range(3):
        log = d / ("log%d.jsonl" % i)
        p = airlock.run(["run", "-q", "-w", d, "--audit", log, "--", "true"], timeout=60)
        assert p.returncode == 0, p.stderr
        logs.append(log)
    p = airlock.run(["audit", "verify", *logs])
    assert p.returncode == 1
    assert "one rotated log" in p.stdout and "oldest first" in p.stdout, p.stdout
    assert "FILE.N ... FILE.1 FILE" in p.stdout
    assert "'airlock audit verify FILE' once for each" in p.stdout
    for log in logs:
        assert airlock.run(["audit", "verify", log]).returncode == 0


# --- discard after a partial accept -------------------------------------------

def test_discard_after_partial_accept_does_not_claim_the_workspace_is_as_it_was(airlock):
    ws = airlock.make_dir()
    (ws / "a.txt").write_text("a\n")
    airlock.chown(ws)
    p = airlock.run(["run", "-q", "--review", "-w", ws, "--", "sh", "-c",
                     "echo new > b.txt; echo new > c.txt"], timeout=60)
    sid = re.search(r"airlock accept (\w+)", p.stderr).group(1)
    a = airlock.run(["accept", sid, "b.txt"])
    assert a.returncode == 0, a.stderr
    d = airlock.run(["discard", sid])
    assert d.returncode == 0, d.stderr
    assert "as it was" not in d.stdout, d.stdout
    assert "1 path taken by an earlier 'airlock accept' stay" in d.stdout, d.stdout
    assert (ws / "b.txt").exists() and not (ws / "c.txt").exists()


def test_discard_without_accept_keeps_the_usual_line(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "--review", "-w", ws, "--", "sh", "-c", "echo x > b.txt"],
                    timeout=60)
    sid = re.search(r"airlock accept (\w+)", p.stderr).group(1)
    d = airlock.run(["discard", sid])
    assert "the workspace is as it was" in d.stdout, d.stdout


# --- -q still prints Airlock's one-line error ---------------------------------

def test_oom_under_quiet_prints_the_error_code(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl", "--memory", "32M",
                     "--", "python3", "-c", "x = bytearray(256 << 20)"], timeout=60)
    assert p.returncode == 137, p.stderr
    assert "airlock: oom_killed: " in p.stderr, p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.startswith("airlock:")]) == 1


def test_timeout_under_quiet_prints_the_error_code(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl", "--timeout", "1",
                     "--", "sleep", "30"], timeout=60)
    assert p.returncode == 124, p.stderr
    assert "airlock: timeout" in p.stderr, p.stderr


# --- the clean environment: the docs agree with each other and with Airlock ---

def _documented_env(text, anchor):
    text = re.sub(r"\s+", " ", text)
    i = text.index(anchor)
    m = re.search(r"`((?:[A-Z_]+ ?)+)`", text[i:i + 600])
    return set(m.group(1).split())


def test_clean_environment_docs_agree_with_the_sandbox(airlock):
    cli = _documented_env((DOCS / "cli.md").read_text(), "A clean environment")
    pol = _documented_env((DOCS / "policy.md").read_text(), "clean environment")
    assert cli == pol
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl", "--", "env"],
                    timeout=60)
    assert p.returncode == 0, p.stderr
    names = {line.split("=", 1)[0] for line in p.stdout.splitlines() if "=" in line}
    assert names == cli, (names, cli)


# --- the sandbox names its own user ---------------------------------------------

def test_id_inside_names_the_sandbox_user(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl", "--", "sh", "-c",
                     "id; echo $USER; echo x >> /etc/passwd && echo WROTE"], timeout=60)
    assert p.returncode != 0 or "WROTE" not in p.stdout
    lines = p.stdout.splitlines()
    assert lines[0] == "uid=1000(agent) gid=1000(agent) groups=1000(agent)", p.stdout
    assert lines[1] == "agent"
    assert "WROTE" not in p.stdout, "the sandbox's /etc/passwd is writable"


def test_sandbox_passwd_leaves_no_name_in_the_root(airlock):
    """The sandbox's own /etc/passwd and /etc/group are written in the new
    root's tmpfs and unlinked once bound: nothing at the root names them,
    and the bind is read-only, not executable."""
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl", "--", "sh", "-c",
                     "ls -a /; grep -E ' /etc/(passwd|group) ' /proc/self/mountinfo"], timeout=60)
    assert p.returncode == 0, p.stderr
    names = p.stdout.split("\n")
    assert not [n for n in names if "airlock" in n and " /etc/" not in n], p.stdout
    binds = [l for l in names if " /etc/" in l]
    assert len(binds) == 2, p.stdout
    for line in binds:
        opts = line.split()[5].split(",")
        assert {"ro", "nosuid", "nodev", "noexec"} <= set(opts), line


def test_id_inside_as_uid_0_is_root(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl", "--uid", "0", "--",
                     "sh", "-c", "id -un; id -gn; getent passwd root | cut -d: -f6"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["root", "root", "/root"]


# --- a spent budget: what the docs say is what the log holds ---------------------

BUDGET_CALL = ("import urllib.request, urllib.error\n"
               "for i in range(2):\n"
               "    try:\n"
               "        urllib.request.urlopen('http://up.test:9/', timeout=20)\n"
               "    except urllib.error.HTTPError as e:\n"
               "        print(e.code)\n"
               "    except OSError as e:\n"
               "        print('error', e)\n")


def test_spent_budget_is_logged_as_the_docs_say(airlock):
    ws = airlock.make_dir()
    (ws / "call.py").write_text(BUDGET_CALL)
    (ws / "policy.json").write_text(json.dumps({"network": {"budget": {"requests": 1}}}))
    airlock.chown(ws)
    p = airlock.run(["run", "-q", "-w", ws, "--audit", ws / "audit.jsonl", "-p", ws / "policy.json",
                     "--allow", "up.test:9", "--host", "up.test=127.0.0.1",
                     "--allow-private", "127.0.0.1", "--", "python3", "/workspace/call.py"],
                    timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "429", p.stdout
    events = _lines(ws / "audit.jsonl")
    refused = [e for e in events if e["kind"] == "net.decision"
               and e.get("reason") == "budget_requests"]
    assert refused and refused[0]["decision"] == "deny" and refused[0]["status"] == 429
    assert not [e for e in events if e["kind"] == "limit.hit"]
    cli = re.sub(r"\s+", " ", (DOCS / "cli.md").read_text())
    assert ('A spent network budget is not a `limit.hit`' in cli
            and '`"reason": "budget_requests"`' in cli)


# --- exec output over the API as text ------------------------------------------

def test_exec_encoding_utf8_gives_text_where_the_bytes_are_text(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the daemon tests run as root")
    import sys
    sys.path.insert(0, str(REPO / "tests/daemon"))
    from daemonlib import Daemon
    d = Daemon(tmp_path / "d")
    d.base.mkdir()
    d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec")
    d.start()
    try:
        c = d.client(d.admin, timeout=60)
        sb = c.create(sandbox_class="small")
        body = json.dumps({"argv": ["sh", "-c", "printf 'h\\303\\251 ok\\n'; printf '\\377\\376' >&2"]})

        def lines(query):
            status, _, data = c.request("POST", "/v1/sandboxes/%s/exec%s" % (sb["id"], query),
                                        body.encode(), "application/json")
            return status, [json.loads(x) for x in data.splitlines() if x.strip()]

        status, evs = lines("?encoding=utf8")
        assert status == 200, evs
        out = [e for e in evs if e["type"] == "stdout"]
        err = [e for e in evs if e["type"] == "stderr"]
        assert "".join(e["text"] for e in out) == "hé ok\n"
        assert all("data" not in e for e in out)
        # Bytes that are not UTF-8 stay base64.
        assert err and all("text" not in e and "data" in e for e in err)
        # The default is unchanged: base64 "data".
        status, evs = lines("")
        assert [e for e in evs if e["type"] == "stdout"][0]["data"] == "aMOpIG9rCg=="
        status, evs = lines("?encoding=latin1")
        assert status == 400 and "utf8" in evs[0]["message"]
        c.delete(sb["id"])
    finally:
        d.cleanup(d.admin)
