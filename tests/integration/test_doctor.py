# SPDX-License-Identifier: Apache-2.0
"""airlock doctor: its verdict on the namespace tier is the run's (exit 0
exactly when `airlock run -- true` works, for root and for an ordinary user
in a delegated cgroup; exit 1 and the fix when a switch blocks it), the
facts of the tiers not built yet match the host, and --workspace says
whether limits.workspaceDisk and limits.io can be had there, as the run
would."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
AIRLOCK_BIN = REPO / os.environ.get("AIRLOCK_BIN", BUILD / "src/cli/airlock")
TEST_USER = os.environ.get("AIRLOCK_TEST_USER", "airlock-test")

NAMESPACE_CHECKS = ["userns", "cgroup", "landlock", "seccomp"]


def doctor(airlock, *args, prefix=(), timeout=30):
    argv = [*prefix, *airlock.cmd(["doctor", *args])]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          cwd=str(airlock.base))


def doctor_json(airlock, *args, prefix=()):
    p = doctor(airlock, "--json", *args, prefix=prefix)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def tier(report, name):
    return next(t for t in report["tiers"] if t["name"] == name)


def test_verdict_is_the_runs(airlock):
    rc, rep = doctor_json(airlock)
    ws = airlock.make_dir()
    run = airlock.run(["run", "-q", "-w", ws, "--", "true"], check_setup=False, timeout=60)
    ns = tier(rep, "namespace")
    assert [c["name"] for c in ns["checks"]] == NAMESPACE_CHECKS
    assert (rc == 0) == (run.returncode == 0), (rep, run.stderr)
    assert ns["available"] == (rc == 0)
    for c in ns["checks"]:
        assert c["detail"], c
        assert c["ok"] or c["fix"], c


def test_tiers_not_built_are_said_so_with_their_facts(airlock):
    _, rep = doctor_json(airlock)
    assert [t["name"] for t in rep["tiers"]] == ["namespace", "container", "gvisor", "microvm"]
    # The container tier is the namespace tier's checks plus its images.
    cont = tier(rep, "container")
    assert cont["built"] is True, cont
    assert [c["name"] for c in cont["checks"]] == [*NAMESPACE_CHECKS, "images"], cont
    gv = tier(rep, "gvisor")
    assert [c["name"] for c in gv["checks"]] == [*NAMESPACE_CHECKS, "runsc"], gv
    assert gv["built"] is bool(shutil.which("runsc")), gv
    t = tier(rep, "microvm")
    # Available where KVM boots the guest kernel and QEMU and the kernel are
    # there (test_tier_microvm.py); otherwise refused naming /dev/kvm, QEMU
    # or the guest kernel.
    if not t["available"]:
        assert t["built"] is False, t
        assert any(w in t["why"] for w in ("/dev/kvm", "QEMU", "guest kernel")), t
    runsc = tier(rep, "gvisor")["checks"][-1]
    assert runsc["name"] == "runsc"
    assert runsc["ok"] == bool(shutil.which("runsc")), runsc
    kvm = tier(rep, "microvm")["checks"][0]
    assert kvm["name"] == "kvm"
    # Whether /dev/kvm opens read-write for the identity doctor ran as.
    probe = subprocess.run([*airlock.cmd([])[:-1], "/bin/sh", "-c", "exec 3<>/dev/kvm"],
                           capture_output=True, timeout=30)
    assert kvm["ok"] == (probe.returncode == 0), (kvm, probe.stderr)
    assert kvm["ok"] or kvm["fix"]


def test_text_output_names_each_tier_and_check(airlock):
    p = doctor(airlock)
    assert p.returncode in (0, 1), p.stderr
    for word in ("namespace tier", "container tier", "gvisor tier", "microvm tier",
                 *NAMESPACE_CHECKS, "runsc", "kvm"):
        assert word in p.stdout, p.stdout
    assert "Airlock has no microVM backend yet" in p.stdout or "usable /dev/kvm" in p.stdout


def test_user_namespaces_switched_off_fail_with_the_switch(airlock):
    """user.max_user_namespaces is per user namespace: set to 0 in one of our
    own, it blocks what Airlock makes beneath it, as the host-wide switch
    would, without touching the host."""
    if airlock.rootless:
        pytest.skip("the outer namespace is made by root here; the user case is the cgroup one")
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    wrap = ["unshare", "--user", "--map-root-user", "/bin/sh", "-c",
            'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "sh"]
    rc, rep = doctor_json(airlock, prefix=wrap)
    assert rc == 1, rep
    userns = tier(rep, "namespace")["checks"][0]
    assert userns["ok"] is False
    assert "user.max_user_namespaces = 0" in userns["fix"], userns
    ws = airlock.make_dir()
    run = subprocess.run([*wrap, *airlock.cmd(["run", "-q", "-w", ws, "--", "true"])],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 125, run.stderr


def test_undelegated_user_fails_on_the_cgroup(airlock):
    """An ordinary user outside any cgroup delegated to them: doctor says so
    (exit 1), and the run is refused too."""
    if airlock.rootless or os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to become an ordinary user without a delegated cgroup")
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        pytest.skip("cgroup v2: whether the caller's cgroup is delegated depends on the host")
    user = TEST_USER
    wrap = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--reset-env",
            "--"]
    p = subprocess.run([*wrap, str(AIRLOCK_BIN), "doctor", "--json"], capture_output=True,
                       text=True, timeout=30, cwd="/")
    rep = json.loads(p.stdout)
    cg = tier(rep, "namespace")["checks"][1]
    ws = airlock.make_dir()
    os.chmod(ws, 0o777)
    run = subprocess.run([*wrap, str(AIRLOCK_BIN), "run", "-q", "-w", str(ws), "--", "true"],
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert (p.returncode == 0) == (run.returncode == 0), (rep, run.stderr)
    if run.returncode == 0:
        pytest.skip("this host lets the ordinary user's own cgroup hold sandboxes")
    assert p.returncode == 1 and cg["ok"] is False and cg["fix"], cg


def test_workspace_on_tmpfs_has_neither_quota_nor_io(airlock):
    if airlock.rootless:
        pytest.skip("mounting a tmpfs needs root")
    d = airlock.make_dir("tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(d)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        _, rep = doctor_json(airlock, "--workspace", str(d))
        quota, io = rep["workspace"]["checks"]
        assert rep["workspace"]["path"] == str(d)
        assert quota["name"] == "workspaceDisk" and quota["ok"] is False, quota
        assert "tmpfs" in quota["detail"] and "prjquota" in quota["fix"], quota
        assert io["name"] == "io" and io["ok"] is False, io
        assert "no block device" in io["detail"], io
        # The run says the same.
        pol = airlock.make_dir("pol") / "p.json"
        pol.write_text('{"limits": {"workspaceDisk": "4M"}}')
        run = airlock.run(["run", "-q", "-w", d, "-p", pol, "--", "true"], check_setup=False,
                          timeout=60)
        assert run.returncode == 125 and "tmpfs" in run.stderr, run.stderr
    finally:
        subprocess.run(["umount", "-l", str(d)], timeout=30)


def test_workspace_quota_verdict_is_the_runs(airlock):
    ws = airlock.make_dir()
    _, rep = doctor_json(airlock, "--workspace", str(ws))
    quota, io = rep["workspace"]["checks"]
    pol = airlock.make_dir("pol") / "p.json"
    pol.write_text('{"limits": {"workspaceDisk": "4M"}}')
    run = airlock.run(["run", "-q", "-w", ws, "-p", pol, "--", "true"], check_setup=False,
                      timeout=60)
    assert quota["ok"] == (run.returncode == 0), (quota, run.stderr)
    # limits.io: a disk behind the workspace and the controller delegated,
    # as the run finds them.
    run = airlock.run(["run", "-q", "-w", ws, "--io-write-bps", "5M", "--", "true"],
                      check_setup=False, timeout=60)
    assert io["ok"] == (run.returncode == 0), (io, run.stderr)
    if airlock.rootless and not quota["ok"]:
        assert "root" in quota["detail"] or "no project quotas" in quota["detail"], quota


@pytest.mark.parametrize("args,why", [
    (["--workspace", "/nonexistent-airlock-doctor"], "No such file"),
    (["--workspace", "/etc/passwd"], "not a directory"),
    (["--frobnicate"], "unknown or incomplete option"),
    (["extra"], "unexpected argument"),
])
def test_bad_usage_exits_2(airlock, args, why):
    p = doctor(airlock, *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert why in p.stderr, p.stderr


def test_help_and_man(airlock):
    p = doctor(airlock, "--help")
    assert p.returncode == 0 and "--workspace" in p.stdout and "--json" in p.stdout, p.stdout
    top = subprocess.run([str(AIRLOCK_BIN), "--help"], capture_output=True, text=True,
                         timeout=30)
    assert "doctor" in top.stdout
