# SPDX-License-Identifier: Apache-2.0
"""`airlock agent`: the host owns the model loop, the sandbox only executes
(docs/agent.md). A scripted model server (tests/agentlib.py) stands in for
the model API, reached through a route whose key is injected on the host."""

import json
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from agentlib import KEY, ScriptedModel, read_jsonl, write_secrets  # noqa: E402

GIT = ["git", "-c", "init.defaultBranch=main", "-c", "user.name=T", "-c", "user.email=t@example.com"]


def git(*args, cwd=None):
    return subprocess.run([*GIT, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          check=True, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp",
                                           "GIT_CONFIG_GLOBAL": "/dev/null",
                                           "GIT_CONFIG_NOSYSTEM": "1",
                                           "GIT_CEILING_DIRECTORIES": "/",
                                           "GIT_CONFIG_COUNT": "1",
                                           "GIT_CONFIG_KEY_0": "safe.directory",
                                           "GIT_CONFIG_VALUE_0": "*"})


def run_agent(airlock, model, d, *opts, task="fix the failing test", timeout=90):
    sf = write_secrets(airlock, d)
    args = ["agent", "--task", task, "--audit", d / "audit.jsonl",
            "--transcript", d / "transcript.jsonl", "--backoff-ms", "50",
            *model.agent_args(sf), *opts]
    airlock.chown(d)
    p = airlock.run(args, input="", timeout=timeout, check_setup=False)
    assert p.stdout.strip(), p.stderr
    return p, json.loads(p.stdout.strip().splitlines()[-1])


def plain_ws(airlock):
    ws = airlock.make_dir("agent-ws")
    git("init", "-q", ws)
    (ws / "a.txt").write_text("hello\n")
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "init", cwd=ws)
    airlock.chown(ws)
    return ws


def test_merge_gate_clone_edit_test_commit_push(airlock):
    """clone@sha -> run the tests -> edit -> tests pass -> commit -> the host
    pushes a branch; the model's key is never inside the sandbox."""
    d = airlock.make_dir("agent")
    bare = d / "remote.git"
    git("init", "-q", "--bare", bare)
    seed = d / "seed"
    git("clone", "-q", bare, seed)
    (seed / "calc.sh").write_text("echo $((2 + 3 - 1))\n")
    (seed / "test.sh").write_text('test "$(sh calc.sh)" = 5 && echo PASS || { echo FAIL; exit 1; }\n')
    git("add", ".", cwd=seed)
    git("commit", "-q", "-m", "calc with a bug", cwd=seed)
    git("push", "-q", "origin", "HEAD:main", cwd=seed)
    sha = git("rev-parse", "HEAD", cwd=seed).stdout.strip()
    airlock.chown(d)
    # The key is searched for in two halves, so that the command itself does
    # not hold it.
    half = len(KEY) // 2
    hunt = (f"env; A={KEY[:half]}; B={KEY[half:]}; "
            'grep -rl "$A$B" /workspace /tmp /home /etc /run /var /root /dev/shm 2>/dev/null; '
            "cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n' | grep -c \"$A$B\"; "
            "echo SEARCHED")
    script = [
        {"calls": [("bash", {"command": "sh test.sh"})]},
        {"calls": [("bash", {"command": hunt})]},
        {"calls": [("edit", {"path": "calc.sh", "old_string": "- 1", "new_string": ""})]},
        {"calls": [("bash", {"command": "sh test.sh && git -c user.name=Agent "
                             "-c user.email=agent@example.com commit -qam 'calc: drop the stray -1'"})]},
        {"text": "fixed"},
    ]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "--repo", f"file://{bare}", "--rev", sha,
                           "--push", "agent/fix-calc", timeout=120)
    assert p.returncode == 0 and res["ok"] and res["errorCode"] is None, (p.stderr, res)
    assert res["bundle"]["commitMessages"] == ["calc: drop the stray -1"], res
    assert len(res["bundle"]["patches"]) == 1 and "-echo $((2 + 3 - 1))" in res["bundle"]["patches"][0]
    assert res["push"]["branch"] == "agent/fix-calc", res
    # The branch is in the remote: the base plus exactly the agent's commit.
    log = git("--git-dir", bare, "log", "--format=%s", "agent/fix-calc").stdout.split("\n")
    assert log[:2] == ["calc: drop the stray -1", "calc with a bug"]
    # The tool results went back to the model: the first test failed, the
    # last passed; the key was in no env and no file of the sandbox.
    results = [e for e in read_jsonl(d / "transcript.jsonl") if e["type"] == "tool.result"]
    assert "FAIL" in results[0]["result"] and "PASS" in results[3]["result"]
    assert "SEARCHED" in results[1]["result"] and KEY not in results[1]["result"]
    assert "PATH=" in results[1]["result"]
    for r in m.requests:
        assert r["headers"]["x-api-key"] == KEY
        assert KEY not in json.dumps(r["body"])
    # The push was the host's: audited as git.push, not a sandbox process.
    audit = read_jsonl(d / "audit.jsonl")
    assert [e["branch"] for e in audit if e["kind"] == "git.push"] == ["agent/fix-calc"]


