# SPDX-License-Identifier: Apache-2.0
"""The daemon's HTTP front under hostile and faulty clients: memory that an
unauthenticated client could grow, running out of file descriptors, a burst
of connections, slow clients, connection caps, and request framing that two
HTTP readers could read differently (RFC 9112)."""

import json
import os
import pathlib
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "daemon"))
from daemonlib import AIRLOCK, AIRLOCKD, BUILD, Daemon, wait_for  # noqa: E402


@pytest.fixture(scope="module")
def base():
    if os.geteuid() != 0:
        pytest.skip("the daemon tests run as root")
    for b in (AIRLOCK, AIRLOCKD):
        if not b.exists():
            pytest.skip(f"{b} is not built (run 'ninja -C {BUILD}')")
    d = pathlib.Path(tempfile.mkdtemp(prefix="airlockd-http-faults-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemon(base):
    made = []

    def make(*args):
        d = Daemon(tempfile.mkdtemp(prefix="d-", dir=base), args)
        d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec")
        d.start()
        made.append(d)
        return d
    yield make
    for d in made:
        d.cleanup(d.admin)


def unix_conn(d, timeout=10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(d.socket))
    return s


_pending = {}  # bytes read past an answer, per socket (pipelined answers)


def read_answer(s, limit=1 << 20):
    """One HTTP answer (head and a Content-Length body), or b"" if the
    daemon closed the connection first."""
    data = _pending.pop(s.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
        assert len(data) < limit
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    if len(body) > length:
        _pending[s.fileno()] = body[length:]
    return head + b"\r\n\r\n" + body[:length]


def status_of(answer):
    if not answer:
        return None
    return int(answer.split(b" ", 2)[1])


def header_of(answer, name):
    head = answer.partition(b"\r\n\r\n")[0]
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def body_json(answer):
    return json.loads(answer.partition(b"\r\n\r\n")[2])


def raw(d, data, timeout=10):
    s = unix_conn(d, timeout)
    try:
        s.sendall(data)
        return read_answer(s)
    finally:
        _pending.pop(s.fileno(), None)
        s.close()


def vmrss_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def under_asan(pid):
    """ASan keeps freed memory in quarantine: RSS says nothing under it."""
    return "libasan" in pathlib.Path(f"/proc/{pid}/maps").read_text()


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# item 3: an unauthenticated client cannot grow the daemon

def test_unauthenticated_requests_with_query_strings_do_not_grow_the_daemon(daemon):
    d = daemon()
    pid = d.proc.pid
    # 41 parameters of 185 bytes: over the API's 40, so the query string is
    # refused as well as the missing token; the request line stays under
    # the 8 KiB a line may have.
    params = "&".join("k%d=%s" % (i, "v" * 185) for i in range(41))
    many = ("GET /v1/sandboxes?%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % params).encode()
    few = b"GET /v1/sandboxes?state=running&x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

    def burst(n):
        for i in range(n):
            a = raw(d, many if i % 2 == 0 else few)
            assert status_of(a) in (400, 401), a[:200]

    burst(300)  # warm-up: the allocator's arenas and libevent's free lists
    before = vmrss_kib(pid)
    burst(2000)
    after = vmrss_kib(pid)
    if under_asan(pid):
        # Its leak checker, run when the daemon exits, says what RSS cannot.
        d.stop()
        log = d.log.read_text()
        assert "LeakSanitizer" not in log, log[-4000:]
        return
    assert after - before < 4096, "RSS grew by %d KiB over 2,000 requests" % (after - before)


# item 6: out of file descriptors, no spin and no log flood

def test_out_of_file_descriptors_no_spin_no_flood(daemon):
    d = daemon()
    pid = d.proc.pid
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (48, 48))
    log_before = d.log.stat().st_size
    conns = []
    try:
        for _ in range(120):  # more than the daemon has descriptors; the backlog holds the rest
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(str(d.socket))
            except BlockingIOError:
                s.close()
                break
            conns.append(s)
        time.sleep(0.5)
        cpu0 = cpu_seconds(pid)
        time.sleep(2.0)
        cpu = cpu_seconds(pid) - cpu0
        assert cpu < 0.3, "the daemon used %.2f s of CPU in 2 s while out of descriptors" % cpu
        grown = d.log.stat().st_size - log_before
        assert grown < 16384, "the log grew by %d bytes: %r" % (
            grown, d.log.read_bytes()[log_before:log_before + 500])
    finally:
        for s in conns:
            s.close()
    # It serves again once the connections are gone.
    def serves():
        try:
            return status_of(raw(d, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", timeout=2)) == 401
        except OSError:
            return False
    wait_for(serves, timeout=15, what="the daemon to serve again")
    assert d.proc.poll() is None


# item 10: the listen backlog is what was asked for

def _burst(d, family, addr, n=400):
    os.kill(d.proc.pid, signal.SIGSTOP)  # nothing is accepted: the backlog must hold them all
    socks = []
    try:
        refused = 0
        for _ in range(n):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(addr)
            except BlockingIOError:
                if family == socket.AF_UNIX:  # the backlog is full
                    refused += 1
                    s.close()
                    continue
            except OSError:
                refused += 1
                s.close()
                continue
            socks.append(s)
        if family != socket.AF_UNIX:
            # A SYN past a full accept queue is dropped: such a connection
            # is still in progress after a while.
            time.sleep(0.5)
            established = 0
            for s in socks:
                _, w, _ = select.select([], [s], [], 0)
                if w and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    established += 1
            refused += len(socks) - established
        assert refused == 0, "%d of %d connections were not queued" % (refused, n)
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    try:
        for s in socks:
            s.setblocking(True)
            s.settimeout(20)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answered = sum(1 for s in socks if status_of(read_answer(s)) == 401)
        assert answered == n
    finally:
        for s in socks:
            s.close()


def test_burst_of_400_connections_on_the_unix_socket(daemon):
    d = daemon()
    _burst(d, socket.AF_UNIX, str(d.socket))


def test_burst_of_400_connections_on_tcp(daemon):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    d = daemon("--listen", "127.0.0.1:%d" % port)
    _burst(d, socket.AF_INET, ("127.0.0.1", port))


# item 11: slow clients, caps

def test_slowloris_connections_are_closed_at_the_request_deadline(daemon):
    d = daemon("--request-timeout", "2")
    conns = []
    try:
        for i in range(100):
            s = unix_conn(d)
            s.setblocking(False)
            if i % 2 == 0:
                s.send(b"GET /healthz HTTP/1.1\r\n")  # half a head
            conns.append(s)
        start = time.monotonic()
        open_ = set(range(len(conns)))
        while open_ and time.monotonic() - start < 8:
            for i in list(open_):
                try:
                    conns[i].send(b"X")  # one byte at a time keeps no deadline alive
                except (BrokenPipeError, ConnectionResetError):
                    open_.discard(i)
                    continue
                except BlockingIOError:
                    pass
                try:
                    if conns[i].recv(4096) == b"":
                        open_.discard(i)
                except BlockingIOError:
                    pass
                except ConnectionResetError:
                    open_.discard(i)
            time.sleep(0.25)
        took = time.monotonic() - start
        assert not open_, "%d of 100 slow connections still open after %.1f s" % (len(open_), took)
        assert took > 1.5, "closed after %.1f s, before the deadline" % took
    finally:
        for s in conns:
            s.close()
    assert status_of(raw(d, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) == 401


def test_the_request_deadline_does_not_end_an_exec_stream(daemon):
    d = daemon("--request-timeout", "1")
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")
    r = c.run(sb["id"], ["sh", "-c", "sleep 3; echo done"])
    assert r.exit_code == 0 and r.stdout == b"done\n"

    # The same with half of a next request pipelined behind the exec: its
    # deadline waits for the stream to end, then closes the connection.
    body = json.dumps({"argv": ["sh", "-c", "sleep 3; echo done"]}).encode()
    s = unix_conn(d, timeout=20)
    try:
        s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  b"GET /healthz HTTP/1.1\r\n"
                  % (sb["id"].encode(), d.admin.encode(), len(body), body))
        data = b""
        start = time.monotonic()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        took = time.monotonic() - start
    finally:
        s.close()
    assert b'"type":"exit"' in data and b'"exitCode":0' in data, data[-500:]
    assert took < 10, "the connection stayed open %.1f s after the stream" % took


def test_requests_pipelined_behind_an_answer_are_bounded(daemon):
    d = daemon()
    c = d.client(d.admin)
    sb = c.create(sandbox_class="small")
    body = json.dumps({"argv": ["sh", "-c", "sleep 4; echo done"]}).encode()
    s = unix_conn(d, timeout=20)
    try:
        s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (sb["id"].encode(), d.admin.encode(), len(body), body))
        time.sleep(0.5)
        rss0 = vmrss_kib(d.proc.pid)
        start = time.monotonic()
        s.setblocking(False)
        sent, closed = 0, False
        while sent < 16 << 20 and time.monotonic() - start < 3 and not closed:
            try:
                sent += s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 256)
            except BlockingIOError:
                time.sleep(0.01)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        grown = vmrss_kib(d.proc.pid) - rss0
    finally:
        s.close()
    assert closed, "%d bytes pipelined behind a stream were all taken" % sent
    assert grown < 8192 or under_asan(d.proc.pid), "the daemon grew by %d KiB" % grown


def test_connections_per_peer_past_the_cap_get_429(daemon):
    d = daemon("--max-peer-connections", "5")
    held = [unix_conn(d) for _ in range(5)]
    try:
        time.sleep(0.2)
        a = raw(d, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(a) == 429, a
        assert header_of(a, b"Retry-After") is not None
        assert body_json(a)["error"] == "too_many_connections"
    finally:
        for s in held:
            s.close()
    wait_for(lambda: status_of(raw(d, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) == 401,
             timeout=5, what="the cap to free up")


def test_connections_past_the_total_cap_get_503(daemon):
    d = daemon("--max-connections", "4")
    held = [unix_conn(d) for _ in range(4)]
    try:
        time.sleep(0.2)
        a = raw(d, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(a) == 503, a
        assert header_of(a, b"Retry-After") is not None
    finally:
        for s in held:
            s.close()


def test_a_head_over_the_size_limit_is_refused(daemon):
    d = daemon()
    a = raw(d, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
    assert status_of(a) == 431, a[:300]
    assert body_json(a)["error"] == "bad_request"


# item 12: ambiguous framing and bytes not allowed in a head

FRAMING = [
    ("two different Content-Length",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
     "Content-Length"),
    ("two equal Content-Length",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
     "Content-Length"),
    ("Content-Length list",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\n{}",
     "Content-Length"),
    ("Content-Length not a number",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}",
     "Content-Length"),
    ("Content-Length negative",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
     "Content-Length"),
    ("Content-Length and Transfer-Encoding",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
     "Transfer-Encoding"),
    ("Transfer-Encoding gzip",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
     "Transfer-Encoding"),
    ("Transfer-Encoding gzip, chunked",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
     "Transfer-Encoding"),
    ("two Transfer-Encoding",
     b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     "Transfer-Encoding"),
    ("obs-fold",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n",
     "fold"),
    ("NUL in Authorization",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\x00def\r\n\r\n",
     "Authorization"),
    ("bare CR in a value",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
     "CR"),
    ("control byte in a value",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n",
     "X-A"),
    ("space before the colon",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n",
     "name"),
    ("LF in a name",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nX\nA: 1\r\n\r\n",
     "colon"),
]


@pytest.mark.parametrize("name,request_bytes,word", FRAMING, ids=[f[0] for f in FRAMING])
def test_ambiguous_framing_is_refused(daemon_for_framing, name, request_bytes, word):
    a = raw(daemon_for_framing, request_bytes)
    assert status_of(a) == 400, a[:300]
    b = body_json(a)
    assert b["error"] == "bad_request"
    assert word.lower() in b["message"].lower(), b["message"]
    assert header_of(a, b"Connection") == b"close"


@pytest.fixture(scope="module")
def daemon_for_framing(base):
    d = Daemon(tempfile.mkdtemp(prefix="f-", dir=base))
    d.admin = d.grant("admin", "--allow-sandbox")
    d.start()
    yield d
    d.cleanup(d.admin)


def test_well_framed_bodies_and_pipelined_requests_pass(daemon_for_framing):
    d = daemon_for_framing
    s = unix_conn(d)
    try:
        s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
                  b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"2\r\n{}\r\n0\r\n\r\n"
                  b"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + d.admin.encode()
                  + b"\r\n\r\n")
        assert status_of(read_answer(s)) == 401
        assert status_of(read_answer(s)) == 401
        a = read_answer(s)
        assert status_of(a) == 200 and body_json(a)["ok"] is True
    finally:
        _pending.pop(s.fileno(), None)
        s.close()


def test_a_head_sent_byte_by_byte_is_checked_whole(daemon_for_framing):
    d = daemon_for_framing
    s = unix_conn(d)
    try:
        req = (b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
               b"Content-Length: 3\r\n\r\n{} ")
        for i in range(len(req)):
            s.send(req[i:i + 1])
            time.sleep(0.002)
        a = read_answer(s)
        assert status_of(a) == 400 and "Content-Length" in body_json(a)["message"]
    finally:
        s.close()


def test_refusals_are_counted_in_metrics(daemon_for_framing):
    d = daemon_for_framing
    assert status_of(raw(d, FRAMING[0][1])) == 400
    a = raw(d, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + d.admin.encode()
            + b"\r\nConnection: close\r\n\r\n")
    assert status_of(a) == 200
    text = a.partition(b"\r\n\r\n")[2].decode()
    values = {l.split()[0]: float(l.split()[1]) for l in text.splitlines()
              if l and not l.startswith("#")}
    assert values["airlock_http_refused_heads_total"] >= 1
    assert "airlock_http_accept_pauses_total" in values


def test_connections_far_past_the_total_cap_are_closed_at_once(daemon):
    d = daemon("--max-connections", "3")
    held = [unix_conn(d) for _ in range(6)]
    try:
        time.sleep(0.3)
        s = unix_conn(d, timeout=5)
        try:
            assert s.recv(100) == b""  # closed without a word, before any request
        finally:
            s.close()
    finally:
        for s in held:
            s.close()
