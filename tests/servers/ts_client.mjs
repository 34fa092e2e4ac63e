// A host built on the TypeScript SDK's client, for the tap's tests: connects, lists the tools, calls one,
// and prints what it got as JSON on stdout.
//
//   node ts_client.mjs TOOL ARGS_JSON stdio COMMAND [ARGS...]
//   node ts_client.mjs TOOL ARGS_JSON http URL
//
// The server's process gets this process's whole environment (as a host's config "env" would give it),
// so a tap started as COMMAND finds its data folder.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [tool, argsJson, kind, target, ...rest] = process.argv.slice(2);
if (!tool || !argsJson || !["stdio", "http"].includes(kind) || !target) {
  process.stderr.write("usage: ts_client.mjs TOOL ARGS_JSON (stdio COMMAND [ARGS...] | http URL)\n");
  process.exit(2);
}
const transport =
  kind === "stdio"
    ? new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: "ts-sdk-host", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);
const tools = await client.listTools();
const call = await client.callTool({ name: tool, arguments: JSON.parse(argsJson) });
const server = client.getServerVersion();
if (transport instanceof StreamableHTTPClientTransport) {
  await transport.terminateSession();
}
await client.close();
process.stdout.write(JSON.stringify({ server, tools: tools.tools.map((t) => t.name), call }) + "\n");
