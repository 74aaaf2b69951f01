# SPDX-License-Identifier: Apache-2.0
"""A hostile bundle against airlock-runtime: what linux.namespaces[].path
names is opened only once it is known to be a namespace (a FIFO would hold
create forever, a device be opened by root). Needs root."""

import json
import os
import pathlib
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "integration"))
from test_oci_runtime import create, env, rt, spec, write_spec  # noqa: E402,F401

if os.geteuid() != 0:
    pytest.skip("airlock-runtime here needs root", allow_module_level=True)


@pytest.mark.parametrize("kind", ["network", "ipc", "uts"])
@pytest.mark.parametrize("gated", [False, True])
def test_namespace_path_that_is_a_fifo(env, kind, gated):
    fifo = env["tmp"] / "ns-fifo"
    os.mkfifo(fifo)
    ns = [{"type": t} for t in ("pid", "network", "mount", "ipc", "uts") if t != kind]
    ns.append({"type": kind, "path": str(fifo)})
    extra = {}
    if gated:
        extra["annotations"] = {"airlock.io/policy": json.dumps(
            {"network": {"allow": ["example.com:443"]}})}
    write_spec(env, spec(["/bin/true"], linux={"namespaces": ns}, **extra))
    t0 = time.monotonic()
    p = create(env, "f1")
    took = time.monotonic() - t0
    if p.returncode == 0:
        rt(env, "delete", "--force", "f1")
    assert p.returncode != 0 and "namespace" in p.stderr, p.stderr
    assert took < 10, took
    assert not (env["state"] / "f1").exists()
