# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: run the real `airlock` binary, as root and as an
ordinary user, against real workspaces."""

import json
import os
import pathlib
import pwd
import shutil
import signal
import subprocess
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
# Relative paths are taken from the repository, whatever the test's cwd.
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
AIRLOCK_BIN = REPO / os.environ.get("AIRLOCK_BIN", BUILD / "src/cli/airlock")
RUNAS = REPO / "tests/runas.sh"
TEST_USER = os.environ.get("AIRLOCK_TEST_USER", "airlock-test")

# Which identities to test as: "root,user" by default.
MODES = [m for m in os.environ.get("AIRLOCK_TEST_MODES", "root,user").split(",") if m]


# Tests signal the programs they start and expect each signal's default
# action; an ignored signal stays ignored across exec, and whatever started
# the suite may have left some ignored (a shell starts background commands
# with SIGINT and SIGQUIT ignored, nohup SIGHUP).
for _sig in (signal.SIGHUP, signal.SIGQUIT):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.SIG_DFL)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Under pytest-xdist (-n), a short base for tmp_path.

    Each worker's tmp_path is BASE/popen-gwN/<test name>: below pytest's
    default base that leaves too little of the 108 bytes a unix socket's
    path may have for a daemon's run directory and its sockets. Set before
    the tmpdir plugin reads it; --basetemp given on the command line wins."""
    if hasattr(config, "workerinput") or config.option.basetemp:
        return
    if getattr(config.option, "numprocesses", None) in (None, 0):
        return
    base = tempfile.mkdtemp(prefix="pt-", dir="/tmp")
    config.option.basetemp = base
    config._airlock_basetemp = base


def pytest_unconfigure(config):
    base = getattr(config, "_airlock_basetemp", None)
    if base:
        shutil.rmtree(base, ignore_errors=True)


# Under pytest-xdist with --dist loadgroup (tests/run-all.sh), each test file
# is one group, run by one worker, so that a module's fixtures are made once.
# The files named here share one group instead, run one after another:
# - microvm: they boot QEMU guests (emulated here, heavy on the CPU), and
#   test_tier_microvm.py checks that no QEMU is left by counting every QEMU
#   on the machine;
# - idranges: their sandboxes take id ranges from root's one pool
#   (/var/lib/airlock/idranges), and test_exec_uid_rootless.py checks that
#   the block a sandbox freed is the next one handed out.
XDIST_SHARED_GROUPS = {
    "microvm": {"test_tier_microvm.py", "test_microvm_limits.py", "test_microvm_spec.py",
                "test_escape_microvm.py", "test_microvm_attacks.py", "test_tier_microvm_api.py"},
    "idranges": {"test_exec_uid.py", "test_exec_confined.py", "test_idrange_attacks.py",
                 "test_volume_users_attacks.py", "test_exec_uid_rootless.py"},
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Before pytest-xdist reads the marks: every test's group."""
    # (A worker has option.dist "no" and option.loadgroup set.)
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        name = item.path.name
        group = next((g for g, files in XDIST_SHARED_GROUPS.items() if name in files), None)
        item.add_marker(pytest.mark.xdist_group(group or item.path.name))


def _ensure_user():
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", TEST_USER], check=True)
        return pwd.getpwnam(TEST_USER)


class Airlock:
    def __init__(self, mode, base):
        self.mode = mode
        self.base = base
        self.user = None
        if mode == "user":
            if os.geteuid() != 0:
                self.user = None  # already an ordinary user
            else:
                self.user = _ensure_user()

    @property
    def rootless(self):
        return self.mode == "user" or os.geteuid() != 0

    def make_dir(self, name="ws"):
        d = pathlib.Path(tempfile.mkdtemp(prefix=name + "-", dir=self.base))
        d.chmod(0o755)
        if self.user:
            os.chown(d, self.user.pw_uid, self.user.pw_gid)
        return d

    def chown(self, path):
        """Give a tree made by the test to the identity airlock runs as."""
        if not self.user:
            return
        for root, dirs, files in os.walk(path):
            os.chown(root, self.user.pw_uid, self.user.pw_gid)
            for f in files:
                os.lchown(os.path.join(root, f), self.user.pw_uid, self.user.pw_gid)

    def cmd(self, args):
        argv = [str(AIRLOCK_BIN)] + [str(a) for a in args]
        if self.user:
            argv = [str(RUNAS), self.user.pw_name] + argv
        return argv

    def run(self, args, cwd=None, timeout=120, input=None, check_setup=True, env=None):
        """Run `airlock ARGS...`; returns CompletedProcess with text output."""
        p = subprocess.run(
            self.cmd(args),
            cwd=str(cwd or self.base),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        if check_setup and p.returncode == 125:
            raise AssertionError(f"sandbox setup failed: {p.stderr.strip()}")
        return p

    def sandbox(self, script, *opts, workspace=None, **kw):
        """Run a shell script inside a sandbox over `workspace`."""
        ws = workspace or self.make_dir()
        return self.run(["run", "-q", "-w", ws, *opts, "--", "/bin/sh", "-c", script], **kw)

    def result(self, args, **kw):
        """Run with --result and return (CompletedProcess, result dict)."""
        rdir = self.make_dir("result")
        rfile = rdir / "result.json"
        p = self.run(["run", "--result", rfile, *args], **kw)
        with open(rfile) as f:
            return p, json.load(f)


@pytest.fixture(scope="session")
def test_base():
    if not AIRLOCK_BIN.exists():
        pytest.skip(f"{AIRLOCK_BIN} is not built (run 'make build')")
    base = pathlib.Path(tempfile.mkdtemp(prefix="airlock-tests-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=MODES)
def airlock(request, test_base):
    mode = request.param
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("needs root")
    if mode == "user" and os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("needs setpriv (util-linux) to run as an ordinary user")
    return Airlock(mode, test_base)


@pytest.fixture
def root_airlock(airlock):
    """`airlock` as root only, for the rules Airlock keeps when it runs as
    root on what other users can change (the other modes skip)."""
    if airlock.rootless:
        pytest.skip("a rule of root's: an ordinary user acts with their own rights")
    return airlock
