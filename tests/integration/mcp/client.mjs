// SPDX-License-Identifier: Apache-2.0
// The official MCP SDK's client driving `airlock-tool mcp` in a sandbox
// (tests/integration/test_tools.py): argv[2] is the command line, as JSON,
// that starts it; prints what the client saw as one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

class Transport extends StdioClientTransport {
  setProtocolVersion(v) {
    this.negotiated = v;
  }
}

const argv = JSON.parse(process.argv[2]);
const transport = new Transport({ command: argv[0], args: argv.slice(1), stderr: "inherit" });
const client = new Client({ name: "airlock-test", version: "1.0.0" });
await client.connect(transport);
const out = { latest: LATEST_PROTOCOL_VERSION, protocolVersion: transport.negotiated };
out.server = client.getServerVersion();
out.tools = (await client.listTools()).tools;
out.time = await client.callTool({ name: "core.time", arguments: {} });
out.argv = await client.callTool({ name: "argv.sep", arguments: { v: "a b" } });
out.denied = await client.callTool({ name: "argv.bare", arguments: { v: "x" } });
out.bad = await client.callTool({ name: "argv.sep", arguments: { w: 1 } });
await client.close();
console.log(JSON.stringify(out));
