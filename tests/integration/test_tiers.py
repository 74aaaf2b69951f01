# SPDX-License-Identifier: Apache-2.0
"""Isolation tiers: --tier and the policy's "tier", the container tier's
image root, and the refusals (exit 125 with the reason) of the tiers this
build cannot run."""

import json
import os

import pytest

from tierlib import import_image, make_rootfs


def test_unknown_tier_refused(airlock):
    p = airlock.run(["run", "-q", "--tier", "vm", "--", "true"], check_setup=False, timeout=30)
    assert p.returncode == 125
    assert 'unknown tier "vm"' in p.stderr and "namespace, container" in p.stderr


def test_unknown_tier_in_policy_refused(airlock):
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text(json.dumps({"tier": "chroot"}))
    airlock.chown(pol.parent)
    p = airlock.run(["run", "-q", "-p", pol, "--", "true"], check_setup=False, timeout=30)
    assert p.returncode == 125
    assert '"tier"' in p.stderr and "must be one of" in p.stderr


def test_namespace_tier_in_result(airlock):
    p, res = airlock.result(["-q", "--tier", "namespace", "--", "true"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert res["tier"] == "namespace"


def test_microvm_refused_with_reason(airlock):
    p = airlock.run(["run", "-q", "--tier", "microvm", "--", "true"], check_setup=False, timeout=60)
    if p.returncode == 0:
        pytest.skip("the microvm tier runs here: tests/integration/test_tier_microvm.py")
    assert p.returncode == 125, p.stderr
    assert "tier microvm:" in p.stderr and "/dev/kvm" in p.stderr, p.stderr


def test_gvisor_tier_runs_in_result(airlock):
    if not os.access("/usr/bin/runsc", os.X_OK):
        p = airlock.run(["run", "-q", "--tier", "gvisor", "--", "true"], check_setup=False)
        assert p.returncode == 125 and "runsc" in p.stderr
        return
    p, res = airlock.result(["-q", "--tier", "gvisor", "--", "/bin/true"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert res["tier"] == "gvisor"


def test_container_needs_image(airlock):
    p = airlock.run(["run", "-q", "--tier", "container", "--", "true"], check_setup=False, timeout=30)
    assert p.returncode == 125 and "needs an image" in p.stderr
    p = airlock.run(["run", "-q", "--tier", "container", "--image", "no-such-image", "--", "true"],
                    check_setup=False, timeout=30)
    assert p.returncode == 125 and 'image "no-such-image" not found' in p.stderr


def test_container_root_is_the_image(airlock):
    name, _ = import_image(airlock, make_rootfs(airlock))
    try:
        ws = airlock.make_dir()
        p, res = airlock.result(["-q", "-w", ws, "--tier", "container", "--image", name, "--",
                                 "/bin/sh", "-c",
                                 "cat /etc/os-release; ls /usr/bin; echo ok > /workspace/out; "
                                 "echo x > /bin/new || echo ro"], timeout=60)
        assert p.returncode == 0, p.stderr
        assert res["tier"] == "container"
        assert "ID=airlock-test-image" in p.stdout
        # The host's /usr is not there: only what the image holds.
        assert "python3" not in p.stdout
        assert "ro" in p.stdout.split()
        assert (ws / "out").read_text() == "ok\n"
        # The host's secrets are not reachable: no host system directory.
        p = airlock.sandbox("cat /etc/shadow /etc/hostname; ls /home", "--tier", "container",
                            "--image", name, timeout=60)
        assert "root:" not in p.stdout
    finally:
        airlock.run(["image", "rm", name], check_setup=False, timeout=30)


def test_container_tier_with_the_gate(airlock):
    """An image has no room of its own for what Airlock mounts over its files
    in a gated sandbox: the gate's resolver, and the sandbox's CA bundle
    when a route terminates TLS. Import makes room; both are there."""
    name, _ = import_image(airlock, make_rootfs(airlock))
    try:
        pol = airlock.make_dir("pol") / "policy.json"
        pol.write_text(json.dumps({"network": {
            "mode": "gated", "allow": ["example.test:443"],
            "routes": [{"name": "ex", "upstream": "https://example.test", "terminate": True}]}}))
        airlock.chown(pol)
        p = airlock.sandbox("cat /etc/resolv.conf; echo CA=$SSL_CERT_FILE; "
                            "cat /etc/ssl/certs/ca-certificates.crt",
                            "--tier", "container", "--image", name, "--policy", pol, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "nameserver 127.0.0.1" in p.stdout
        assert "CA=/etc/ssl/certs/ca-certificates.crt" in p.stdout
        assert "BEGIN CERTIFICATE" in p.stdout
    finally:
        airlock.run(["image", "rm", name], check_setup=False, timeout=30)


def test_gvisor_refuses_too_few_pids(airlock):
    if not os.access("/usr/bin/runsc", os.X_OK):
        return
    p = airlock.run(["run", "-q", "--tier", "gvisor", "--pids", "32", "--", "/bin/true"],
                    check_setup=False, timeout=60)
    assert p.returncode == 125 and "limits.pids is 32" in p.stderr, p.stderr
