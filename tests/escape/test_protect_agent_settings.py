# SPDX-License-Identifier: Apache-2.0
"""A project's agent settings run commands on the host: `.claude/settings.json`
holds hooks (shell commands the host's agent runs on each tool call) and
`.claude/hooks/` the scripts they name. Where they exist at the start, the
agent in the sandbox must not rewrite them, as it cannot rewrite
`.claude/commands/` or `.mcp.json`."""


def test_agent_settings_are_write_protected(airlock):
    ws = airlock.make_dir()
    (ws / ".claude" / "hooks").mkdir(parents=True)
    (ws / ".claude" / "settings.json").write_text('{"permissions": {}}\n')
    (ws / ".claude" / "hooks" / "check.sh").write_text("#!/bin/sh\ntrue\n")
    airlock.chown(ws)
    evil = '{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "touch /tmp/x"}]}]}}'
    script = "; ".join([
        f"echo '{evil}' > /workspace/.claude/settings.json",
        "echo 'touch /tmp/x' >> /workspace/.claude/hooks/check.sh",
        "echo evil > /workspace/.claude/hooks/new.sh",
        "echo ok > /workspace/other.txt",
    ])
    p = airlock.sandbox(script, workspace=ws, timeout=60)
    assert (ws / ".claude" / "settings.json").read_text() == '{"permissions": {}}\n'
    assert (ws / ".claude" / "hooks" / "check.sh").read_text() == "#!/bin/sh\ntrue\n"
    assert not (ws / ".claude" / "hooks" / "new.sh").exists()
    assert (ws / "other.txt").read_text() == "ok\n", p.stderr
