# SPDX-License-Identifier: Apache-2.0
"""A run's policy may name volumes (filesystem.mounts with "volume"), and
the agent mounts them as the daemon's user: a volume is its grant's, as in
a create, so a run may not name another grant's volume (it would read and
write what the other grant keeps there)."""

import pathlib
import secrets
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from agentlib import ScriptedModel  # noqa: E402
from daemonlib import AirlockError  # noqa: E402


def test_a_run_may_not_mount_another_grants_volume(run_daemon):
    d = run_daemon
    owner = d.client(d.grant("owner", "--allow-sandbox", "--allow-exec"))
    vol = "rv-" + secrets.token_hex(4)
    owner.create_volume(vol, "16M")
    try:
        thief = d.client(d.grant("thief", "--allow-runs", "--secret", "MODEL_KEY",
                                 "--allow-host-workspace"))
        script = [{"calls": [("bash", {"command": "echo taken > /data/taken; ls /data"})]},
                  {"text": "done"}]
        with ScriptedModel(script) as m:
            pol = {"network": {"routes": [{"name": "model",
                                           "upstream": f"http://127.0.0.1:{m.port}",
                                           "inject": {"x-api-key": "${secret:MODEL_KEY}"}}],
                               "allowPrivate": ["127.0.0.1"]},
                   "filesystem": {"mounts": [{"volume": vol, "target": "/data"}]}}
            try:
                run = thief.create_run("x", "test-model", pol, max_turns=3)
            except AirlockError as e:
                assert e.status == 404 and vol in e.body["message"], e.body
            else:
                r = thief.wait_run(run["id"], timeout=60)
                pytest.fail(f"a run mounted another grant's volume: {r.get('transcript')}")
    finally:
        owner.delete_volume(vol)
