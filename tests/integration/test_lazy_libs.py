# SPDX-License-Identifier: Apache-2.0
"""airlock loads libssl and libcrypto only when the network gate needs TLS
(src/cli/tlslazy.c), and SQLite only when a command opens the daemon's
database itself (src/cli/sqlitelazy.c): a run never opens them, and a command
that needs one when it cannot be loaded fails, saying why."""

import json
import subprocess

import pytest


@pytest.fixture
def run_without_libssl(airlock):
    """Runs airlock with a library path whose libssl.so.3 and libsqlite3.so.0
    cannot be loaded (through env, which runas.sh's reset environment does
    not undo)."""
    d = airlock.make_dir("lib")
    (d / "libssl.so.3").write_bytes(b"")
    (d / "libsqlite3.so.0").write_bytes(b"")
    airlock.chown(d)

    def run(args):
        argv = airlock.cmd(args)
        i = next(i for i, a in enumerate(argv) if a.endswith("/airlock"))
        argv[i:i] = ["env", f"LD_LIBRARY_PATH={d}"]
        return subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True,
                              timeout=90)
    return run


def test_a_run_without_tls_loads_neither(airlock, run_without_libssl):
    ws = airlock.make_dir()
    p = run_without_libssl(["run", "-q", "-w", ws, "--net", "gated", "--",
                            "sh", "-c", "echo ran"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ran"


def test_a_terminating_route_without_libssl_fails_closed(airlock, run_without_libssl):
    ws = airlock.make_dir()
    d = airlock.make_dir("tlslazy")
    (d / "policy.json").write_text(json.dumps({"network": {"routes": [
        {"name": "up", "upstream": "https://upstream.test:4443", "terminate": True}]}}))
    airlock.chown(d)
    p = run_without_libssl(["run", "-q", "-w", ws, "-p", d / "policy.json",
                            "--host", "upstream.test=127.0.0.1", "--allow-private",
                            "127.0.0.0/8", "--", "sh", "-c", "echo ran"])
    assert p.returncode != 0
    assert "ran" not in p.stdout
    assert "loading libssl.so.3" in p.stderr, p.stderr


def test_a_grant_without_libsqlite_fails_closed(airlock, run_without_libssl):
    state = airlock.make_dir("state")
    p = run_without_libssl(["grant", "create", "--name", "t", "--state-dir", state])
    assert p.returncode != 0
    assert "loading libsqlite3.so.0" in p.stderr, p.stderr


def test_a_libssl_that_lacks_a_function_is_not_taken(airlock):
    # A library that loads but lacks functions: the stand-ins that return
    # nothing (SSL_CTX_set_verify among them) could not say so, and a peer
    # would go unverified; the library is refused whole.
    d = airlock.make_dir("partial")
    src = d / "empty.c"
    src.write_text("int airlock_test_partial_libssl;\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(d / "libssl.so.3"), str(src)],
                   check=True, timeout=60)
    airlock.chown(d)
    ws = airlock.make_dir()
    p_dir = airlock.make_dir("tlspartial")
    (p_dir / "policy.json").write_text(json.dumps({"network": {"routes": [
        {"name": "up", "upstream": "https://upstream.test:4443", "terminate": True}]}}))
    airlock.chown(p_dir)
    argv = airlock.cmd(["run", "-q", "-w", ws, "-p", p_dir / "policy.json",
                        "--host", "upstream.test=127.0.0.1", "--allow-private",
                        "127.0.0.0/8", "--", "sh", "-c", "echo ran"])
    i = next(i for i, a in enumerate(argv) if a.endswith("/airlock"))
    argv[i:i] = ["env", f"LD_LIBRARY_PATH={d}"]
    p = subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True, timeout=90)
    assert p.returncode != 0
    assert "ran" not in p.stdout
    assert "loading libssl.so.3: it lacks" in p.stderr, p.stderr
