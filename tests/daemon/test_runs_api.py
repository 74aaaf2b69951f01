# SPDX-License-Identifier: Apache-2.0
"""POST /v1/runs and GET /v1/runs/{id}: `airlock agent` through the daemon
(docs/agent.md). The model is the scripted server of tests/agentlib.py,
reached through the policy's route with a daemon secret the grant names."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from agentlib import KEY, ScriptedModel  # noqa: E402
from daemonlib import AirlockError  # noqa: E402


def policy(port):
    return {"network": {"routes": [{"name": "model", "upstream": f"http://127.0.0.1:{port}",
                                    "inject": {"x-api-key": "${secret:MODEL_KEY}"}}],
                        "allowPrivate": ["127.0.0.1"]}}


def test_run_through_the_api(run_daemon):
    d = run_daemon
    c = d.client(d.grant("runner", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY"))
    script = [{"calls": [("write_file", {"path": "out.txt", "content": "made by the agent\n"}),
                         ("bash", {"command": "cat out.txt"})]},
              {"text": "done"}]
    with ScriptedModel(script) as m:
        run = c.create_run("write out.txt", "test-model", policy(m.port), max_turns=5)
        assert run["state"] == "running" and len(run["id"]) == 16
        r = c.wait_run(run["id"], timeout=60)
    assert r["state"] == "done", r
    res = r["result"]
    assert res["ok"] and res["runId"] == run["id"] and res["summary"] == "done", res
    results = [e for e in r["transcript"] if e["type"] == "tool.result"]
    assert results[1]["result"] == "made by the agent\n"
    assert all(q["headers"]["x-api-key"] == KEY for q in m.requests)
    # Its model calls and tool calls are in the daemon's audit log.
    audit = [__import__("json").loads(l) for l in d.audit.read_text().splitlines() if l.strip()]
    mine = [e for e in audit if e.get("sandbox") == run["id"]]
    assert len([e for e in mine if e["kind"] == "route.call"]) == 2
    started = {e["pid"] for e in mine if e["kind"] == "process.started"}
    assert {e["pid"] for e in results} <= started
    # The stream of a finished run replays its transcript, then its result.
    events = list(c.run_events(run["id"], timeout=30))
    assert [n for n, _ in events].count("result") == 1 and events[-1][0] == "result"
    assert [e for n, e in events if n == "transcript"] == r["transcript"]
    assert events[-1][1]["runId"] == run["id"]
    # Another grant sees no such run.
    other = d.client(d.grant("other", "--allow-runs"))
    with pytest.raises(AirlockError) as e:
        other.get_run(run["id"])
    assert e.value.status == 404


def test_runs_need_the_grant_flag_and_a_named_secret(run_daemon):
    d = run_daemon
    plain = d.client(d.admin)
    with pytest.raises(AirlockError) as e:
        plain.create_run("x", "m", policy(1))
    assert (e.value.status, e.value.body["permission"]) == (403, "allowRuns")
    nosecret = d.client(d.grant("nosecret", "--allow-runs"))
    with pytest.raises(AirlockError) as e:
        nosecret.create_run("x", "m", policy(1))
    assert (e.value.status, e.value.body["limit"]) == (403, "secrets")
    runner = d.client(d.grant("runner2", "--allow-runs", "--secret", "MODEL_KEY"))
    with pytest.raises(AirlockError) as e:
        runner.create_run("x", "m", {"network": {"routes": []}})
    assert e.value.status == 400 and e.value.body["field"] == "policy"
    with pytest.raises(AirlockError) as e:
        runner.create_run("x", "m", policy(1), provider="other")
    assert e.value.status == 400 and e.value.body["field"] == "provider"


def test_run_events_stream_as_they_happen(run_daemon):
    d = run_daemon
    c = d.client(d.grant("streamer", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY"))
    script = [{"calls": [("bash", {"command": "echo first"})]},
              {"calls": [("bash", {"command": "sleep 2; echo second"})]},
              {"text": "done"}]
    with ScriptedModel(script) as m:
        run = c.create_run("t", "test-model", policy(m.port))
        seen = []
        for name, e in c.run_events(run["id"], timeout=60):
            seen.append((name, e))
            if name == "transcript" and e["type"] == "tool.result" and e["result"] == "first\n":
                # Seen while the run still goes on.
                assert c.get_run(run["id"])["state"] == "running"
    assert seen[-1][0] == "result" and seen[-1][1]["ok"], seen[-1]
    results = [e["result"] for n, e in seen if n == "transcript" and e["type"] == "tool.result"]
    assert results == ["first\n", "second\n"]


JS = """
import { Client } from %s;
const [sock, token, port] = process.argv.slice(2);
const c = new Client({ socketPath: sock, token });
const policy = { network: { routes: [{ name: "model", upstream: `http://127.0.0.1:${port}`,
                 inject: { "x-api-key": "${secret:MODEL_KEY}" } }], allowPrivate: ["127.0.0.1"] } };
const run = await c.createRun({ task: "t", model: "m", policy });
const names = [];
const result = await c.runEvents(run.id, (name) => names.push(name));
const got = await c.getRun(run.id);
console.log(JSON.stringify({ names, ok: result.ok, state: got.state }));
"""


@pytest.mark.skipif(not __import__("shutil").which("node"), reason="node is not installed")
def test_js_client_runs(run_daemon, tmp_path):
    import json
    import subprocess
    d = run_daemon
    token = d.grant("js", "--allow-runs", "--allow-host-workspace", "--secret", "MODEL_KEY")
    index = pathlib.Path(__file__).resolve().parent.parent.parent / "clients/js/index.js"
    script = tmp_path / "run.mjs"
    script.write_text(JS % json.dumps(index.as_uri()))
    with ScriptedModel([{"calls": [("bash", {"command": "true"})]}, {"text": "ok"}]) as m:
        p = subprocess.run(["node", str(script), str(d.socket), token, str(m.port)],
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["ok"] and out["state"] == "done" and out["names"][-1] == "result", out
    assert out["names"].count("transcript") >= 4, out
