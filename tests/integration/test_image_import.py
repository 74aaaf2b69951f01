# SPDX-License-Identifier: Apache-2.0
"""airlock image import|ls|rm: a hostile tree imported safely (no path
leaves the cache; links kept as links, never followed; no device node; no
set-id bit), content-addressed."""

import json
import os
import pathlib
import stat

from tierlib import import_image, make_rootfs


def cache_dir(airlock):
    if airlock.user:
        return pathlib.Path(airlock.user.pw_dir) / ".local/state/airlock/images"
    return pathlib.Path("/var/lib/airlock/images")


def hostile(root):
    (root / "etc").mkdir(exist_ok=True)
    os.symlink("/etc/shadow", root / "etc/shadow-link")
    os.symlink("../../../../../../etc", root / "up")
    (root / "suid").write_text("#!/bin/sh\n")
    os.chmod(root / "suid", 0o4755)
    os.mkfifo(root / "fifo")
    os.link(root / "etc/os-release", root / "hard")
    if os.geteuid() == 0:
        os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))


def test_hostile_tree_stays_in_cache(airlock):
    root = make_rootfs(airlock, extra=hostile)
    name, iid = import_image(airlock, root)
    try:
        assert len(iid) == 64
        rootfs = cache_dir(airlock) / iid / "rootfs"
        assert os.readlink(rootfs / "etc/shadow-link") == "/etc/shadow"
        assert os.path.islink(rootfs / "up")
        st = os.lstat(rootfs / "suid")
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX)
        assert not os.path.lexists(rootfs / "fifo")
        assert not os.path.lexists(rootfs / "null")
        assert os.lstat(rootfs / "hard").st_nlink == 1  # copied, not linked
        # Inside, the links resolve in the image, never on the host.
        p = airlock.sandbox("cat /etc/shadow-link; ls /up/ | head -3; /suid; echo done",
                            "--tier", "container", "--image", name, timeout=60)
        assert "root:" not in p.stdout and "done" in p.stdout
    finally:
        airlock.run(["image", "rm", name], check_setup=False, timeout=30)


def test_content_addressed_and_rm(airlock):
    root = make_rootfs(airlock)
    name1, id1 = import_image(airlock, root)
    name2, id2 = import_image(airlock, root)
    assert id1 == id2
    p = airlock.run(["image", "ls", "--json"], check_setup=False, timeout=30)
    entry = [e for e in json.loads(p.stdout) if e["id"] == id1][0]
    assert name1 in entry["names"] and name2 in entry["names"]
    assert airlock.run(["image", "rm", name1], check_setup=False).returncode == 0
    assert (cache_dir(airlock) / id1).exists()  # name2 still needs it
    assert airlock.run(["image", "rm", name2], check_setup=False).returncode == 0
    assert not (cache_dir(airlock) / id1).exists()
    p = airlock.run(["image", "rm", name2], check_setup=False)
    assert p.returncode == 3 and "not found" in p.stderr


def test_bad_names_and_sources(airlock):
    p = airlock.run(["image", "import", "/nonexistent", "--name", "x"], check_setup=False)
    assert p.returncode != 0 and "/nonexistent" in p.stderr
    root = airlock.make_dir("img")
    p = airlock.run(["image", "import", root, "--name", "../evil"], check_setup=False)
    assert p.returncode == 2 and "image name" in p.stderr


# Layered archives: whiteouts, links, and entries that try to leave.

import tarfile  # noqa: E402
import subprocess  # noqa: E402

from tierlib import oci_layout, tar_layer  # noqa: E402

LOWER = [
    {"name": "etc", "type": tarfile.DIRTYPE, "mode": 0o755},
    {"name": "etc/os-release", "data": b"ID=layered\n"},
    {"name": "etc/gone", "data": b"x\n"},
    {"name": "opq", "type": tarfile.DIRTYPE, "mode": 0o755},
    {"name": "opq/old", "data": b"old\n"},
    {"name": "suid", "data": b"#!/bin/sh\n", "mode": 0o6755},
    {"name": "lib", "type": tarfile.SYMTYPE, "link": "/usr/lib"},
    {"name": "shadow-link", "type": tarfile.SYMTYPE, "link": "../../../etc/shadow"},
    {"name": "null", "type": tarfile.CHRTYPE},
    {"name": "fifo", "type": tarfile.FIFOTYPE},
]
UPPER = [
    {"name": "etc/.wh.gone"},
    {"name": "opq/.wh..wh..opq"},
    {"name": "opq/new", "data": b"new\n"},
    {"name": "hard", "type": tarfile.LNKTYPE, "link": "etc/os-release"},
]


