# SPDX-License-Identifier: Apache-2.0
"""The volumes API of an ordinary user's airlockd: the same requests and
promises as a root daemon's (tests/daemon/test_volumes_api.py), with the
volume a directory given to each sandbox as a tmpfs of its size."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "daemon"))
from daemonlib import AIRLOCK, AIRLOCKD, AirlockError, Daemon  # noqa: E402

RUNAS = HERE.parent / "runas.sh"


class UserDaemon(Daemon):
    """airlockd run by the ordinary test user, as a login manager would."""

    def __init__(self, base, user):
        super().__init__(base)
        self.user = user

    def _as_user(self, argv):
        return [str(RUNAS), self.user.pw_name] + [str(a) for a in argv]

    def start(self, args=None):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(self._as_user(
            [AIRLOCKD, "--socket", self.socket, "--state-dir", self.state, "--run-dir",
             self.run_dir, "--audit", self.audit, "--airlock", AIRLOCK]),
            stdout=logf, stderr=subprocess.STDOUT)
        logf.close()

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("airlockd exited: " + self.log.read_text()[-2000:])
            return self.socket.exists() and self._try(
                lambda: self.client("-").request("GET", "/healthz")[0] == 401)
        from daemonlib import wait_for
        wait_for(up, what="airlockd to listen")
        return self

    def grant(self, name, *flags):
        p = subprocess.run(self._as_user([AIRLOCK, "grant", "create", "--name", name,
                                          "--state-dir", self.state] + list(flags)),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()


@pytest.fixture
def user_api(airlock):
    if not airlock.rootless or os.geteuid() != 0:
        pytest.skip("an ordinary user's daemon, started by root through runas.sh")
    base = pathlib.Path(tempfile.mkdtemp(prefix="ud-", dir="/tmp"))
    os.chown(base, airlock.user.pw_uid, airlock.user.pw_gid)
    d = UserDaemon(base, airlock.user)
    d.admin = d.grant("admin", "--allow-sandbox", "--allow-exec", "--allow-host-workspace")
    d.start()
    try:
        yield d.client(d.admin, timeout=60)
    finally:
        d.cleanup(d.admin)
        shutil.rmtree(base, ignore_errors=True)


def test_home_volume_through_the_api(user_api):
    api = user_api
    name = "u-" + os.urandom(6).hex()
    v = api.create_volume(name, "8M")
    assert v["size"] == 8 << 20 and v["attached"] is None
    sb = api.create(sandbox_class="small", home=name)
    try:
        r = api.run(sb["id"], ["sh", "-c", 'echo kept > "$HOME/note"; df -k "$HOME" | tail -1'],
                    timeout=30)
        assert r.exit_code == 0, r.stderr
        assert int(r.stdout.split()[1]) == 8192
        assert api.get_volume(name)["attached"] == "rw"
        with pytest.raises(AirlockError) as e:  # a second writer
            api.create(sandbox_class="small", home=name)
        assert e.value.status == 409
        with pytest.raises(AirlockError) as e:
            api.delete_volume(name)
        assert e.value.status == 409
    finally:
        api.delete(sb["id"])
    sb = api.create(sandbox_class="small", home=name)
    try:
        r = api.run(sb["id"], ["sh", "-c", 'cat "$HOME/note"'], timeout=30)
        assert r.stdout == b"kept\n", r.stderr
    finally:
        api.delete(sb["id"])
    assert name in [v["name"] for v in api.volumes()]
    api.delete_volume(name)
    assert name not in [v["name"] for v in api.volumes()]
