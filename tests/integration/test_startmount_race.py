# SPDX-License-Identifier: Apache-2.0
"""The start's read-write mounts (--rw, filesystem.mounts) are checked by
the plan on their resolved paths (no denied tree inside) and then opened
for the idmapped mount: that open must not follow a symbolic link swapped
in for a parent after the checks, or a denied tree would be mounted
read-write. The attack swaps a parent of the source with a link to a
denied tree, atomically (renameat2 RENAME_EXCHANGE), while sandboxes start
again and again (test_livemount_race.py is the same at run time)."""

import json
import os
import subprocess
import sys
import time

import pytest

from test_livemount_race import FLIP


def test_swapped_parent_never_mounts_another_tree_at_start(airlock):
    if airlock.rootless:
        pytest.skip("idmapped mounts are made by a root caller only")
    base = airlock.make_dir("race")
    (base / "p" / "src").mkdir(parents=True)
    (base / "p" / "src" / "ok.txt").write_text("fine\n")
    secret = airlock.make_dir("secret")
    (secret / "src").mkdir()
    (secret / "src" / "MARKER").write_text("denied tree\n")
    for path in (secret, secret / "src", secret / "src" / "MARKER"):
        os.chown(path, 54321, 54321)
    os.symlink(str(secret), str(base / "plink"))
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text(json.dumps({"filesystem": {"denyRead": [str(secret)]}}))
    pol.chmod(0o644)
    flip = subprocess.Popen([sys.executable, "-c", FLIP, str(base / "p"), str(base / "plink"),
                             "40"])
    leaks = starts = 0
    try:
        # 4 s of starts, longer (up to 30 s) on a loaded machine until one
        # start got through the swaps (most are refused, as they should be).
        t0 = time.monotonic()
        while not leaks and (time.monotonic() < t0 + 4 or (not starts and time.monotonic() < t0 + 30)):
            p = airlock.run(["run", "-q", "-p", pol, "--rw", f"{base}/p/src:/mnt/m", "--", "sh",
                             "-c", "cat /mnt/m/MARKER 2>/dev/null; ls /mnt/m >/dev/null && "
                             "echo started"], check_setup=False, timeout=30)
            starts += "started" in p.stdout
            leaks += "denied tree" in p.stdout
    finally:
        flip.kill()
        flip.wait()
    assert not leaks, f"a denied tree was mounted read-write at start ({starts} starts)"
    assert starts > 0, "no sandbox started while the parent was being swapped"
