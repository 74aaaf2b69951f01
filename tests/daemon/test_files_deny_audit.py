# SPDX-License-Identifier: Apache-2.0
"""A change through the files API that the sandbox's deny list refuses is
written to the audit log as a refusal (api.file_refused), never as the
change it would have been; the directory is made from the one checked."""

import io
import os
import pathlib
import tarfile
import tempfile

import pytest

from daemonlib import AirlockError


@pytest.fixture
def setup(make_daemon, daemon_base):
    ws = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=daemon_base))
    os.chmod(ws, 0o755)
    (ws / "private").mkdir()
    (ws / "private" / "key").write_text("private key\n")
    d = make_daemon()
    api = d.client(d.admin)
    sb = api.create(sandbox_class="small", workspace=str(ws),
                    policy={"filesystem": {"denyRead": [str(ws / "private")]}})
    yield api, sb["id"], ws
    try:
        api.delete(sb["id"])
    except (AirlockError, OSError):
        pass


def tar_of(name):
    t = io.BytesIO()
    with tarfile.open(fileobj=t, mode="w") as tf:
        info = tarfile.TarInfo(name)
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    return t.getvalue()


def test_a_refused_change_is_audited_as_refused(setup):
    api, sid, ws = setup
    attempts = [
        ("write", "private/key", lambda: api.write_file(sid, "private/key", b"x")),
        ("delete", "private", lambda: api.delete_file(sid, "private", recursive=True)),
        ("mkdir", "private/new", lambda: api.mkdir(sid, "private/new")),
        ("rename", "private", lambda: api.rename(sid, "private", "moved")),
        ("tar", ".", lambda: api.upload_tar(sid, ".", tar_of("private/key"))),
    ]
    for _, _, f in attempts:
        with pytest.raises(AirlockError) as e:
            f()
        assert e.value.status == 403, e.value
    lines = api.audit(sid)
    done = [l for l in lines if l["kind"] in ("api.file_written", "api.file_deleted",
                                             "api.dir_created", "api.file_renamed",
                                             "api.tar_extracted")]
    assert not done, f"a refused change was recorded as done: {done}"
    refused = {(l.get("op"), l.get("path")) for l in lines if l["kind"] == "api.file_refused"}
    for op, path, _ in attempts:
        assert (op, path) in refused, (op, path, refused)
    assert all(l.get("grant") == "admin" for l in lines if l["kind"] == "api.file_refused")
    assert (ws / "private" / "key").read_text() == "private key\n"
    assert not (ws / "private" / "new").exists()
    # What is allowed is still made, and recorded as made.
    api.mkdir(sid, "a/b", parents=True)
    assert (ws / "a" / "b").is_dir()
    assert any(l["kind"] == "api.dir_created" and l.get("path") == "a/b" for l in api.audit(sid))
