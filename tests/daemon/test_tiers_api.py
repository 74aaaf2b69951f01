# SPDX-License-Identifier: Apache-2.0
"""The tier through the daemon: create with "tier" (and the policy's
"image"), the record and `airlock ls` show it, a tier this host cannot run
is refused with the reason."""

import json
import os
import pathlib
import shutil
import subprocess
import uuid

import pytest

from daemonlib import AIRLOCK, AirlockError


def import_image(tmp):
    root = pathlib.Path(tmp) / "img"
    for b in ("/bin/sh", "/bin/cat"):
        real = os.path.realpath(b)
        libs = [w for line in subprocess.run(["ldd", real], capture_output=True,
                                             text=True).stdout.splitlines()
                for w in line.split() if w.startswith("/")]
        (root / b.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(real, root / b.lstrip("/"))
        for lib in libs:
            (root / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(lib, root / lib.lstrip("/"))
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/os-release").write_text("ID=airlock-daemon-image\n")
    name = "d-" + uuid.uuid4().hex[:12]
    subprocess.run([str(AIRLOCK), "image", "import", str(root), "--name", name], check=True,
                   capture_output=True, timeout=60)
    return name


def test_container_tier_through_the_api(api, tmp_path):
    name = import_image(tmp_path)
    try:
        sb = api.create(policy={"tier": "container", "image": name}, sandbox_class="small")
        try:
            assert sb["tier"] == "container"
            assert api.get(sb["id"])["tier"] == "container"
            out = api.run(sb["id"], ["/bin/cat", "/etc/os-release"])
            assert b"airlock-daemon-image" in out.stdout, (out.stderr, out.error_code)
        finally:
            api.delete(sb["id"])
    finally:
        subprocess.run([str(AIRLOCK), "image", "rm", name], capture_output=True, timeout=30)


def test_tier_field_and_refusals(api):
    sb = api.create(sandbox_class="small")
    try:
        assert sb["tier"] == "namespace"
    finally:
        api.delete(sb["id"])
    status, _, body = api.request("POST", "/v1/sandboxes", {"tier": "vm"})
    assert status == 400 and b"tier" in body
    with pytest.raises(AirlockError) as e:
        api.create(policy={"tier": "microvm"})
    assert "microVM backend" in json.dumps(e.value.body) or "kvm" in json.dumps(e.value.body)


def test_gvisor_tier_through_the_api(api):
    if not os.access("/usr/bin/runsc", os.X_OK):
        pytest.skip("runsc is not installed")
    status, _, body = api.request("POST", "/v1/sandboxes", {"tier": "gvisor", "class": "small"})
    assert status == 201, body
    sb = json.loads(body)
    try:
        assert sb["tier"] == "gvisor"
        out = api.run(sb["id"], ["/bin/uname", "-r"])
        host = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
        assert out.stdout.strip() and out.stdout.decode().strip() != host, out.stderr
    finally:
        api.delete(sb["id"])
