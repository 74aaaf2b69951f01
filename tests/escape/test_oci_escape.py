# SPDX-License-Identifier: Apache-2.0
"""The escape probe inside a container started by airlock-runtime, as
containerd would start it: an image root holding the probe, uid 0 inside,
the runtime's own boundary. Each case exits 0 when it was blocked."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_escape import CASES, PROBE  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
RUNTIME = BUILD / "src/runtime/airlock-runtime"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the OCI runtime is driven as root here"),
    pytest.mark.skipif(not RUNTIME.exists(), reason="airlock-runtime not built"),
    pytest.mark.skipif(not PROBE.exists(), reason="escape-probe not built"),
]

# Cases about a workspace (there is none in a container), the ones that need
# a listener the host test makes, and the resource bombs (the plain escape
# suite runs them; here they would only cost time).
SKIP = {"write-git-hooks", "modify-git-config", "replace-git-dir", "umount-workspace",
        "reach-host-loopback", "fork-bomb", "memory-bomb", "disk-fill"}

NAMESPACES = [{"type": t} for t in ("pid", "network", "mount", "ipc", "uts")]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    base = tmp_path_factory.mktemp("oci-escape")
    base.chmod(0o755)
    root = base / "bundle/rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    shutil.copy2(PROBE, root / "probe")
    return base


def run_case(base, case):
    b = base / "bundle"
    cid = "esc-" + case
    (b / "config.json").write_text(json.dumps({
        "ociVersion": "1.0.2",
        "root": {"path": "rootfs", "readonly": True},
        "process": {"args": ["/probe", case], "env": ["PATH=/"], "cwd": "/",
                    "user": {"uid": 0, "gid": 0}},
        "linux": {"namespaces": NAMESPACES,
                  "resources": {"pids": {"limit": 64}, "memory": {"limit": 512 << 20}}},
    }))
    state = base / "state"
    out, err = base / f"{case}.out", base / f"{case}.err"
    env = dict(os.environ, AIRLOCK_RUNTIME_AUDIT=str(base / "audit.log"))
    rt = [str(RUNTIME), "--root", str(state)]
    with open(out, "w") as o, open(err, "w") as e:
        p = subprocess.run(rt + ["create", "--bundle", str(b), "--pid-file",
                                 str(base / f"{case}.pid"), cid],
                           stdin=subprocess.DEVNULL, stdout=o, stderr=e, timeout=30, env=env)
    assert p.returncode == 0, err.read_text()
    pid = int((base / f"{case}.pid").read_text())
    try:
        assert subprocess.run(rt + ["start", cid], timeout=30, env=env).returncode == 0
        # The keeper exits with the probe's status; it is not our child, so
        # its status is read from the audit record.
        end = time.time() + 60
        while time.time() < end:
            st = json.loads(subprocess.run(rt + ["state", cid], capture_output=True,
                                           text=True, timeout=30).stdout)
            if st["status"] == "stopped":
                break
            time.sleep(0.05)
        assert st["status"] == "stopped", f"{case} still running"
    finally:
        subprocess.run(rt + ["delete", "--force", cid], timeout=30, capture_output=True)
    exits = [json.loads(line) for line in (base / "audit.log").read_text().splitlines()]
    code = [x for x in exits if x["sandbox"] == "oci:" + cid and x["kind"] == "container.exited"]
    return out.read_text() + err.read_text(), code[-1] if code else None, pid


@pytest.mark.parametrize("case", [c for c in CASES if c not in SKIP])
def test_escape_in_container(bundle, case):
    report, ex, _ = run_case(bundle, case)
    print(report)
    assert "ESCAPED" not in report, report
    assert ex is not None, "no exit recorded"
    assert ex.get("exit_code") == 0, f"{ex}: {report}"
    assert report.startswith(case + ": "), report