def test_streamed_and_whole_answers_in_both_formats(airlock):
    d = airlock.make_dir("agent")
    ws = plain_ws(airlock)
    for provider in ("anthropic", "openai"):
        for stream in (True, False):
            (ws / "a.txt").write_text("hello\n")
            script = [{"calls": [("edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"}),
                                 ("read_file", {"path": "a.txt"})]},
                      {"text": "done"}]
            with ScriptedModel(script, provider) as m:
                p, res = run_agent(airlock, m, d, "-w", ws, *([] if stream else ["--no-stream"]))
            assert res["ok"] and res["summary"] == "done", (provider, stream, p.stderr)
            assert m.requests[0]["body"]["stream"] is stream
            assert res["usage"]["inputTokens"] == 200 and res["usage"]["outputTokens"] == 40
            assert "+bye" in res["bundle"]["patches"][0]
            # The model got the tool results back, in its own format.
            second = json.dumps(m.requests[1]["body"]["messages"])
            assert "edited a.txt" in second and "bye" in second


def test_max_turns(airlock):
    d = airlock.make_dir("agent")
    with ScriptedModel([{"repeat": {"calls": [("bash", {"command": "true"})]}}]) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--max-turns", "3")
    assert p.returncode == 3 and res["errorCode"] == "budget_exhausted", (p.stderr, res)
    assert len(m.requests) == 3 and res["usage"]["turns"] == 3


def test_max_tokens(airlock):
    d = airlock.make_dir("agent")
    with ScriptedModel([{"repeat": {"calls": [("bash", {"command": "true"})]}}]) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--max-tokens", "250")
    # 120 tokens a turn: the third turn passes 250.
    assert p.returncode == 3 and res["errorCode"] == "budget_exhausted", (p.stderr, res)
    assert len(m.requests) == 3


def test_disallowed_host_tool_comes_back_as_policy_denied(airlock):
    d = airlock.make_dir("agent")
    script = [{"calls": [("host_tool", {"name": "core.env", "arguments": {}}),
                         ("host_tool", {"name": "core.time", "arguments": {}})]},
              {"text": "ok"}]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--tool", "core.time")
    assert res["ok"], p.stderr
    results = m.requests[1]["body"]["messages"][-1]["content"]
    assert results[0]["is_error"] and "policy_denied" in results[0]["content"], results
    assert not results[1]["is_error"] and "unixMs" in results[1]["content"], results
    tools = [e for e in read_jsonl(d / "audit.jsonl") if e["kind"] == "tool.call"]
    assert [(t["tool"], t.get("errorCode")) for t in tools][:1] == [("core.env", "policy_denied")]


