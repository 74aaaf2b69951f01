# SPDX-License-Identifier: Apache-2.0
"""POST /v1/runs takes a policy from the grant, as a create does, and must
hold it to the same limits: a hardware section names a driver command the
host runs (host configuration: airlockd --hardware FILE, refused in a
create), and a grant's classes bound limits.memory, limits.cpus and
limits.timeout (and forbid timeout 0) whatever the class named."""

import pathlib
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from agentlib import ScriptedModel  # noqa: E402
from daemonlib import AirlockError  # noqa: E402


def policy(port, **extra):
    p = {"network": {"routes": [{"name": "model", "upstream": f"http://127.0.0.1:{port}",
                                 "inject": {"x-api-key": "${secret:MODEL_KEY}"}}],
                     "allowPrivate": ["127.0.0.1"]}}
    p.update(extra)
    return p


def test_a_runs_policy_may_not_name_a_hardware_driver(run_daemon, tmp_path):
    d = run_daemon
    c = d.client(d.grant("runner", "--allow-runs", "--secret", "MODEL_KEY"))
    mark = tmp_path / "driver-ran"
    tmp_path.chmod(0o777)
    hw = {"driver": {"command": ["/usr/bin/touch", str(mark)]},
          "actuators": {"allow": ["motor_left"]}, "limits": {"maxSpeed": 0.5}}
    script = [{"calls": [("bash", {"command": "true"})]}, {"text": "done"}]
    with ScriptedModel(script) as m:
        try:
            run = c.create_run("x", "test-model", policy(m.port, hardware=hw), max_turns=3)
        except AirlockError as e:
            assert e.status == 400 and e.body.get("field") == "policy.hardware", e.body
        else:
            try:
                c.wait_run(run["id"], timeout=60)
            finally:
                time.sleep(0.2)
            pytest.fail(f"accepted a run whose policy names a host driver command "
                        f"(the driver ran: {mark.exists()})")
    assert not mark.exists(), "a grant's run ran a command on the host"


def test_a_runs_policy_is_held_to_the_grants_classes(run_daemon):
    d = run_daemon
    c = d.client(d.grant("small-runner", "--allow-runs", "--secret", "MODEL_KEY", "--allow-host-workspace",
                         "--classes", "small"))
    for extra, limit in (({"class": "small", "limits": {"memory": "64G"}}, "limits.memory"),
                         ({"class": "small", "limits": {"cpus": 64}}, "limits.cpus"),
                         ({"class": "small", "limits": {"timeout": 0}}, "limits.timeout"),
                         ({"class": "large"}, "classes")):
        with pytest.raises(AirlockError) as e:
            c.create_run("x", "m", policy(1, **extra))
        assert (e.value.status, e.value.body.get("limit")) == (403, limit), (extra, e.value.body)
