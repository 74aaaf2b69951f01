# SPDX-License-Identifier: Apache-2.0
"""A hostile sandbox tries to stop its supervisor's loop.

Where the gate may hand out host sockets (the direct path), the supervisor
makes the sandbox's Unix connects itself, on its copy of the caller's
socket, made non-blocking for the call. The copy shares the socket's flags
with the sandbox: a thread that clears O_NONBLOCK again and again while
another connects to a listener whose backlog is full would turn the
supervisor's connect() into one that waits as long as the backlog stays
full. The supervisor's loop serves the network gate, the tool gateway, the
hardware gate's deadman and the host's emergency stop: none of it may
wait on the sandbox. A second connect, to a listener with room, must still
be answered at once."""

import json
import os

import pytest

# Gated, with no rate or byte budget: the gate may hand out host sockets,
# so the supervisor makes the sandbox's local connects itself. An IP rule
# is all it takes; nothing here leaves the sandbox.
DIRECT = {"network": {"allow": ["192.0.2.1:9"], "directPath": True, "budget": {"rate": 0}}}

WEDGE = r'''
import ctypes, json, os, socket, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
F_SETFL = 4
FULL, FREE = "/tmp/full.sock", "/tmp/free.sock"
full = socket.socket(socket.AF_UNIX)
full.bind(FULL)
full.listen(0)
free = socket.socket(socket.AF_UNIX)
free.bind(FREE)
free.listen(64)
fillers = []
for _ in range(4):  # the full listener's backlog, filled
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    try:
        s.connect(FULL)
    except OSError:
        pass
    fillers.append(s)
kinds = sys.argv[1].split(",")
stop = False
def attack(S, addr):
    fd = S.fileno()
    buf = ctypes.create_string_buffer(addr, len(addr))
    def flip():
        while not stop:
            libc.fcntl(fd, F_SETFL, 0)
    threading.Thread(target=flip, daemon=True).start()
    threading.Thread(target=lambda: libc.connect(fd, buf, len(addr)), daemon=True).start()
if "unix" in kinds:
    attack(socket.socket(socket.AF_UNIX),
           (struct.pack("=H", socket.AF_UNIX) + FULL.encode()).ljust(110, b"\0"))
if "tcp" in kinds:
    # A loopback listener whose accept queue is full drops the SYN: a
    # blocking connect would wait for the retransmissions (minutes).
    tl = socket.socket()
    tl.bind(("127.0.0.1", 0))
    tl.listen(0)
    port = tl.getsockname()[1]
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            pass
        fillers.append(s)
    time.sleep(0.2)
    taddr = struct.pack("=HH4s8x", socket.AF_INET, socket.htons(port),
                        socket.inet_aton("127.0.0.1"))
    current = [-1]
    def tflip():
        while not stop:
            libc.fcntl(current[0], F_SETFL, 0)
    def tconnect():
        # One connect is one chance: a new blocking socket every 20 ms.
        tbuf = ctypes.create_string_buffer(taddr, len(taddr))
        while not stop:
            S = socket.socket()
            fillers.append(S)
            current[0] = S.fileno()
            threading.Thread(target=lambda fd=S.fileno(): libc.connect(fd, tbuf, len(taddr)),
                             daemon=True).start()
            time.sleep(0.02)
    threading.Thread(target=tflip, daemon=True).start()
    threading.Thread(target=tconnect, daemon=True).start()
out = {"probes": []}
deadline = time.monotonic() + 2
while time.monotonic() < deadline:
    done = []
    def probe():
        t = socket.socket(socket.AF_UNIX)
        t.connect(FREE)
        done.append(1)
    t0 = time.monotonic()
    th = threading.Thread(target=probe, daemon=True)
    th.start()
    th.join(2.0)
    out["probes"].append(round(time.monotonic() - t0, 3))
    if not done:
        out["wedged"] = True
        break
    free.accept()[0].close()
    time.sleep(0.05)
stop = True
print(json.dumps(out), flush=True)
full.close()
os._exit(0)
'''


def test_sandbox_cannot_wedge_its_supervisor_with_a_local_connect(airlock):
    if airlock.mode != "root":
        # The same loop and the same connect as root's; one identity keeps
        # the suite's time (the attack is the sandbox's, not the host's).
        pytest.skip("run under root only")
    kinds = os.environ.get("WEDGE_KINDS", "unix,tcp")
    ws = airlock.make_dir()
    (ws / "w.py").write_text(WEDGE)
    (ws / "policy.json").write_text(json.dumps(DIRECT))
    airlock.chown(ws)
    r = airlock.run(["run", "-q", "-w", ws, "-p", ws / "policy.json", "--cpus",
                     str(os.cpu_count() or 1), "--", "python3", "/workspace/w.py", kinds],
                    timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert not out.get("wedged"), out
    assert len(out["probes"]) > 5, out  # the attack ran while it was probed
