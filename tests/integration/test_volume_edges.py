# SPDX-License-Identifier: Apache-2.0
"""Attacks through a volume the agent shapes: what one sandbox leaves in a
volume (set-id files, capability xattrs, device nodes) gives nothing to the
next sandbox that mounts it, whatever that one's settings."""

import uuid

import pytest


@pytest.fixture
def vol(airlock):
    if airlock.rootless:
        pytest.skip("volumes need root")
    name = "t-" + uuid.uuid4().hex[:12]
    p = airlock.run(["volume", "create", name, "--size", "16M"], timeout=60)
    assert p.returncode == 0, p.stderr
    yield name
    airlock.run(["volume", "rm", name], timeout=30)


def test_volume_mount_is_nosuid_nodev_inside_the_sandbox(airlock, vol):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-T", "-w", ws, "--volume", "%s:/data" % vol, "--",
                     "/bin/sh", "-c",
                     "grep ' /data ' /proc/self/mountinfo; "
                     "mount -o remount,suid,dev /data 2>&1 && echo REMOUNTED; "
                     "mount -o remount,bind,suid /data 2>&1 && echo REMOUNTED; "
                     "grep ' /data ' /proc/self/mountinfo"], timeout=60)
    assert p.returncode in (0, 1), p.stderr
    lines = [l for l in p.stdout.splitlines() if " /data " in l]
    assert lines, p.stdout + p.stderr
    for l in lines:
        opts = l.split()[5].split(",")
        assert "nosuid" in opts and "nodev" in opts, l
    assert "REMOUNTED" not in p.stdout, p.stdout


def test_set_id_file_left_in_a_volume_gives_no_privilege(airlock, vol):
    """A set-uid copy of a program the first sandbox leaves on the volume
    does not run with another identity in a second one."""
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-T", "-w", ws, "--uid", "0", "--volume", "%s:/data" % vol,
                     "--", "/bin/sh", "-c",
                     "cp /usr/bin/id /data/id && chmod 6755 /data/id; ls -ln /data/id; "
                     "mknod /data/null c 1 3 2>&1; echo MADE"], timeout=60)
    assert "MADE" in p.stdout, p.stdout + p.stderr
    p = airlock.run(["run", "-q", "-T", "-w", ws, "--uid", "1000", "--volume",
                     "%s:/data" % vol, "--", "/bin/sh", "-c", "/data/id -u; /data/id -ru; stat -c MODE=%a /data/id; "
                     "test -c /data/null && (echo x > /data/null && echo DEV-WORKS) ; true"],
                    timeout=60)
    ids = p.stdout.split()
    assert len(ids) >= 3 and ids[0] == ids[1] == "1000", p.stdout + p.stderr
    # Refused when made (seccomp), and not honoured if it were (nosuid).
    assert ids[2] == "MODE=755", p.stdout
    assert "DEV-WORKS" not in p.stdout, p.stdout
