# SPDX-License-Identifier: Apache-2.0
"""`airlock run` end to end: every property of the boundary, checked from
inside a real sandbox, as root and as an ordinary user."""

import os
import pathlib

import pytest


def test_runs_command_and_passes_exit_code(airlock):
    p = airlock.sandbox("echo hello; exit 7")
    assert p.returncode == 7
    assert p.stdout == "hello\n"


def test_identity_inside(airlock):
    p = airlock.sandbox("id -u; id -g; echo $HOME; pwd; hostname")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1000", "1000", "/home/agent", "/workspace", "airlock"]


def test_fake_root_inside(airlock):
    p = airlock.sandbox("id -u; echo $HOME; cat /proc/self/status | grep CapEff", "--uid", "0")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("\n")
    assert lines[0] == "0" and lines[1] == "/root"
    assert lines[2].split()[1] == "0000000000000000"


def test_never_a_privileged_host_uid(airlock):
    # The sandbox's uid as the host sees it, through the uid map.
    p = airlock.sandbox("cat /proc/self/uid_map", "--uid", "0")
    inside, outside, count = p.stdout.split()
    assert (inside, count) == ("0", "1")
    assert outside != "0"


def test_workspace_read_write_and_cwd(airlock):
    ws = airlock.make_dir()
    (ws / "in.txt").write_text("from host\n")
    airlock.chown(ws)
    p = airlock.sandbox("cat in.txt && echo made > out.txt", workspace=ws)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "from host\n"
    out = ws / "out.txt"
    assert out.read_text() == "made\n"
    # What the agent creates belongs to the workspace's owner on the host.
    assert out.stat().st_uid == ws.stat().st_uid


def test_clean_environment(airlock):
    env = dict(os.environ, AIRLOCK_LEAK_CHECK="secret-value", AWS_SECRET_ACCESS_KEY="x")
    p = airlock.run(["run", "-q", "-w", airlock.make_dir(), "--env", "FOO=bar", "--", "env"], env=env)
    assert p.returncode == 0, p.stderr
    names = {line.split("=", 1)[0] for line in p.stdout.splitlines()}
    assert "AIRLOCK_LEAK_CHECK" not in names and "AWS_SECRET_ACCESS_KEY" not in names
    assert "FOO=bar" in p.stdout.splitlines()
    assert {"PATH", "HOME", "TERM", "LANG"} <= names


def test_system_dirs_read_only(airlock):
    p = airlock.sandbox("touch /usr/x; echo $?; touch /etc/x; echo $?; touch /x; echo $?; mkdir /opt/x; echo $?")
    assert p.stdout.split() == ["1", "1", "1", "1"], p.stderr


def test_tmp_and_home_writable_and_private(airlock):
    p = airlock.sandbox("echo a > /tmp/a && echo b > $HOME/b && cat /tmp/a $HOME/b && ls -A /tmp")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "a\nb\na\n"


def test_tmp_size_limit(airlock):
    p = airlock.sandbox(
        "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>/dev/null; echo $?; du -m /tmp/fill | cut -f1",
        "-p", _policy(airlock, '{"limits": {"disk": "16M", "fileSize": "1G"}}'),
    )
    rc, size = p.stdout.split()
    assert rc != "0"
    assert int(size) <= 16


