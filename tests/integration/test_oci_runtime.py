# SPDX-License-Identifier: Apache-2.0
"""airlock-runtime, the OCI runtime: a bundle driven directly
(create/start/state/kill/delete, exec, pause/resume), then through a
containerd started by the test (`ctr run --runc-binary`). Needs root."""

import hashlib
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
RUNTIME = BUILD / "src/runtime/airlock-runtime"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the OCI runtime is driven as root here"),
    pytest.mark.skipif(not RUNTIME.exists(), reason="airlock-runtime not built"),
]

BINS = ["/bin/sh", "/bin/sleep", "/bin/cat", "/bin/true", "/bin/id", "/usr/bin/unshare"]
NAMESPACES = [{"type": t} for t in ("pid", "network", "mount", "ipc", "uts")]


def make_rootfs(root):
    """A small root file system: a shell, a few tools and their libraries."""
    libs = set()
    for b in BINS:
        out = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
        for tok in out.split():
            if tok.startswith("/"):
                libs.add(tok)
    for f in BINS + sorted(libs):
        dst = pathlib.Path(str(root) + f)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")


def spec(args, **extra):
    s = {
        "ociVersion": "1.0.2",
        "root": {"path": "rootfs", "readonly": True},
        "process": {"args": args, "env": ["PATH=/bin"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
        "linux": {"namespaces": NAMESPACES},
    }
    s.update(extra)
    return s


@pytest.fixture
def env(tmp_path):
    tmp_path.chmod(0o755)
    bundle = tmp_path / "bundle"
    (bundle / "rootfs").mkdir(parents=True)
    make_rootfs(bundle / "rootfs")
    e = dict(os.environ, AIRLOCK_RUNTIME_AUDIT=str(tmp_path / "audit.log"))
    state = tmp_path / "state"
    yield {"bundle": bundle, "state": state, "env": e, "tmp": tmp_path}
    # Nothing left behind even when a test fails half-way.
    if state.exists():
        for c in os.listdir(state):
            subprocess.run([str(RUNTIME), "--root", str(state), "delete", "--force", c],
                           timeout=20, capture_output=True)


def rt(env, *args, timeout=20, **kw):
    return subprocess.run([str(RUNTIME), "--root", str(env["state"])] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout, env=env["env"], **kw)


def create(env, cid, pid_file=True):
    """create: the container keeps create's stdio, so they are files here
    (a pipe would stay open as long as the container)."""
    out = env["tmp"] / f"{cid}.out"
    err = env["tmp"] / f"{cid}.err"
    args = [str(RUNTIME), "--root", str(env["state"]), "create", "--bundle", str(env["bundle"])]
    if pid_file:
        args += ["--pid-file", str(env["tmp"] / f"{cid}.pid")]
    with open(out, "w") as o, open(err, "w") as e:
        p = subprocess.run(args + [cid], stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                           timeout=20, env=env["env"])
    p.stderr = err.read_text()
    p.out = out
    if pid_file and p.returncode == 0:
        p.pid = int((env["tmp"] / f"{cid}.pid").read_text())
    return p


def write_spec(env, s):
    (env["bundle"] / "config.json").write_text(json.dumps(s))


def state_of(env, cid):
    p = rt(env, "state", cid)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def wait_pid(pid, timeout=10):
    """Wait for a process's end (a zombie has ended: the keeper and the
    sandbox's pid 1 are reaped by whoever adopts them, a shim or init)."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def cgroups_named(name):
    out = subprocess.run(["find", "/sys/fs/cgroup", "-maxdepth", "6", "-type", "d",
                          "-name", name], capture_output=True, text=True).stdout
    return out.split()


def cgroup_of(env, cid):
    """The container's own cgroup leaf, as the keeper recorded it."""
    name = json.loads((env["state"] / cid / "state.json").read_text())["cgroupName"]
    assert cgroups_named(name), "the container has a cgroup"
    return name


def test_lifecycle_and_state_schema(env):
    write_spec(env, spec(["/bin/sh", "-c", "echo hello; exit 3"]))
    p = create(env, "c1")
    assert p.returncode == 0, p.stderr
    cg = cgroup_of(env, "c1")
    pid, out = p.pid, p.out
    st = state_of(env, "c1")
    # The runtime spec's required fields, and their types.
    for k, t in (("ociVersion", str), ("id", str), ("status", str), ("pid", int),
                 ("bundle", str)):
        assert isinstance(st[k], t), k
    assert st["ociVersion"].startswith("1.")
    assert st["id"] == "c1" and st["status"] == "created" and st["pid"] == pid
    assert st["bundle"] == str(env["bundle"])
    assert (env["state"].stat().st_mode & 0o777) == 0o700
    assert rt(env, "start", "c1").returncode == 0
    assert wait_pid(pid)
    assert state_of(env, "c1")["status"] == "stopped"
    assert "hello" in out.read_text()
    # A second start is refused.
    assert rt(env, "start", "c1").returncode != 0
    assert rt(env, "delete", "c1").returncode == 0
    assert rt(env, "state", "c1").returncode != 0
    assert not cgroups_named(cg)
    audit = (env["tmp"] / "audit.log").read_text()
    assert '"container.exited"' in audit and '"exit_code":3' in audit


def test_kill_exec_pause_delete(env):
    write_spec(env, spec(["/bin/sleep", "60"]))
    p = create(env, "c2")
    assert p.returncode == 0, p.stderr
    cg = cgroup_of(env, "c2")
    pid = p.pid
    assert rt(env, "start", "c2").returncode == 0
    assert state_of(env, "c2")["status"] == "running"
    # exec: the exit code comes back.
    p = rt(env, "exec", "c2", "/bin/sh", "-c", "echo in-exec; exit 5")
    assert p.returncode == 5 and "in-exec" in p.stdout
    # ps --format json lists the container's processes.
    ps = json.loads(rt(env, "ps", "--format", "json", "c2").stdout)
    assert len(ps) >= 2
    # pause/resume: the freezer.
    assert rt(env, "pause", "c2").returncode == 0
    assert state_of(env, "c2")["status"] == "paused"
    assert rt(env, "resume", "c2").returncode == 0
    assert state_of(env, "c2")["status"] == "running"
    # A running container is not deleted without --force.
    assert rt(env, "delete", "c2").returncode != 0
    assert rt(env, "kill", "c2", "TERM").returncode == 0
    assert wait_pid(pid)
    assert state_of(env, "c2")["status"] == "stopped"
    assert rt(env, "delete", "c2").returncode == 0
    assert not cgroups_named(cg)
    for q in ps:
        assert wait_pid(q, 5), f"process {q} left behind"


def test_delete_force_kills_everything(env):
    write_spec(env, spec(["/bin/sh", "-c", "sleep 60 & sleep 60"]))
    assert create(env, "c3", pid_file=False).returncode == 0
    assert rt(env, "start", "c3").returncode == 0
    ps = json.loads(rt(env, "ps", "--format", "json", "c3").stdout)
    cg = cgroup_of(env, "c3")
    assert rt(env, "delete", "--force", "c3").returncode == 0
    assert not cgroups_named(cg)
    for q in ps:
        assert wait_pid(q, 5), f"process {q} left behind"


@pytest.mark.parametrize("change,needle", [
    ({"hooks": {"prestart": [{"path": "/bin/true"}]}}, "hooks"),
    ({"linux": {"namespaces": NAMESPACES[1:]}}, "pid"),
    ({"linux": {"namespaces": NAMESPACES[:1] + NAMESPACES[2:] +
                [{"type": "network", "path": "/proc/self/ns/net"}]}}, "host's network"),
    ({"linux": {"namespaces": NAMESPACES[1:] + [{"type": "pid", "path": "/proc/1/ns/pid"}]}},
     "joining the pid"),
    ({"linux": {"namespaces": NAMESPACES, "seccomp": {"defaultAction": "SCMP_ACT_NOTIFY"}}},
     "seccomp"),
    ({"linux": {"namespaces": NAMESPACES, "seccomp": {
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO",
                      "args": [{"index": 9, "value": 1, "op": "SCMP_CMP_EQ"}]}]}}}, "args"),
    ({"linux": {"namespaces": NAMESPACES, "sysctl": {"net.ipv4.ip_forward": "1"}}}, "sysctl"),
    ({"mounts": [{"destination": "/x", "type": "nfs", "source": "srv:/x"}]}, "nfs"),
    ({"mounts": [{"destination": "/run", "type": "tmpfs", "source": "tmpfs",
                  "options": ["exec", "suid"]}]}, "tmpfs option"),
    ({"process": {"args": ["/bin/true"], "cwd": "/", "terminal": True}}, "console-socket"),
    ({"linux": {"namespaces": NAMESPACES,
                "resources": {"memory": {"limit": 1 << 26, "swap": 1 << 27}}}}, "swap"),
    ({"bogus": 1}, "bogus"),
])
def test_unsupported_refused(env, change, needle):
    write_spec(env, spec(["/bin/true"], **change))
    p = create(env, "bad")
    assert p.returncode != 0
    assert needle in p.stderr, p.stderr
    assert not (env["state"] / "bad").exists()


