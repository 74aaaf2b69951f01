# SPDX-License-Identifier: Apache-2.0
"""A tiny image root for the container tier's tests: /bin/sh and cat with
their libraries, copied from the host, plus a marker file."""

import os
import shutil
import subprocess
import uuid


def make_rootfs(airlock, extra=None):
    root = airlock.make_dir("img")
    for b in ("/bin/sh", "/bin/cat", "/bin/ls"):
        real = os.path.realpath(b)
        files = [real] + [
            w for line in subprocess.run(["ldd", real], capture_output=True, text=True).stdout.splitlines()
            for w in line.split() if w.startswith("/")
        ]
        for f in files:
            dst = root / f.lstrip("/") if f != real else root / b.lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dst)
            if f != real:  # the library under its own name too
                d2 = root / f.lstrip("/")
                d2.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(f, d2)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/os-release").write_text("ID=airlock-test-image\n")
    if extra:
        extra(root)
    airlock.chown(root)
    return root


def import_image(airlock, root):
    name = "t-" + uuid.uuid4().hex[:12]
    p = airlock.run(["image", "import", root, "--name", name], check_setup=False, timeout=60)
    assert p.returncode == 0, p.stderr
    return name, p.stdout.strip()


def tar_layer(entries, gz=False):
    """A tar layer from [{"name", "type", "mode", "data", "link"}]."""
    import gzip
    import io
    import tarfile

    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.type = e.get("type", tarfile.REGTYPE)
            ti.mode = e.get("mode", 0o644)
            data = e.get("data", b"")
            if ti.type == tarfile.REGTYPE:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                ti.linkname = e.get("link", "")
                if ti.type in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                    ti.devmajor, ti.devminor = 1, 3
                t.addfile(ti)
    b = bio.getvalue()
    return gzip.compress(b) if gz else b


def oci_layout(path, layers):
    """An OCI image layout at path from layer bytes."""
    import hashlib
    import json

    blobs = path / "blobs/sha256"
    blobs.mkdir(parents=True)

    def put(b):
        h = hashlib.sha256(b).hexdigest()
        (blobs / h).write_bytes(b)
        return {"digest": "sha256:" + h, "size": len(b)}

    cfg = put(b"{}")
    man = put(json.dumps({"schemaVersion": 2, "config": cfg,
                          "layers": [put(b) for b in layers]}).encode())
    (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [man]}))
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return path
