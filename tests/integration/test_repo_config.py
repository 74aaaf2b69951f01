# SPDX-License-Identifier: Apache-2.0
"""The workspace's .airlock/isolation.json: minimumTier always enforced,
network and mounts only when trusted, hostile files refused."""

import json
import os


def ws_with(airlock, cfg, raw=None):
    ws = airlock.make_dir()
    (ws / ".airlock").mkdir()
    (ws / "fix").mkdir()
    (ws / "fix/data").write_text("fixture\n")
    (ws / ".airlock/isolation.json").write_text(raw if raw is not None else json.dumps(cfg))
    airlock.chown(ws)
    return ws


def test_minimum_tier_enforced(airlock):
    ws = ws_with(airlock, {"minimumTier": "gvisor"})
    p = airlock.sandbox("true", workspace=ws, check_setup=False, timeout=30)
    assert p.returncode == 125
    assert "requires tier gvisor" in p.stderr and "this run's tier is namespace" in p.stderr


def test_untrusted_adds_nothing(airlock):
    ws = ws_with(airlock, {"allowedDomains": ["example.com"], "env": {"FROM_REPO": "yes"},
                           "mounts": [{"source": "fix", "target": "/fix"}]})
    p = airlock.run(["run", "-w", ws, "--", "/bin/sh", "-c",
                     "echo env=$FROM_REPO; ls /fix; echo proxy=$HTTPS_PROXY"], timeout=60)
    assert "env=\n" in p.stdout
    assert "fixture" not in p.stdout and "proxy=\n" in p.stdout + "\n"
    assert "not applied" in p.stderr and "--trust-repo-config" in p.stderr


def test_trusted_applies_readonly(airlock):
    ws = ws_with(airlock, {"allowedDomains": ["example.com"],
                           "mounts": [{"source": "fix", "target": "/fix"}]})
    p = airlock.sandbox("cat /fix/data; echo x > /fix/data || echo ro; echo p=$HTTPS_PROXY",
                        "--trust-repo-config", workspace=ws, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "fixture" in p.stdout and "ro" in p.stdout.split()
    assert "p=http://127.0.0.1:3128" in p.stdout


def test_limits_only_tighten(airlock):
    ws = ws_with(airlock, {"limits": {"timeout": "1s"}})
    p = airlock.sandbox("sleep 5", workspace=ws, timeout=30)
    assert p.returncode == 124


def test_hostile_files_refused(airlock):
    cases = [
        (None, '{"bogus": 1}', "unknown key"),
        (None, '{"mounts": [{"source": "../..", "target": "/x"}]}', "inside the workspace"),
        (None, '{"mounts": [{"source": "fix", "target": "/x", "readonly": false}]}', "read-only"),
        (None, '{"minimumTier": "weak"}', "minimumTier"),
        (None, "[1", ".airlock/isolation.json"),
        (None, '{"env": {"A": "x", "A": "y"}}', "duplicate"),
    ]
    for _, raw, why in cases:
        ws = ws_with(airlock, None, raw=raw)
        p = airlock.sandbox("true", "--trust-repo-config", workspace=ws, check_setup=False,
                            timeout=30)
        assert p.returncode == 125, raw
        assert why in p.stderr, (raw, p.stderr)
    ws = ws_with(airlock, None, raw="{}")
    os.unlink(ws / ".airlock/isolation.json")
    os.symlink("/etc/passwd", ws / ".airlock/isolation.json")
    p = airlock.sandbox("true", workspace=ws, check_setup=False, timeout=30)
    assert p.returncode == 125 and "symbolic link" in p.stderr