def test_only_loopback(airlock):
    p = airlock.sandbox("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
    assert p.stdout.split() == ["lo"]


def test_pid_namespace_sees_only_sandbox(airlock):
    p = airlock.sandbox("ps -e -o pid= | wc -l; cat /proc/1/comm")
    count, comm = p.stdout.split()
    assert int(count) <= 4  # init, sh, ps, wc
    assert comm == "airlock-init"


def test_pid1_hides_host_command_line(airlock):
    p = airlock.sandbox("tr '\\0' ' ' < /proc/1/cmdline", "--env", "MARKER=host-argv-marker")
    assert "host-argv-marker" not in p.stdout
    assert "/workspace" not in p.stdout and "airlock run" not in p.stdout


def test_no_capabilities_nnp_seccomp(airlock):
    p = airlock.sandbox("grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status")
    fields = dict(line.split(":\t") for line in p.stdout.strip().splitlines())
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert fields[cap] == "0000000000000000", (cap, fields)
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"


def test_unshare_and_mount_refused(airlock):
    p = airlock.sandbox("unshare -U true; echo $?; unshare -n true; echo $?; mount -t tmpfs none /tmp 2>/dev/null; echo $?")
    assert [x != "0" for x in p.stdout.split()] == [True, True, True], p.stdout


def test_proc_sensitive_parts_read_only(airlock):
    p = airlock.sandbox(
        "echo x > /proc/sys/kernel/hostname; echo $?; echo b > /proc/sysrq-trigger; echo $?",
        "--uid", "0",
    )
    assert [x != "0" for x in p.stdout.split()] == [True, True]


def test_minimal_dev(airlock):
    p = airlock.sandbox("ls /dev | sort | tr '\\n' ' '; echo x > /dev/null && echo ok; head -c 4 /dev/urandom | wc -c; test -e /dev/pts/ptmx && echo pts")
    names = set(p.stdout.split("\n")[0].split())
    assert {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm"} <= names
    assert not any(n.startswith(("sd", "vd", "nvme", "mem", "kmsg", "loop")) for n in names), names
    assert "ok" in p.stdout and "pts" in p.stdout


def test_denied_secret_under_home_unreadable(airlock):
    # A home that exists on the host, visible because the read mode is host.
    home = pathlib.Path("/home") / "airlock-deny-check"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (home / ".aws").mkdir(exist_ok=True)
    (home / ".aws" / "credentials").write_text("aws secret\n")
    (home / "notes.txt").write_text("public\n")
    for f in [home, home / ".ssh", home / ".aws"]:
        f.chmod(0o755)
    for f in [home / ".ssh/id_rsa", home / ".aws/credentials", home / "notes.txt"]:
        f.chmod(0o644)
    try:
        p = airlock.sandbox(
            f"cat {home}/notes.txt; cat {home}/.ssh/id_rsa; ls -A {home}/.ssh | wc -l; cat {home}/.aws/credentials",
            "--read", "host",
        )
        assert "public" in p.stdout
        assert "PRIVATE KEY" not in p.stdout and "aws secret" not in p.stdout
        assert p.stdout.split()[1] == "0"
    finally:
        import shutil
        shutil.rmtree(home)


def test_etc_shadow_masked_in_both_read_modes(airlock):
    for mode in ("system", "host"):
        p = airlock.sandbox("cat /etc/shadow; cat /etc/gshadow; echo end", "--read", mode)
        assert p.stdout == "end\n", (mode, p.stdout)


def test_deny_read_flag(airlock):
    ws = airlock.make_dir()
    (ws / "secret").mkdir()
    (ws / "secret" / "token").write_text("TOKEN\n")
    (ws / "ok.txt").write_text("fine\n")
    airlock.chown(ws)
    p = airlock.sandbox("cat ok.txt; cat secret/token; ls -A secret | wc -l", "--deny-read", ws / "secret", workspace=ws)
    assert "fine" in p.stdout and "TOKEN" not in p.stdout
    assert p.stdout.split()[-1] == "0"


def test_workspace_symlink_to_shadow_reveals_nothing(airlock):
    ws = airlock.make_dir()
    os.symlink("/etc/shadow", ws / "shadow")
    os.symlink("/", ws / "hostroot")
    airlock.chown(ws)
    p = airlock.sandbox("cat shadow; cat hostroot/etc/shadow; ls hostroot/", workspace=ws)
    assert "root:" not in p.stdout
    assert "workspace" in p.stdout  # the link resolves inside the sandbox's own root


def test_git_hooks_and_config_read_only(airlock):
    ws = airlock.make_dir()
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "src.txt").write_text("x\n")
    airlock.chown(ws)
    p = airlock.sandbox(
        "echo evil > .git/hooks/x; echo $?; echo '[core] fsmonitor=evil' >> .git/config; echo $?; echo ok > src.txt; echo $?",
        workspace=ws,
    )
    assert [x != "0" for x in p.stdout.split()] == [True, True, False], p.stdout
    assert not (ws / ".git" / "hooks" / "x").exists()
    assert (ws / ".git" / "config").read_text() == "[core]\n"


def test_git_hooks_created_when_missing(airlock):
    ws = airlock.make_dir()
    (ws / ".git").mkdir()
    airlock.chown(ws)
    p = airlock.sandbox("mkdir .git/hooks/x 2>/dev/null; echo $?; echo a > .git/config; echo $?", workspace=ws)
    assert [x != "0" for x in p.stdout.split()] == [True, True]


def test_extra_ro_and_rw_mounts(airlock):
    ro = airlock.make_dir("ro")
    (ro / "data").write_text("read me\n")
    rw = airlock.make_dir("rw")
    airlock.chown(ro)
    airlock.chown(rw)
    p = airlock.sandbox(
        "cat /data/data; touch /data/x; echo $?; echo w > /out/w && echo wrote",
        "--ro", f"{ro}:/data", "--rw", f"{rw}:/out",
    )
    assert "read me" in p.stdout and "wrote" in p.stdout, p.stderr
    assert p.stdout.split()[2] != "0"
    assert (rw / "w").read_text() == "w\n"


def test_mount_source_symlink_refused(airlock):
    d = airlock.make_dir()
    os.symlink("/etc", d / "link")
    p = airlock.run(["run", "-q", "--ro", f"{d}/link:/x", "--", "true"], check_setup=False)
    assert p.returncode == 125
    assert "link" in p.stderr and p.stderr.count("\n") == 1


def test_mount_source_inside_denied_path_refused(airlock):
    d = airlock.make_dir()
    (d / "keys").mkdir()
    p = airlock.run(["run", "-q", "--deny-read", d, "--ro", f"{d}/keys:/keys", "--", "true"], check_setup=False)
    assert p.returncode == 125
    assert "denied" in p.stderr


def test_timeout_kills_whole_tree(airlock):
    p, r = airlock.result(["-q", "--timeout", "1", "--", "/bin/sh", "-c", "sleep 100 & sleep 100"])
    assert p.returncode == 124
    assert r["errorCode"] == "timeout" and r["exitCode"] == 124 and r["ok"] is False
    assert r["durationMs"] < 10000


def test_memory_hog_is_oom_killed(airlock):
    p, r = airlock.result(["-q", "--memory", "64M", "--", "python3", "-c", "a = bytearray(1 << 30)"])
    assert p.returncode == 137
    assert r["errorCode"] == "oom_killed"


def test_fork_bomb_held_by_pids_limit(airlock):
    p = airlock.sandbox(
        "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; ps -e -o pid= | wc -l",
        "--pids", "32", "--timeout", "20",
    )
    # The shell's fork fails at the limit; nothing beyond it was created.
    assert int(p.stdout.split()[-1] if p.stdout.split() else 0) <= 32


def test_cpu_quota_applied(airlock):
    p, r = airlock.result(["-q", "--cpus", "0.2", "--timeout", "2", "--", "/bin/sh", "-c", "while :; do :; done"])
    assert r["errorCode"] == "timeout"
    # Two seconds of wall clock at a fifth of a cpu.
    assert r["usage"]["cpuMs"] < 1000, r


def test_open_files_limit(airlock):
    p = airlock.sandbox("ulimit -n", "-p", _policy(airlock, '{"limits": {"openFiles": 64}}'))
    assert p.stdout.strip() == "64"


def test_output_limit(airlock):
    p, r = airlock.result(["-q", "-p", _policy(airlock, '{"limits": {"output": "64k"}}'), "--", "/bin/sh", "-c", "yes"])
    assert r["errorCode"] == "output_limit"
    assert len(p.stdout) <= 64 * 1024


def test_command_not_found_127(airlock):
    p, r = airlock.result(["-q", "--", "no-such-command-x"])
    assert p.returncode == 127 and r["errorCode"] == "exec_failed"
    assert "no-such-command-x" in p.stderr and p.stderr.count("\n") == 1


def test_command_not_executable_126(airlock):
    ws = airlock.make_dir()
    (ws / "script").write_text("#!/bin/sh\necho hi\n")
    (ws / "script").chmod(0o644)
    airlock.chown(ws)
    p, r = airlock.result(["-q", "-w", ws, "--", "/workspace/script"])
    assert p.returncode == 126 and r["errorCode"] == "exec_failed"


def test_missing_workspace_125(airlock):
    p, r = airlock.result(["-q", "-w", "/nonexistent/ws", "--", "true"], check_setup=False)
    assert p.returncode == 125 and r["errorCode"] == "setup_failed"
    assert "/nonexistent/ws" in p.stderr and p.stderr.count("\n") == 1


def test_bad_policy_names_the_key(airlock):
    pol = _policy(airlock, '{"limits": {"memroy": "1G"}}')
    p = airlock.run(["run", "-q", "-p", pol, "--", "true"], check_setup=False)
    assert p.returncode == 125
    assert "limits.memroy" in p.stderr and p.stderr.count("\n") == 1


def test_bad_size_flag(airlock):
    p = airlock.run(["run", "-q", "--memory", "12X", "--", "true"], check_setup=False)
    assert p.returncode == 125 and "memory" in p.stderr


def test_result_json_shape(airlock):
    p, r = airlock.result(["-q", "--", "/bin/sh", "-c", "exit 3"])
    assert set(r) >= {"ok", "exitCode", "signal", "errorCode", "durationMs", "usage"}
    assert r["exitCode"] == 3 and r["ok"] is False and r["errorCode"] is None and r["signal"] is None


def test_killed_by_signal_128_plus_n(airlock):
    p, r = airlock.result(["-q", "--", "/bin/sh", "-c", "kill -TERM $$"])
    assert p.returncode == 128 + 15 and r["signal"] == 15


def test_nothing_left_behind(airlock):
    ids = []
    for args in (["--", "true"], ["--timeout", "1", "--", "sleep", "10"],
                 ["--memory", "32M", "--", "python3", "-c", "a = bytearray(1 << 29)"],
                 ["-w", "/nonexistent", "--", "true"]):
        p, r = airlock.result(["-q", *args], check_setup=False)
        if r.get("sandbox"):
            ids.append(r["sandbox"])
    assert len(ids) >= 3
    left = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        left += [os.path.join(root, d) for d in dirs if any(d == f"airlock-{i}" for i in ids)]
    assert left == []
    with open("/proc/self/mountinfo") as f:
        assert not any(i in f.read() for i in ids)


def test_help(airlock):
    p = airlock.run(["run", "--help"])
    assert p.returncode == 0 and "--workspace" in p.stdout and "man airlock-run" in p.stdout
    # The whole text (as the man page has it): `airlock help run`.
    p = airlock.run(["help", "run"])
    assert p.returncode == 0 and "--workspace" in p.stdout and "Exit status" in p.stdout


def _policy(airlock, text):
    d = airlock.make_dir("policy")
    f = d / "policy.json"
    f.write_text(text)
    airlock.chown(d)
    return f


def test_user_namespaces_disabled_named(airlock):
    # The limit is per user namespace: switch it off in one made for the
    # test, and run Airlock there.
    import shutil
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux)")
    script = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    argv = ["unshare", "-U", "--map-user=0", "--map-group=0", "sh", "-c", script, "sh",
            *airlock.cmd(["run", "-q", "--", "true"])]
    if airlock.user:
        pytest.skip("the test's outer namespace is made as root")
    import subprocess
    p = subprocess.run(argv, cwd=airlock.make_dir(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 125, p.stderr
    assert "user.max_user_namespaces" in p.stderr and p.stderr.count("\n") == 1


def test_state_directories_cannot_be_mounted(airlock):
    # Airlock's own state (the audit log among it) is denied to every bind,
    # even where the sandbox user could not resolve the path by itself.
    state = "/var/lib/airlock" if not airlock.rootless else os.path.expanduser("~airlock-test/.local/state/airlock")
    if airlock.rootless and not airlock.user:
        pytest.skip("needs the test user's home")
    os.makedirs(state + "/audit", exist_ok=True)
    if airlock.user:
        for d in (state.rsplit("/", 2)[0], state.rsplit("/", 1)[0], state, state + "/audit"):
            os.chown(d, airlock.user.pw_uid, airlock.user.pw_gid)
    for args in (["-w", state + "/audit"], ["--ro", f"{state}:/x"]):
        p = airlock.run(["run", "-q", *args, "--", "ls", "/"], check_setup=False)
        assert p.returncode == 125, (args, p.stdout)
        assert "denied path" in p.stderr
