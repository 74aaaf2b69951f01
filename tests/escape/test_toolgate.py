# SPDX-License-Identifier: Apache-2.0
"""The tool gateway's endpoint is a door to the gateway and to nothing else.

Each case is an attempt from inside a real sandbox (as root and as an
ordinary user; with the default uid inside and with --uid 0) to use
/run/airlock for more than calling allowed tools: to write there, replace
the client or the socket, remount or unmount the endpoint, see the host's
own /run/airlock, pass the gateway descriptors or bytes it does not expect.
The verdict is what the host sees: the audit log, the gateway still
answering, and the endpoint unchanged."""

import json

import pytest

ATTEMPTS = r"""
import ctypes, errno, json, os, socket, array
libc = ctypes.CDLL(None, use_errno=True)
out = {}

def try_(name, f):
    try:
        f()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))

def sysmount(src, tgt, fstype, flags):
    r = libc.mount(src and src.encode(), tgt.encode(), fstype and fstype.encode(),
                   ctypes.c_ulong(flags), None)
    if r < 0:
        raise OSError(ctypes.get_errno(), "mount")

def sysumount(tgt):
    if libc.umount2(tgt.encode(), 2) < 0:
        raise OSError(ctypes.get_errno(), "umount")

MS_REMOUNT, MS_BIND, MS_RDONLY = 32, 4096, 1
try_("create", lambda: open("/run/airlock/x", "w"))
try_("write-client", lambda: open("/run/airlock/bin/airlock-tool", "r+b"))
try_("unlink-socket", lambda: os.unlink("/run/airlock/tool.sock"))
try_("rename-socket", lambda: os.rename("/run/airlock/tool.sock", "/run/airlock/t"))
try_("chmod-socket", lambda: os.chmod("/run/airlock/tool.sock", 0o666))
try_("remount-rw", lambda: sysmount(None, "/run/airlock", None, MS_REMOUNT | MS_BIND))
try_("mount-over", lambda: sysmount("tmpfs", "/run/airlock", "tmpfs", 0))
try_("umount", lambda: sysumount("/run/airlock"))
try_("umount-client", lambda: sysumount("/run/airlock/bin/airlock-tool"))

def bind_own():
    s = socket.socket(socket.AF_UNIX)
    s.bind("/run/airlock/evil.sock")
try_("bind-own", bind_own)

# Descriptors passed to the gateway, then a line past its limit: it
# answers or closes, and takes nothing.
def pass_fds():
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["AIRLOCK_TOOL_SOCKET"])
    fds = [os.open("/workspace", os.O_RDONLY), os.open("/proc/self/ns/mnt", os.O_RDONLY)]
    line = json.dumps({"runId": os.environ["AIRLOCK_RUN_ID"], "callId": "f",
                       "tool": "core.time", "args": {}}).encode() + b"\n"
    s.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    out["fd-answer"] = json.loads(s.makefile("rb").readline())["ok"]
try_("pass-fds", pass_fds)

def huge():
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["AIRLOCK_TOOL_SOCKET"])
    s.settimeout(20)
    try:
        s.sendall(b"{" + b" " * (2 << 20))
        s.sendall(b"}\n")
    except OSError:
        pass
    try:
        data = s.recv(65536)
    except OSError:
        data = b""
    out["huge-answer"] = data[:200].decode(errors="replace")
try_("huge", huge)

print(json.dumps(out))
"""

REFUSED = {"create", "write-client", "unlink-socket", "rename-socket", "chmod-socket",
           "remount-rw", "mount-over", "umount", "umount-client", "bind-own"}


def _audit(airlock):
    return airlock.make_dir("audit") / "audit.jsonl"


@pytest.mark.parametrize("uid", [[], ["--uid", "0"]], ids=["agent", "uid0"])
def test_endpoint_cannot_be_changed_or_bypassed(airlock, uid):
    ws = airlock.make_dir()
    (ws / "attempts.py").write_text(ATTEMPTS)
    airlock.chown(ws)
    log = _audit(airlock)
    p = airlock.sandbox("python3 /workspace/attempts.py; "
                        "find /run/airlock | sort | tr '\\n' ' '; echo; "
                        "airlock-tool call core.time >/dev/null && echo still-answers",
                        "--tool", "core.time", "--audit", log, *uid, workspace=ws)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    out = json.loads(lines[0])
    allowed = sorted(k for k in REFUSED if out.get(k) == "ok")
    assert not allowed, out
    assert out.get("fd-answer") is True, out
    assert "still-answers" in lines, p.stdout
    assert lines[1].split() == ["/run/airlock", "/run/airlock/bin",
                                "/run/airlock/bin/airlock-tool", "/run/airlock/tool.sock"], lines
    # The host's log: only its own kinds, and a chain that verifies.
    events = [json.loads(line) for line in open(log)]
    assert {e["kind"] for e in events} <= {"sandbox.created", "process.started",
                                           "process.ended", "sandbox.destroyed", "tool.started",
                                           "tool.call"}
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout + v.stderr


def test_host_run_airlock_is_not_shown(airlock):
    """With all of / shown, /run (the host's service sockets, Airlock's own
    control sockets in /run/airlock) is still not: only the endpoint."""
    p = airlock.sandbox("ls -A /run; ls -A /run/airlock", "--read", "host",
                        "--tool", "core.time")
    assert p.stdout.split() == ["airlock", "bin", "tool.sock"], p.stdout


def test_no_socket_no_client_without_tools(airlock):
    p = airlock.sandbox("test -e /run/airlock && echo present; "
                        "env | grep '^AIRLOCK_\\(TOOL\\|RUN\\)' ; true", "--read", "host")
    assert p.stdout.strip() == "", p.stdout
