# SPDX-License-Identifier: Apache-2.0
"""The microvm tier: the command in its own kernel under QEMU, QEMU inside
Airlock's own sandbox (docs/tiers.md). Where KVM cannot run the stock guest
kernel (this machine's KVM is the paravirtual kvm_pvm) the runs use QEMU's
software emulation, which the operator allows with AIRLOCK_MICROVM_ACCEL=tcg:
the same guest, the same boundary, a slower boot."""

import http.server
import json
import os
import platform
import shlex
import shutil
import subprocess
import threading

import pytest

QEMU = "/usr/bin/qemu-system-x86_64"
VM_DIR = os.environ.get("AIRLOCK_VM_DIR", "/usr/local/share/airlock/vm")
ACCEL = "AIRLOCK_MICROVM_ACCEL"


def _kvm_runs_stock_kernels():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return not os.path.exists("/sys/module/kvm_pvm")


def need_microvm():
    if not os.access(QEMU, os.X_OK):
        pytest.skip(f"{QEMU} is missing (apt install qemu-system-x86)")
    if not os.access(os.path.join(VM_DIR, "vmlinuz"), os.R_OK):
        pytest.skip(f"no guest kernel in {VM_DIR} (make deps)")


def vm_run_argv(airlock, args, consent=True):
    """airlock ARGS, with the operator's consent to emulation where KVM
    cannot run the guest (through env(1): the test user's environment is
    reset by runas.sh)."""
    argv = airlock.cmd(args)
    at = next(i for i, a in enumerate(argv) if a.endswith("/airlock"))
    env = ["/usr/bin/env", f"-u{ACCEL}"]
    if consent and not _kvm_runs_stock_kernels():
        env.append(f"{ACCEL}=tcg")
    argv[at:at] = env
    return argv


def vm_run(airlock, args, timeout=60, consent=True):
    argv = vm_run_argv(airlock, args, consent)
    return subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True,
                          timeout=timeout)


def qemu_pids():
    pids = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0].endswith(b"qemu-system-x86_64"):
                    pids.add(int(d))
        except OSError:
            pass
    return pids


GUEST = r"""
echo out-line
echo err-line >&2
uname -r
cat in.txt
echo from-guest > made-in-guest.txt
grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status
id -u
touch /usr/airlock-probe 2>/dev/null && echo ROOT-WRITABLE
mount -t tmpfs x /mnt 2>/dev/null && echo MOUNTED
cat /proc/1/cmdline 2>/dev/null | head -c 64 | tr '\0' ' '; echo
echo "listeners=$(grep -c ' 0A ' /proc/net/tcp)"
exit 7
"""


def test_microvm_runs_in_its_own_kernel(airlock):
    need_microvm()
    before = qemu_pids()
    ws = airlock.make_dir()
    (ws / "in.txt").write_text("from-host\n")
    airlock.chown(ws)
    p = vm_run(airlock, ["run", "-q", "--tier", "microvm", "-w", ws, "--", "/bin/sh", "-c", GUEST])
    assert p.returncode == 7, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "out-line", p.stdout
    # stderr is its own stream (Airlock's -q prints nothing of its own).
    assert "err-line" in p.stderr and "err-line" not in p.stdout, (p.stdout, p.stderr)
    # The guest's own kernel, not the host's.
    assert lines[1] != platform.release() and lines[1], (lines[1], platform.release())
    assert "from-host" in lines, p.stdout
    # Written from the guest, seen on the host as the namespace tier's are.
    made = ws / "made-in-guest.txt"
    assert made.read_text() == "from-guest\n"
    if airlock.user:
        assert made.stat().st_uid == airlock.user.pw_uid
    # No capability, no_new_privs, not root, a read-only root, no mounts.
    assert "CapEff:\t0000000000000000" in p.stdout, p.stdout
    assert "CapBnd:\t0000000000000000" in p.stdout, p.stdout
    assert "NoNewPrivs:\t1" in p.stdout, p.stdout
    assert "\n0\n" not in p.stdout, p.stdout
    assert "ROOT-WRITABLE" not in p.stdout and "MOUNTED" not in p.stdout, p.stdout
    # pid 1 is the guest's init (its own pid namespace is the guest).
    assert "/init" in p.stdout, p.stdout
    # Network "none": no link to the gate, nothing listening in the guest.
    assert "listeners=0" in p.stdout, p.stdout
    assert not (qemu_pids() - before), "a QEMU was left running"


