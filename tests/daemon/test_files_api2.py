# SPDX-License-Identifier: Apache-2.0
"""The files API's second half (issue 15 item 4): mkdir, rename, stat,
exists, list with depth, tar upload and download, streamed reads and writes,
watch; each refuses `..`, paths outside and symbolic links out as the first
half does (test_files_escape.py)."""

import io
import os
import tarfile
import threading
import time

import pytest

from daemonlib import AirlockError

SECRET = "/etc/airlock-test-secret2"


@pytest.fixture
def host_secret():
    with open(SECRET, "w") as f:
        f.write("host secret\n")
    yield SECRET
    os.unlink(SECRET)


@pytest.fixture
def trapped(api, sandbox, host_secret):
    r = api.run(sandbox["id"], ["sh", "-c", """
        set -e
        mkdir -p real/sub/deeper
        echo inside > real/sub/f
        echo deep > real/sub/deeper/g
        ln -s /etc etc-link
        ln -s %s secret-link
        ln -s ../../../../../../etc dotdot-link
        ln -s real/sub inner-link
        mkfifo fifo
        """ % host_secret])
    assert r.exit_code == 0, r.stderr
    return sandbox["id"]


def refused(f, status=403):
    with pytest.raises(AirlockError) as e:
        f()
    assert e.value.status == status, e.value
    return e.value


OUTSIDE = ["../../../etc/passwd", "..", "real/../../x", "/etc/passwd",
           "/workspace/../etc/passwd", "/workspacex/f"]


@pytest.mark.parametrize("path", OUTSIDE)
def test_outside_paths_refused_everywhere(api, trapped, path):
    e = refused(lambda: api.stat(trapped, path))
    assert e.error == "path_refused"
    refused(lambda: api.exists(trapped, path))
    refused(lambda: api.mkdir(trapped, path))
    refused(lambda: api.mkdir(trapped, path, parents=True))
    refused(lambda: api.rename(trapped, "real/sub/f", path))
    refused(lambda: api.rename(trapped, path, "x"))
    refused(lambda: api.list_files(trapped, path, depth=3))


def test_mkdir(api, trapped):
    api.mkdir(trapped, "made")
    assert api.stat(trapped, "made")["type"] == "dir"
    assert refused(lambda: api.mkdir(trapped, "made"), 409).error == "conflict"
    refused(lambda: api.mkdir(trapped, "no/such/parent"), 404)
    api.mkdir(trapped, "a/b/c", parents=True)
    api.mkdir(trapped, "a/b/c", parents=True)  # exists: fine with parents
    r = api.run(trapped, ["stat", "-c", "%U %a", "/workspace/a/b/c"])
    assert r.stdout.split()[1] == b"755"
    # Through links: never.
    for p in ["etc-link/new", "inner-link/new", "dotdot-link/new", "secret-link/x"]:
        assert refused(lambda: api.mkdir(trapped, p, parents=True)).error == "path_refused", p
        assert refused(lambda: api.mkdir(trapped, p)).error == "path_refused", p
    assert not os.path.exists("/etc/new")


def test_rename(api, trapped):
    api.rename(trapped, "real/sub/f", "moved")
    assert api.read_file(trapped, "moved") == b"inside\n"
    assert not api.exists(trapped, "real/sub/f")
    api.write_file(trapped, "other", b"o")
    assert refused(lambda: api.rename(trapped, "moved", "other"), 409).error == "conflict"
    api.rename(trapped, "moved", "other", overwrite=True)
    assert api.read_file(trapped, "other") == b"inside\n"
    # A link is moved as a link, never followed, and nothing moves out.
    api.rename(trapped, "secret-link", "renamed-link")
    assert api.stat(trapped, "renamed-link")["type"] == "symlink"
    assert open(SECRET).read() == "host secret\n"
    for dst in ["etc-link/x", "inner-link/x", "dotdot-link/x"]:
        assert refused(lambda: api.rename(trapped, "other", dst)).error == "path_refused"
    for src in ["etc-link/passwd", "dotdot-link/passwd", "inner-link/f"]:
        assert refused(lambda: api.rename(trapped, src, "stolen")).error == "path_refused"
    assert os.path.exists("/etc/passwd")
    refused(lambda: api.rename(trapped, ".", "x"), 400)


