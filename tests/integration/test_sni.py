# SPDX-License-Identifier: Apache-2.0
"""The SNI check: a TLS tunnel the gate does not terminate (CONNECT, SOCKS5,
transparent mode's relay) must name, in its ClientHello, the host the rules
allowed. Naming another (domain fronting by SNI) is refused before any byte
reaches the upstream, and recorded with both names. Runs against the
private test network of netns.py."""

import json
import subprocess

import pytest

import netns
from netns import RANGE, SERVER_ADDR, TLS_NAME, TLS_PORT

ALLOW = ["--allow-private", RANGE, "--host", f"{TLS_NAME}={SERVER_ADDR}", "--allow", f"{TLS_NAME}:{TLS_PORT}"]


from netns import net  # noqa: E402,F401  (the test network, one per module)


CLIENT = r'''
import json, socket, ssl, sys
mode, sni = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile="/ca.pem")
ctx.check_hostname = False  # the name sent is the point, not the check
out = {}
try:
    if mode == "connect":
        s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
        s.sendall(b"CONNECT upstream.test:8443 HTTP/1.1\r\nHost: upstream.test:8443\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            c = s.recv(1)
            if not c:
                break
            head += c
        out["status"] = head.split(b" ")[1].decode() if head else ""
    else:
        s = socket.create_connection(("upstream.test", 8443), timeout=20)
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: upstream.test\r\n\r\n")
    data = b""
    while True:
        c = t.recv(65536)
        if not c:
            break
        data += c
    out["body"] = data.split(b"\r\n\r\n", 1)[-1].decode()
except (OSError, ssl.SSLError) as e:
    out["error"] = type(e).__name__
print(json.dumps(out))
'''


def run(airlock, net, mode, sni):
    ws = airlock.make_dir()
    (ws / "c.py").write_text(CLIENT)
    airlock.chown(ws)
    logdir = airlock.make_dir("netlog")
    args = ["run", "-q", "-w", ws, "--net-log", logdir / "net.jsonl", "--ro", f"{net.ca}:/ca.pem", *ALLOW,
            "--", "python3", "/workspace/c.py", mode, sni]
    p = subprocess.run(["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(args)],
                       cwd=str(airlock.base), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    log = logdir / "net.jsonl"
    records = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return json.loads(p.stdout), records


@pytest.mark.parametrize("mode,protocol", [("connect", "connect"), ("transparent", "transparent")])
def test_sni_must_name_the_allowed_host(airlock, net, mode, protocol):
    out, records = run(airlock, net, mode, TLS_NAME)
    assert out.get("body") == netns.HELLO, (out, records)
    assert not [r for r in records if r["decision"] == "deny"], records

    out, records = run(airlock, net, mode, "fronted.example")
    assert "body" not in out, out
    denied = [r for r in records if r["decision"] == "deny"]
    assert len(denied) == 1, records
    d = denied[0]
    assert d["protocol"] == protocol and d["reason"] == "sni_mismatch", d
    assert d["host"] == TLS_NAME and "fronted.example" in d["rule"] and TLS_NAME in d["rule"], d
