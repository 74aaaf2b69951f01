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
