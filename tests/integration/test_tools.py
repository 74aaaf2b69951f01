# SPDX-License-Identifier: Apache-2.0
"""The tool gateway from inside real sandboxes (docs/tools.md): the endpoint
at /run/airlock, `airlock-tool` and its MCP server, `airlock run --tool` and
`--tools`, and the host's audit of every call. The gateway's own checks
(schemas, limits, runners) have unit tests (tests/unit/test-toolgate*.c);
these drive it end to end, as an agent would."""

import json
import os
import pathlib
import shlex
import shutil
import subprocess
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD = REPO / os.environ.get("AIRLOCK_BUILD", "build")
AIRLOCK_BIN = REPO / os.environ.get("AIRLOCK_BIN", BUILD / "src/cli/airlock")

MCP_DIR = REPO / "tests/integration/mcp"

# Prints its arguments as one JSON array: what the host really ran.
ARGV_TOOL = """#!/usr/bin/python3
import json, sys
print(json.dumps(sys.argv[1:]))
"""


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _audit(airlock):
    return airlock.make_dir("audit") / "audit.jsonl"


def _tools_file(airlock, define):
    d = airlock.make_dir("tools")
    f = d / "tools.json"
    f.write_text(json.dumps({"define": define}))
    f.chmod(0o644)
    airlock.chown(d)
    return f


def _argv_tools(airlock):
    """Two command tools over one script: `argv.sep` has a literal "--"
    before its argument, `argv.bare` has not."""
    d = airlock.make_dir("bin")
    script = d / "argv.py"
    script.write_text(ARGV_TOOL)
    script.chmod(0o755)
    airlock.chown(d)
    schema = {"type": "object", "properties": {"v": {"type": "string", "maxLength": 200}},
              "required": ["v"], "additionalProperties": False}
    return _tools_file(airlock, {
        "argv.sep": {"description": "echo an argument", "args": schema,
                     "command": [str(script), "--", "${args.v}"]},
        "argv.bare": {"description": "echo an argument", "args": schema,
                      "command": [str(script), "${args.v}"]},
    })


# The endpoint


@pytest.mark.parametrize("net", [[], ["--allow", "example.com"]], ids=["none", "gated"])
def test_endpoint_holds_only_the_socket_and_the_client(airlock, net):
    script = textwrap.dedent("""\
        cd /run/airlock || exit 9
        find . | sort | tr '\\n' ' '; echo
        stat -c '%F %a' tool.sock
        stat -c '%U' tool.sock
        test -S "$AIRLOCK_TOOL_SOCKET" && echo sock-ok
        echo "$PATH"
        for what in 'touch x' 'touch bin/x' 'mkdir d' 'rm -f tool.sock' 'mv tool.sock t' \
                    'chmod 666 tool.sock' 'ln -s / l' 'cp /bin/sh bin/airlock-tool' \
                    'rm -f bin/airlock-tool'; do
            sh -c "$what" 2>/dev/null && echo "ALLOWED: $what"
        done
        grep ' /run/airlock' /proc/self/mountinfo | awk '{print $5, $6}'
    """)
    p = airlock.sandbox(script, "--tool", "core.time", *net)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0].split() == [".", "./bin", "./bin/airlock-tool", "./tool.sock"], out
    assert out[1] == "socket 600", out
    assert out[2] == "agent", out
    assert "sock-ok" in out
    assert any(line.endswith(":/run/airlock/bin") for line in out), out
    assert not [line for line in out if line.startswith("ALLOWED")], out
    mounts = dict(line.split(" ", 1) for line in out if line.startswith("/run/airlock"))
    assert mounts["/run/airlock"].startswith("ro,"), mounts
    assert mounts["/run/airlock/bin/airlock-tool"].startswith("ro,"), mounts


def test_no_endpoint_without_tools(airlock):
    p = airlock.sandbox("ls -A /run 2>&1; env | grep -c '^AIRLOCK_TOOL\\|^AIRLOCK_RUN' ; "
                        "command -v airlock-tool || echo none", "--read", "host")
    assert p.stdout.split()[-2:] == ["0", "none"], p.stdout
    assert "airlock" not in p.stdout.split()[:-2], p.stdout


def test_environment_names_the_endpoint(airlock):
    p = airlock.sandbox('echo "$AIRLOCK_TOOL_SOCKET"; echo "$AIRLOCK_RUN_ID"; '
                        'command -v airlock-tool', "--tool", "core.time",
                        "--env", "AIRLOCK_RUN_ID=forged")
    sock, run_id, path = p.stdout.split()
    assert sock == "/run/airlock/tool.sock"
    # The host's run id, whatever the policy's env said.
    assert len(run_id) == 32 and all(c in "0123456789abcdef" for c in run_id), run_id
    assert path == "/run/airlock/bin/airlock-tool"