def test_unsupported_flags_refused(env):
    assert "systemd" in rt(env, "--systemd-cgroup", "state", "x").stderr
    assert "checkpoint" in rt(env, "checkpoint", "x").stderr
    p = rt(env, "features")
    assert p.returncode == 0 and json.loads(p.stdout)["ociVersionMax"].startswith("1.")


def test_annotation_policy_limits(env):
    """airlock.io/policy: its limits apply (here the open files limit)."""
    pol = json.dumps({"limits": {"openFiles": 64}})
    write_spec(env, spec(["/bin/sh", "-c", "ulimit -n"],
                         annotations={"airlock.io/policy": pol,
                                      "io.kubernetes.pod.name": "agent-0",
                                      "io.kubernetes.pod.namespace": "agents"}))
    p = create(env, "c4")
    assert p.returncode == 0, p.stderr
    pid, out = p.pid, p.out
    assert rt(env, "start", "c4").returncode == 0
    assert wait_pid(pid)
    assert out.read_text().strip() == "64"
    audit = (env["tmp"] / "audit.log").read_text()
    assert '"pod":"agent-0"' in audit and '"namespace":"agents"' in audit
    rt(env, "delete", "c4")


def run_once(env, cid, args, **extra):
    write_spec(env, spec(args, **extra))
    p = create(env, cid)
    assert p.returncode == 0, p.stderr
    assert rt(env, "start", cid).returncode == 0
    assert wait_pid(p.pid)
    rt(env, "delete", cid)
    return p.out.read_text()


