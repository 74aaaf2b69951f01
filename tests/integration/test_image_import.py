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
