# SPDX-License-Identifier: Apache-2.0
"""Transparent mode with ssh: git over ssh to a test sshd in the test network
(netns.py), with no proxy and no ProxyCommand, reaches the allowed host and
port and is refused for another port, each decision recorded."""

import json
import os
import shutil
import subprocess
import time

import pytest

import netns
from netns import RANGE, SERVER_ADDR

SSH_PORT = 2222


@pytest.fixture(scope="module")
def sshnet():
    why = netns.available()
    if why:
        pytest.skip(why)
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server is not installed")
    n = netns.Network().start()
    d = n.dir / "ssh"
    d.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / "host"], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / "client"], check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    (d / "sshd_config").write_text(
        f"Port {SSH_PORT}\nListenAddress {SERVER_ADDR}\nHostKey {d / 'host'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "PidFile none\n")
    (d / "client").chmod(0o644)  # copied and narrowed inside the sandbox
    subprocess.run(["mkdir", "-p", "/run/sshd"], check=True)
    p = subprocess.Popen(["ip", "netns", "exec", n.server_ns, "/usr/sbin/sshd", "-D", "-e", "-f",
                          d / "sshd_config"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        r = subprocess.run(["ip", "netns", "exec", n.server_ns, "ss", "-ltn"], capture_output=True, text=True)
        if f":{SSH_PORT}" in r.stdout:
            break
        if p.poll() is not None:
            break
        time.sleep(0.1)
    else:
        p.kill()
    if p.poll() is not None:
        n.stop()
        pytest.skip(f"sshd did not start: {p.stderr.read().decode(errors='replace')[-300:]}")
    n.ssh_key = d / "client"
    yield n
    p.terminate()
    p.wait(timeout=5)
    n.stop()


def test_git_over_ssh_without_proxy(airlock, sshnet):
    net = sshnet
    ws = airlock.make_dir()
    shutil.copy(net.ssh_key, ws / "key")
    airlock.chown(ws)
    logdir = airlock.make_dir("netlog")
    ssh = ("ssh -i /tmp/k -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
           "-o LogLevel=ERROR")
    script = (
        "unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy; "
        "cp /workspace/key /tmp/k && chmod 600 /tmp/k; "
        f"GIT_SSH_COMMAND='{ssh} -p {SSH_PORT}' git clone -q root@upstream.test:{net.www}/repo.git /tmp/r "
        "&& cat /tmp/r/README; echo rc=$?; "
        f"{ssh} -o ConnectTimeout=10 -p 22 root@upstream.test true; echo rc=$?")
    args = ["run", "-q", "-w", ws, "--net-log", logdir / "net.jsonl", "--allow-private", RANGE,
            "--host", f"upstream.test={SERVER_ADDR}", "--allow", f"upstream.test:{SSH_PORT}",
            "--", "/bin/sh", "-c", script]
    p = subprocess.run(["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)],
                       cwd=str(airlock.base), capture_output=True, text=True, timeout=60)
    assert p.returncode != 125, p.stderr
    assert p.stdout.splitlines()[:2] == ["cloned through the gate", "rc=0"], (p.stdout, p.stderr)
    assert p.stdout.splitlines()[2] != "rc=0", p.stdout
    records = [json.loads(x) for x in (logdir / "net.jsonl").read_text().splitlines()]
    tp = [r for r in records if r["protocol"] == "transparent"]
    assert any(r["decision"] == "allow" and r["port"] == SSH_PORT and r["bytesDown"] > 0 for r in tp), records
    assert any(r["decision"] == "deny" and r["port"] == 22 and r["reason"] == "port_not_allowed"
               for r in tp), records