def test_spec_seccomp_narrows_never_widens(env):
    """The spec's profile is stacked on Airlock's filter: it can refuse
    more (nanosleep here), and allowing what Airlock refuses (unshare)
    changes nothing."""
    sh = "/bin/sleep 0.01; echo sleep=$?; /usr/bin/unshare -r /bin/true; echo unshare=$?"
    plain = run_once(env, "s0", ["/bin/sh", "-c", sh])
    assert "sleep=0" in plain and "unshare=0" not in plain, plain
    prof = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
        {"names": ["nanosleep", "clock_nanosleep"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {"names": ["unshare", "clone", "clone3", "setns", "mount"], "action": "SCMP_ACT_ALLOW"}]}
    out = run_once(env, "s1", ["/bin/sh", "-c", sh],
                   linux={"namespaces": NAMESPACES, "seccomp": prof})
    assert "sleep=0" not in out and "sleep=" in out, out
    assert "unshare=0" not in out, out


def test_join_pod_network_namespace(env):
    """A pod's network namespace given by path is joined (here one made by
    the test); the container still has no capability in it."""
    holder = subprocess.Popen(["unshare", "--net", "sleep", "30"])
    try:
        ns = f"/proc/{holder.pid}/ns/net"
        end = time.time() + 5
        while os.readlink(ns) == os.readlink("/proc/self/ns/net") and time.time() < end:
            time.sleep(0.02)
        want = os.readlink(ns)
        nss = [n for n in NAMESPACES if n["type"] != "network"] + [{"type": "network",
                                                                    "path": ns}]
        out = run_once(env, "j1", ["/bin/sh", "-c",
                                   "cat /proc/self/net/dev >/dev/null; echo ok; "
                                   "/usr/bin/unshare -r /bin/true; echo unshare=$?"],
                       linux={"namespaces": nss})
        assert "ok" in out and "unshare=0" not in out, out
        # The joined namespace is the one the test made: its inode shows in
        # the keeper's, which the sandbox was cloned from.
        write_spec(env, spec(["/bin/sleep", "30"], linux={"namespaces": nss}))
        p = create(env, "j2")
        assert p.returncode == 0, p.stderr
        assert os.readlink(f"/proc/{p.pid}/ns/net") == want
        ps = json.loads(rt(env, "ps", "--format", "json", "j2").stdout)
        assert all(os.readlink(f"/proc/{q}/ns/net") == want for q in ps)
        rt(env, "delete", "--force", "j2")
    finally:
        holder.kill()
        holder.wait()


