# SPDX-License-Identifier: Apache-2.0
"""`airlock supervise`: a long-lived sandbox and its control socket
(docs/control.md), as root and as an ordinary user."""

import base64
import json
import os
import socket
import subprocess
import time

import pytest


class Supervisor:
    def __init__(self, airlock, policy=None, review=False):
        self.airlock = airlock
        self.ws = airlock.make_dir()
        (self.ws / "hello.txt").write_text("hi\n")
        airlock.chown(self.ws)
        self.run_dir = airlock.make_dir("run")
        self.audit = airlock.make_dir("audit") / "audit.jsonl"
        pol = airlock.make_dir("policy") / "policy.json"
        doc = {"workspace": {"path": str(self.ws)}}
        doc.update(policy or {})
        if review:
            doc["workspace"]["mode"] = "overlay"
        pol.write_text(json.dumps(doc))
        airlock.chown(pol.parent)
        self.keep = airlock.make_dir("keep")
        self.id = os.urandom(8).hex()
        r, w = os.pipe()
        argv = airlock.cmd(["supervise", "--id", self.id, "--policy", pol, "--run-dir", self.run_dir,
                            "--audit", self.audit, "--ready-fd", str(w),
                            "--keep-root", self.keep])
        self.proc = subprocess.Popen(argv, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(w)
        with os.fdopen(r) as f:
            self.ready = f.readline().strip()
        self.sock = str(self.run_dir / self.id / "control.sock")

    def request(self, obj, timeout=30):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        s.connect(self.sock)
        s.sendall((json.dumps(obj) + "\n").encode())
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
        s.close()
        return [json.loads(line) for line in out.decode().splitlines()]

    def exec(self, argv, **kw):
        events = self.request({"op": "exec", "argv": argv, **kw})
        out = b"".join(base64.b64decode(e["data"]) for e in events if e.get("type") == "stdout")
        err = b"".join(base64.b64decode(e["data"]) for e in events if e.get("type") == "stderr")
        return events, out.decode(), err.decode()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.request({"op": "destroy"})
            except OSError:
                pass
            self.proc.wait(timeout=10)


@pytest.fixture
def sup(airlock):
    s = Supervisor(airlock)
    assert s.ready == "ok", s.proc.stderr.read().decode() if s.proc.poll() is not None else s.ready
    yield s
    s.close()


def test_exec_streams_and_exits(sup):
    events, out, err = sup.exec(["sh", "-c", "cat hello.txt; echo oops >&2; exit 5"])
    assert events[0] == {"type": "started", "pid": events[0]["pid"], "seq": 1}
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert out == "hi\n" and err == "oops\n"
    assert events[-1]["type"] == "exit" and events[-1]["exitCode"] == 5
    assert events[-1]["errorCode"] is None


def test_exec_has_the_same_confinement(sup):
    _, out, _ = sup.exec(["sh", "-c",
                          "id -u; pwd; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | cut -f2; "
                          "cat /etc/shadow; touch /usr/x 2>/dev/null || echo ro; unshare -U true 2>/dev/null || echo nouserns; "
                          "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"])
    assert out.split() == ["1000", "/workspace", "0000000000000000", "1", "2", "ro", "nouserns", "lo"]


def test_state_persists_between_execs(sup):
    sup.exec(["sh", "-c", "echo kept > /tmp/state"])
    _, out, _ = sup.exec(["cat", "/tmp/state"])
    assert out == "kept\n"


def test_env_cwd_stdin(sup):
    data = base64.b64encode(b"from stdin\n").decode()
    _, out, _ = sup.exec(["sh", "-c", "echo $FOO; pwd; cat"], env={"FOO": "bar"}, cwd="/tmp", stdin=data)
    assert out == "bar\n/tmp\nfrom stdin\n"


def test_env_naming_a_secret_refused(sup):
    events = sup.request({"op": "exec", "argv": ["true"], "env": {"K": "${secret:X}"}})
    assert events == [{"ok": False, "error": "bad_request", "message": events[0]["message"]}]


def test_not_found_and_not_executable(sup):
    events, _, _ = sup.exec(["no-such-command"])
    assert [e["type"] for e in events] == ["error", "exit"]
    assert events[-1]["exitCode"] == 127 and events[-1]["errorCode"] == "exec_failed"
    events, _, _ = sup.exec(["/workspace/hello.txt"])
    assert events[-1]["exitCode"] == 126


def test_timeout_kills_the_process_group(sup):
    t = time.monotonic()
    events, _, _ = sup.exec(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
    assert events[-1]["exitCode"] == 124 and events[-1]["errorCode"] == "timeout"
    assert time.monotonic() - t < 10
    # The sandbox lives on.
    _, out, _ = sup.exec(["echo", "alive"])
    assert out == "alive\n"


def test_background_attach_stdin_signal(sup):
    started = sup.request({"op": "exec", "argv": ["sh", "-c", "read line; echo got $line; sleep 30"],
                           "background": True})
    assert started[0]["type"] == "started"
    pid = started[0]["pid"]
    assert sup.request({"op": "stdin", "pid": pid, "data": base64.b64encode(b"x\n").decode()}) == [{"ok": True}]
    time.sleep(0.3)
    assert sup.request({"op": "signal", "pid": pid, "signal": 15}) == [{"ok": True}]
    events = sup.request({"op": "attach", "pid": pid})
    out = b"".join(base64.b64decode(e["data"]) for e in events if e.get("type") == "stdout")
    assert out == b"got x\n"
    assert events[-1]["type"] == "exit" and events[-1]["signal"] == 15
    status = sup.request({"op": "status"})[0]
    assert [p["running"] for p in status["processes"] if p["pid"] == pid] == [False]


def test_unknown_process_and_bad_requests(sup):
    assert sup.request({"op": "attach", "pid": 999})[0]["error"] == "unknown_process"
    assert sup.request({"op": "nope"})[0]["error"] == "bad_request"
    assert sup.request({"op": "exec", "argv": []})[0]["error"] == "bad_request"
    assert sup.request({"op": "exec", "argv": ["true"], "cwd": "relative"})[0]["error"] == "bad_request"


def test_status_reports_usage(sup):
    sup.exec(["true"])
    st = sup.request({"op": "status"})[0]
    assert st["ok"] and st["sandbox"] == sup.id and st["state"] == "running"
    assert {"cpuMs", "memoryPeakBytes", "pids"} <= set(st["usage"])


def test_destroy_cleans_up(airlock):
    s = Supervisor(airlock)
    assert s.ready == "ok"
    s.exec(["sh", "-c", "sleep 100 &"])
    assert s.request({"op": "destroy"}) == [{"ok": True}]
    assert s.proc.wait(timeout=10) == 0
    assert not (s.run_dir / s.id).exists()
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        assert f"airlock-{s.id}" not in dirs
    kinds = [json.loads(line)["kind"] for line in open(s.audit)]
    assert kinds[0] == "sandbox.created" and kinds[-1] == "sandbox.destroyed"
    assert airlock.run(["audit", "verify", s.audit]).returncode == 0


def test_setup_failure_is_reported_on_the_ready_fd(airlock):
    s = Supervisor(airlock, {"workspace": {"path": "/nonexistent/ws"}})
    assert s.ready.startswith("error: ") and "/nonexistent/ws" in s.ready
    assert s.proc.wait(timeout=10) == 125


def test_review_copies_the_changes_while_running_and_at_the_end(airlock):
    s = Supervisor(airlock, review=True)
    try:
        assert s.ready == "ok"
        _, _, err = s.exec(["sh", "-c", "echo new > new.txt; echo changed > hello.txt; rm -f gone"])
        assert err == ""
        [ans] = s.request({"op": "review"})
        assert ans["ok"] and ans["changes"]["added"] == 1 and ans["changes"]["modified"] == 1
        kept = s.keep / "sandboxes" / s.id
        assert ans["dir"] == str(kept)
        assert (s.ws / "hello.txt").read_text() == "hi\n" and not (s.ws / "new.txt").exists()
        # A second copy replaces the first.
        s.exec(["sh", "-c", "echo more > more.txt"])
        [ans] = s.request({"op": "review"})
        assert ans["changes"]["added"] == 2
    finally:
        s.close()
    # The end makes the final copy: what the agent wrote after the last one
    # is in it.
    manifest = json.loads((kept / "manifest.json").read_text())
    paths = sorted(e["path"] for e in manifest["entries"])
    assert paths == ["hello.txt", "more.txt", "new.txt"]
    diff = airlock.run(["diff", "--state-root", s.keep, s.id], check_setup=False)
    assert diff.returncode == 0 and "+changed" in diff.stdout and "+more" in diff.stdout
    assert (s.ws / "hello.txt").read_text() == "hi\n"
    events = [json.loads(l) for l in s.audit.read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert "review.snapshot" in kinds and "review.kept" in kinds


def test_review_of_a_plain_workspace_is_refused(sup):
    [ans] = sup.request({"op": "review"})
    assert ans == {"ok": False, "error": "not_reviewable",
                   "message": "the sandbox's workspace is not copy-on-write"}
