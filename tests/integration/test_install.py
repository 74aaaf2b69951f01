# SPDX-License-Identifier: Apache-2.0
"""`make install DESTDIR=...` into a temporary root, then the installed
programs run from there: their --help, a small sandbox, the man pages, the
completion, the systemd units, and `make uninstall`."""

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time

import pytest

import pathlib

# As tests/conftest.py has them (a module of that name may be another
# suite's when several are collected together).
REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
AIRLOCK_BIN = REPO / os.environ.get("AIRLOCK_BIN", BUILD / "src/cli/airlock")
TEST_USER = os.environ.get("AIRLOCK_TEST_USER", "airlock-test")

COMMANDS = ["run", "audit", "diff", "accept", "discard", "export", "push", "supervise",
            "create", "ls", "exec", "cp", "rm", "logs", "grant", "gc", "review", "doctor", "volume", "stop",
            "ui", "image", "estop", "approvals", "agent"]


def _prefix():
    """The build directory's install prefix, without its leading slash."""
    try:
        p = subprocess.run(["meson", "introspect", str(BUILD), "--buildoptions"],
                           capture_output=True, text=True, timeout=60)
        return [o["value"] for o in json.loads(p.stdout) if o["name"] == "prefix"][0].lstrip("/")
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return ""  # the fixture says why


PREFIX = _prefix()


