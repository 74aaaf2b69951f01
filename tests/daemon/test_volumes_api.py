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
