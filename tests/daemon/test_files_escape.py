# SPDX-License-Identifier: Apache-2.0
"""The files API stays beneath the workspace: symbolic links the sandbox
makes, `..`, absolute paths and special files lead nowhere else."""

import pytest

from daemonlib import AirlockError

SECRET = "/etc/airlock-test-secret"


@pytest.fixture
def host_secret():
    with open(SECRET, "w") as f:
        f.write("host secret\n")
    yield SECRET
    import os
    os.unlink(SECRET)


@pytest.fixture
def trapped(api, sandbox, host_secret):
    """A workspace the sandbox has filled with traps."""
    r = api.run(sandbox["id"], ["sh", "-c", """
        set -e
        mkdir -p real/sub
        echo inside > real/sub/f
        ln -s /etc etc-link
        ln -s %s secret-link
        ln -s ../../../../../../etc dotdot-link
        ln -s real/sub inner-link
        ln -s /workspace/real/sub/f abs-inner
        mkfifo fifo
        """ % host_secret])
    assert r.exit_code == 0, r.stderr
    return sandbox["id"]


def refused(f, status=403):
    with pytest.raises(AirlockError) as e:
        f()
    assert e.value.status == status, e.value
    return e.value


@pytest.mark.parametrize("path", [
    "../../../etc/passwd", "..", "real/../../x", "/etc/passwd", "/workspace/../etc/passwd",
    "/workspacex/f",
])
def test_dotdot_and_outside_paths_are_refused(api, trapped, path):
    e = refused(lambda: api.read_file(trapped, path))
    assert e.error == "path_refused" and e.body["field"] == "path"
    refused(lambda: api.write_file(trapped, path, b"x"))
    refused(lambda: api.delete_file(trapped, path))
    refused(lambda: api.list_files(trapped, path))


@pytest.mark.parametrize("path", [
    "secret-link", "etc-link/passwd", "etc-link/airlock-test-secret", "dotdot-link/passwd",
])
def test_symlinks_out_are_refused_for_reading(api, trapped, path):
    e = refused(lambda: api.read_file(trapped, path))
    assert e.error == "path_refused"
    assert b"host secret" not in str(e.body).encode()


def test_listing_through_a_symlink_out_is_refused(api, trapped):
    refused(lambda: api.list_files(trapped, "etc-link"))
    refused(lambda: api.list_files(trapped, "dotdot-link"))


def test_writes_follow_no_symlink(api, trapped, host_secret):
    for path in ["secret-link", "etc-link/new-file", "inner-link/f", "inner-link/new",
                 "abs-inner"]:
        e = refused(lambda: api.write_file(trapped, path, b"pwned"))
        assert e.error == "path_refused", path
    with open(host_secret) as f:
        assert f.read() == "host secret\n"
    import os
    assert not os.path.exists("/etc/new-file")
    # The link itself can be removed: that does not follow it.
    api.delete_file(trapped, "secret-link")
    assert os.path.exists(host_secret)


def test_symlinks_that_stay_inside_can_be_read(api, trapped):
    assert api.read_file(trapped, "inner-link/f") == b"inside\n"
    entries = {e["name"]: e["type"] for e in api.list_files(trapped)["entries"]}
    assert entries["etc-link"] == "symlink" and entries["real"] == "dir"
    # An absolute link means /workspace inside, but / on the host: refused.
    refused(lambda: api.read_file(trapped, "abs-inner"))


def test_special_files_do_not_hang_the_daemon(api, trapped):
    e = refused(lambda: api.read_file(trapped, "fifo"), status=400)
    assert "regular file" in e.message
    refused(lambda: api.write_file(trapped, "fifo", b"x"), status=400)
    refused(lambda: api.read_file(trapped, "real"), status=400)
    assert api.health()["ok"]


def test_a_symlink_swapped_in_for_a_directory(api, trapped):
    """A directory the client writes into turns into a link to /etc."""
    api.write_file(trapped, "swap/a", b"1")
    r = api.run(trapped, ["sh", "-c", "rm -rf swap && ln -s /etc swap"])
    assert r.exit_code == 0
    refused(lambda: api.write_file(trapped, "swap/b", b"2"))
    import os
    assert not os.path.exists("/etc/b")
