# SPDX-License-Identifier: Apache-2.0
"""Files the agent writes land on the host: no setuid or setgid bit, file
capability or device node may survive, whatever call made it.

Each case runs a script inside a real sandbox that tries every call that
sets mode bits or creates a node (the chmod family including fchmodat2,
open/openat/creat with O_CREAT or O_TMPFILE, openat2, mkdir/mkdirat,
mknod/mknodat, setxattr of security.capability, io_uring), in a read-write
workspace and in a --rw mount, as root and as an ordinary user, with the
default uid inside and with --uid 0. The verdict is taken ON THE HOST, with
os.stat and os.getxattr after the run: the sandbox's own report is only
used to show that ordinary file work still succeeds."""

import json
import os
import stat

import pytest

SCRIPT = r"""
import ctypes, errno, json, os, stat, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AT_FDCWD = -100
NR = {"creat": 85, "chmod": 90, "fchmod": 91, "mknod": 133, "mkdir": 83,
      "openat": 257, "mkdirat": 258, "mknodat": 259, "fchmodat": 268,
      "renameat2": 316, "io_uring_setup": 425, "openat2": 437, "fchmodat2": 452}
out = {}

def sc(name, *args):
    conv = []
    for a in args:
        if isinstance(a, str):
            conv.append(ctypes.c_char_p(a.encode()))
        elif isinstance(a, int):
            conv.append(ctypes.c_long(a))
        else:
            conv.append(a)
    r = libc.syscall(ctypes.c_long(NR[name]), *conv)
    return 0 if r >= 0 else ctypes.get_errno()

def attempt(key, fn):
    try:
        r = fn()
        out[key] = r if isinstance(r, int) else 0
    except OSError as e:
        out[key] = e.errno

def fresh(name):
    p = os.path.join(D, name)
    with open(p, "wb") as f:
        f.write(open("/usr/bin/id", "rb").read())
    os.chmod(p, 0o755)
    return p

D = sys.argv[1]
os.umask(0o022)
# Ordinary work must keep working.
attempt("plain_create", lambda: fresh("plain"))
attempt("plain_chmod", lambda: os.chmod(os.path.join(D, "plain"), 0o700))
attempt("plain_mkdir", lambda: os.mkdir(os.path.join(D, "plaindir"), 0o755))
attempt("plain_fifo", lambda: os.mkfifo(os.path.join(D, "plainfifo"), 0o644))

# The chmod family.
for bits in (0o4755, 0o2755, 0o6755):
    attempt(f"chmod_{bits:o}", lambda: os.chmod(fresh(f"chmod_{bits:o}"), bits))
attempt("chmod_highbits", lambda: sc("chmod", fresh("chmod_high"), 0x10000 | 0o4755))
def do_fchmod():
    fd = os.open(fresh("fchmod"), os.O_RDONLY)
    try:
        os.fchmod(fd, 0o4755)
    finally:
        os.close(fd)
attempt("fchmod", do_fchmod)
attempt("fchmod_raw", lambda: sc("fchmod", os.open(fresh("fchmod_raw"), os.O_RDONLY), 0o2755))
attempt("fchmodat", lambda: sc("fchmodat", AT_FDCWD, fresh("fchmodat"), 0o4755))
attempt("fchmodat2", lambda: sc("fchmodat2", AT_FDCWD, fresh("fchmodat2"), 0o4755, 0))

# Creating with set-id bits in the mode.
def create(name, mode, flags=os.O_CREAT | os.O_WRONLY):
    fd = os.open(os.path.join(D, name), flags, mode)
    os.close(fd)
attempt("open_creat", lambda: create("open_creat", 0o4755))
attempt("open_creat_sgid", lambda: create("open_creat_sgid", 0o2755))
attempt("creat", lambda: sc("creat", os.path.join(D, "creat"), 0o4755))
attempt("openat", lambda: sc("openat", AT_FDCWD, os.path.join(D, "openat"),
                             os.O_CREAT | os.O_WRONLY, 0o6755))
def openat2():
    how = ctypes.create_string_buffer(struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, 0o4755, 0), 24)
    r = libc.syscall(ctypes.c_long(NR["openat2"]), ctypes.c_long(AT_FDCWD),
                     ctypes.c_char_p(os.path.join(D, "openat2").encode()), how, ctypes.c_long(24))
    return 0 if r >= 0 else ctypes.get_errno()
attempt("openat2", openat2)
def tmpfile():
    fd = os.open(D, os.O_TMPFILE | os.O_WRONLY, 0o4755)
    os.link(f"/proc/self/fd/{fd}", os.path.join(D, "tmpfile"), follow_symlinks=True)
    os.close(fd)
attempt("o_tmpfile", tmpfile)

# Directories.
attempt("mkdir_sgid", lambda: os.mkdir(os.path.join(D, "mkdir_sgid"), 0o2755))
attempt("mkdir_suid", lambda: os.mkdir(os.path.join(D, "mkdir_suid"), 0o4755))
attempt("mkdirat", lambda: sc("mkdirat", AT_FDCWD, os.path.join(D, "mkdirat"), 0o6755))

# Nodes.
attempt("mknod_reg_suid", lambda: os.mknod(os.path.join(D, "mknod_reg"), stat.S_IFREG | 0o4755))
attempt("mknod_fifo_sgid", lambda: os.mknod(os.path.join(D, "mknod_fifo"), stat.S_IFIFO | 0o2644))
attempt("mknod_chr", lambda: os.mknod(os.path.join(D, "mknod_chr"), stat.S_IFCHR | 0o666,
                                      os.makedev(1, 3)))
attempt("mknod_blk", lambda: os.mknod(os.path.join(D, "mknod_blk"), stat.S_IFBLK | 0o666,
                                      os.makedev(7, 0)))
attempt("mknodat_chr", lambda: sc("mknodat", AT_FDCWD, os.path.join(D, "mknodat_chr"),
                                  stat.S_IFCHR | 0o666, os.makedev(1, 5)))
attempt("mknod_raw_suid", lambda: sc("mknod", os.path.join(D, "mknod_raw"),
                                     stat.S_IFREG | 0o4755, 0))

# RENAME_WHITEOUT leaves a 0:0 character device where the old name was.
attempt("rename_whiteout", lambda: sc("renameat2", AT_FDCWD, fresh("whiteout_src"), AT_FDCWD,
                                      os.path.join(D, "whiteout_dst"), 4))

# A file capability (v2: cap_setuid permitted and effective).
def setcap():
    p = fresh("setcap")
    os.setxattr(p, "security.capability",
                struct.pack("<IIIII", 0x02000001, 1 << 7, 0, 0, 0))
attempt("setxattr_cap", setcap)
attempt("io_uring", lambda: sc("io_uring_setup", 8, ctypes.create_string_buffer(120)))
print(json.dumps(out))
"""