def test_each_run_has_its_own_run_id(airlock):
    ids = {airlock.sandbox('echo "$AIRLOCK_RUN_ID"', "--tool", "core.time").stdout.strip()
           for _ in range(2)}
    assert len(ids) == 2, ids


# Calls


def test_allowed_tool_works(airlock):
    p = airlock.sandbox("airlock-tool call core.time", "--tool", "core.time")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip(), p.stdout
    ls = airlock.sandbox("airlock-tool ls --json", "--tool", "core.time")
    assert [t["name"] for t in json.loads(ls.stdout)] == ["core.time"], ls.stdout


def test_disallowed_tool_is_policy_denied(airlock):
    tools = _argv_tools(airlock)
    p = airlock.sandbox("airlock-tool call argv.sep v=x", "--tool", "core.time",
                        "--tools", tools)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert "policy_denied" in p.stderr, p.stderr
    p = airlock.sandbox("airlock-tool call no.such.tool", "--tool", "core.time")
    assert p.returncode == 3 and "policy_denied" in p.stderr, p.stderr


# Sends each line of /workspace/lines.json (with "R" replaced by the run id)
# on one connection and prints each answer.
RAW_CALL = """
import json, os, socket
run_id = os.environ["AIRLOCK_RUN_ID"]
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["AIRLOCK_TOOL_SOCKET"])
f = s.makefile("rwb")
for line in json.load(open("/workspace/lines.json")):
    f.write(line.replace('"R"', json.dumps(run_id)).encode() + b"\\n")
    f.flush()
    print(f.readline().decode().strip())
"""


def _raw(airlock, lines, *opts, then=""):
    ws = airlock.make_dir()
    (ws / "raw.py").write_text(RAW_CALL)
    (ws / "lines.json").write_text(json.dumps(lines))
    airlock.chown(ws)
    return airlock.sandbox("python3 /workspace/raw.py; " + then + "true", *opts, workspace=ws)


def test_wrong_run_id_is_run_mismatch(airlock):
    req = json.dumps({"runId": "0" * 32, "callId": "a", "tool": "core.time", "args": {}})
    p = _raw(airlock, [req], "--tool", "core.time")
    assert p.returncode == 0, p.stderr
    resp = json.loads(p.stdout.splitlines()[0])
    assert (resp["ok"], resp["errorCode"]) == (False, "run_mismatch"), resp
    p = airlock.sandbox('AIRLOCK_RUN_ID=0123 airlock-tool call core.time', "--tool", "core.time")
    assert p.returncode == 8 and "run_mismatch" in p.stderr, (p.returncode, p.stderr)


def test_every_call_is_in_the_host_audit_and_verifies(airlock):
    log = _audit(airlock)
    p = airlock.sandbox("airlock-tool call core.time >/dev/null; airlock-tool call nope.x; "
                        "AIRLOCK_RUN_ID=bad airlock-tool call core.time; true",
                        "--tool", "core.time", "--audit", log)
    assert p.returncode == 0, p.stderr
    calls = [e for e in _lines(log) if e["kind"] == "tool.call"]
    assert [(c["tool"], c.get("errorCode")) for c in calls] == [
        ("core.time", None), ("nope.x", "policy_denied"), ("core.time", "run_mismatch")], calls
    assert [c["decision"] for c in calls] == ["allow", "deny", "deny"], calls
    assert len({c["sandbox"] for c in calls}) == 1
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout + v.stderr