def test_hanging_command_times_out_and_the_loop_goes_on(airlock):
    d = airlock.make_dir("agent")
    script = [{"calls": [("bash", {"command": "sleep 300"})]},
              {"calls": [("bash", {"command": "echo after"})]},
              {"text": "ok"}]
    t0 = time.monotonic()
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--cmd-timeout", "2")
    assert time.monotonic() - t0 < 40
    assert res["ok"], p.stderr
    results = [e for e in read_jsonl(d / "transcript.jsonl") if e["type"] == "tool.result"]
    assert results[0]["errorCode"] == "timeout" and "timeout" in results[0]["result"]
    assert results[1]["result"].strip() == "after"


def test_api_error_retried_then_task_failed(airlock):
    d = airlock.make_dir("agent")
    with ScriptedModel([{"repeat": {"status": 500}}]) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--retries", "2")
    assert p.returncode == 1 and res["errorCode"] == "task_failed", (p.stderr, res)
    assert len(m.requests) == 3 and "500" in res["message"]
    # A 4xx other than 429 is not retried.
    with ScriptedModel([{"repeat": {"status": 400}}]) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--retries", "2")
    assert res["errorCode"] == "task_failed" and len(m.requests) == 1


def test_transcript_and_audit_agree(airlock):
    d = airlock.make_dir("agent")
    script = [{"calls": [("bash", {"command": "echo one"}), ("list_files", {})]},
              {"calls": [("write_file", {"path": "sub/new.txt", "content": "x\n"})]},
              {"text": "done"}]
    # The route records the model server's call id in each route.call.
    pol = d / "policy.json"
    pol.write_text(json.dumps({"network": {"routes": [{"name": "model", "upstream": "http://x",
                                                        "record": ["x-call-id"]}]}}))
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "-p", pol)
    assert res["ok"], p.stderr
    tr = read_jsonl(d / "transcript.jsonl")
    audit = [e for e in read_jsonl(d / "audit.jsonl") if e["sandbox"] == res["runId"]]
    calls = [e for e in audit if e["kind"] == "route.call"]
    assert len(calls) == len([e for e in tr if e["type"] == "model.call"]) == 3
    assert all(c["tool"] == "agent.model" and c["status"] == 200 for c in calls)
    assert [c["recorded"]["x-call-id"] for c in calls] == ["call-1", "call-2", "call-3"]
    started = {e["pid"]: e for e in audit if e["kind"] == "process.started"}
    for e in tr:
        if e["type"] == "tool.result":
            assert e["pid"] in started, (e, started)
    assert started[[e for e in tr if e["type"] == "tool.result"][0]["pid"]]["argv"][-1] == "echo one"


def test_bad_flags(airlock):
    p = airlock.run(["agent", "--model", "m"], check_setup=False)
    assert p.returncode == 2 and "--task" in p.stderr
    p = airlock.run(["agent", "--task", "x", "--model", "m", "--provider", "nope"], check_setup=False)
    assert p.returncode == 2 and "anthropic or openai" in p.stderr
    p = airlock.run(["agent", "--task", "x", "--model", "m", "--push", "b"], check_setup=False)
    assert p.returncode == 2 and "--repo" in p.stderr


def test_model_route_is_the_hosts_alone(airlock):
    """The sandbox cannot call the model through the agent's route: the key
    would be injected into its request."""
    d = airlock.make_dir("agent")
    probe = ("python3 -c \"import urllib.request as u, urllib.error as e\n"
             "try:\n"
             " r = u.urlopen(u.Request('http://127.0.0.1:8080/model/v1/messages', data=b'{}'), timeout=10)\n"
             " print('STATUS', r.status)\n"
             "except e.HTTPError as x:\n"
             " print('STATUS', x.code, x.headers.get('x-airlock-denied'))\"")
    script = [{"calls": [("bash", {"command": probe})]}, {"text": "ok"}]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock))
        assert res["ok"], p.stderr
        assert len(m.requests) == 2, [r["path"] for r in m.requests]
    out = [e for e in read_jsonl(d / "transcript.jsonl") if e["type"] == "tool.result"][0]["result"]
    assert "STATUS 403 host_only" in out, out
    denied = [e for e in read_jsonl(d / "audit.jsonl")
              if e["kind"] == "route.call" and e["sandbox"] == res["runId"] and e["decision"] == "deny"]
    assert [e["reason"] for e in denied] == ["host_only"]


