# SPDX-License-Identifier: Apache-2.0
"""Attacks through a pod's own airlock.io/policy document (an annotation
the pod's author writes): it may narrow the container, never reach the
node. Host paths are the node's, as routes and tool definitions are.
Needs root."""

import json
import sys
import pathlib

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "integration"))
from test_oci_runtime import create, env, rt, spec, wait_pid, write_spec  # noqa: E402,F401


@pytest.fixture
def host_secret(env):
    d = env["tmp"] / "node-only"
    d.mkdir()
    (d / "key").write_text("node-private-91c3\n")
    return d


@pytest.mark.parametrize("fs", [
    lambda d: {"mounts": [{"source": str(d), "target": "/stolen", "readonly": True}]},
    lambda d: {"mounts": [{"source": str(d), "target": "/stolen"}]},
])
def test_pod_document_cannot_mount_host_paths(env, host_secret, fs):
    doc = {"filesystem": fs(host_secret)}
    write_spec(env, spec(["/bin/sh", "-c", "cat /stolen/key; echo rc=$?"],
                         annotations={"airlock.io/policy": json.dumps(doc)}))
    p = create(env, "m1")
    if p.returncode == 0:
        rt(env, "start", "m1")
        wait_pid(p.pid, 20)
        out = p.out.read_text()
        rt(env, "delete", "--force", "m1")
        assert "node-private" not in out, out
        pytest.fail("a pod's document mounted a host path: " + out)
    assert "filesystem.mounts" in p.stderr, p.stderr
    assert not (env["state"] / "m1").exists()


def test_pod_document_cannot_take_host_sockets(env):
    """network.directPath hands the container sockets the host connected
    (through the API it needs a grant with host rights): a node's choice."""
    doc = {"network": {"allow": ["example.com:443"], "directPath": True}}
    write_spec(env, spec(["/bin/true"], annotations={"airlock.io/policy": json.dumps(doc)}))
    p = create(env, "d1")
    if p.returncode == 0:
        rt(env, "delete", "--force", "d1")
    assert p.returncode != 0 and "network.directPath" in p.stderr, p.stderr
    assert not (env["state"] / "d1").exists()


@pytest.mark.parametrize("doc,needle", [
    ({"image": "alpine"}, "image"),
    ({"env": {"FOO": "bar"}}, "env"),
    ({"network": {"allow": ["example.com:443"], "onUnlisted": "ask"}}, "onUnlisted"),
    ({"tools": {"allow": ["core.time"], "onUnlisted": "ask"}}, "onUnlisted"),
])
def test_keys_a_container_cannot_honour_are_refused(env, doc, needle):
    """A key accepted and then not enforced is a promise broken: the
    bundle's root is the image, the spec's env the environment, and no
    operator is there to ask."""
    write_spec(env, spec(["/bin/true"], annotations={"airlock.io/policy": json.dumps(doc)}))
    p = create(env, "k1")
    if p.returncode == 0:
        rt(env, "delete", "--force", "k1")
    assert p.returncode != 0 and needle in p.stderr, p.stderr
    assert not (env["state"] / "k1").exists()
