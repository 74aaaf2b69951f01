# SPDX-License-Identifier: Apache-2.0
"""The network gate for a container that names a pod's network namespace
by path: its processes keep a namespace of their own (loopback, the gate's
listeners and name server), every connect() is decided by the gate
(transparent mode), and what the gate allows it connects from the pod's
namespace, resolving with the pod's resolver. Needs root."""

import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from test_oci_runtime import NAMESPACES, create, env, rt, run_once, spec, write_spec  # noqa: F401,E501

POD_ADDR = "10.99.0.1"
PORT = 18080


@pytest.fixture
def pod():
    """A pod's network namespace: an address the host cannot reach (on its
    loopback), and an HTTP server on it."""
    if not shutil.which("ip"):
        pytest.skip("iproute2 is needed")
    sh = (f"ip link set lo up && ip addr add {POD_ADDR}/32 dev lo && "
          f"exec python3 -m http.server --bind {POD_ADDR} {PORT}")
    holder = subprocess.Popen(["unshare", "--net", "sh", "-c", sh], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    ns = f"/proc/{holder.pid}/ns/net"
    try:
        end = time.time() + 10
        ready = False
        while time.time() < end and not ready:
            p = subprocess.run(["nsenter", f"--net={ns}", "python3", "-c",
                                f"import socket; socket.create_connection(('{POD_ADDR}', {PORT}), 1)"],
                               capture_output=True)
            ready = p.returncode == 0
            if not ready:
                time.sleep(0.1)
        assert ready, "the pod's server did not start"
        yield ns
    finally:
        holder.kill()
        holder.wait()


def add_curl(root):
    curl = shutil.which("curl")
    if not curl:
        pytest.skip("curl is needed inside the test image")
    libs = set()
    for tok in subprocess.run(["ldd", curl], capture_output=True, text=True).stdout.split():
        if tok.startswith("/"):
            libs.add(tok)
    for f in [curl] + sorted(libs) + ["/bin/cat"]:
        dst = pathlib.Path(str(root) + f)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)
    # Name service for getaddrinfo: files then dns.
    (root / "etc/nsswitch.conf").write_text("hosts: files dns\n")
    for lib in pathlib.Path("/lib/x86_64-linux-gnu").glob("libnss_dns*"):
        shutil.copy2(lib, pathlib.Path(str(root) + str(lib)))
    return curl


def test_gate_in_a_pods_network_namespace(env, pod):
    root = env["bundle"] / "rootfs"
    curl = add_curl(root)
    (root / "etc/resolv.conf").write_text("nameserver 192.0.2.53\n")
    # The pod's resolver, as the CRI binds it.
    pod_resolv = env["tmp"] / "pod-resolv.conf"
    pod_resolv.write_text("nameserver 192.0.2.53\nsearch pod.svc.cluster.local\n")
    pol = json.dumps({"network": {"allow": [f"pod.test:{PORT}"],
                                  "hosts": {"pod.test": POD_ADDR},
                                  "allowPrivate": [f"{POD_ADDR}/32"]}})
    sh = (f"cat /etc/resolv.conf; "
          f"{curl} -s -m 5 -o /dev/null -w 'byaddr=%{{http_code}}\\n' http://{POD_ADDR}:{PORT}/; "
          f"{curl} -s -m 10 -w 'named=%{{http_code}}\\n' http://pod.test:{PORT}/; "
          f"{curl} -s -m 5 -o /dev/null -w 'other=%{{http_code}}\\n' http://other.test:{PORT}/; "
          "cat /proc/net/dev")
    nss = [n for n in NAMESPACES if n["type"] != "network"] + [{"type": "network", "path": pod}]
    proc = {"args": ["/bin/sh", "-c", sh], "cwd": "/", "user": {"uid": 0, "gid": 0},
            "env": ["PATH=/bin:/usr/bin"]}
    out = run_once(env, "pn1", proc["args"], process=proc, linux={"namespaces": nss},
                   annotations={"airlock.io/policy": pol},
                   mounts=[{"destination": "/etc/resolv.conf", "type": "bind",
                            "source": str(pod_resolv), "options": ["rbind", "ro"]}])
    # The container resolves with the gate's name server, not the pod's.
    assert "nameserver 127.0.0.1" in out and "192.0.2.53" not in out, out
    # Allowed by name: the gate connected from the pod's namespace, where
    # the pod's server answers (the address is the pod's own).
    assert "named=200" in out and "Directory listing" in out, out
    # By address, before any name was answered with it, the gate has no
    # name to check: refused. Were the container in the pod's namespace
    # itself, this would connect.
    assert "byaddr=000" in out, out
    assert "other=000" in out, out
    audit = [json.loads(x) for x in (env["tmp"] / "audit.log").read_text().splitlines()]
    dec = [a for a in audit if a["kind"] == "net.decision" and a["sandbox"] == "oci:pn1"]
    assert {d["decision"] for d in dec} >= {"allow", "deny"}, dec


def test_gates_connect_from_the_pod_and_resolve_with_its_resolver(env, pod):
    """The gates' process is in the pod's network namespace and reads the
    pod's resolv.conf; the container's processes are in neither."""
    pod_resolv = env["tmp"] / "pod-resolv.conf"
    pod_resolv.write_text("nameserver 192.0.2.54\n")
    (env["bundle"] / "rootfs/etc/resolv.conf").write_text("nameserver 192.0.2.53\n")
    nss = [n for n in NAMESPACES if n["type"] != "network"] + [{"type": "network", "path": pod}]
    write_spec(env, spec(["/bin/sleep", "30"], linux={"namespaces": nss},
                         annotations={"airlock.io/policy": json.dumps(
                             {"network": {"allow": ["pod.test:443"]}})},
                         mounts=[{"destination": "/etc/resolv.conf", "type": "bind",
                                  "source": str(pod_resolv), "options": ["rbind", "ro"]}]))
    p = create(env, "pn2")
    assert p.returncode == 0, p.stderr
    try:
        want = os.readlink(pod)
        kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
        in_pod = [k for k in kids if os.readlink(f"/proc/{k}/ns/net") == want]
        assert len(in_pod) == 1, (kids, want)
        gate = in_pod[0]
        assert open(f"/proc/{gate}/root/etc/resolv.conf").read() == pod_resolv.read_text()
        ps = json.loads(rt(env, "ps", "--format", "json", "pn2").stdout)
        assert ps and all(os.readlink(f"/proc/{q}/ns/net") != want for q in ps
                          if str(q) != gate), ps
        # The host's own resolver is untouched.
        assert "192.0.2.54" not in open("/etc/resolv.conf").read()
    finally:
        rt(env, "delete", "--force", "pn2")


def test_gated_container_resolves_with_the_gate(env):
    """Without a pod too: a gated container's /etc/resolv.conf (the image's
    regular file) names the gate's name server, the only one it reaches."""
    (env["bundle"] / "rootfs/etc/resolv.conf").write_text("nameserver 192.0.2.53\n")
    pol = json.dumps({"network": {"allow": ["example.test:443"]}})
    out = run_once(env, "pn3", ["/bin/cat", "/etc/resolv.conf"],
                   annotations={"airlock.io/policy": pol})
    assert out.startswith("nameserver 127.0.0.1"), out
    # Not gated: the image's own.
    out = run_once(env, "pn4", ["/bin/cat", "/etc/resolv.conf"])
    assert out == "nameserver 192.0.2.53\n", out