def test_stat_and_exists(api, trapped):
    st = api.stat(trapped, "real/sub/f")
    assert st["type"] == "file" and st["size"] == 7 and st["name"] == "real/sub/f"
    assert api.stat(trapped, "real")["type"] == "dir"
    assert api.stat(trapped, ".")["type"] == "dir"
    link = api.stat(trapped, "etc-link")
    assert link["type"] == "symlink" and link["target"] == "/etc"
    assert api.stat(trapped, "fifo")["type"] == "other"
    assert api.stat(trapped, "inner-link/f")["size"] == 7  # a link that stays inside
    assert refused(lambda: api.stat(trapped, "missing"), 404).error == "not_found"
    assert api.exists(trapped, "real/sub/f") is True
    assert api.exists(trapped, "missing") is False
    assert api.exists(trapped, "real/sub/f/under-a-file") is False
    # A link out is refused, not answered: "exists" would probe the host.
    for p in ["etc-link/passwd", "dotdot-link/passwd", "etc-link/no-such"]:
        assert refused(lambda: api.exists(trapped, p)).error == "path_refused", p
        assert refused(lambda: api.stat(trapped, p)).error == "path_refused", p


def test_list_with_depth(api, trapped):
    one = api.list_files(trapped, "real", depth=1)
    assert [e["path"] for e in one["entries"]] == ["sub"]
    three = api.list_files(trapped, "real", depth=3)
    assert [e["path"] for e in three["entries"]] == [
        "sub", "sub/deeper", "sub/deeper/g", "sub/f"]
    top = api.list_files(trapped, ".", depth=5)
    paths = [e["path"] for e in top["entries"]]
    # Links are listed, never entered.
    assert "etc-link" in paths and not any(p.startswith("etc-link/") for p in paths)
    assert not any(p.startswith("dotdot-link/") or p.startswith("inner-link/") for p in paths)
    refused(lambda: api.list_files(trapped, ".", depth=0), 400)
    refused(lambda: api.list_files(trapped, ".", depth=33), 400)
    refused(lambda: api.list_files(trapped, "etc-link", depth=2))


def test_read_and_write_of_any_size(api, trapped):
    """40 MiB: more than one request carries (16 MiB), streamed both ways."""
    import hashlib
    data = os.urandom(1 << 20) * 40
    r = api.write_file(trapped, "big/blob", data)
    assert r["size"] == len(data)
    # Nothing left behind by the pieces.
    assert [e["name"] for e in api.list_files(trapped, "big")["entries"]] == ["blob"]
    out = io.BytesIO()
    assert api.read_file_to(trapped, "big/blob", out) == len(data)
    assert hashlib.sha256(out.getvalue()).digest() == hashlib.sha256(data).digest()
    assert api.read_file(trapped, "big/blob") == data
    r = api.run(trapped, ["sh", "-c", "sha256sum /workspace/big/blob"])
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_append_follows_no_link(api, trapped, host_secret):
    for p in ["secret-link", "etc-link/passwd", "inner-link/f", "dotdot-link/passwd"]:
        e = refused(lambda: api._put(trapped, p, b"pwned", append="true"))
        assert e.error == "path_refused", p
    assert open(host_secret).read() == "host secret\n"
    refused(lambda: api._put(trapped, "fifo", b"x", append="true"), 400)
    refused(lambda: api._put(trapped, "missing", b"x", append="true"), 404)
    api._put(trapped, "real/sub/f", b"more\n", append="true")
    assert api.read_file(trapped, "real/sub/f") == b"inside\nmore\n"


