# SPDX-License-Identifier: Apache-2.0
"""ssh through the gate: `airlock-tool connect HOST PORT` is a byte pipe
through the gate's CONNECT listener, decided and audited like any
connection, and GIT_SSH_COMMAND uses it as ssh's ProxyCommand, so that
`git clone` over ssh reaches a test sshd with no other configuration."""

import json
import os
import pathlib
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time

import pytest


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        data = self.request.recv(4096)
        self.request.sendall(b"echo:" + data)


@pytest.fixture(scope="module")
def echo():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


def test_connect_pipe_is_decided_by_the_gate(airlock, echo):
    port = echo.server_address[1]
    ws = airlock.make_dir()
    d = airlock.make_dir("ssh")
    script = (f"printf hello | airlock-tool connect echo.test {port}; echo; "
              f"printf no | airlock-tool connect other.test {port}; echo \"rc=$?\"")
    p = airlock.run(["run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "--tool", "core.time",
                     "--allow", f"echo.test:{port}", "--host", "echo.test=127.0.0.1",
                     "--host", "other.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
                     "--", "sh", "-c", script], timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "echo:hello", p.stdout + p.stderr
    assert lines[-1] == "rc=1", p.stdout
    assert "not_allowed" in p.stderr, p.stderr
    events = [json.loads(line) for line in open(d / "audit.jsonl")]
    dec = [(e["host"], e["decision"]) for e in events if e["kind"] == "net.decision"]
    assert ("echo.test", "allow") in dec and ("other.test", "deny") in dec, dec


@pytest.fixture
def sshd():
    if os.geteuid() != 0 or not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("needs root and sshd to run a test sshd")
    d = pathlib.Path(tempfile.mkdtemp(prefix="airlock-sshd-", dir="/tmp"))
    d.chmod(0o755)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host")],
                   check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client")],
                   check=True)
    (d / "client").chmod(0o644)  # the sandbox copies it to a 0600 file of its own
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n"
        f"PermitRootLogin prohibit-password\nPasswordAuthentication no\nPidFile {d}/pid\n")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(d / "repo.git")], check=True)
    work = d / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "README").write_text("over ssh\n")
    subprocess.run(["git", "-C", str(work), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "seed"], check=True)
    subprocess.run(["git", "-C", str(work), "push", "-q", str(d / "repo.git"), "main"], check=True)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")],
                            stderr=subprocess.DEVNULL)
    for _ in range(50):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the test sshd did not start")
    yield d, port
    proc.terminate()
    proc.wait(timeout=10)


def test_git_clone_over_ssh_through_the_gate(airlock, sshd):
    d, port = sshd
    ws = airlock.make_dir()
    airlock.chown(ws)
    script = f"""
set -e
mkdir -p ~/.ssh
cp {d}/client ~/.ssh/id_ed25519
chmod 600 ~/.ssh/id_ed25519
printf 'StrictHostKeyChecking no\\nUserKnownHostsFile /dev/null\\nLogLevel ERROR\\n' > ~/.ssh/config
echo "$GIT_SSH_COMMAND"
git clone -q ssh://root@sshd.test:{port}{d}/repo.git /tmp/r
cat /tmp/r/README
"""
    p = airlock.run(["run", "-q", "-w", ws, "--tool", "core.time", "--ro", f"{d}:{d}",
                     "--allow", f"sshd.test:{port}", "--host", "sshd.test=127.0.0.1",
                     "--allow-private", "127.0.0.0/8", "--", "sh", "-c", script], timeout=90)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ProxyCommand" in p.stdout
    assert p.stdout.strip().endswith("over ssh"), p.stdout + p.stderr