def sh(argv, timeout=120, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, **kw)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("make install checks the build's packages as root (make deps)")
    assert PREFIX, f"meson introspect {BUILD} --buildoptions named no prefix"
    dest = tmp_path_factory.mktemp("destdir")
    # Installed at the build's own prefix: another prefix would reconfigure
    # and rebuild the build directory every other test is running from.
    p = sh(["make", "-C", str(REPO), "install", "BUILD=" + str(BUILD), "PREFIX=/" + PREFIX,
            "DESTDIR=" + str(dest)], timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    yield dest


def bin_(root, name):
    return str(root / PREFIX / "bin" / name)


def test_programs_installed(root):
    for name in ["airlock", "airlockd", "airlock-git"]:
        assert os.access(root / PREFIX / "bin" / name, os.X_OK), name
    for page in ["airlock.1", "airlock-run.1", "airlock-audit.1"]:
        assert (root / PREFIX / "share/man/man1" / page).is_file()
    assert (root / PREFIX / "share/man/man8/airlockd.8").is_file()
    for cmd in COMMANDS:
        assert (root / PREFIX / "share/man/man1" / ("airlock-%s.1" % cmd)).is_file(), cmd
    assert (root / PREFIX / "share/bash-completion/completions/airlock").is_file()
    assert (root / PREFIX / "share/zsh/site-functions/_airlock").is_file()
    assert (root / PREFIX / "lib/systemd/system/airlockd.service").is_file()
    assert (root / PREFIX / "lib/systemd/system/airlockd.socket").is_file()


def test_help_of_each_installed_program(root):
    p = sh([bin_(root, "airlock"), "--help"])
    assert p.returncode == 0 and "Usage: airlock" in p.stdout
    for cmd in COMMANDS:
        p = sh([bin_(root, "airlock"), cmd, "--help"])
        assert p.returncode == 0, (cmd, p.stderr)
        assert "Usage: airlock " + cmd in p.stdout, cmd
    p = sh([bin_(root, "airlockd"), "--help"])
    assert p.returncode == 0 and "Usage: airlockd" in p.stdout


def _examples(text):
    lines = text.splitlines()
    i = lines.index("Examples:")
    out = []
    for line in lines[i + 1:]:
        if not line.strip():
            break
        out.append(line)
    return out


def test_every_help_fits_one_screen_with_three_uses_and_the_man_page(root):
    helps = [([bin_(root, "airlock"), "--help"], "'man airlock'")]
    helps += [([bin_(root, "airlock"), cmd, "--help"], "'man airlock-%s'" % cmd)
              for cmd in COMMANDS]
    helps += [([bin_(root, "airlock"), "audit", sub, "--help"], "'man airlock-audit'")
              for sub in ["verify", "show"]]
    helps += [([bin_(root, "airlockd"), "--help"], "'man airlockd'")]
    env = {k: v for k, v in os.environ.items() if k != "AIRLOCK_HELP"}
    for argv, man in helps:
        p = sh(argv, env=env)
        assert p.returncode == 0, (argv, p.stderr)
        lines = p.stdout.splitlines()
        assert len(lines) <= 24, (argv, len(lines), p.stdout)
        assert max(len(x) for x in lines) <= 100, argv
        ex = _examples(p.stdout)
        assert len(ex) == 3 and all(x.startswith("  ") for x in ex), (argv, ex)
        assert man in p.stdout, (argv, p.stdout)


def test_airlock_help_cmd_prints_every_option(root):
    short = sh([bin_(root, "airlock"), "run", "--help"]).stdout
    full = sh([bin_(root, "airlock"), "help", "run"])
    assert full.returncode == 0
    assert "--inject" not in short and "--inject" in full.stdout
    assert full.stdout.startswith(short.split("\nEvery option")[0].split("\n\nOptions")[0])
    # export and push live in airlock-git: the full text crosses the exec.
    assert "--state-root" in sh([bin_(root, "airlock"), "help", "push"]).stdout
    assert "--state-root" not in sh([bin_(root, "airlock"), "push", "--help"]).stdout
    p = sh([bin_(root, "airlock"), "help", "nosuch"])
    assert p.returncode == 2 and "unknown command" in p.stderr


def test_installed_airlock_runs_a_sandbox(root, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    p = sh([bin_(root, "airlock"), "run", "-q", "-w", str(ws), "--audit", str(tmp_path / "a.jsonl"),
            "--", "sh", "-c", "echo hi > /workspace/out; cat /workspace/out"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hi\n"


def _man_text(page):
    env = dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0", LANG="C.UTF-8")
    p = sh(["man", "-l", str(page)], env=env, timeout=60)
    assert p.returncode == 0, (page, p.stderr)
    assert not p.stderr.strip(), (page, p.stderr)
    return re.sub(r".\x08", "", p.stdout)


def test_man_pages_render_and_list_every_option_of_the_help(root):
    if not shutil.which("man"):
        pytest.skip("man is not installed (man-db: make deps)")
    pages = sorted((root / PREFIX / "share/man").glob("man*/*.[18]"))
    assert len(pages) == len(COMMANDS) + 3  # + airlock(1), airlockd(8), airlock-tool(1)
    for page in pages:
        text = _man_text(page)
        assert "NAME" in text and "SYNOPSIS" in text, page
    # The page is the help: every option the full help names is on it.
    env = dict(os.environ, AIRLOCK_HELP="full")
    for cmd in ["run", "create", "gc"]:
        full = sh([bin_(root, "airlock"), cmd, "--help"], env=env).stdout
        text = _man_text(root / PREFIX / "share/man/man1" / ("airlock-%s.1" % cmd))
        opts = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", full))
        assert len(opts) >= 3, cmd
        for opt in opts:
            assert opt in text, (cmd, opt)


def test_bash_completion_offers_commands_and_options(root):
    comp = root / PREFIX / "share/bash-completion/completions/airlock"
    script = """
source %s
PATH=%s:$PATH
COMP_WORDS=(airlock ru); COMP_CWORD=1; _airlock; echo "${COMPREPLY[@]}"
COMP_WORDS=(airlock run --mem); COMP_CWORD=2; _airlock; echo "${COMPREPLY[@]}"
COMP_WORDS=(airlockd --max-s); COMP_CWORD=1; _airlockd; echo "${COMPREPLY[@]}"
""" % (comp, root / PREFIX / "bin")
    p = sh(["bash", "-c", script], timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["run"]
    assert lines[1].split() == ["--memory"]
    assert lines[2].split() == ["--max-sandboxes"]


def test_systemd_units_verify(root, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed: the units cannot be verified here")
    units = root / PREFIX / "lib/systemd/system"
    service = (units / "airlockd.service").read_text()
    assert f"ExecStart=/{PREFIX}/bin/airlockd" in service
    for key in ["ProtectSystem=strict", "StateDirectory=airlock", "RuntimeDirectory=airlock",
                "NoNewPrivileges=yes", "KillMode=process", "Delegate=yes", "PrivateTmp=yes",
                "RuntimeDirectoryPreserve=yes"]:
        assert key in service, key
    # verify checks that ExecStart exists: point it into the staging root.
    (tmp_path / "airlockd.service").write_text(
        service.replace(f"ExecStart=/{PREFIX}/bin/", f"ExecStart={root}/{PREFIX}/bin/"))
    shutil.copy(units / "airlockd.socket", tmp_path)
    p = sh(["systemd-analyze", "verify", "--man=no", str(tmp_path / "airlockd.service"),
            str(tmp_path / "airlockd.socket")], timeout=60)
    assert p.returncode == 0 and not p.stderr.strip(), p.stderr


def test_airlockd_serves_the_socket_it_is_given(root, tmp_path):
    """airlockd.socket: the service manager's socket (fd 3) is used, not a
    new one."""
    if not shutil.which("systemd-socket-activate"):
        pytest.skip("systemd-socket-activate is not installed")
    sock = tmp_path / "api.sock"
    proc = subprocess.Popen(["systemd-socket-activate", "-l", str(sock), bin_(root, "airlockd"),
                             "--socket", str(tmp_path / "other.sock"), "--state-dir",
                             str(tmp_path / "state"), "--run-dir", str(tmp_path / "run"),
                             "--audit", str(tmp_path / "audit.jsonl")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(str(sock))
        s.sendall(b"GET /v1/health HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        assert data.startswith(b"HTTP/1."), data
        assert not (tmp_path / "other.sock").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_uninstall_removes_what_install_put(root):
    p = sh(["make", "-C", str(REPO), "uninstall", "BUILD=" + str(BUILD)], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not (root / PREFIX / "bin/airlock").exists()
    assert not (root / PREFIX / "share/man/man1/airlock-run.1").exists()
    assert not (root / PREFIX / "lib/systemd/system/airlockd.service").exists()
