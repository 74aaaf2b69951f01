# SPDX-License-Identifier: Apache-2.0
"""The files API works on the host's directory, as root: what the sandbox's
deny list hides inside (the daemon's own secrets file, filesystem.denyRead)
must not be read, listed into a tar, overwritten or removed through it
either. Inside, the same paths are masked."""

import io
import os
import pathlib
import secrets
import tarfile
import tempfile

import pytest

from daemonlib import AirlockError


@pytest.fixture
def setup(make_daemon, daemon_base):
    ws = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=daemon_base))
    os.chmod(ws, 0o755)
    token = f"sk-{secrets.token_hex(8)}"
    sec = ws / "secrets.env"
    sec.write_text(f"API_KEY={token}\n")
    os.chmod(sec, 0o600)
    (ws / "private").mkdir()
    (ws / "private" / "key").write_text("private key\n")
    (ws / "open.txt").write_text("fine\n")
    d = make_daemon("--secrets", str(sec))
    api = d.client(d.admin)
    sb = api.create(sandbox_class="small", workspace=str(ws),
                    policy={"filesystem": {"denyRead": [str(ws / "private")]}})
    yield api, sb["id"], ws, token
    try:
        api.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def refused(f):
    with pytest.raises(AirlockError) as e:
        f()
    assert e.value.status == 403, e.value
    return e.value


def test_denied_paths_stay_hidden_through_the_files_api(setup):
    api, sid, ws, token = setup
    # Inside, the deny list holds.
    r = api.run(sid, ["sh", "-c", "cat /workspace/secrets.env /workspace/private/key; true"])
    assert token.encode() not in r.stdout and b"private key" not in r.stdout
    # The API reads what is not denied ...
    assert api.read_file(sid, "open.txt") == b"fine\n"
    # ... and none of what is.
    refused(lambda: api.read_file(sid, "secrets.env"))
    refused(lambda: api.read_file(sid, "private/key"))
    refused(lambda: api.stat(sid, "private/key"))
    refused(lambda: api.list_files(sid, "private"))
    # Not through a link the agent made either.
    r = api.run(sid, ["sh", "-c", "ln -s secrets.env l1 && ln -s private l2"])
    assert r.exit_code == 0, r.stderr
    refused(lambda: api.read_file(sid, "l1"))
    refused(lambda: api.read_file(sid, "l2/key"))
    # A tar of a directory holding them carries none of them.
    try:
        buf = io.BytesIO()
        api.download_tar(sid, ".", out=buf)
        data = buf.getvalue()
        assert token.encode() not in data and b"private key" not in data
    except AirlockError as e:
        assert e.status == 403
    # Nor may they be replaced, appended to, moved or removed.
    refused(lambda: api.write_file(sid, "secrets.env", b"API_KEY=mine\n"))
    refused(lambda: api.write_file(sid, "private/key", b"x"))
    refused(lambda: api.delete_file(sid, "private", recursive=True))
    refused(lambda: api.rename(sid, "secrets.env", "moved"))
    t = io.BytesIO()
    with tarfile.open(fileobj=t, mode="w") as tf:
        info = tarfile.TarInfo("private/key")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    refused(lambda: api.upload_tar(sid, ".", t.getvalue()))
    # What is not denied still moves, with the usual answers.
    api.rename(sid, "open.txt", "moved.txt")
    assert (ws / "moved.txt").read_text() == "fine\n"
    api.write_file(sid, "other.txt", b"x")
    with pytest.raises(AirlockError) as e:
        api.rename(sid, "other.txt", "moved.txt")
    assert e.value.status == 409
    assert sec_intact(ws, token)
    assert (ws / "private" / "key").read_text() == "private key\n"


def sec_intact(ws, token):
    return (ws / "secrets.env").read_text() == f"API_KEY={token}\n"


def test_a_denied_file_replaced_or_made_later_stays_hidden(make_daemon, daemon_base):
    # The deny set a read built is kept a while; a secrets file the host
    # rotates by rename (a new inode) and a denied path that only appears
    # after that read must be refused all the same.
    ws = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=daemon_base))
    os.chmod(ws, 0o755)
    sec = ws / "secrets.env"
    sec.write_text("API_KEY=old\n")
    os.chmod(sec, 0o600)
    (ws / "open.txt").write_text("fine\n")
    d = make_daemon("--secrets", str(sec))
    api = d.client(d.admin)
    sb = api.create(sandbox_class="small", workspace=str(ws),
                    policy={"filesystem": {"denyRead": [str(ws / "later")]}})
    sid = sb["id"]
    try:
        refused(lambda: api.read_file(sid, "secrets.env"))
        assert api.read_file(sid, "open.txt") == b"fine\n"
        new = ws / "secrets.env.new"
        new.write_text("API_KEY=rotated\n")
        os.chmod(new, 0o600)
        os.rename(new, sec)
        refused(lambda: api.read_file(sid, "secrets.env"))
        (ws / "later").write_text("made after the first read\n")
        refused(lambda: api.read_file(sid, "later"))
        refused(lambda: api.write_file(sid, "later", b"x"))
    finally:
        api.delete(sid)
