#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cold start per isolation tier: `airlock run --tier T -- /bin/true` for
each tier this host runs, against `runsc do true` and a bubblewrap sandbox,
measured in the same run, interleaved. Prints each median and its ratio to
bwrap's (and, for the gvisor tier, to runsc's own)."""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK_BIN", os.path.join(REPO, "build/src/cli/airlock"))
RUNS = int(os.environ.get("BENCH_RUNS", "30"))
WARMUP = 3

BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
         "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
RUNSC = ["runsc", "--rootless", "--network=none", "do", "true"]


# The microvm tier boots a kernel: fewer runs (BENCH_VM_RUNS), and where KVM
# cannot run the stock guest kernel it is measured under QEMU's emulation
# (AIRLOCK_MICROVM_ACCEL=tcg), which the label says.
VM_RUNS = int(os.environ.get("BENCH_VM_RUNS", "5"))
VM_ENV = dict(os.environ)


def kvm_runs_stock_kernels():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return not os.path.exists("/sys/module/kvm_pvm")


def run(argv, cwd):
    t0 = time.perf_counter()
    env = VM_ENV if "microvm" in argv else None
    p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0, p.returncode


def image_root():
    """A tiny root for the container tier: /bin/true and its libraries."""
    root = tempfile.mkdtemp(prefix="airlock-bench-img-")
    real = os.path.realpath("/bin/true")
    out = subprocess.run(["ldd", real], capture_output=True, text=True).stdout
    for f in [real] + [w for line in out.splitlines() for w in line.split() if w.startswith("/")]:
        dst = os.path.join(root, ("bin/true" if f == real else f.lstrip("/")))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(f, dst)
    return root


def main():
    ws = tempfile.mkdtemp(prefix="airlock-bench-")
    img = image_root()
    name = "bench-%d" % os.getpid()
    subprocess.run([AIRLOCK, "image", "import", img, "--name", name], check=True,
                   capture_output=True)
    cases = {
        "bwrap": BWRAP,
        "runsc do": RUNSC,
        "namespace": [AIRLOCK, "run", "-q", "-w", ws, "--", "/bin/true"],
        "container": [AIRLOCK, "run", "-q", "-w", ws, "--tier", "container", "--image", name,
                      "--", "/bin/true"],
        "gvisor": [AIRLOCK, "run", "-q", "-w", ws, "--tier", "gvisor", "--", "/bin/true"],
    }
    vm = "microvm"
    if "AIRLOCK_MICROVM_ACCEL" not in VM_ENV and not kvm_runs_stock_kernels():
        VM_ENV["AIRLOCK_MICROVM_ACCEL"] = "tcg"
    if VM_ENV.get("AIRLOCK_MICROVM_ACCEL") == "tcg":
        vm = "microvm(tcg)"
    cases[vm] = [AIRLOCK, "run", "-q", "-w", ws, "--tier", "microvm", "--", "/bin/true"]
    for k, argv in list(cases.items()):
        if shutil.which(argv[0]) is None and not os.path.exists(argv[0]) or run(argv, ws)[1]:
            print(f"tiers: {k} cannot run here, left out", file=sys.stderr)
            del cases[k]
    times = {k: [] for k in cases}
    for i in range(WARMUP + RUNS):
        for k, argv in cases.items():
            if k.startswith("microvm") and i >= WARMUP + VM_RUNS:
                continue
            t, _ = run(argv, ws)
            if i >= WARMUP:
                times[k].append(t)
    subprocess.run([AIRLOCK, "image", "rm", name], capture_output=True)
    shutil.rmtree(img, ignore_errors=True)
    shutil.rmtree(ws, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    base = med.get("bwrap")
    for k, m in med.items():
        ratio = f"  {m / base:5.1f}x bwrap" if base else ""
        if k == "gvisor" and "runsc do" in med:
            ratio += f"  {m / med['runsc do']:4.2f}x runsc do"
        p90 = sorted(times[k])[int(0.9 * (len(times[k]) - 1))]
        print(f"tiers: {k:12s} median {m * 1000:8.2f} ms  p90 {p90 * 1000:8.2f} ms  "
              f"n={len(times[k])}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
