# SPDX-License-Identifier: Apache-2.0
"""Review at the host's edge: what the agent left in its upper layer is
hostile input. Capture must not fill the host's disk (hard links, sparse
files), and the diff must show what accepting does without letting names or
bytes hide anything from the reviewer."""

import json
import os
import pathlib
import pty
import re
import select
import subprocess
import time

import pytest


def _workspace(airlock):
    ws = airlock.make_dir()
    (ws / "keep.txt").write_text("keep\n")
    (ws / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    airlock.chown(ws)
    return ws


def _policy(airlock, disk):
    pol = airlock.make_dir("policy") / "p.json"
    pol.write_text(json.dumps({"limits": {"disk": disk, "fileSize": "4G"}}))
    airlock.chown(pol.parent)
    return pol


def _state_root(airlock):
    if airlock.user:
        return pathlib.Path(airlock.user.pw_dir) / ".local/state/airlock"
    if os.geteuid() == 0:
        return pathlib.Path("/var/lib/airlock")
    return pathlib.Path(os.environ["HOME"]) / ".local/state/airlock"


def _du(path):
    """Bytes the file system spent on path, hard links counted once."""
    out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return int(out.split()[0])


def _run(airlock, ws, script, *opts):
    audit = airlock.make_dir("audit") / "audit.jsonl"
    p = airlock.run(["run", "-q", "--review", "--audit", audit, "-w", ws, *opts, "--",
                     "/bin/sh", "-c", script], check_setup=False, timeout=60)
    m = re.search(r"airlock accept (\w+)", p.stderr)
    return p, (m.group(1) if m else None), audit


def _events(audit):
    try:
        lines = pathlib.Path(audit).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(x) for x in lines if x.strip()]


def _sandbox_dirs(airlock):
    d = _state_root(airlock) / "sandboxes"
    return set(os.listdir(d)) if d.exists() else set()


# ---- A: host disk ----


def test_hardlink_bomb_is_captured_once(airlock):
    """30 names of one 12 MB file under limits.disk=16M: the capture holds
    the content once, and accepting makes links, not 30 copies."""
    ws = _workspace(airlock)
    pol = _policy(airlock, "16M")
    script = ("dd if=/dev/urandom of=big bs=1M count=12 2>/dev/null; "
              "i=0; while [ $i -lt 30 ]; do ln big link$i; i=$((i+1)); done; ls | wc -l")
    p, sid, _ = _run(airlock, ws, script, "-p", pol)
    assert p.returncode == 0, p.stderr
    assert sid, p.stderr
    assert int(p.stdout.split()[-1]) >= 31
    used = _du(_state_root(airlock) / "sandboxes" / sid)
    assert used <= 17 << 20, f"capture wrote {used} bytes for 12 MB of content"

    d = airlock.run(["diff", sid])
    assert d.returncode == 0, d.stderr
    assert "link29" in d.stdout

    a = airlock.run(["accept", sid])
    assert a.returncode == 0, a.stderr
    st = os.stat(ws / "link7")
    assert st.st_size == 12 << 20
    assert os.stat(ws / "big").st_ino == st.st_ino
    assert _du(ws) <= 17 << 20


def test_capture_over_the_disk_limit_fails_closed(airlock):
    """A sparse file counts at its apparent size: 1 GiB under a 16M limit is
    refused, nothing of the capture is kept, the workspace is untouched and
    the audit says why."""
    ws = _workspace(airlock)
    before = sorted(os.listdir(ws))
    pol = _policy(airlock, "16M")
    old = _sandbox_dirs(airlock)
    p, sid, audit = _run(airlock, ws, "echo x > small.txt; truncate -s 1G huge; echo ok",
                         "-p", pol)
    assert p.stdout.strip() == "ok"
    assert p.returncode == 125, p.stderr
    assert "limits.disk" in p.stderr, p.stderr
    assert sorted(os.listdir(ws)) == before
    # This run's sandbox, if anything of it is left (the audit names it:
    # other tests' sandboxes come and go meanwhile).
    ours = {e["sandbox"] for e in _events(audit) if e.get("sandbox")}
    assert ours, _events(audit)
    new = (_sandbox_dirs(airlock) - old) & ours
    for n in new:
        changes = _state_root(airlock) / "sandboxes" / n / "changes"
        assert not changes.exists() or not os.listdir(changes)
        d = airlock.run(["diff", n])
        assert d.returncode != 0 and "limits.disk" in d.stderr, d.stdout + d.stderr
        a = airlock.run(["accept", n])
        assert a.returncode != 0
    failed = [e for e in _events(audit) if e.get("kind") == "review.failed"]
    assert failed, _events(audit)
    assert "limits.disk" in json.dumps(failed[0])


def test_sparse_file_under_the_limit_stays_sparse(airlock):
    ws = _workspace(airlock)
    pol = _policy(airlock, "16M")
    p, sid, _ = _run(airlock, ws, "truncate -s 8M sparse; echo tail >> sparse", "-p", pol)
    assert p.returncode == 0, p.stderr
    used = _du(_state_root(airlock) / "sandboxes" / sid)
    assert used < 1 << 20, used
    assert airlock.run(["accept", sid]).returncode == 0
    assert os.stat(ws / "sparse").st_size == (8 << 20) + 5


