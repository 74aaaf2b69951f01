# SPDX-License-Identifier: Apache-2.0
"""airlock-runtime follows linux.cgroupsPath (runc's meaning): the
container's processes, the keeper included (the pid its caller is given),
are in the cgroup the spec names in every hierarchy, its limits are written
there, update/pause/ps/delete use it, and it is gone after delete. Needs
root."""

import json
import os
import pathlib
import re
import shutil
import time

import pytest

from test_oci_runtime import (IMAGE, NAMESPACES, RUNTIME, containerd, create,  # noqa: F401
                              env, rt, run_args, spec, state_of, write_spec)

CG = pathlib.Path("/sys/fs/cgroup")


def v1():
    return not (CG / "cgroup.controllers").exists()


def hierarchies():
    """(mount point, own path) of each cgroup hierarchy this process is in."""
    out = []
    for line in open("/proc/self/cgroup").read().splitlines():
        _, ctrls, path = line.split(":", 2)
        if v1() and ctrls:
            mnt = CG / ctrls.split(",")[0].replace("name=", "")
            if (mnt / "cgroup.procs").exists():
                out.append((mnt, path))
        elif not v1() and not ctrls:
            out.append((CG, path))
    return out


def leaf(mnt, spec_path, own="/"):
    base = mnt if spec_path.startswith("/") else mnt / own.lstrip("/")
    return base / spec_path.lstrip("/")


def procs(d):
    return [int(p) for p in (d / "cgroup.procs").read_text().split()]


@pytest.fixture
def parent():
    """A cgroup parent of the test's own, removed (with what is left in it)
    at the end."""
    name = "airlock-oci-test-%d" % os.getpid()
    yield name
    for mnt, _ in hierarchies():
        d = mnt / name
        if d.exists():
            for sub in sorted(d.rglob("*"), key=lambda p: -len(p.parts)):
                if sub.is_dir():
                    try:
                        sub.rmdir()
                    except OSError:
                        pass
            try:
                d.rmdir()
            except OSError:
                pass


def memory_dir(path):
    return leaf(CG / "memory", path) if v1() else leaf(CG, path)


def test_cgroups_path_followed(env, parent):
    path = f"/{parent}/cp1"
    write_spec(env, spec(["/bin/sleep", "30"], linux={
        "namespaces": NAMESPACES, "cgroupsPath": path,
        "resources": {"memory": {"limit": 48 << 20}, "pids": {"limit": 40}}}))
    p = create(env, "cp1")
    assert p.returncode == 0, p.stderr
    # The keeper (the pid the caller is given) is in the named cgroup in
    # every hierarchy, not a cgroup of Airlock's own choosing.
    for mnt, _ in hierarchies():
        d = leaf(mnt, path)
        assert d.is_dir(), d
        assert p.pid in procs(d), (d, procs(d))
    mem = memory_dir(path)
    limit = "memory.limit_in_bytes" if v1() else "memory.max"
    assert (mem / limit).read_text().strip() == str(48 << 20)
    assert rt(env, "start", "cp1").returncode == 0
    # The container's process is there too.
    end = time.time() + 10
    while len(procs(mem)) < 2 and time.time() < end:
        time.sleep(0.05)
    assert len(procs(mem)) >= 2, procs(mem)
    ps = json.loads(rt(env, "ps", "--format", "json", "cp1").stdout)
    assert sorted(ps) == sorted(procs(mem))
    # update and pause act on the named cgroup.
    pids_dir = leaf(CG / "pids", path) if v1() else mem
    assert rt(env, "update", "--resources", "-", "cp1",
              input=json.dumps({"pids": {"limit": 30}})).returncode == 0
    assert (pids_dir / "pids.max").read_text().strip() == "30"
    assert rt(env, "pause", "cp1").returncode == 0
    if v1():
        assert (leaf(CG / "freezer", path) / "freezer.state").read_text().strip() == "FROZEN"
    else:
        assert (mem / "cgroup.freeze").read_text().strip() == "1"
    assert rt(env, "resume", "cp1").returncode == 0
    assert rt(env, "delete", "--force", "cp1").returncode == 0
    for mnt, _ in hierarchies():
        assert not leaf(mnt, path).exists(), leaf(mnt, path)
    assert not (env["state"] / "cp1").exists()


