// A real MCP client for the end-to-end tests: the TypeScript SDK against
// `clawconnect mcp` (stdio) or `clawconnect serve` (streamable HTTP).
//
//   node client.mjs <command> [args...]   # stdio
//   node client.mjs http://127.0.0.1:PORT/mcp
//
// It lists the tools, runs a task and polls check_task to completion
// (counting progress notifications), then runs a task that hangs, cancels
// it and polls it to its terminal state. It prints one JSON object on
// stdout; the Go test asserts on it. The SDK validates every
// structuredContent against the tool's outputSchema on the way.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [target, ...rest] = process.argv.slice(2);
const transport = target.startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(target))
  : new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "inherit" });
const client = new Client({ name: "clawconnect-e2e", version: "1.0.0" });
await client.connect(transport);

const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, { timeout: 180000, ...opts });
const out = { server: client.getServerVersion() };

const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name).sort();

// Poll check_task until the task is terminal.
async function poll(jobId, extra = {}, onprogress) {
  for (let i = 0; i < 40; i++) {
    const r = await call("check_task", { jobId, waitMs: 30000, ...extra }, onprogress ? { onprogress, resetTimeoutOnProgress: true } : {});
    const s = r.structuredContent;
    if (s.isTerminal) return { result: r, snapshot: s };
  }
  throw new Error(`task ${jobId} did not finish`);
}

const run = await call("run_task", { task: "ECHO=e2e-bridge-ok please" });
if (run.isError) throw new Error("run_task failed: " + JSON.stringify(run.content));
let progress = 0;
const done = await poll(run.structuredContent.jobId, {}, () => progress++);
out.run = {
  jobId: run.structuredContent.jobId,
  status: done.snapshot.status,
  summary: done.snapshot.summary,
  text: done.result.content?.[0]?.text,
  progress,
};

const hang = await call("run_task", { task: "HANG until cancelled" });
const hangId = hang.structuredContent.jobId;
// Wait until the gateway acknowledged the run (it has a run id).
for (let i = 0; i < 30; i++) {
  const r = await call("check_task", { jobId: hangId, mode: "poll", waitMs: 2000 });
  if (r.structuredContent.parentRunId || r.structuredContent.isTerminal) break;
}
const cancel = await call("cancel_task", { taskId: hangId });
out.cancel = { isError: cancel.isError ?? false, requested: cancel.structuredContent?.requested, text: cancel.content?.[0]?.text };
const after = await poll(hangId);
out.cancelled = { status: after.snapshot.status, terminalReason: after.snapshot.terminalReason };

const info = await call("get_connection_info", {});
out.toolsetVersion = info.structuredContent.toolsetVersion;

console.log(JSON.stringify(out));
await client.close();
