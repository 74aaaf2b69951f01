# SPDX-License-Identifier: Apache-2.0
"""/v1/volumes and the "volumes"/"home" of a create (issue 15 item 3)."""

import uuid

import pytest

from daemonlib import AirlockError


@pytest.fixture
def vol(api):
    name = "t-" + uuid.uuid4().hex[:12]
    v = api.create_volume(name, "16M")
    assert v["name"] == name and v["size"] == 16 << 20 and v["attached"] is None
    yield name
    try:
        api.delete_volume(name)
    except AirlockError:
        pass


def test_create_list_get_delete(api, vol, shared_daemon):
    assert vol in [v["name"] for v in api.volumes()]
    assert api.get_volume(vol)["size"] == 16 << 20
    with pytest.raises(AirlockError) as e:
        api.create_volume(vol, "16M")
    assert e.value.status == 409
    with pytest.raises(AirlockError) as e:
        api.create_volume("../etc", "16M")
    assert e.value.status == 400
    with pytest.raises(AirlockError) as e:
        api.create_volume("t-small", "1M")
    assert e.value.status == 400
    with pytest.raises(AirlockError) as e:
        api.get_volume("no-such-volume-" + uuid.uuid4().hex[:6])
    assert e.value.status == 404
    api.delete_volume(vol)
    assert vol not in [v["name"] for v in api.volumes()]
    # Both were audited, and the log took them.
    import json
    lines = [json.loads(x) for x in open(shared_daemon.audit)]
    kinds = [(x["kind"], x.get("volume")) for x in lines if x["sandbox"] == "airlockd"]
    assert ("api.volume_created", vol) in kinds and ("api.volume_removed", vol) in kinds


def test_home_across_sandboxes_and_one_writer(api, vol):
    sb = api.create(sandbox_class="small", home=vol)
    try:
        r = api.run(sb["id"], ["sh", "-c", 'echo kept > "$HOME/note"; echo "$HOME"'])
        assert r.exit_code == 0, r.stderr
        assert api.get_volume(vol)["attached"] == "rw"
        # A second writer, and removal, are refused while it is attached.
        with pytest.raises(AirlockError) as e:
            api.create(sandbox_class="small", volumes=[{"name": vol, "target": "/data"}])
        assert e.value.status == 409
        with pytest.raises(AirlockError) as e:
            api.delete_volume(vol)
        assert e.value.status == 409
    finally:
        api.delete(sb["id"])
    sb = api.create(sandbox_class="small",
                    volumes=[{"name": vol, "target": "/data", "readonly": True}])
    try:
        r = api.run(sb["id"], ["sh", "-c", "cat /data/note; touch /data/x"])
        assert r.stdout == b"kept\n"
        assert r.exit_code != 0 and b"Read-only" in r.stderr
    finally:
        api.delete(sb["id"])


def test_create_with_bad_volumes(api):
    for body in ([{"name": "x"}], [{"name": "x", "target": "rel"}], "x"):
        with pytest.raises(AirlockError) as e:
            api.create(sandbox_class="small", volumes=body)
        assert e.value.status == 400
    with pytest.raises(AirlockError) as e:
        api.create(sandbox_class="small", home="no-such-" + uuid.uuid4().hex[:6])
    assert e.value.status == 404


def test_a_grant_sees_and_uses_only_its_own_volumes(api, vol, shared_daemon):
    """A home holds an agent's sessions and logins: another grant's volume
    is one that does not exist, and a volume made on the host needs a grant
    that may name host paths."""
    import subprocess
    from daemonlib import AIRLOCK
    assert api.get_volume(vol)["owner"] == "admin"
    other = shared_daemon.client(shared_daemon.grant(
        "other-" + uuid.uuid4().hex[:6], "--allow-sandbox", "--allow-exec"))
    assert vol not in [v["name"] for v in other.volumes()]
    for call in (lambda: other.get_volume(vol), lambda: other.delete_volume(vol),
                 lambda: other.create(sandbox_class="small", home=vol),
                 lambda: other.create(sandbox_class="small",
                                      volumes=[{"name": vol, "target": "/v", "readonly": True}]),
                 lambda: other.create(sandbox_class="small", policy={"filesystem": {"mounts": [
                     {"volume": vol, "target": "/v"}]}})):
        with pytest.raises(AirlockError) as e:
            call()
        assert e.value.status == 404, e.value
    assert api.get_volume(vol)["attached"] is None
    # Made on the host: the admin grant (allowHostWorkspace) may use it,
    # the other may not.
    host = "t-" + uuid.uuid4().hex[:12]
    p = subprocess.run([str(AIRLOCK), "volume", "create", host, "--size", "8M"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    try:
        assert api.get_volume(host)["owner"] is None
        with pytest.raises(AirlockError) as e:
            other.get_volume(host)
        assert e.value.status == 404
        sb = api.create(sandbox_class="small", home=host)
        api.delete(sb["id"])
    finally:
        subprocess.run([str(AIRLOCK), "volume", "rm", host], timeout=60)
