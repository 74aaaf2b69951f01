# SPDX-License-Identifier: Apache-2.0
"""config.json shaped as containerd's CRI plugin writes it for a pod: the
sandbox (pause) container with the pod's host name, a network namespace
the CRI made, its /dev/shm, a cgroupsPath under the kubelet's hierarchy and
the io.kubernetes.cri annotations; then an app container joining the
sandbox's network, ipc and uts namespaces. crictl and a kubelet are not on
this machine: this is as close to the CRI path as a test here gets
(docs/kubernetes.md says what is left). Needs root."""

import json
import os
import pathlib
import subprocess
import time

import pytest

from test_oci_runtime import NAMESPACES, create, env, rt, spec, wait_pid, write_spec  # noqa: F401

CG = pathlib.Path("/sys/fs/cgroup")
POD_UID = "8a6f0c1e-5b1d-4a8e-9a7e-2f1c0d9e4b11"


def cri_annotations(kind, sandbox_id):
    return {
        "io.kubernetes.cri.container-type": kind,
        "io.kubernetes.cri.sandbox-id": sandbox_id,
        "io.kubernetes.cri.sandbox-name": "agent-0",
        "io.kubernetes.cri.sandbox-namespace": "agents",
        "io.kubernetes.cri.sandbox-uid": POD_UID,
    }


def masked():
    return {"maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/sys", "/proc/sysrq-trigger"]}


def sys_resource():
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 24))
    return False


@pytest.fixture
def netns():
    holder = subprocess.Popen(["unshare", "--net", "--uts", "sleep", "60"])
    try:
        ns = f"/proc/{holder.pid}/ns/net"
        end = time.time() + 5
        while os.readlink(ns) == os.readlink("/proc/self/ns/net") and time.time() < end:
            time.sleep(0.02)
        yield ns
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def kubepods():
    name = "kubepods-airlock-test-%d" % os.getpid()
    yield name
    for d in sorted(CG.glob(f"*/{name}/**"), key=lambda p: -len(p.parts)) + \
            list(CG.glob(f"*/{name}")):
        try:
            d.rmdir()
        except OSError:
            pass


def test_cri_shaped_pod(env, netns, kubepods):
    shm = env["tmp"] / "shm"
    shm.mkdir()
    sandbox_id = "f" * 64
    pod_cg = f"/{kubepods}/besteffort/pod{POD_UID}"
    nss = [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
           {"type": "network", "path": netns}]
    s = spec(["/bin/sleep", "60"], hostname="agent-0",
             annotations=cri_annotations("sandbox", sandbox_id),
             mounts=[{"destination": "/proc", "type": "proc", "source": "proc",
                      "options": ["nosuid", "noexec", "nodev"]},
                     {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                      "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
                     {"destination": "/dev/shm", "type": "bind", "source": str(shm),
                      "options": ["rbind", "ro"]}],
             linux={"namespaces": nss, "cgroupsPath": f"{pod_cg}/{sandbox_id}",
                    "resources": {"cpu": {"shares": 2}}, **masked()})
    # The CRI's -998 for the pause container needs CAP_SYS_RESOURCE, which
    # a test machine that is itself a container may not have.
    s["process"].update(user={"uid": 65535, "gid": 65535, "additionalGids": [65535]},
                        noNewPrivileges=True, oomScoreAdj=-998 if sys_resource() else 0)
    write_spec(env, s)
    p = create(env, sandbox_id)
    assert p.returncode == 0, p.stderr
    try:
        assert rt(env, "start", sandbox_id).returncode == 0
        mem = CG / "memory" if (CG / "memory").is_dir() else CG
        leaf = mem / pod_cg.lstrip("/") / sandbox_id
        assert p.pid in [int(x) for x in (leaf / "cgroup.procs").read_text().split()]
        # The app container joins the sandbox's namespaces by path, as the
        # CRI gives them (the pause container's).
        ps = json.loads(rt(env, "ps", "--format", "json", sandbox_id).stdout)
        pause = [q for q in ps if q != p.pid and os.readlink(f"/proc/{q}/ns/net") ==
                 os.readlink(netns)]
        assert pause, ps
        app_ns = [{"type": "pid"}, {"type": "mount"},
                  {"type": "network", "path": f"/proc/{pause[0]}/ns/net"},
                  {"type": "ipc", "path": f"/proc/{pause[0]}/ns/ipc"},
                  {"type": "uts", "path": f"/proc/{pause[0]}/ns/uts"}]
        a = spec(["/bin/sh", "-c", "cat /proc/sys/kernel/hostname"],
                 annotations=cri_annotations("container", sandbox_id) |
                 {"io.kubernetes.cri.container-name": "agent"},
                 linux={"namespaces": app_ns, "cgroupsPath": f"{pod_cg}/app1", **masked()})
        write_spec(env, a)
        q = create(env, "app1")
        assert q.returncode == 0, q.stderr
        assert rt(env, "start", "app1").returncode == 0
        assert wait_pid(q.pid, 10)
        # The pod's host name, set in the sandbox's own uts namespace and
        # seen by the container that joined it.
        assert q.out.read_text().strip() == "agent-0", q.out.read_text()
        rt(env, "delete", "app1")
        # A host name with a uts namespace joined is refused, as runc does:
        # it would rename the pod.
        a["hostname"] = "other"
        write_spec(env, a)
        r = create(env, "app2")
        assert r.returncode != 0 and "uts" in r.stderr, r.stderr
        audit = (env["tmp"] / "audit.log").read_text()
        assert '"pod":"agent-0"' in audit and '"namespace":"agents"' in audit
    finally:
        rt(env, "delete", "--force", sandbox_id)
    assert not leaf.exists()


@pytest.mark.parametrize("name", ["-bad", "a" * 65, "a b", "x/y"])
def test_bad_hostname_refused(env, name):
    write_spec(env, spec(["/bin/true"], hostname=name))
    p = create(env, "h1")
    assert p.returncode != 0 and "hostname" in p.stderr, p.stderr
