# SPDX-License-Identifier: Apache-2.0
"""A small C library preloaded into an Airlock process to stand in for one
libc call (a slow sync, a kill at a chosen point), built once per test."""

import shutil
import subprocess

import pytest


def build(tmp_path, name, source):
    """Compile `source` to tmp_path/<name>.so; skip without a compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip(f"no C compiler to build the {name} shim")
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    so = tmp_path / f"{name}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(src), "-ldl"], check=True,
                   timeout=60)
    tmp_path.chmod(0o755)
    return so
