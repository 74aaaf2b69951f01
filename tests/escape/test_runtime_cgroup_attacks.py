# SPDX-License-Identifier: Apache-2.0
"""Attacks on airlock-runtime's linux.cgroupsPath: a delete acts on the
cgroup its container made, never on another that took the same path
since. Needs root."""

import os
import sys
import pathlib
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "integration"))
from test_oci_runtime import NAMESPACES, create, env, rt, spec, write_spec  # noqa: E402,F401
from test_oci_cgroups import CG, hierarchies, leaf, parent, procs, v1  # noqa: E402,F401

if os.geteuid() != 0:
    pytest.skip("airlock-runtime's cgroupsPath needs root here", allow_module_level=True)


def test_delete_spares_a_cgroup_made_since_at_the_same_path(env, parent):
    path = f"/{parent}/same"
    mem = leaf(CG / "memory", path) if v1() else leaf(CG, path)
    write_spec(env, spec(["/bin/true"], linux={"namespaces": NAMESPACES, "cgroupsPath": path}))
    a = create(env, "old")
    assert a.returncode == 0, a.stderr
    assert rt(env, "start", "old").returncode == 0
    end = time.time() + 10
    while mem.exists() and time.time() < end:
        time.sleep(0.05)
    assert not mem.exists(), "the first container's leaf goes when its process ends"
    # Another container takes the path that is free again.
    write_spec(env, spec(["/bin/sleep", "30"], linux={"namespaces": NAMESPACES,
                                                     "cgroupsPath": path}))
    b = create(env, "new")
    assert b.returncode == 0, b.stderr
    assert rt(env, "start", "new").returncode == 0
    try:
        assert rt(env, "delete", "old").returncode == 0
        assert mem.is_dir(), "deleting the old container removed the new one's cgroup"
        assert b.pid in procs(mem)
        os.kill(b.pid, 0)
    finally:
        rt(env, "delete", "--force", "new")


def test_a_container_cannot_nest_in_another_containers_cgroup(env, parent):
    """A leaf beneath another container's cgroup would be charged to its
    limits, frozen with it, and keep its delete from removing it."""
    victim = f"/{parent}/victim"
    write_spec(env, spec(["/bin/sleep", "30"], linux={"namespaces": NAMESPACES,
                                                     "cgroupsPath": victim}))
    a = create(env, "victim")
    assert a.returncode == 0, a.stderr
    try:
        write_spec(env, spec(["/bin/true"], linux={"namespaces": NAMESPACES,
                                                   "cgroupsPath": victim + "/inside"}))
        b = create(env, "nested")
        if b.returncode == 0:
            rt(env, "delete", "--force", "nested")
        assert b.returncode != 0 and "holds processes" in b.stderr, b.stderr
        for mnt, _ in hierarchies():
            assert not leaf(mnt, victim + "/inside").exists()
    finally:
        rt(env, "delete", "--force", "victim")