def test_capture_does_not_follow_symlinks(airlock):
    ws = _workspace(airlock)
    p, sid, _ = _run(airlock, ws, "ln -s /etc/passwd pw; ln -s .. up")
    assert p.returncode == 0, p.stderr
    changes = _state_root(airlock) / "sandboxes" / sid / "changes"
    assert os.path.islink(changes / "pw") and os.readlink(changes / "pw") == "/etc/passwd"
    assert os.path.islink(changes / "up")


# ---- B: what the diff shows ----


def _diff_on_tty(airlock, sid):
    """`airlock diff` with its stdout on a terminal; returns the raw bytes."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(airlock.cmd(["diff", sid]), stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1)
        if not r:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=10)
    os.close(master)
    assert proc.returncode == 0, proc.stderr.read()
    return out


def test_diff_escapes_c1_controls_on_a_terminal(airlock):
    ws = _workspace(airlock)
    script = r"printf 'raw \233[31m red\nenc \302\233[2J clear\nok \303\251t\303\251\n' > c1.txt"
    p, sid, _ = _run(airlock, ws, script)
    assert p.returncode == 0, p.stderr
    out = _diff_on_tty(airlock, sid)
    assert b"c1.txt" in out
    assert b"\x9b" not in out.replace("é".encode(), b""), out
    assert b"\xc2\x9b" not in out
    assert b"<U+009B>" in out
    assert b"\\x9b" in out
    assert "été".encode() in out  # ordinary UTF-8 is left alone
    # Piped, the bytes are as the agent wrote them, for git apply.
    d = subprocess.run(airlock.cmd(["diff", sid]), capture_output=True, timeout=30)
    assert d.returncode == 0, d.stderr
    assert b"raw \x9b[31m red" in d.stdout and b"enc \xc2\x9b[2J" in d.stdout


HIDDEN = ["a.txt\u200b", "b\u202etxt.exe", "c\u2066.txt", "d.txt\ufeff", "e\u00ad.txt",
          "f\U000e0041.txt", "g.txt\ufe0f"]


def _sh_quote_bytes(name):
    return "".join("\\%03o" % b for b in name.encode())


def test_hidden_names_flagged_and_held_back(airlock):
    ws = _workspace(airlock)
    script = "echo plain > plain.txt; " + "; ".join(
        f"echo hidden > \"$(printf '{_sh_quote_bytes(n)}')\"" for n in HIDDEN)
    script += "; printf x > \"$(printf 'ctl\\302\\233.txt')\""
    p, sid, _ = _run(airlock, ws, script)
    assert p.returncode == 0, p.stderr
    d = airlock.run(["diff", sid])
    assert d.returncode == 0, d.stderr
    out = d.stdout
    for n in HIDDEN:
        assert n not in out, f"{n!r} shown as it is"
    assert "a.txt\\u200b" in out or "a.txt\\342\\200\\213" in out
    assert out.count("hidden characters") >= len(HIDDEN)
    assert "U+200B" in out and "U+202E" in out and "U+E0041" in out
    # A C1 control in a name is never captured.
    assert re.search(r"Not captured: ctl\\xc2\\x9b\.txt", out), out

    a = airlock.run(["accept", sid])
    assert a.returncode == 0, a.stderr
    assert (ws / "plain.txt").exists()
    assert sorted(os.listdir(ws)) == ["keep.txt", "plain.txt", "tool.sh"]
    assert "hidden characters" in a.stdout + a.stderr

    a = airlock.run(["accept", sid, HIDDEN[0]])
    assert a.returncode == 0, a.stderr
    assert (ws / HIDDEN[0]).read_text() == "hidden\n"
    assert not (ws / HIDDEN[1]).exists()


def test_new_directories_and_modes_shown(airlock):
    ws = _workspace(airlock)
    script = ("mkdir -m 0777 open; mkdir -p deep/er; chmod 0700 deep/er; chmod +x tool.sh; "
              "chmod 0600 keep.txt")
    p, sid, _ = _run(airlock, ws, script)
    assert p.returncode == 0, p.stderr
    out = airlock.run(["diff", sid]).stdout
    assert "new directory open/ (mode 040777" in out, out
    assert "deep/er" in out and "040700" in out, out
    assert re.search(r"a/tool\.sh.*\nold mode 100644\nnew mode 100755", out), out
    assert re.search(r"a/keep\.txt.*\nold mode 100644\nnew mode 100600", out), out


def test_accept_never_applies_setid_bits(airlock):
    ws = _workspace(airlock)
    script = ("cp /bin/true suid; chmod 4755 suid; chmod 2755 tool.sh; mkdir sdir; "
              "chmod 3777 sdir; stat -c '%a' suid tool.sh sdir")
    p, sid, _ = _run(airlock, ws, script)
    assert p.returncode == 0, p.stderr
    inside = p.stdout.split()
    out = airlock.run(["diff", sid]).stdout
    if inside and inside[0] == "4755":
        # The sandbox let the bit be set: the diff says so, and that it is dropped.
        assert "setuid" in out, out
    if len(inside) > 2 and inside[2] == "3777":
        assert "sticky" in out or "setgid" in out, out
    a = airlock.run(["accept", sid])
    assert a.returncode == 0, a.stderr
    for name in ("suid", "tool.sh", "sdir"):
        if (ws / name).exists():
            assert os.stat(ws / name).st_mode & 0o7000 == 0, name
