#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""make demo, the host-owned agent loop: a scripted model (tests/agentlib.py,
standing in for a model API) fixes a failing test in a demo repository.
`airlock agent` calls the model through a route whose key the host injects;
every tool call the model makes runs inside the sandbox; the diff comes back
in the result, and the workspace waits for `airlock accept`."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from agentlib import KEY, ScriptedModel  # noqa: E402

AIRLOCK = os.environ.get("AIRLOCK_BIN", str(ROOT / "build/src/cli/airlock"))

demo = pathlib.Path(tempfile.mkdtemp(prefix="airlock-agent-demo-"))
ws = demo / "project"
ws.mkdir()
(ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
(ws / "test_calc.py").write_text(
    "from calc import add\n\nassert add(2, 3) == 5, f'add(2, 3) = {add(2, 3)}'\nprint('tests pass')\n")
git = ["git", "-c", "user.name=demo", "-c", "user.email=demo@example.com", "-C", str(ws)]
subprocess.run([*git, "init", "-q"], check=True)
subprocess.run([*git, "add", "."], check=True)
subprocess.run([*git, "commit", "-qm", "calc"], check=True)
secrets = demo / "secrets.env"
secrets.write_text(f"MODEL_KEY={KEY}\n")
secrets.chmod(0o600)

script = [
    {"text": "Let me run the tests.", "calls": [("bash", {"command": "python3 -B test_calc.py"})]},
    {"calls": [("read_file", {"path": "calc.py"})]},
    {"text": "add subtracts; fixing it.",
     "calls": [("edit", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})]},
    {"calls": [("bash", {"command": "python3 -B test_calc.py"})]},
    {"text": "Fixed: add() returned a - b; the test passes now."},
]
print(f"== airlock agent: a scripted model fixes a failing test in {ws}")
with ScriptedModel(script) as model:
    p = subprocess.run([AIRLOCK, "agent", "--task", "make the tests pass", "-w", str(ws), "--review",
                        "--audit", str(demo / "audit.jsonl"), "--transcript", str(demo / "transcript.jsonl"),
                        *model.agent_args(secrets)], stdout=subprocess.PIPE, text=True, timeout=120)
res = json.loads(p.stdout)
print()
print(f"== the result: ok={res['ok']} errorCode={res['errorCode']} turns={res['usage']['turns']} "
      f"toolCalls={res['usage']['toolCalls']} runId={res['runId']}")
print("== the diff the agent proposes (the workspace is unchanged until 'airlock accept'):")
print(res["bundle"]["patches"][0] if res["bundle"]["patches"] else "(none)")
print(f"== calc.py on the host still says: {(ws / 'calc.py').read_text().splitlines()[1].strip()}")
print(f"== the model saw the key in no request body: {all(KEY not in json.dumps(r['body']) for r in model.requests)}")
subprocess.run([AIRLOCK, "discard", res["runId"]], capture_output=True)
subprocess.run(["rm", "-rf", str(demo)])
sys.exit(0 if res["ok"] else 1)