def test_microvm_timeout_kills_qemu(airlock):
    need_microvm()
    if airlock.user:
        pytest.skip("the cgroup's kill is the namespace tier's in both modes")
    before = qemu_pids()
    p = vm_run(airlock, ["run", "-q", "--tier", "microvm", "--timeout", "3", "--", "sleep", "600"])
    assert p.returncode == 124, p.stderr
    assert not (qemu_pids() - before), "a QEMU was left running"


class _Upstream(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"upstream-says-hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


NET_SCRIPT = r"""
curl -sS -m 30 http://upstream.test:{port}/x; echo "allowed=$?"
curl -sS -m 30 -o /dev/null -w "unlisted=%{{http_code}}\n" http://other.test:{port}/x
"""


def test_microvm_network_gate_over_the_guest_link(airlock):
    """The guest's proxy variables name 127.0.0.1:3128 as in every tier; its
    loopback ports are carried to the gate's own listeners, which apply the
    rules and log: a listed loopback-served upstream answers, an unlisted
    name gets the gate's refusal."""
    need_microvm()
    if airlock.user:
        pytest.skip("the gate is the namespace tier's in both modes; one boot is enough")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    logdir = airlock.make_dir("netlog")
    try:
        p = vm_run(airlock, ["run", "-q", "--tier", "microvm", "--allow-private", "127.0.0.1",
                             "--host", "upstream.test=127.0.0.1", "--allow", f"upstream.test:{port}",
                             "--net-log", logdir / "net.jsonl",
                             "--", "/bin/sh", "-c", NET_SCRIPT.format(port=port)])
    finally:
        srv.shutdown()
    assert p.returncode == 0, p.stderr
    assert "upstream-says-hello" in p.stdout and "allowed=0" in p.stdout, (p.stdout, p.stderr)
    assert "unlisted=403" in p.stdout, (p.stdout, p.stderr)
    recs = [json.loads(l) for l in (logdir / "net.jsonl").read_text().splitlines() if l.strip()]
    assert any(r.get("decision") == "allow" and "upstream.test" in json.dumps(r) for r in recs), recs
    assert any(r.get("decision") == "deny" and "other.test" in json.dumps(r) for r in recs), recs


def test_microvm_small_memory_refused(airlock):
    need_microvm()
    p = vm_run(airlock, ["run", "-q", "--tier", "microvm", "--memory", "64M", "--", "true"])
    assert p.returncode == 125, p.stderr
    assert "limits.memory" in p.stderr and "--memory" in p.stderr, p.stderr


def test_microvm_without_usable_kvm_refused_with_the_fix(airlock):
    need_microvm()
    if _kvm_runs_stock_kernels():
        pytest.skip("KVM runs the stock kernel here: nothing to refuse")
    p = vm_run(airlock, ["run", "-q", "--tier", "microvm", "--", "true"], consent=False)
    assert p.returncode == 125, p.stderr
    assert "/dev/kvm" in p.stderr and f"{ACCEL}=tcg" in p.stderr, p.stderr


def test_doctor_says_what_microvm_needs(airlock):
    p = vm_run(airlock, ["doctor", "--json"])
    rep = json.loads(p.stdout)
    t = [t for t in rep["tiers"] if t["name"] == "microvm"][0]
    names = [c["name"] for c in t["checks"]]
    assert names == ["kvm", "kvm-guest", "qemu", "guest-kernel", "accel"], names
    for c in t["checks"]:
        assert c["ok"] or c["fix"], c
    ok = os.access(QEMU, os.X_OK) and os.access(os.path.join(VM_DIR, "vmlinuz"), os.R_OK)
    assert t["available"] is ok, t


def test_microvm_terminal_refused(airlock):
    """-t: the guest gives the command no terminal; refused, not pipes in
    its place."""
    need_microvm()
    if airlock.user or not shutil.which("script"):
        pytest.skip("checked as root, under script(1)")
    argv = vm_run_argv(airlock, ["run", "-q", "-t", "--tier", "microvm", "--", "true"])
    p = subprocess.run(["script", "-qec", shlex.join(argv), "/dev/null"], capture_output=True,
                       text=True, timeout=60, cwd=str(airlock.base))
    assert "drop -t" in p.stdout + p.stderr, (p.stdout, p.stderr)
    assert p.returncode == 125, (p.stdout, p.stderr)
