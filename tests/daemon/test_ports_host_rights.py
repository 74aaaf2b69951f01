# SPDX-License-Identifier: Apache-2.0
"""A port forward is a listener on the daemon's host. On loopback, on a
port above 1023, it is the grant's (allowSandbox); served to the network
(a non-loopback bind) or on a privileged port (below 1024, which only the
host's own services may take, and a grant could squat before them) it is
host power, as host paths are: it needs a grant with allowHostWorkspace."""

import pytest

from daemonlib import AirlockError


def test_non_loopback_or_privileged_ports_need_host_rights(make_daemon):
    d = make_daemon()
    c = d.client(d.grant("plain", "--allow-sandbox", "--allow-exec"))
    sb = c.create(sandbox_class="small")["id"]
    try:
        for kw in ({"bind": "0.0.0.0"}, {"bind": "::"}, {"bind": "::ffff:10.0.0.1"},
                   {"host_port": 1023}):
            with pytest.raises(AirlockError) as e:
                c.open_port(sb, 8000, **kw)
            assert e.value.status == 403, (kw, e.value.body)
            assert "allowHostWorkspace" in str(e.value.body), (kw, e.value.body)
        # Loopback, an unprivileged port: the grant's own.
        p = c.open_port(sb, 8000, bind="127.0.0.1")
        assert p["hostPort"] > 1023, p
    finally:
        c.delete(sb)
    admin = d.client(d.admin)
    sb = admin.create(sandbox_class="small")["id"]
    try:
        assert admin.open_port(sb, 8000, bind="0.0.0.0")["hostPort"] > 0
    finally:
        admin.delete(sb)