def test_terminal_through_console_socket(env):
    """process.terminal: the master comes over --console-socket at create;
    the process gets a terminal of the sandbox's own; bytes go both ways;
    the window size is carried."""
    import array
    import socket as sk
    import termios
    import fcntl as fc
    import struct
    path = str(env["tmp"] / "console.sock")
    srv = sk.socket(sk.AF_UNIX, sk.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    proc = {"args": ["/bin/sh", "-c", "test -t 0 && echo is-a-tty; read line; echo got:$line"],
            "env": ["PATH=/bin"], "cwd": "/", "terminal": True,
            "consoleSize": {"height": 30, "width": 100}}
    write_spec(env, spec(proc["args"], process=proc))
    args = [str(RUNTIME), "--root", str(env["state"]), "create", "--bundle", str(env["bundle"]),
            "--console-socket", path, "--pid-file", str(env["tmp"] / "t.pid"), "t1"]
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env["env"])
    srv.settimeout(10)
    conn, _ = srv.accept()
    fds = array.array("i")
    msg, anc, _, _ = conn.recvmsg(1024, sk.CMSG_SPACE(4))
    for level, typ, data in anc:
        fds.frombytes(data[:4])
    master = fds[0]
    assert p.wait(timeout=20) == 0, p.stderr.read()
    pid = int((env["tmp"] / "t.pid").read_text())
    ws = struct.unpack("HHHH", fc.ioctl(master, termios.TIOCGWINSZ, b"\0" * 8))
    assert ws[:2] == (30, 100)
    assert rt(env, "start", "t1").returncode == 0
    os.write(master, b"hello\r")
    out = b""
    end = time.time() + 10
    while b"got:hello" not in out and time.time() < end:
        import select
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                out += os.read(master, 4096)
            except OSError:
                break
    assert b"is-a-tty" in out and b"got:hello" in out, out
    assert wait_pid(pid)
    os.close(master)
    rt(env, "delete", "t1")