def test_review_leaves_the_diff_for_accept(airlock):
    d = airlock.make_dir("agent")
    ws = plain_ws(airlock)
    state = airlock.make_dir("state")
    script = [{"calls": [("write_file", {"path": "a.txt", "content": "changed\n"})]}, {"text": "ok"}]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", ws, "--review", "--state-root", state)
    assert res["ok"], p.stderr
    assert (ws / "a.txt").read_text() == "hello\n"
    assert "+changed" in res["bundle"]["patches"][0]
    assert res["review"]["sandbox"] == res["runId"]
    acc = airlock.run(["accept", "--state-root", state, res["runId"]])
    assert acc.returncode == 0, acc.stderr
    assert (ws / "a.txt").read_text() == "changed\n"


def test_wall_timeout_cuts_a_command_and_ends_the_run(airlock):
    d = airlock.make_dir("agent")
    t0 = time.monotonic()
    with ScriptedModel([{"repeat": {"calls": [("bash", {"command": "sleep 60"})]}}]) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--timeout", "4")
    assert time.monotonic() - t0 < 40
    assert p.returncode == 124 and res["errorCode"] == "timeout", (p.stderr, res)
    # The first command was cut at the run's end, not left to sleep its 60 s.
    assert 1 <= len(m.requests) <= 2, len(m.requests)


def test_a_signal_to_the_agent_ends_its_sandbox(airlock):
    import os
    import signal
    d = airlock.make_dir("agent")
    sf = write_secrets(airlock, d)
    # A TMPDIR of its own: other runs' private directories come and go in /tmp.
    tmp = airlock.make_dir("tmp")
    with ScriptedModel([{"calls": [("bash", {"command": "sleep 60"})]}, {"text": "x"}]) as m:
        proc = subprocess.Popen(airlock.cmd(["agent", "--task", "t", "--audit", d / "audit.jsonl",
                                             "-w", plain_ws(airlock), *m.agent_args(sf)]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, TMPDIR=str(tmp)))
        deadline = time.monotonic() + 30
        sid = None
        while time.monotonic() < deadline and not sid:
            time.sleep(0.2)
            if (d / "audit.jsonl").exists():
                started = [e for e in read_jsonl(d / "audit.jsonl") if e["kind"] == "process.started"]
                sid = started[0]["sandbox"] if started else None
        assert sid, "the command never started"
        # The agent alone (not its group) is told to stop.
        before = set(tmp.glob("airlock-agent-*"))
        # runas.sh execs the command: the pid is the agent's.
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)

        def supervisors():
            out = []
            for p in os.listdir("/proc"):
                try:
                    if p.isdigit() and sid.encode() in open(f"/proc/{p}/cmdline", "rb").read():
                        out.append(p)
                except OSError:
                    pass
            return out
        end = time.monotonic() + 15
        while supervisors() and time.monotonic() < end:
            time.sleep(0.2)
        assert not supervisors()
        # Its private directory (the policy, the run dir) is gone too.
        after = set(tmp.glob("airlock-agent-*"))
        assert len(after - before) == 0 and len(before - after) == 1
    ends = [e for e in read_jsonl(d / "audit.jsonl") if e["kind"] == "sandbox.destroyed" and e["sandbox"] == sid]
    assert len(ends) == 1


def test_run_policy_flags_shape_the_sandbox(airlock):
    d = airlock.make_dir("agent")
    extra = airlock.make_dir("extra")
    (extra / "data.txt").write_text("fixture\n")
    airlock.chown(extra)
    script = [{"calls": [("bash", {"command": "cat /fixtures/data.txt; (echo x > /fixtures/new) "
                                              "2>/dev/null || echo READONLY; echo $GREETING"})]},
              {"text": "ok"}]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--ro", f"{extra}:/fixtures",
                           "--env", "GREETING=hello", "--pids", "64")
    assert res["ok"], p.stderr
    out = [e for e in read_jsonl(d / "transcript.jsonl") if e["type"] == "tool.result"][0]["result"]
    assert out == "fixture\nREADONLY\nhello\n", out
    bad = airlock.run(["agent", "--task", "t", "--model", "m", "--read", "all"], check_setup=False)
    assert bad.returncode == 2 and "system or host" in bad.stderr


