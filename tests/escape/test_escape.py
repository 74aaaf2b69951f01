# SPDX-License-Identifier: Apache-2.0
"""The escape suite: every case of the escape probe (tests/escape/probe.c),
run inside a real sandbox, as root and as an ordinary user. The probe makes
one attempt per run and exits 0 when it was blocked, 1 when it got out.

The `airlock` fixture (tests/conftest.py) supplies the binary, the identities
and the workspaces. The probe is found through AIRLOCK_ESCAPE_PROBE, or in
the build directory (AIRLOCK_BUILD, default <repo>/build)."""

import os
import pathlib
import socket
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
PROBE = REPO / os.environ.get("AIRLOCK_ESCAPE_PROBE", BUILD / "tests/escape/escape-probe")
# Where the probe is bound inside the sandbox. It must be a path whose mount
# point the sandbox can create: a file inside a read-only system directory
# (such as /opt/probe) is not one.
PROBE_DST = os.environ.get("AIRLOCK_ESCAPE_PROBE_DST", "/probe")

# Every case of `escape-probe --list`, in its order; test_case_list_matches
# keeps the two in step.
CASES = [
    "read-shadow",
    "read-ssh-key",
    "read-credentials",
    "read-host-keys",
    "proc-root-escape",
    "symlink-escape",
    "hardlink-escape",
    "write-usr",
    "write-etc",
    "write-root-fs",
    "write-proc-sys",
    "sysrq-trigger",
    "write-sys",
    "write-git-hooks",
    "modify-git-config",
    "replace-git-dir",
    "mknod",
    "disk-fill",
    "mount-tmpfs",
    "mount-proc",
    "mount-cgroup",
    "remount-rw",
    "umount-workspace",
    "umount-mask",
    "pivot-root",
    "new-mount-api",
    "chroot-escape",
    "unshare-user",
    "unshare-net",
    "unshare-mount",
    "clone-newuser",
    "clone3",
    "setns",
    "ptrace-pid1",
    "ptrace-traceme",
    "process-vm-readv",
    "host-pid",
    "fork-bomb",
    "memory-bomb",
    "keyctl",
    "add-key",
    "bpf",
    "perf-event-open",
    "userfaultfd",
    "io-uring",
    "kernel-module",
    "kexec",
    "reboot",
    "open-by-handle",
    "personality",
    "x32-abi",
    "i386-abi",
    "tiocsti",
    "tiocsti-highbits",
    "tioclinux",
    "dev-mem",
    "dev-block",
    "cgroup-escape",
    "raw-socket",
    "packet-socket",
    "vsock",
    "netlink-other",
    "net-ifaces",
    "reach-host-loopback",
    "reach-metadata",
    "reach-internet",
    "caps-check",
    "no-new-privs",
    "seccomp-mode",
    "setuid-0",
    "leaked-fds",
    "env-secrets",
]

# Extra `airlock run` options per case: the resource cases get the limits
# they are meant to run into.
OPTIONS = {
    "fork-bomb": ["--pids", "64", "--memory", "512M"],
    "memory-bomb": ["--memory", "256M", "--pids", "64"],
    # Enough memory that the size of /tmp, not the memory limit its pages
    # are charged to, is what stops the writer.
    "disk-fill": ["--memory", "1536M", "--timeout", "120"],
}

# Cases the sandbox may stop by killing the probe on a limit (exit 137,
# oom_killed) instead of letting it see a refusal; that is blocked too.
KILLED_IS_BLOCKED = {"memory-bomb", "disk-fill", "fork-bomb"}

# Escapes that work today, each with what it takes to close it. They are
# strict: the day one is closed, its test fails until it leaves this list.
KNOWN_GAPS = {}

HOOK = "#!/bin/sh\nexit 0\n"
GIT_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"


def _probe():
    if not PROBE.exists():
        pytest.skip(f"{PROBE} is not built (ninja -C {BUILD})")
    return PROBE


def _workspace(airlock):
    """A workspace with a .git holding a hook and a config, as the cases
    about git expect; the probe itself creates nothing there."""
    ws = airlock.make_dir("escape-ws")
    hooks = ws / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(HOOK)
    (hooks / "pre-commit").chmod(0o755)
    (ws / ".git" / "config").write_text(GIT_CONFIG)
    airlock.chown(ws)
    return ws


def _git_intact(ws):
    git = ws / ".git"
    assert git.is_dir() and not git.is_symlink(), ".git was replaced"
    assert sorted(p.name for p in (git / "hooks").iterdir()) == ["pre-commit"], "hooks changed"
    assert (git / "hooks" / "pre-commit").read_text() == HOOK, "a hook changed"
    assert (git / "config").read_text() == GIT_CONFIG, ".git/config changed"


class _Listeners:
    """Listening sockets on the host's loopback (IPv4 and, where available,
    IPv6): what reach-host-loopback must not be able to connect to."""

    def __init__(self):
        self.socks = []
        for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            try:
                s = socket.socket(family, socket.SOCK_STREAM)
                s.bind((addr, 0))
                s.listen(16)
                self.socks.append(s)
            except OSError:
                pass

    @property
    def ports(self):
        return [str(s.getsockname()[1]) for s in self.socks]

    def close(self):
        for s in self.socks:
            s.close()


def _run_probe(airlock, case, args=()):
    probe = _probe()
    ws = _workspace(airlock)
    argv = ["run", "-q", "-w", ws, "--timeout", "60", *OPTIONS.get(case, []),
            "--ro", f"{probe}:{PROBE_DST}", "--", PROBE_DST, case, *args]
    p = airlock.run(argv, timeout=300)
    return p, ws


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[c]))
        if c in KNOWN_GAPS
        else c
        for c in CASES
    ],
)
def test_escape(airlock, case):
    listeners = _Listeners() if case == "reach-host-loopback" else None
    try:
        args = listeners.ports if listeners else []
        p, ws = _run_probe(airlock, case, args)
    finally:
        if listeners:
            listeners.close()
    report = (p.stdout + p.stderr).strip()
    print(f"exit {p.returncode}: {report}")
    assert "ESCAPED" not in p.stdout, report
    if case in KILLED_IS_BLOCKED and p.returncode == 137:
        pass
    else:
        assert p.returncode == 0, f"exit {p.returncode}: {report}"
        assert p.stdout.startswith(case + ": "), report
    _git_intact(ws)


def test_case_list_matches():
    p = subprocess.run([str(_probe()), "--list"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    assert p.stdout.split() == CASES


def test_usage_errors():
    probe = str(_probe())
    assert subprocess.run([probe], capture_output=True, timeout=30).returncode == 2
    p = subprocess.run([probe, "no-such-case"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "no-such-case" in p.stderr


def _host_status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split()[1]
    return None


def test_probe_sees_an_unconfined_process():
    """The probe must be able to say ESCAPED: outside any sandbox, this
    process has no seccomp filter."""
    if _host_status("Seccomp") != "0":
        pytest.skip("the test runner itself runs under seccomp")
    p = subprocess.run([str(_probe()), "seccomp-mode"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1, p.stdout
    assert "ESCAPED" in p.stdout