def test_annotation_network_gate(env):
    """airlock.io/policy with network rules: the gate answers inside the
    container's own network namespace, allows what the policy allows,
    refuses the rest, and each decision is in the audit log."""
    import http.server
    import threading
    curl = shutil.which("curl")
    if not curl:
        pytest.skip("curl is needed inside the test image")
    root = env["bundle"] / "rootfs"
    libs = set()
    for tok in subprocess.run(["ldd", curl], capture_output=True, text=True).stdout.split():
        if tok.startswith("/"):
            libs.add(tok)
    for f in [curl] + sorted(libs):
        dst = pathlib.Path(str(root) + f)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"from-upstream"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        pol = json.dumps({"network": {"allow": [f"upstream.test:{port}"],
                                      "hosts": {"upstream.test": "127.0.0.1"},
                                      "allowPrivate": ["127.0.0.1/32"]}})
        sh = (f"{curl} -s -m 10 http://upstream.test:{port}/ ; echo; "
              f"{curl} -s -m 10 -o /dev/null -w 'denied=%{{http_code}}' http://other.test:{port}/")
        proc = {"args": ["/bin/sh", "-c", sh], "cwd": "/", "user": {"uid": 0, "gid": 0},
                "env": ["PATH=/bin:/usr/bin", "HTTP_PROXY=http://127.0.0.1:3128",
                        "http_proxy=http://127.0.0.1:3128"]}
        out = run_once(env, "g1", proc["args"], process=proc,
                       annotations={"airlock.io/policy": pol})
    finally:
        srv.shutdown()
    assert "from-upstream" in out, out
    assert "denied=403" in out, out
    audit = [json.loads(x) for x in (env["tmp"] / "audit.log").read_text().splitlines()]
    decisions = [a for a in audit if a["kind"] == "net.decision" and a["sandbox"] == "oci:g1"]
    assert {d["decision"] for d in decisions} >= {"allow", "deny"}, decisions
    # The keeper and its gate both write: the hash chain holds.
    airlock = BUILD / "src/cli/airlock"
    if airlock.exists():
        v = subprocess.run([str(airlock), "audit", "verify", str(env["tmp"] / "audit.log")],
                           capture_output=True, text=True, timeout=30)
        assert v.returncode == 0, v.stdout + v.stderr


def test_oom_score_adj(env):
    s = spec(["/bin/cat", "/proc/self/oom_score_adj"])
    s["process"]["oomScoreAdj"] = 500
    out = run_once(env, "o1", s["process"]["args"], process=s["process"])
    assert out.strip() == "500", out


def test_spec_limits_reach_the_cgroup(env):
    """linux.resources: memory and pids limits land in the container's cgroup."""
    write_spec(env, spec(["/bin/sleep", "30"], linux={
        "namespaces": NAMESPACES,
        "resources": {"memory": {"limit": 64 << 20}, "pids": {"limit": 32},
                      "cpu": {"shares": 512}}}))
    p = create(env, "l1")
    assert p.returncode == 0, p.stderr
    name = cgroup_of(env, "l1")
    found = {}
    for d in cgroups_named(name):
        for f in ("memory.max", "memory.limit_in_bytes", "pids.max", "cpu.shares",
                  "cpu.weight"):
            if os.path.exists(os.path.join(d, f)):
                found[f] = open(os.path.join(d, f)).read().strip()
    assert found.get("memory.max", found.get("memory.limit_in_bytes")) == str(64 << 20), found
    assert found.get("pids.max") == "32", found
    assert found.get("cpu.shares", found.get("cpu.weight")) in ("512", "20"), found
    # update --resources lowers them, and never raises them past the limits
    # the container was created with.
    assert rt(env, "start", "l1").returncode == 0
    p = rt(env, "update", "--resources", "-", "l1", input=json.dumps({"pids": {"limit": 20}}))
    assert p.returncode == 0, p.stderr
    pids = [os.path.join(d, "pids.max") for d in cgroups_named(name)
            if os.path.exists(os.path.join(d, "pids.max"))]
    assert open(pids[0]).read().strip() == "20"
    p = rt(env, "update", "--resources", "-", "l1", input=json.dumps({"pids": {"limit": 64}}))
    assert p.returncode != 0 and "above" in p.stderr, p.stderr
    assert open(pids[0]).read().strip() == "20"
    assert rt(env, "delete", "--force", "l1").returncode == 0


# ---- through containerd -------------------------------------------------

