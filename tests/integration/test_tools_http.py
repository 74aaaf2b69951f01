# SPDX-License-Identifier: Apache-2.0
"""An HTTP tool end to end: a sandbox calls a host tool whose request goes
through one of the policy's routes, with a host-held key injected on the
way out. The upstream sees the key; the sandbox, its answer and the audit
log never do; the route's rules (here: no private address unless allowed)
hold for the tool's request as for the sandbox's own."""

import hashlib
import json

from test_routes import SECRET, pki, upstream  # noqa: F401 (fixtures)


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _setup(airlock, pki):
    d = airlock.make_dir("tools-http")
    sf = d / "secrets.env"
    sf.write_text(f"FORGE_KEY={SECRET}\n")
    sf.chmod(0o600)
    tools = d / "tools.json"
    tools.write_text(json.dumps({"define": {"forge.repo": {
        "description": "one repository of the forge, read-only",
        "args": {"type": "object", "required": ["repo"], "additionalProperties": False,
                 "properties": {"repo": {"type": "string", "pattern": "^[a-z0-9-]{1,40}$"}}},
        "http": {"route": "forge", "method": "GET", "path": "/repos/${args.repo}"}}}}))
    policy = d / "policy.json"
    policy.write_text(json.dumps({"network": {"routes": [
        {"name": "forge", "upstream": "https://upstream.test", "caFile": str(pki.ca)}]}}))
    airlock.chown(d)
    return d, sf, tools, policy


def _call(airlock, pki, upstream, d, sf, tools, policy, *extra, script=None):
    return airlock.sandbox(
        script or "airlock-tool call forge.repo repo=airlock",
        "-p", policy, "--secrets", sf, "--tools", tools, "--tool", "forge.repo",
        "--route", f"forge=https://upstream.test:{upstream.port}",
        "--inject", "forge:x-api-key=${secret:FORGE_KEY}",
        "--host", "upstream.test=127.0.0.1", "--audit", d / "audit.jsonl", *extra,
        timeout=90)


def test_http_tool_injects_the_host_key_and_the_sandbox_never_sees_it(airlock, pki, upstream):
    upstream.seen.clear()
    d, sf, tools, policy = _setup(airlock, pki)
    p = _call(airlock, pki, upstream, d, sf, tools, policy, "--allow-private", "127.0.0.0/8")
    assert p.returncode == 0, p.stderr
    answer = json.loads(p.stdout)
    # The upstream got the tool's request with the host's key...
    assert [(s["method"], s["path"]) for s in upstream.seen] == [("GET", "/repos/airlock")]
    assert ("x-api-key", SECRET) in upstream.seen[0]["headers"]
    assert answer["apiKeySha256"] == hashlib.sha256(SECRET.encode()).hexdigest()
    # ...and neither the sandbox's output nor the audit log holds it.
    assert SECRET not in p.stdout + p.stderr
    log = (d / "audit.jsonl").read_text()
    assert SECRET not in log
    events = _lines(d / "audit.jsonl")
    call = [e for e in events if e["kind"] == "tool.call"]
    assert len(call) == 1 and call[0]["decision"] == "allow", call
    route = [e for e in events if e["kind"] == "route.call"]
    assert route and route[0].get("tool") == "forge.repo", route


def test_http_tool_obeys_the_route_rules(airlock, pki, upstream):
    """Without --allow-private the upstream's loopback address is refused for
    the tool's request exactly as for the sandbox's own."""
    upstream.seen.clear()
    d, sf, tools, policy = _setup(airlock, pki)
    p = _call(airlock, pki, upstream, d, sf, tools, policy)
    assert p.returncode == 7, (p.returncode, p.stdout, p.stderr)  # tool_failed
    assert "private_address" in p.stderr
    assert upstream.seen == []


def test_http_tool_argument_cannot_leave_its_path_segment(airlock, pki, upstream):
    upstream.seen.clear()
    d, sf, tools, policy = _setup(airlock, pki)
    p = _call(airlock, pki, upstream, d, sf, tools, policy, "--allow-private", "127.0.0.0/8",
              script="airlock-tool call forge.repo 'repo=../admin'; echo rc=$?")
    assert "rc=4" in p.stdout, (p.stdout, p.stderr)  # bad_args: the schema's pattern
    assert upstream.seen == []
