# SPDX-License-Identifier: Apache-2.0
"""`airlock agent` on a repository that asks for a stronger tier in its
.airlock/isolation.json: the agent is exactly the run that works on a
repository it did not write, and it never read the file, so a repository's
minimumTier was not enforced there (docs/tiers.md). It is now, before the
model is called."""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from agentlib import ScriptedModel, write_secrets  # noqa: E402


def test_agent_enforces_minimum_tier(airlock):
    d = airlock.make_dir("agent")
    ws = airlock.make_dir("agent-ws")
    (ws / ".airlock").mkdir()
    (ws / ".airlock/isolation.json").write_text(json.dumps({"minimumTier": "microvm"}))
    airlock.chown(ws)
    with ScriptedModel([{"text": "ok"}]) as m:
        sf = write_secrets(airlock, d)
        airlock.chown(d)
        p = airlock.run(["agent", "--task", "look", "--audit", d / "audit.jsonl",
                         "--backoff-ms", "50", *m.agent_args(sf), "-w", ws],
                        input="", timeout=60, check_setup=False)
        assert len(m.requests) == 0, "the model was called"
    assert p.returncode == 125, (p.stdout, p.stderr)
    assert "requires tier microvm" in p.stderr, p.stderr
