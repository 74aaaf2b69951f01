# SPDX-License-Identifier: Apache-2.0
"""The audit log and host-side secrets, through `airlock run`."""

import json
import os

import pytest

SECRET = "sk-test-9f8e7d6c5b4a39281716"


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _audit_file(airlock):
    d = airlock.make_dir("audit")
    return d / "audit.jsonl"


def test_run_is_recorded_and_verifies(airlock):
    log = _audit_file(airlock)
    p = airlock.sandbox("echo hi", "--audit", log)
    assert p.returncode == 0, p.stderr
    events = _lines(log)
    kinds = [e["kind"] for e in events]
    assert kinds == ["sandbox.created", "process.started", "process.ended", "sandbox.destroyed"]
    assert len({e["sandbox"] for e in events}) == 1
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert events[1]["argv"] == ["/bin/sh", "-c", "echo hi"]
    assert events[2]["exitCode"] == 0
    assert len(events[0]["policyDigest"]) == 64
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0 and "4 lines OK" in v.stdout


def test_audit_log_not_visible_inside(airlock):
    log = _audit_file(airlock)
    airlock.sandbox("true", "--audit", log)
    # Even with the whole host filesystem shown, the log's directory is not
    # bound in, and Airlock's default state directories are masked.
    p = airlock.sandbox(f"cat {log} 2>/dev/null | wc -c; ls -A /var/lib/airlock 2>/dev/null | wc -l",
                        "--read", "host", "--audit", log)
    assert p.stdout.split() == ["0", "0"], p.stdout


def test_limit_hits_are_recorded(airlock):
    log = _audit_file(airlock)
    airlock.run(["run", "-q", "--audit", log, "--timeout", "1", "--", "sleep", "10"])
    airlock.run(["run", "-q", "--audit", log, "--memory", "32M", "--", "python3", "-c", "a = bytearray(1 << 29)"])
    hits = [e for e in _lines(log) if e["kind"] == "limit.hit"]
    assert [h["limit"] for h in hits] == ["timeout", "memory"]
    ended = [e for e in _lines(log) if e["kind"] == "process.ended"]
    assert [e["errorCode"] for e in ended] == ["timeout", "oom_killed"]


def test_seccomp_kill_is_a_violation(airlock):
    log = _audit_file(airlock)
    # An x32 system call: the filter kills the process.
    p = airlock.run(["run", "-q", "--audit", log, "--", "python3", "-c",
                     "import ctypes; ctypes.CDLL(None).syscall(0x40000000 | 39)"])
    assert p.returncode == 128 + 31
    v = [e for e in _lines(log) if e["kind"] == "violation"]
    assert v and v[0]["what"] == "seccomp"


def test_tampering_is_caught(airlock):
    log = _audit_file(airlock)
    airlock.sandbox("true", "--audit", log)
    airlock.sandbox("true", "--audit", log)
    data = bytearray(log.read_bytes())
    # Change one byte inside the third line.
    lines = data.split(b"\n")
    third = lines[2]
    i = third.index(b'"kind"')
    third[i + 9] ^= 0x01
    lines[2] = third
    log.write_bytes(b"\n".join(lines))
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 1
    assert "seq 3" in v.stdout + v.stderr
    # The same verdict as one JSON object (the dashboard's report).
    v = airlock.run(["audit", "verify", "--json", log])
    assert v.returncode == 1, v.stderr
    j = json.loads(v.stdout)
    assert j["ok"] is False and j["badSeq"] in (3, 4) and j["reason"], j


def _secrets_file(airlock, content, mode=0o600):
    d = airlock.make_dir("secrets")
    f = d / "secrets.env"
    f.write_text(content)
    f.chmod(mode)
    airlock.chown(d)
    return f


def test_secret_reaching_stdout_is_redacted(airlock):
    log = _audit_file(airlock)
    sf = _secrets_file(airlock, f"API_KEY={SECRET}\n")
    p = airlock.run(["run", "-q", "--audit", log, "--secrets", sf,
                     "--route", "model=https://api.model.test",
                     "--inject", "model:x-api-key=${secret:API_KEY}",
                     "--", "/bin/sh", "-c", f"echo key={SECRET}; echo $(printf %s {SECRET} | base64) >&2"])
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stdout and "[REDACTED]" in p.stdout
    assert "[REDACTED]" in p.stderr
    text = log.read_text()
    assert SECRET not in text and "[REDACTED]" in text
    assert airlock.run(["audit", "verify", log]).returncode == 0


def test_secret_never_in_sandbox_env(airlock):
    sf = _secrets_file(airlock, f"API_KEY={SECRET}\n")
    p = airlock.run(["run", "-q", "--secrets", sf, "--route", "model=https://api.model.test",
                     "--inject", "model:authorization=Bearer ${secret:API_KEY}",
                     "--", "/bin/sh", "-c", "env; cat /proc/self/environ; cat /proc/1/environ"])
    assert SECRET not in p.stdout and "[REDACTED]" not in p.stdout


def test_env_naming_a_secret_is_refused(airlock):
    p = airlock.run(["run", "-q", "--env", "KEY=${secret:API_KEY}", "--", "true"], check_setup=False)
    assert p.returncode == 125
    assert "KEY" in p.stderr and "secret" in p.stderr and p.stderr.count("\n") == 1


def test_secrets_file_with_loose_mode_refused(airlock):
    sf = _secrets_file(airlock, f"API_KEY={SECRET}\n", mode=0o644)
    p = airlock.run(["run", "-q", "--secrets", sf, "--", "true"], check_setup=False)
    assert p.returncode == 125
    assert str(sf) in p.stderr and p.stderr.count("\n") == 1


def test_missing_secret_is_named(airlock):
    sf = _secrets_file(airlock, "OTHER=x\n")
    env = {k: v for k, v in os.environ.items() if k != "NOT_THERE_KEY"}
    p = airlock.run(["run", "-q", "--secrets", sf, "--route", "model=https://api.model.test",
                     "--inject", "model:x-api-key=${secret:NOT_THERE_KEY}", "--", "true"],
                    check_setup=False, env=env)
    assert p.returncode == 125
    assert "NOT_THERE_KEY" in p.stderr and p.stderr.count("\n") == 1


def test_audit_show_filters(airlock):
    log = _audit_file(airlock)
    airlock.sandbox("true", "--audit", log)
    p = airlock.run(["audit", "show", log, "--kind", "process.started", "--json"])
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert len(lines) == 1 and lines[0]["kind"] == "process.started"