# What must never be found on the host afterwards.
FORBIDDEN = stat.S_ISUID | stat.S_ISGID


def scan(root):
    """Every bad file under root, as seen from the host."""
    bad = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if st.st_mode & FORBIDDEN:
                bad.append(f"{p}: mode {oct(st.st_mode)}")
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                bad.append(f"{p}: device node {oct(st.st_mode)}")
            if stat.S_ISREG(st.st_mode):
                try:
                    os.getxattr(p, "security.capability", follow_symlinks=False)
                    bad.append(f"{p}: has security.capability")
                except OSError:
                    pass
    return bad


def run_attempts(airlock, where, uid):
    ws = airlock.make_dir()
    rw = airlock.make_dir("rw")
    script = ws / "attempt.py"
    script.write_text(SCRIPT)
    airlock.chown(ws)
    target = "/workspace" if where == "workspace" else "/out"
    opts = ["--rw", f"{rw}:/out"]
    if uid is not None:
        opts += ["--uid", str(uid)]
    p = airlock.run(
        ["run", "-q", "-w", ws, *opts, "--", "python3", "/workspace/attempt.py", target],
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    return (ws if where == "workspace" else rw), report


@pytest.mark.parametrize("where", ["workspace", "rw-mount"])
@pytest.mark.parametrize("uid", [None, 0], ids=["uid-default", "uid-0"])
def test_no_setid_file_lands_on_host(airlock, where, uid):
    host_dir, report = run_attempts(airlock, where, uid)
    # Ordinary file work is untouched by the filter.
    for key in ("plain_create", "plain_chmod", "plain_mkdir", "plain_fifo"):
        assert report[key] == 0, (key, report)
    assert os.stat(host_dir / "plain").st_mode & 0o7777 == 0o700
    # Verdict on the host.
    bad = scan(host_dir)
    assert not bad, "\n".join(bad) + "\nreport: " + json.dumps(report)
    # Each set-id attempt was refused outright, not silently trimmed.
    for key, val in report.items():
        if key.startswith("plain_"):
            continue
        assert val != 0, f"{key} succeeded inside the sandbox: {report}"
    assert report["openat2"] == 38, report  # ENOSYS: libcs fall back to openat
    assert report["io_uring"] != 0


def test_cp_chmod_4755(airlock):
    """The reported case, as a shell would do it."""
    ws = airlock.make_dir()
    p = airlock.sandbox("cp /usr/bin/id x && chmod 4755 x; chmod 2755 x; chmod u+s x; "
                        "stat -c %a x", workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    st = os.stat(ws / "x")
    assert st.st_mode & FORBIDDEN == 0, oct(st.st_mode)
    assert p.stdout.strip().splitlines()[-1] == "755"


def test_owner_of_agent_files(airlock, test_base):
    """A root caller's workspace is idmapped onto its owner: what the agent
    writes belongs to whoever owns the tree (never to root unless the tree
    is root's), and nothing of it is set-id. Rootless, files are the
    caller's."""
    import pwd
    import subprocess
    import tempfile
    import pathlib

    user = pwd.getpwnam(os.environ.get("AIRLOCK_TEST_USER", "airlock-test"))
    ws = airlock.make_dir()
    p = airlock.sandbox("echo x > f && mkdir d && chmod 4755 f; true", workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    st = os.stat(ws / "f")
    assert st.st_uid == os.stat(ws).st_uid
    assert st.st_mode & FORBIDDEN == 0
    if airlock.rootless:
        assert st.st_uid == user.pw_uid
        return
    # Root caller, a tree owned by an ordinary user: files land as that user.
    if os.geteuid() != 0:
        return
    other = pathlib.Path(tempfile.mkdtemp(prefix="ws-user-", dir=test_base))
    os.chmod(other, 0o755)
    os.chown(other, user.pw_uid, user.pw_gid)
    p = airlock.sandbox("echo x > f && mkdir d", workspace=other, timeout=60)
    assert p.returncode == 0, p.stderr
    for name in ("f", "d"):
        st = os.stat(other / name)
        assert (st.st_uid, st.st_gid) == (user.pw_uid, user.pw_gid), (name, st)
    subprocess.run(["rm", "-rf", str(other)], check=False)