def test_edit_refusals_and_large_output_truncated(airlock):
    d = airlock.make_dir("agent")
    ws = plain_ws(airlock)
    (ws / "b.txt").write_text("x x\n")
    airlock.chown(ws)
    script = [{"calls": [("edit", {"path": "a.txt", "old_string": "absent", "new_string": "y"}),
                         ("edit", {"path": "b.txt", "old_string": "x", "new_string": "y"}),
                         ("bash", {"command": "head -c 100000 /dev/zero | tr '\\0' a"}),
                         ("read_file", {"path": "missing.txt"}),
                         ("no_such_tool", {})]},
              {"text": "ok"}]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", ws, "--output-cap", "1000")
    assert res["ok"], p.stderr
    r = [e for e in read_jsonl(d / "transcript.jsonl") if e["type"] == "tool.result"]
    assert r[0]["isError"] and "not found" in r[0]["result"]
    assert r[1]["isError"] and "occurs 2 times" in r[1]["result"]
    assert (ws / "b.txt").read_text() == "x x\n"
    assert r[2]["result"].startswith("a" * 1000)
    assert "[airlock: output truncated, 99000 more bytes not shown]" in r[2]["result"]
    assert r[3]["isError"] and "No such file" in r[3]["result"]
    assert r[4]["isError"] and "unknown tool" in r[4]["result"]


def test_terminal_escapes_from_the_model_and_the_sandbox_are_shown_escaped(airlock):
    d = airlock.make_dir("agent")
    script = [{"text": "title \x1b]0;pwned\x07 and \u009b2J",
               "calls": [("bash", {"command": "printf 'out \\033[2J \\302\\233 done'"})]},
              {"text": "ok"}]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock))
    assert res["ok"], p.stderr
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr and "\u009b" not in p.stderr
    assert "title \\x1b]0;pwned\\x07 and \\x9b2J" in p.stderr, p.stderr
    assert "out \\x1b[2J \\x9b done" in p.stderr, p.stderr


def test_agent_takes_runs_uid_and_audit_rotate_flags(airlock):
    """Flags the agent gained from run through one engine (policyflags.c):
    --uid and --audit-rotate (its supervisor rotates the log) live; --volume, --io-* with run's messages;
    --net is not one of them (the model is called through the gate)."""
    d = airlock.make_dir("agent")
    script = [{"calls": [("bash", {"command": "id -u"})]}] * 4 + [{"text": "ok"}]
    with ScriptedModel(script) as m:
        p, res = run_agent(airlock, m, d, "-w", plain_ws(airlock), "--uid", "0",
                           "--audit-rotate", "4K:3")
    assert res["ok"], p.stderr
    # The supervisor rotated the log at 4K (one run writes more than that).
    assert (d / "audit.jsonl.1").exists(), sorted(x.name for x in d.iterdir())
    out = [e for e in read_jsonl(d / "transcript.jsonl") if e["type"] == "tool.result"][0]["result"]
    assert out.startswith("0\n"), out
    for flag, value, why in [("--uid", "x", "--uid \"x\": expected a number from 0 to 65534"),
                             ("--volume", "v", "--volume \"v\": expected NAME:/PATH[:ro]"),
                             ("--audit-rotate", "lots", "expected SIZE[:KEEP]"),
                             ("--io-read-bps", "fast", "io.readBps"),
                             ("--net", "none", "unknown option")]:
        bad = airlock.run(["agent", "--task", "t", "--model", "m", flag, value], check_setup=False)
        assert bad.returncode == 2 and why in bad.stderr, (flag, bad.stderr)
