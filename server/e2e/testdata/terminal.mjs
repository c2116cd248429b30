// A real MCP client for the terminal tools: the TypeScript SDK against
// `clawconnect mcp --terminal-tools` (stdio) or `clawconnect serve` with the
// tools on (streamable HTTP).
//
//   node terminal.mjs <command> [args...]
//   node terminal.mjs http://127.0.0.1:PORT/mcp
//
// It lists the tools and the terminals, waits until one pane offers a send
// (the same process in two listings in a row), sends a request, and waits
// for the reply with terminal_status, counting progress notifications;
// with INTRUDER_URL, a second credential then probes the Turn. It
// prints one JSON object on stdout; the Go test asserts on it. The SDK
// validates every structuredContent against the tool's outputSchema.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [command, ...args] = process.argv.slice(2);
const request = process.env.TERMINAL_REQUEST;
const transport = command.startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "clawconnect-e2e-terminal", version: "1.0.0" });
await client.connect(transport);

const call = async (name, a, opts) => {
  const r = await client.callTool({ name, arguments: a }, undefined, { timeout: 180000, ...opts });
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
  return r;
};
const out = {};
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();

let row, prev;
for (let i = 0; i < 120 && !row; i++) {
  const list = await call("terminal_list", {});
  const t = list.structuredContent.terminals;
  out.listed = t.length;
  if (t.length === 1 && t[0].available_actions.length > 0) {
    if (prev && prev.id === t[0].id) row = t[0];
    prev = t[0];
  }
  if (!row) await new Promise((r) => setTimeout(r, 500));
}
if (!row) throw new Error("no sendable terminal listed");
out.row = { agent: row.agent, management_state: row.management_state };

const action = row.available_actions.find((a) => a.scope === "terminal_follow_current");
const sent = await call("terminal_send", { ...action.arguments, request });
out.send = sent.structuredContent;

let progress = 0;
let status;
for (let i = 0; i < 10; i++) {
  const r = await call("terminal_status", { turn_id: sent.structuredContent.turn_id, wait_ms: 60000 },
    { onprogress: () => progress++, resetTimeoutOnProgress: true });
  status = r.structuredContent;
  if (!status.running) {
    out.text = r.content?.[0]?.text;
    break;
  }
}
out.status = status;
out.progress = progress;

// INTRUDER_URL: another credential on the same server asks for the Turn,
// and for one that does not exist; it must not tell them apart.
if (process.env.INTRUDER_URL) {
  const other = new Client({ name: "clawconnect-e2e-intruder", version: "1.0.0" });
  await other.connect(new StreamableHTTPClientTransport(new URL(process.env.INTRUDER_URL)));
  const ask = async (name, a) => {
    const r = await other.callTool({ name, arguments: a });
    return { isError: !!r.isError, text: r.content?.[0]?.text ?? "" };
  };
  const turn = sent.structuredContent.turn_id;
  out.intruder = {
    turn,
    status: await ask("terminal_status", { turn_id: turn, wait_ms: 0 }),
    cancel: await ask("terminal_cancel", { turn_id: turn }),
    ghost: await ask("terminal_status", { turn_id: "turn-20260101T000000-00000000", wait_ms: 0 }),
    list: await ask("terminal_list", {}),
  };
  await other.close();
}
process.stdout.write(JSON.stringify(out));
await client.close();
