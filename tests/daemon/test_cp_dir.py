# SPDX-License-Identifier: Apache-2.0
"""`airlock cp ID:PATH DIR` puts the file in DIR under its own name, as its
usage example says (`airlock cp 3f2a:out/result.json .`); it failed with
"Is a directory"."""

import os
import subprocess

from daemonlib import AIRLOCK


def cli(d, token, *args, cwd=None):
    env = dict(os.environ, AIRLOCK_SOCKET=str(d.socket), AIRLOCK_TOKEN=token)
    return subprocess.run([str(AIRLOCK)] + [str(a) for a in args], capture_output=True,
                          env=env, timeout=60, cwd=cwd)


def test_cp_into_a_directory(make_daemon, tmp_path):
    d = make_daemon()
    tok = d.grant("cp", "--allow-sandbox", "--allow-exec")
    p = cli(d, tok, "create", "--class", "small")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.decode().strip()
    src = tmp_path / "in.txt"
    src.write_text("result\n")
    assert cli(d, tok, "cp", src, sid + ":out/result.json").returncode == 0
    dest = tmp_path / "dl"
    dest.mkdir()
    p = cli(d, tok, "cp", sid + ":out/result.json", ".", cwd=dest)
    assert p.returncode == 0, p.stderr
    assert (dest / "result.json").read_text() == "result\n"
    p = cli(d, tok, "cp", sid + ":/workspace/out/result.json", dest / "sub-missing" / "x")
    assert p.returncode == 1
    # A remote directory is refused with the reason.
    p = cli(d, tok, "cp", sid + ":out/", dest)
    assert p.returncode != 0 and b"directory" in p.stderr, p.stderr
    assert cli(d, tok, "rm", sid).returncode == 0