def test_cgroups_path_relative_and_process_end(env, parent):
    """A relative path is beneath the runtime's own cgroup; when the
    process ends the keeper leaves and removes the leaf."""
    rel = f"{parent}/cp2"
    write_spec(env, spec(["/bin/true"], linux={"namespaces": NAMESPACES, "cgroupsPath": rel}))
    p = create(env, "cp2")
    assert p.returncode == 0, p.stderr
    own = dict((str(m), o) for m, o in hierarchies())
    mnt = CG / "memory" if v1() else CG
    d = leaf(mnt, rel, own[str(mnt)])
    assert p.pid in procs(d), d
    assert rt(env, "start", "cp2").returncode == 0
    end = time.time() + 10
    while d.exists() and time.time() < end:
        time.sleep(0.05)
    assert not d.exists(), "the keeper removes the leaf when the process ends"
    # The kernel takes an exiting process out of its cgroup before it is a
    # zombie: the leaf can be gone a moment before the state says stopped.
    while state_of(env, "cp2")["status"] != "stopped" and time.time() < end:
        time.sleep(0.05)
    p = rt(env, "delete", "cp2")
    assert p.returncode == 0, p.stderr
    if str(own[str(mnt)]) not in ("/", ""):
        shutil.rmtree(str(leaf(mnt, parent, own[str(mnt)])), ignore_errors=True)


@pytest.mark.parametrize("bad,needle", [
    ("system.slice:airlock:x", "slice"),
    ("/a/../b", ".."),
    ("/", "names no cgroup"),
    ("/a/./b", "\".\""),
])
def test_cgroups_path_refused(env, bad, needle):
    write_spec(env, spec(["/bin/true"], linux={"namespaces": NAMESPACES, "cgroupsPath": bad}))
    p = create(env, "bad")
    assert p.returncode != 0 and needle in p.stderr, p.stderr
    assert not (env["state"] / "bad").exists()


def test_cgroups_path_existing_refused(env, parent):
    """Airlock makes the container's cgroup: it does not join another's
    (whose limits and members it does not own)."""
    mnt = CG / "memory" if v1() else CG
    (mnt / parent / "taken").mkdir(parents=True)
    write_spec(env, spec(["/bin/true"], linux={"namespaces": NAMESPACES,
                                               "cgroupsPath": f"/{parent}/taken"}))
    p = create(env, "tk")
    assert p.returncode != 0 and "exists" in p.stderr, p.stderr
    assert (mnt / parent / "taken").exists()
    (mnt / parent / "taken").rmdir()
    # Nothing it made is left in the other hierarchies.
    for m, _ in hierarchies():
        assert not (m / parent / "taken").exists() or m == mnt


def test_containerd_cgroup_is_the_named_one(env, containerd):
    """ctr run: containerd's default cgroupsPath (/<namespace>/<id>) holds
    the task's pid, with the memory limit, and goes with the container."""
    cid = "cg1"
    a = run_args(cid, "/bin/sleep", "60", detach=True)
    a.insert(a.index("run") + 1, "--memory-limit=67108864")
    containerd(*a)
    path = f"/{containerd.ns}/{cid}"
    try:
        pid = None
        for line in containerd("task", "ls").stdout.splitlines()[1:]:
            f = line.split()
            if f and f[0] == cid:
                pid = int(f[1])
        assert pid, containerd("task", "ls").stdout
        mem = memory_dir(path)
        assert pid in procs(mem), (mem, procs(mem))
        limit = "memory.limit_in_bytes" if v1() else "memory.max"
        assert (mem / limit).read_text().strip() == "67108864"
        # containerd's view of the task is that cgroup: its metrics carry
        # the limit.
        m = containerd("task", "metrics", cid, check=False)
        assert re.search(r"memory\.(limit_in_bytes|max)\s+67108864", m.stdout) or \
            (not v1() and "67108864" in m.stdout), (m.stdout, m.stderr)
        containerd("task", "kill", "--signal", "SIGKILL", cid)
        end = time.time() + 10
        while "STOPPED" not in containerd("task", "ls").stdout and time.time() < end:
            time.sleep(0.1)
        containerd("task", "delete", cid)
        containerd("container", "rm", cid)
        for mnt, _ in hierarchies():
            assert not leaf(mnt, path).exists(), leaf(mnt, path)
    finally:
        for mnt, _ in hierarchies():
            for d in (leaf(mnt, path), mnt / containerd.ns):
                try:
                    d.rmdir()
                except OSError:
                    pass


def test_kill_all_empties_the_named_cgroup(env, parent):
    """kill --all KILL: every process of the named cgroup goes at once, and
    the leaf with them."""
    path = f"/{parent}/cp3"
    write_spec(env, spec(["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"],
                         linux={"namespaces": NAMESPACES, "cgroupsPath": path}))
    p = create(env, "cp3")
    assert p.returncode == 0, p.stderr
    assert rt(env, "start", "cp3").returncode == 0
    mem = memory_dir(path)
    end = time.time() + 10
    while len(procs(mem)) < 4 and time.time() < end:
        time.sleep(0.05)
    members = procs(mem)
    assert len(members) >= 4, members
    assert rt(env, "kill", "--all", "cp3", "KILL").returncode == 0
    end = time.time() + 10
    while mem.exists() and time.time() < end:
        time.sleep(0.05)
    assert not mem.exists()
    for q in members:
        assert not os.path.exists(f"/proc/{q}/cgroup") or \
            open(f"/proc/{q}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", q
    assert rt(env, "delete", "cp3").returncode == 0