def docker_archive(rootfs, path, ref):
    """An image as `docker save` writes it: one layer, a config, a manifest."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        t.add(rootfs, arcname=".")
    data = layer.getvalue()
    diff = "sha256:" + hashlib.sha256(data).hexdigest()
    cfg = json.dumps({"architecture": "amd64", "os": "linux",
                      "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
                      "rootfs": {"type": "layers", "diff_ids": [diff]}}).encode()
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [ref],
                            "Layers": ["layer.tar"]}]).encode()
    with tarfile.open(path, "w") as t:
        for name, blob in (("layer.tar", data), (cfg_name, cfg), ("manifest.json", manifest)):
            ti = tarfile.TarInfo(name)
            ti.size = len(blob)
            t.addfile(ti, io.BytesIO(blob))


@pytest.fixture
def containerd(env):
    if not shutil.which("containerd") or not shutil.which("ctr") or \
            not shutil.which("containerd-shim-runc-v2"):
        pytest.skip("containerd, ctr and containerd-shim-runc-v2 are needed (make deps)")
    base = pathlib.Path(tempfile.mkdtemp(prefix="ctrd-", dir="/tmp"))
    sock = base / "c.sock"
    cfg = base / "config.toml"
    cfg.write_text("version = 2\n"
                   f"root = \"{base}/root\"\nstate = \"{base}/state\"\n"
                   f"[grpc]\n  address = \"{sock}\"\n"
                   "[ttrpc]\n  address = \"" + str(base / "t.sock") + "\"\n"
                   "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n")
    log = open(base / "containerd.log", "w")
    proc = subprocess.Popen(["containerd", "--config", str(cfg)], stdout=log, stderr=log,
                            env=env["env"])
    ns = "airlock-test-%d" % os.getpid()
    shim_root = pathlib.Path("/run/containerd/runc") / ns

    def ctr(*args, timeout=30, check=True):
        p = subprocess.run(["ctr", "--address", str(sock), "--namespace", ns] +
                           [str(a) for a in args], capture_output=True, text=True,
                           timeout=timeout, env=env["env"])
        if check:
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    ctr.shim_root = shim_root
    ctr.address = str(sock)
    ctr.ns = ns
    # Whatever happens from here, containerd, its shims and the containers
    # go at the end.
    try:
        end = time.time() + 20
        while not sock.exists() and time.time() < end:
            time.sleep(0.1)
        if not sock.exists():
            pytest.fail("containerd did not start: " +
                        (base / "containerd.log").read_text()[-2000:])
        tar = env["tmp"] / "image.tar"
        docker_archive(env["bundle"] / "rootfs", tar, "docker.io/airlock-test/sh:1")
        ctr("image", "import", "--no-unpack", "--all-platforms", tar)
        yield ctr
    finally:
        if shim_root.exists():
            for c in os.listdir(shim_root):
                subprocess.run([str(RUNTIME), "--root", str(shim_root), "delete", "--force", c],
                               timeout=20, capture_output=True)
            shutil.rmtree(shim_root, ignore_errors=True)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        # The shims this containerd started, found by its address.
        out = subprocess.run(["pgrep", "-f", f"containerd-shim-runc-v2.*{base}"],
                             capture_output=True, text=True).stdout.split()
        for p in out:
            try:
                os.kill(int(p), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["umount", "-R", str(base / "root")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
        # The namespace's cgroup, the parent of the containers' (their
        # cgroupsPath is /<namespace>/<id>), made by the runtime as runc does.
        for d in pathlib.Path("/sys/fs/cgroup").glob("*/" + ns):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            pathlib.Path("/sys/fs/cgroup", ns).rmdir()
        except OSError:
            pass


IMAGE = "docker.io/airlock-test/sh:1"


def env_shim(ctr):
    """rt() on the shim's --root."""
    return {"state": ctr.shim_root, "env": dict(os.environ)}


def run_args(cid, *cmd, detach=False):
    a = ["run", "--runtime", "io.containerd.runc.v2", "--runc-binary", str(RUNTIME)]
    if detach:
        a.append("-d")
    return a + [IMAGE, cid] + list(cmd)