def test_sandbox_bytes_cannot_add_or_change_audit_lines(airlock):
    """Whatever the sandbox writes to the socket (or anywhere) lands, at
    most, as field values of its own tool.call lines: never a line of its
    own, never a changed line."""
    log = _audit(airlock)
    fake = json.dumps({"seq": 1, "ts": "x", "sandbox": "0" * 16, "kind": "sandbox.destroyed",
                       "prev": "0" * 64})
    evil = [
        json.dumps({"runId": "R", "callId": "a\n" + fake, "tool": "core.time\n" + fake,
                    "args": {"x\n" + fake: "y\r\n" + fake}}),
        json.dumps({"runId": "R", "callId": "b", "tool": "core.time", "args": {}}),
        fake,
        "\u2028" + fake,
        "{\"runId\": \"R\", \"callId\": \"c\", \"tool\": \"core.time\", \"args\": {}, "
        "\"tool\": \"x\"}",
        "not json at all \x1b[2J",
    ]
    then = ("echo %s > /tmp/x.jsonl; airlock-tool call core.time x:=%s; "
            % (shlex.quote(fake), shlex.quote(json.dumps(fake))))
    p = _raw(airlock, evil, "--tool", "core.time", "--audit", log, then=then)
    assert p.returncode == 0, p.stderr
    events = _lines(log)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "sandbox.created" and kinds[-1] == "sandbox.destroyed", kinds
    assert kinds.count("sandbox.destroyed") == 1, kinds
    assert set(kinds) <= {"sandbox.created", "process.started", "process.ended",
                          "sandbox.destroyed", "tool.started", "tool.call"}, kinds
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["sandbox"] for e in events}) == 1
    assert kinds.count("tool.call") >= 3, kinds
    v = airlock.run(["audit", "verify", log])
    assert v.returncode == 0, v.stdout + v.stderr


@pytest.mark.parametrize("value", [
    "two words", "it's \"quoted\"", "new\nline", "$(id) `id` ; id | id && id",
    "*", "~", "--", "=x", "\\", "\u00e9t\u00e9",
])
def test_argument_is_one_literal_element(airlock, value):
    tools = _argv_tools(airlock)
    args = json.dumps({"v": value})
    p = airlock.sandbox(f"airlock-tool call argv.sep --json {shlex.quote(args)}",
                        "--tool", "argv.sep", "--tools", tools)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert json.loads(p.stdout) == ["--", value], p.stdout


@pytest.mark.parametrize("value", ["-rf", "--output=/etc/passwd", "-", "--help"])
def test_leading_dash_is_refused_without_a_separator(airlock, value):
    tools = _argv_tools(airlock)
    args = json.dumps({"v": value})
    p = airlock.sandbox(f"airlock-tool call argv.bare --json {shlex.quote(args)}; echo rc=$?; "
                        f"airlock-tool call argv.sep --json {shlex.quote(args)}",
                        "--tool", "argv.bare", "--tool", "argv.sep", "--tools", tools)
    out = p.stdout.splitlines()
    assert out[0] == "rc=4" and "bad_args" in p.stderr, (p.stdout, p.stderr)
    # After a literal "--" it is one literal element, never an option.
    assert json.loads(out[1]) == ["--", value], p.stdout


def test_bad_args_exit_code(airlock):
    tools = _argv_tools(airlock)
    p = airlock.sandbox("airlock-tool call argv.sep w=1", "--tool", "argv.sep", "--tools", tools)
    assert p.returncode == 4 and "bad_args" in p.stderr, (p.returncode, p.stderr)


def test_a_policy_cannot_define_tools_it_is_not_given(airlock):
    """--tools definitions are the host's; tools.allow still decides."""
    tools = _argv_tools(airlock)
    p = airlock.sandbox("airlock-tool ls --json", "--tool", "core.time", "--tools", tools)
    assert [t["name"] for t in json.loads(p.stdout)] == ["core.time"], p.stdout


def test_unknown_tool_name_is_a_setup_error(airlock):
    p = airlock.run(["run", "-q", "--tool", "no.such", "--", "true"], check_setup=False)
    assert p.returncode == 125 and "no.such" in p.stderr, (p.returncode, p.stderr)


def test_tool_calls_are_counted_in_the_result(airlock):
    p, res = airlock.result(["-q", "--tool", "core.time", "--", "/bin/sh", "-c",
                             "airlock-tool call core.time; airlock-tool call x.y; true"])
    assert res["usage"]["toolCalls"] == 2, res


# MCP