class Watcher:
    """Collect a watch's events on a thread; the stream is bounded by its own
    timeout."""

    def __init__(self, api, sid, path=".", **kw):
        self.events = []
        self.ready = threading.Event()
        self.gen = api.watch(sid, path, timeout=20, **kw)
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        assert self.ready.wait(10), "the watch did not start"

    def _run(self):
        try:
            for ev in self.gen:
                if ev["type"] == "ready":
                    self.ready.set()
                    continue
                self.events.append(ev)
        except Exception as e:  # noqa: BLE001 - surfaced by wait_for
            self.events.append({"type": "error", "error": repr(e)})

    def wait_for(self, pred, what, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for ev in list(self.events):
                if pred(ev):
                    return ev
            time.sleep(0.05)
        raise AssertionError("no %s event in %r" % (what, self.events))


def test_watch_create_modify_delete_rename(api, trapped):
    w = Watcher(api, trapped)
    r = api.run(trapped, ["sh", "-c", """
        set -e
        echo one > new-file
        echo two >> new-file
        mkdir newdir
        sleep 0.2
        echo deep > newdir/inside
        mv new-file renamed
        rm real/sub/f
        """])
    assert r.exit_code == 0, r.stderr
    w.wait_for(lambda e: e["type"] == "create" and e["path"] == "new-file", "create")
    w.wait_for(lambda e: e["type"] == "modify" and e["path"] == "new-file", "modify")
    w.wait_for(lambda e: e["type"] == "create" and e["path"] == "newdir" and e["dir"], "mkdir")
    # A directory made after the watch began is watched too.
    w.wait_for(lambda e: e["type"] == "create" and e["path"] == "newdir/inside", "nested")
    w.wait_for(lambda e: e["type"] == "rename" and e["from"] == "new-file"
               and e["path"] == "renamed", "rename")
    w.wait_for(lambda e: e["type"] == "delete" and e["path"] == "real/sub/f", "delete")
    # Writes through the API are seen as well.
    api.write_file(trapped, "real/api-file", b"x")
    w.wait_for(lambda e: e["path"] == "real/api-file", "api write")


def test_watch_follows_no_link(api, trapped):
    for p in ["etc-link", "dotdot-link", "inner-link", "../", "/etc"]:
        e = refused(lambda: list(api.watch(trapped, p, timeout=1)))
        assert e.error == "path_refused", p
    refused(lambda: list(api.watch(trapped, "missing", timeout=1)), 404)
    refused(lambda: list(api.watch(trapped, ".", timeout=0)), 400)
    # Nothing under a link to /etc is reported from inside the workspace.
    w = Watcher(api, trapped)
    with open("/etc/airlock-watch-probe", "w") as f:
        f.write("x")
    os.unlink("/etc/airlock-watch-probe")
    api.run(trapped, ["touch", "/workspace/marker"])
    w.wait_for(lambda e: e["path"] == "marker", "marker")
    assert not any("probe" in e.get("path", "") for e in w.events)


def test_watch_ends_at_its_timeout(api, trapped):
    evs = list(api.watch(trapped, ".", timeout=1))
    assert evs[0]["type"] == "ready" and evs[-1] == {"type": "end", "reason": "timeout"}


def _tar(entries, fmt=tarfile.USTAR_FORMAT):
    """entries: (TarInfo kwargs, data or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for kw, data in entries:
            ti = tarfile.TarInfo(kw.pop("name"))
            for k, v in kw.items():
                setattr(ti, k, v)
            if data is not None:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def test_tar_upload_and_download(api, trapped, tmp_path):
    long = "l" * 120 + "/" + "n" * 120 + "/" + "x" * 90  # past ustar's fields: pax
    data = _tar([({"name": "d", "type": tarfile.DIRTYPE, "mode": 0o755}, None),
                 ({"name": "d/a.txt", "mode": 0o640}, b"alpha\n"),
                 ({"name": "./d/e/b.bin", "mode": 0o4755}, os.urandom(70000)),
                 ({"name": long}, b"long name\n")], fmt=tarfile.PAX_FORMAT)
    r = api.upload_tar(trapped, "up", data)
    assert r == {"path": "up", "files": 3, "dirs": 1, "bytes": 6 + 70000 + 10}
    assert api.read_file(trapped, "up/d/a.txt") == b"alpha\n"
    assert api.read_file(trapped, "up/" + long) == b"long name\n"
    # Permission bits only: the set-uid bit is gone.
    assert api.stat(trapped, "up/d/e/b.bin")["mode"] == 0o755
    assert api.stat(trapped, "up/d/a.txt")["mode"] == 0o640
    # And back out, streamed, read by Python's own tar reader.
    out = api.download_tar(trapped, "up")
    with tarfile.open(fileobj=io.BytesIO(out)) as t:
        names = {m.name: m for m in t.getmembers()}
        assert t.extractfile("d/a.txt").read() == b"alpha\n"
        assert t.extractfile(long).read() == b"long name\n"
        assert names["d/e/b.bin"].size == 70000 and names["d"].isdir()
    # Links and special files are left out, never followed.
    whole = api.download_tar(trapped, ".")
    with tarfile.open(fileobj=io.BytesIO(whole)) as t:
        names = t.getnames()
        assert all(t.getmember(n).isreg() or t.getmember(n).isdir() for n in names)
        assert "real/sub/f" in names
        assert not any(n.startswith(("etc-link", "secret-link", "dotdot-link", "inner-link",
                                     "fifo")) for n in names)
    # The helpers round-trip a directory.
    src = tmp_path / "src"
    (src / "s").mkdir(parents=True)
    (src / "s" / "f").write_bytes(b"from host")
    api.upload_dir(trapped, str(src), "helper")
    api.download_dir(trapped, "helper", str(tmp_path / "back"))
    assert (tmp_path / "back" / "s" / "f").read_bytes() == b"from host"


@pytest.mark.parametrize("entry,why", [
    ({"name": "../escape"}, '".." is not allowed'),
    ({"name": "a/../../escape"}, '".." is not allowed'),
    ({"name": "/etc/escape"}, "absolute name"),
    ({"name": "link", "type": tarfile.SYMTYPE, "linkname": "/etc"}, "a symbolic link"),
    ({"name": "in", "type": tarfile.SYMTYPE, "linkname": "real"}, "a symbolic link"),
    ({"name": "hard", "type": tarfile.LNKTYPE, "linkname": "real/sub/f"}, "a hard link"),
    ({"name": "dev", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, "character device"),
    ({"name": "blk", "type": tarfile.BLKTYPE}, "block device"),
    ({"name": "fifo2", "type": tarfile.FIFOTYPE}, "a FIFO"),
])
def test_tar_refuses(api, trapped, entry, why):
    data = _tar([({"name": "first-ok"}, b"1"), (entry, b"x" if "type" not in entry else None)],
                fmt=tarfile.GNU_FORMAT)
    e = refused(lambda: api.upload_tar(trapped, "t", data), 422)
    assert why in e.message, e.message
    # Checked whole first: nothing was written, not even the good entry.
    assert not api.exists(trapped, "t")
    assert not os.path.exists("/etc/escape")


def test_tar_through_links_and_damaged(api, trapped, host_secret):
    data = _tar([({"name": "passwd"}, b"pwned")])
    for p in ["etc-link", "dotdot-link", "inner-link", "secret-link"]:
        e = refused(lambda: api.upload_tar(trapped, p, data))
        assert e.error == "path_refused", p
    # An entry beneath a directory the archive does not make, but a link
    # the sandbox made has: refused on the way (files_write's rule).
    e = refused(lambda: api.upload_tar(trapped, ".", _tar([({"name": "etc-link/x"}, b"1")])))
    assert e.error == "path_refused"
    assert open(host_secret).read() == "host secret\n"
    for p in ["etc-link", "dotdot-link", "inner-link"]:
        refused(lambda: api.download_tar(trapped, p))
    bad = bytearray(data)
    bad[0] ^= 1  # the checksum no longer matches
    e = refused(lambda: api.upload_tar(trapped, "t", bytes(bad)), 400)
    assert "checksum" in e.message
    e = refused(lambda: api.upload_tar(trapped, "t", data[:700]), 400)
    e = refused(lambda: api.upload_tar(trapped, "t", b"not a tar" * 100), 400)
    # A size that runs past the end.
    big = bytearray(_tar([({"name": "f"}, b"x")]))
    big[124:136] = b"77777777777\0"
    s = sum(big[:148]) + 8 * 32 + sum(big[156:512])
    big[148:156] = b"%06o\0 " % s
    e = refused(lambda: api.upload_tar(trapped, "t", bytes(big)), 400)
    assert "past the end" in e.message


def test_exec_uid_cwd_env(api, sandbox):
    sid = sandbox["id"]
    r = api.run(sid, ["sh", "-c", 'id -u; pwd; echo "$GREETING"'], uid=1000,
                cwd="/workspace/..", env={"GREETING": "hi"})
    assert r.exit_code == 0, r.stderr
    assert r.stdout.decode().split() == ["1000", "/", "hi"]
    for bad in (0, 1, 65534, -1, "0", 1.5):
        e = refused(lambda: api.run(sid, ["true"], uid=bad), 400)
        assert e.body["field"] == "uid" and "one user" in e.message
    e = refused(lambda: api.run(sid, ["true"], cwd="relative"), 400)
    assert e.body["field"] == "cwd"
    e = refused(lambda: api.run(sid, ["true"], env={"A=B": "x"}), 400)
    r = api.run(sid, ["pwd"], cwd="/no/such/dir")
    assert r.exit_code != 0 or r.error_code


def test_exec_uid_of_a_fake_root_sandbox(api):
    sb = api.create(sandbox_class="small", policy={"uid": 0})
    try:
        r = api.run(sb["id"], ["id", "-u"], uid=0)
        assert r.stdout == b"0\n"
        refused(lambda: api.run(sb["id"], ["id", "-u"], uid=1000), 400)
    finally:
        api.delete(sb["id"])


def test_watch_follows_a_renamed_directory(api, trapped):
    w = Watcher(api, trapped)
    api.run(trapped, ["sh", "-c", "mv real moved && sleep 0.2 && touch moved/sub/new"])
    w.wait_for(lambda e: e["type"] == "rename" and e["from"] == "real" and e["path"] == "moved"
               and e["dir"], "directory rename")
    w.wait_for(lambda e: e["type"] == "create" and e["path"] == "moved/sub/new", "renamed path")


def test_watches_are_bounded(shared_daemon, trapped):
    """At most 64 at once; the 65th is 429, and closing one frees its place."""
    import socket
    token = shared_daemon.admin
    socks = []
    try:
        def open_watch():
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(str(shared_daemon.socket))
            s.sendall(("GET /v1/sandboxes/%s/files/watch?path=.&timeout=30 HTTP/1.1\r\n"
                       "Host: x\r\nAuthorization: Bearer %s\r\n\r\n" % (trapped, token)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
            return s, head.split(b"\r\n", 1)[0]
        # Watches of earlier tests may still run out their timeouts: open
        # until refused, which must come by the 65th.
        for _ in range(65):
            s, status = open_watch()
            socks.append(s)
            if b" 429 " in status:
                break
            assert b" 200 " in status, status
        assert b" 429 " in status, "65 watches at once"
        socks.pop(0).close()
        time.sleep(0.3)
        s, status = open_watch()
        socks.append(s)
        assert b" 200 " in status, status
    finally:
        for s in socks:
            s.close()


def test_watch_ends_when_its_directory_goes(api, trapped):
    w = Watcher(api, trapped, "real")
    api.run(trapped, ["sh", "-c", "mkdir -p outside && mv real outside/ && touch outside/real/x"])
    end = w.wait_for(lambda e: e["type"] == "end", "end")
    assert end["reason"] == "the directory is gone"
    # Nothing after the move was reported under the old name.
    assert not any(e.get("path") == "real/x" for e in w.events)
    w = Watcher(api, trapped, "outside/real")
    api.run(trapped, ["rm", "-rf", "/workspace/outside"])
    w.wait_for(lambda e: e["type"] == "end", "end after rm")


def test_watch_drops_a_subdirectory_moved_out(api, trapped):
    w = Watcher(api, trapped, "real")
    api.run(trapped, ["sh", "-c", "mv real/sub elsewhere && sleep 0.2 && touch elsewhere/y "
                      "&& touch real/marker"])
    w.wait_for(lambda e: e["type"] == "delete" and e["path"] == "real/sub", "moved out")
    w.wait_for(lambda e: e["path"] == "real/marker", "marker")
    assert not any("y" == e.get("path", "").rsplit("/", 1)[-1] for e in w.events), w.events