def test_containerd_run_exit_code(env, containerd):
    p = containerd(*run_args("e1", "/bin/sh", "-c", "echo via-containerd; exit 7"), check=False)
    assert "via-containerd" in p.stdout, p.stderr
    assert p.returncode == 7, (p.stdout, p.stderr)
    containerd("container", "rm", "e1")
    assert not (containerd.shim_root / "e1").exists()


def test_containerd_exec_pause_kill(env, containerd):
    containerd(*run_args("e2", "/bin/sleep", "60", detach=True))
    st = json.loads((containerd.shim_root / "e2/state.json").read_text())
    assert cgroups_named(st["cgroupName"])
    p = containerd("task", "exec", "--exec-id", "x1", "e2", "/bin/sh", "-c", "echo ex; exit 4",
                   check=False)
    assert p.returncode == 4 and "ex" in p.stdout, (p.stdout, p.stderr)
    # A detached exec killed on its own: its proxy forwards the signal.
    containerd("task", "exec", "--detach", "--exec-id", "x2", "e2", "/bin/sleep", "30")
    before = json.loads(rt(env_shim(containerd), "ps", "--format", "json", "e2").stdout)
    containerd("task", "kill", "--exec-id", "x2", "--signal", "SIGTERM", "e2")
    end = time.time() + 10
    while time.time() < end:
        now = json.loads(rt(env_shim(containerd), "ps", "--format", "json", "e2").stdout)
        if len(now) < len(before):
            break
        time.sleep(0.1)
    assert len(now) < len(before), (before, now)
    # exec with a terminal (kubectl exec -it): the shim gets it over the
    # console socket.
    import pty
    import select
    cmd = ["ctr", "--address", containerd.address, "--namespace", containerd.ns, "task", "exec",
           "-t", "--exec-id", "x3", "e2", "/bin/sh", "-c", "test -t 0 && echo exec-tty; exit 6"]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(cmd[0], cmd, env["env"])
    out, end = b"", time.time() + 20
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        try:
            chunk = os.read(fd, 4096) if r else b""
        except OSError:
            break
        if r and not chunk:
            break
        out += chunk
    if time.time() >= end:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert b"exec-tty" in out, out
    assert os.waitstatus_to_exitcode(status) == 6, out
    containerd("task", "pause", "e2")
    assert "PAUSED" in containerd("task", "ls").stdout
    containerd("task", "resume", "e2")
    assert "RUNNING" in containerd("task", "ls").stdout
    containerd("task", "kill", "--signal", "SIGKILL", "e2")
    end = time.time() + 10
    while "STOPPED" not in containerd("task", "ls").stdout and time.time() < end:
        time.sleep(0.1)
    containerd("task", "delete", "e2")
    containerd("container", "rm", "e2")
    assert not (containerd.shim_root / "e2").exists()
    assert not cgroups_named(st["cgroupName"])
    assert wait_pid(st["pid"], 5)


def test_containerd_run_with_terminal(env, containerd):
    """ctr run -t: the shim receives the terminal over the console socket."""
    import pty
    import select
    cmd = ["ctr", "--address", containerd.address, "--namespace", containerd.ns] + \
        run_args("e3", "/bin/sh", "-c", "test -t 0 && echo on-a-tty; exit 3")
    cmd.insert(cmd.index("run") + 1, "-t")
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(cmd[0], cmd, env["env"])
    out = b""
    end = time.time() + 30
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif os.waitpid(pid, os.WNOHANG)[0]:
            pid = 0
            break
    if pid and time.time() >= end:
        os.kill(pid, signal.SIGKILL)
    if pid:
        _, status = os.waitpid(pid, 0)
    else:
        status = None
    os.close(fd)
    assert b"on-a-tty" in out, out
    if status is not None:
        assert os.waitstatus_to_exitcode(status) == 3, out
    containerd("container", "rm", "e3")
