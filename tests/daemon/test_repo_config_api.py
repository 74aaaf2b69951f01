# SPDX-License-Identifier: Apache-2.0
"""The daemon's create reads the workspace's .airlock/isolation.json as
`airlock run` does (docs/tiers.md): minimumTier always (409
repo_config_refused, naming the tier), a bad file refused naming the key
(400 invalid_repo_config), what only tightens applied, what widens only when
the policy trusts repository config."""

import json


def workspace(tmp_path, cfg):
    ws = tmp_path / "ws"
    (ws / ".airlock").mkdir(parents=True)
    (ws / ".airlock/isolation.json").write_text(json.dumps(cfg))
    return ws


def test_minimum_tier_refused_through_the_api(api, tmp_path):
    ws = workspace(tmp_path, {"minimumTier": "gvisor"})
    status, _, body = api.request("POST", "/v1/sandboxes",
                                  {"class": "small", "workspace": str(ws)})
    assert status == 409, body
    b = json.loads(body)
    assert b["error"] == "repo_config_refused" and "gvisor" in b["message"], b


def test_bad_repo_config_refused_naming_the_key(api, tmp_path):
    ws = workspace(tmp_path, {"minimumTier": "namespace", "surprise": 1})
    status, _, body = api.request("POST", "/v1/sandboxes",
                                  {"class": "small", "workspace": str(ws)})
    assert status == 400, body
    b = json.loads(body)
    assert b["error"] == "invalid_repo_config" and "surprise" in b["message"], b


def test_untrusted_applies_neither_env_nor_domains(api, tmp_path):
    ws = workspace(tmp_path, {"minimumTier": "namespace", "env": {"REPO_ASKED": "yes"},
                              "allowedDomains": ["example.com"]})
    sb = api.create(sandbox_class="small", workspace=str(ws))
    try:
        out = api.run(sb["id"], ["/bin/sh", "-c", "echo $REPO_ASKED; echo ${HTTPS_PROXY:-none}"])
        assert out.stdout.split() == [b"none"], (out.stdout, out.stderr)
    finally:
        api.delete(sb["id"])


def test_trusted_applies_domains(api, tmp_path):
    ws = workspace(tmp_path, {"allowedDomains": ["example.com"], "env": {"REPO_ASKED": "yes"}})
    sb = api.create(sandbox_class="small", workspace=str(ws),
                    policy={"trustRepoConfig": True})
    try:
        out = api.run(sb["id"], ["/bin/sh", "-c", "echo $REPO_ASKED ${HTTPS_PROXY:-none}"])
        assert b"127.0.0.1:3128" in out.stdout, (out.stdout, out.stderr)
        assert out.stdout.startswith(b"yes "), (out.stdout, out.stderr)
    finally:
        api.delete(sb["id"])
