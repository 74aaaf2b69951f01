# SPDX-License-Identifier: Apache-2.0
"""A Unix listener inside a gated sandbox that checks its peer's
credentials (SO_PEERCRED), as runsc's control sockets and peer-authenticated
services do. Where the gate can never hand the sandbox a socket of the
host's (every connection through the relay: a byte budget, the gvisor
tier; a class's rate, which is the default), the kernel makes the connect and the listener sees the real caller.
Where it can (the direct path), the host makes it and the listener sees no
pid of its namespace: the documented difference."""

import json

from test_transparent import run

from netns import net  # noqa: E402,F401  (the test network, one per module)


CLIENT = r'''
import json, os, socket, struct, threading
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("/tmp/peer.sock")
s.listen(1)
seen = {}
def serve():
    c, _ = s.accept()
    pid, uid, gid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    seen["pid"] = pid
    c.close()
t = threading.Thread(target=serve)
t.start()
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.settimeout(5)
c.connect("/tmp/peer.sock")
t.join(5)
print(json.dumps({"peer": seen.get("pid"), "me": os.getpid()}))
'''


def _peer(airlock, net, policy):
    r = run(airlock, net, "python3 /workspace/client.py", files={"client.py": CLIENT},
            policy=policy)
    line = [x for x in r.stdout.splitlines() if x.startswith("{")]
    assert line, (r.stdout, r.stderr)
    return json.loads(line[-1])


def test_relay_only_sandbox_keeps_the_real_peer(airlock, net):
    got = _peer(airlock, net, {"network": {"mode": "gated", "budget": {"bytes": 1 << 30}}})
    assert got["peer"] == got["me"], got


def test_direct_path_sandbox_connect_is_the_hosts(airlock, net):
    got = _peer(airlock, net, {"network": {"mode": "gated", "budget": {"rate": 0}}})
    assert got["peer"] == 0, got