def check_layered(airlock, iid):
    rootfs = cache_dir(airlock) / iid / "rootfs"
    assert not (rootfs / "etc/gone").exists()  # .wh.gone
    assert sorted(os.listdir(rootfs / "opq")) == ["new"]  # opaque whiteout
    assert not os.lstat(rootfs / "suid").st_mode & 0o7000
    assert os.readlink(rootfs / "lib") == "/usr/lib"
    assert not os.path.lexists(rootfs / "null") and not os.path.lexists(rootfs / "fifo")
    assert (rootfs / "hard").read_text() == "ID=layered\n"
    assert os.lstat(rootfs / "hard").st_nlink == 1


def test_oci_layout_and_docker_archive_same_id(airlock):
    d = airlock.make_dir("oci")
    layout = oci_layout(d / "layout", [tar_layer(LOWER, gz=True), tar_layer(UPPER)])
    da = d / "da"
    (da / "a").mkdir(parents=True)
    (da / "b").mkdir()
    (da / "a/layer.tar").write_bytes(tar_layer(LOWER))
    (da / "b/layer.tar").write_bytes(tar_layer(UPPER))
    (da / "manifest.json").write_text(
        '[{"Config": "c.json", "RepoTags": ["x:1"], "Layers": ["a/layer.tar", "b/layer.tar"]}]')
    subprocess.run(["tar", "-C", da, "-cf", d / "da.tar", "manifest.json", "a", "b"], check=True)
    airlock.chown(d)
    n1, id1 = import_image(airlock, layout)
    n2, id2 = import_image(airlock, d / "da.tar")
    try:
        assert id1 == id2
        check_layered(airlock, id1)
    finally:
        airlock.run(["image", "rm", id1], check_setup=False)


def test_layers_that_try_to_leave_are_refused(airlock):
    d = airlock.make_dir("evil")
    cases = {
        "dotdot": [{"name": "a/../../escape", "data": b"x"}],
        "absolute": [{"name": "/escape-abs", "data": b"x"}],
        "hardlink-out": [{"name": "h", "type": tarfile.LNKTYPE, "link": "/etc/passwd"}],
        "hardlink-up": [{"name": "h", "type": tarfile.LNKTYPE, "link": "../../etc/passwd"}],
        "symlinked-parent": [{"name": "d", "type": tarfile.SYMTYPE, "link": "/tmp"},
                             {"name": "d/airlock-escaped", "data": b"x"}],
        "symlinked-parent-up": [{"name": "d", "type": tarfile.SYMTYPE, "link": "../../../../tmp"},
                                {"name": "d/airlock-escaped", "data": b"x"}],
    }
    for name, entries in cases.items():
        (d / f"{name}.tar").write_bytes(tar_layer(entries))
    airlock.chown(d)
    for name in cases:
        p = airlock.run(["image", "import", d / f"{name}.tar", "--name", "evil-" + name],
                        check_setup=False, timeout=30)
        assert p.returncode != 0, (name, p.stderr)
        assert "airlock: image:" in p.stderr, p.stderr
    assert not os.path.exists("/tmp/airlock-escaped")
    assert not os.path.exists("/escape-abs") and not os.path.exists("/escape")
    for p in cache_dir(airlock).glob("*/rootfs"):
        assert not (p / "h").exists() or (p / "h").read_text() != open("/etc/passwd").read()
    # A tampered OCI blob is refused: its content must hash to its digest.
    layout = oci_layout(d / "tampered", [tar_layer([{"name": "f", "data": b"ok"}])])
    blobs = sorted((layout / "blobs/sha256").iterdir(), key=lambda p: p.stat().st_size)
    for b in blobs:
        if b.read_bytes()[:1] != b"{":
            b.write_bytes(tar_layer([{"name": "f", "data": b"evil"}]))
    airlock.chown(d)
    p = airlock.run(["image", "import", layout], check_setup=False, timeout=30)
    assert p.returncode != 0 and "does not hash to its digest" in p.stderr, p.stderr


def test_rootfs_tarball_runs_in_container_tier(airlock):
    root = make_rootfs(airlock)
    d = airlock.make_dir("tarball")
    subprocess.run(["tar", "-C", root, "-czf", d / "rootfs.tar.gz", "."], check=True)
    airlock.chown(d)
    name, _ = import_image(airlock, d / "rootfs.tar.gz")
    try:
        p = airlock.sandbox("cat /etc/os-release", "--tier", "container", "--image", name,
                            timeout=60)
        assert p.returncode == 0 and "ID=airlock-test-image" in p.stdout, p.stderr
    finally:
        airlock.run(["image", "rm", name], check_setup=False)
