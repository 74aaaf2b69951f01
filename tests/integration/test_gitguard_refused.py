# SPDX-License-Identifier: Apache-2.0
"""A run refused before any sandbox process existed leaves the trees it
would have guarded alone: nothing inside could have written, so what
changed meanwhile is the host's own (a repository another program is
working in beside it must not have its hooks moved away)."""

import os
import pathlib
import subprocess
import tempfile
import threading
import time

import pytest


REPO = pathlib.Path(__file__).resolve().parent.parent.parent
# Its own paths, as tests/conftest.py finds them (another directory's
# conftest may be the one "conftest" names when every suite runs at once).
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
AIRLOCK_BIN = REPO / os.environ.get("AIRLOCK_BIN", BUILD / "src/cli/airlock")
RUNAS = REPO / "tests/runas.sh"


def test_refused_run_moves_nothing(tmp_path):
    if not AIRLOCK_BIN.exists():
        pytest.skip(f"{AIRLOCK_BIN} is not built")
    ws = pathlib.Path(tempfile.mkdtemp(dir=tmp_path))
    repo = ws / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    hook = repo / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)

    # The host keeps working in the repository while the runs are refused:
    # each chmod renews the hook's change time, so it always looks new.
    stop = threading.Event()

    def host_work():
        mode = 0o755
        while not stop.is_set():
            mode ^= 0o001
            try:
                os.chmod(hook, mode)
            except FileNotFoundError:
                return
            time.sleep(0.0005)

    t = threading.Thread(target=host_work)
    t.start()
    try:
        for _ in range(10):
            # The workspace is the caller's whole home: refused by the plan,
            # before the sandbox's namespaces are made.
            p = subprocess.run([str(AIRLOCK_BIN), "run", "-q", "-w", str(ws), "--", "true"],
                               env={**os.environ, "HOME": str(ws)}, capture_output=True,
                               text=True, timeout=30)
            assert p.returncode == 125, p.stderr
            assert "whole home" in p.stderr, p.stderr
            assert hook.exists(), "a refused run moved the host's hook away: " + p.stderr
    finally:
        stop.set()
        t.join(timeout=5)
    assert not list(repo.glob(".git/hooks/*.airlock-quarantine"))