def test_mcp_server_with_the_sdk_client(airlock):
    if not (MCP_DIR / "node_modules/@modelcontextprotocol/sdk").exists():
        pytest.skip("the MCP SDK is not installed (make deps installs it into "
                    "tests/integration/mcp/node_modules)")
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed (make deps)")
    tools = _argv_tools(airlock)
    argv = [str(AIRLOCK_BIN), "run", "-q", "-w", str(airlock.make_dir()),
            "--tool", "core.time", "--tool", "argv.sep", "--tools", str(tools),
            "--", "airlock-tool", "mcp"]
    if airlock.user:
        argv = [str(REPO / "tests/runas.sh"), airlock.user.pw_name] + argv
    p = subprocess.run([node, str(MCP_DIR / "client.mjs"), json.dumps(argv)],
                       capture_output=True, text=True, timeout=60, cwd=str(airlock.base))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(p.stdout)
    assert r["protocolVersion"] == r["latest"], r
    assert sorted(t["name"] for t in r["tools"]) == ["argv.sep", "core.time"], r
    sep = next(t for t in r["tools"] if t["name"] == "argv.sep")
    assert sep["inputSchema"]["required"] == ["v"], sep
    assert r["time"]["isError"] is False and r["time"]["content"][0]["type"] == "text", r
    assert r["argv"]["isError"] is False, r
    assert json.loads(r["argv"]["content"][0]["text"]) == ["--", "a b"], r
    assert r["denied"]["isError"] is True, r
    assert "policy_denied" in r["denied"]["content"][0]["text"], r
    assert r["bad"]["isError"] is True and "bad_args" in r["bad"]["content"][0]["text"], r


def test_mcp_version_negotiation(airlock):
    """An older revision the server knows is answered as asked; an unknown
    one with the newest."""
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": v, "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}}
            for v in ("2025-06-18", "2024-11-05", "1999-01-01")]
    msgs.append({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    msgs.append({"jsonrpc": "2.0", "id": 3, "method": "no/such"})
    stdin = "".join(json.dumps(m) + "\n" for m in msgs) + "{broken\n"
    p = airlock.run(["run", "-q", "-w", airlock.make_dir(), "--tool", "core.time", "--",
                     "airlock-tool", "mcp"], input=stdin)
    out = [json.loads(line) for line in p.stdout.splitlines()]
    assert [o["result"]["protocolVersion"] for o in out[:3]] == [
        "2025-06-18", "2024-11-05", "2025-11-25"], out
    assert out[3]["result"] == {} and out[4]["error"]["code"] == -32601, out
    assert out[5]["error"]["code"] == -32700 and out[5]["id"] is None, out


# The host's side: secrets and concurrent callers


def test_tool_uses_a_host_secret_the_sandbox_never_sees(airlock):
    token = "forge-" + os.urandom(12).hex()
    d = airlock.make_dir("sec")
    sec = d / "secrets.env"
    sec.write_text(f"FORGE_TOKEN={token}\n")
    sec.chmod(0o600)
    airlock.chown(d)
    tools = _tools_file(airlock, {"forge.whoami": {
        "description": "prints the token it was given (a careless tool)",
        "command": ["/usr/bin/printenv", "FORGE_TOKEN"],
        "env": {"FORGE_TOKEN": "${secret:FORGE_TOKEN}"}}})
    log = _audit(airlock)
    p = airlock.sandbox("airlock-tool call forge.whoami; env; cat /proc/self/environ",
                        "--tool", "forge.whoami", "--tools", tools, "--secrets", sec,
                        "--audit", log)
    assert p.returncode == 0, p.stderr
    assert token not in p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == "[REDACTED]", p.stdout
    assert token not in log.read_text()
    call = [e for e in _lines(log) if e["kind"] == "tool.call"][0]
    assert (call["decision"], call.get("errorCode")) == ("allow", None), call


def test_concurrent_callers_are_each_answered_and_audited(airlock):
    log = _audit(airlock)
    p = airlock.sandbox("for i in 1 2 3 4 5 6 7 8; do airlock-tool call core.time >/tmp/$i & done; "
                        "wait; cat /tmp/[1-8] | grep -c unixMs",
                        "--tool", "core.time", "--audit", log)
    assert p.stdout.split() == ["8"], (p.stdout, p.stderr)
    calls = [e for e in _lines(log) if e["kind"] == "tool.call"]
    assert len(calls) == 8 and all(c["decision"] == "allow" for c in calls), calls


def test_missing_client_is_a_clear_setup_error(airlock, tmp_path):
    """An airlock without airlock-tool beside it refuses a sandbox with tools
    (naming the file), and runs one without."""
    if airlock.user:
        pytest.skip("the copied binary is run directly, as root")
    lonely = tmp_path / "bin"
    lonely.mkdir()
    shutil.copy(AIRLOCK_BIN, lonely / "airlock")
    ws = airlock.make_dir()
    p = subprocess.run([str(lonely / "airlock"), "run", "-q", "-w", str(ws), "--tool", "core.time",
                        "--", "true"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 125, (p.returncode, p.stderr)
    assert str(lonely / "airlock-tool") in p.stderr and "missing" in p.stderr, p.stderr
    p = subprocess.run([str(lonely / "airlock"), "run", "-q", "-w", str(ws), "--", "true"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
