// The MCP Tasks extension's official requester (@modelcontextprotocol/ext-tasks)
// against `clawconnect serve` over stateless 2026-07-28 streamable HTTP.
//
//   node tasks.mjs http://127.0.0.1:PORT/mcp <alice's token> <bob's token>
//   node tasks.mjs http://127.0.0.1:PORT/mcp <token> - terminal <request>
//   node tasks.mjs http://127.0.0.1:PORT_A/mcp <token> - replica http://127.0.0.1:PORT_B/mcp
//
// The requester drives a session port; this script's port is the thinnest
// host: one JSON-RPC POST per request, framed as 2026-07-28 (protocol
// version, client info and capabilities in _meta; Mcp-* headers). The
// requester adds the Tasks capability and the Mcp-Name of task requests
// itself. The script checks that server/discover advertises the extension,
// runs a task to its settled outcome, lets another token try to read and
// cancel a running task, cancels it as its owner, and prints one JSON
// object on stdout for the Go test. In terminal mode it sends <request> to
// the one agent pane as a task instead, accepts every approval the agent
// asks for through the requester's input handler, and reports the settled
// outcome and the input requests it saw. In replica mode it starts a task
// on replica A, prints {"ready": taskId} once the gateway runs it, and
// settles it through the requester while the Go test kills A: a request A
// can no longer answer goes to replica B (as a load balancer would send
// it), and the script prints the settled outcome.
import { withTasks, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import { hasTaskServerCapabilityV2 } from "@modelcontextprotocol/ext-tasks/core/v2";

const [url, aliceToken, bobToken, mode, terminalRequest] = process.argv.slice(2);
const PROTOCOL = "2026-07-28";
let nextId = 0;
// The replicas a request may go to, in order; one that cannot be reached
// (killed) is left for the next.
const endpoints = mode === "replica" ? [url, terminalRequest] : [url];
const failovers = [];

// post sends one request and returns its JSON-RPC response message.
async function post(token, method, params, extraHeaders = {}, signal) {
  const meta = { ...(params._meta ?? {}) };
  meta["io.modelcontextprotocol/protocolVersion"] = PROTOCOL;
  meta["io.modelcontextprotocol/clientInfo"] = { name: "clawconnect-ext-tasks-e2e", version: "1.0.0" };
  meta["io.modelcontextprotocol/clientCapabilities"] ??= {};
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    authorization: "Bearer " + token,
    "mcp-protocol-version": PROTOCOL,
    "mcp-method": method,
    ...extraHeaders,
  };
  if (method === "tools/call") headers["mcp-name"] = params.name;
  const body = JSON.stringify({ jsonrpc: "2.0", id: ++nextId, method, params: { ...params, _meta: meta } });
  let res, text;
  for (;;) {
    try {
      res = await fetch(endpoints[0], { method: "POST", headers, body, signal });
      text = await res.text();
      break;
    } catch (e) {
      if (signal?.aborted || endpoints.length < 2) throw e;
      failovers.push({ method, from: endpoints.shift(), error: String(e.cause?.code ?? e.message) });
    }
  }
  if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    // The last data line carries the response.
    const data = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    return JSON.parse(data[data.length - 1]);
  }
  return JSON.parse(text);
}

// port is the requester's session port for one token.
async function port(token) {
  const discover = await post(token, "server/discover", {});
  if (!hasTaskServerCapabilityV2(discover.result?.capabilities)) {
    throw new Error("server/discover does not advertise the Tasks extension: " + JSON.stringify(discover));
  }
  return {
    endpointId: "clawconnect-" + token.slice(0, 8),
    taskCapabilities: { generation: "v2", capabilities: {} },
    async dispatch(request, options) {
      const msg = await post(token, request.method, request.params ?? {}, options?.context?.headers, options?.signal);
      return msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
    },
    onServerRequest: () => () => {},
    onNotification: () => () => {},
    onInvalidated: () => () => {},
    invalidated: false,
  };
}

if (mode === "terminal") {
  const seen = [];
  const session = withTasks(await port(aliceToken), {
    onInputRequest: async (request, context) => {
      seen.push({ kind: request.kind, inputId: context.inputId, message: request.params?.message });
      return { action: "accept" };
    },
  });
  let row;
  for (let i = 0; i < 60 && !row; i++) {
    const r = await post(aliceToken, "tools/call", { name: "terminal_list", arguments: {} });
    row = r.result.structuredContent.terminals.find((t) => t.available_actions.length > 0);
    if (!row) await new Promise((ok) => setTimeout(ok, 1000)); // the pane is still starting
  }
  const execution = await session.callTool("terminal_send", { terminal_id: row.id, request: terminalRequest });
  const { outcome } = await execution.settle();
  const result = resultFromTaskOutcome(outcome);
  process.stdout.write(JSON.stringify({
    kind: execution.kind,
    taskId: execution.handle?.taskId,
    status: outcome.status,
    text: result.structuredContent?.turn?.result?.text,
    turnStatus: result.structuredContent?.turn?.status,
    inputRequests: seen,
  }) + "\n");
  await session.close();
  process.exit(0);
}

if (mode === "replica") {
  const session = withTasks(await port(aliceToken));
  const execution = await session.callTool("run_task", { task: "WAIT=8000 ECHO=replica-ok please" });
  const taskId = execution.handle?.taskId;
  for (let i = 0; i < 30; i++) {
    // Ready once the gateway runs it (it has a run id): the kill then
    // lands mid-run.
    const r = await post(aliceToken, "tools/call", { name: "check_task", arguments: { jobId: taskId, mode: "poll", waitMs: 2000 } });
    const s = r.result.structuredContent;
    if (s.parentRunId || s.isTerminal) break;
  }
  process.stdout.write(JSON.stringify({ ready: taskId }) + "\n");
  const { outcome, lastTask } = await execution.settle();
  const result = resultFromTaskOutcome(outcome);
  process.stdout.write(JSON.stringify({
    kind: execution.kind,
    taskId,
    status: outcome.status,
    lastStatus: lastTask?.status,
    text: result.content?.[0]?.text,
    jobStatus: result.structuredContent?.status,
    failovers,
  }) + "\n");
  await session.close();
  process.exit(0);
}

const alice = withTasks(await port(aliceToken));
const bob = withTasks(await port(bobToken));
const out = {};

// A task-enabled run_task settles to the agent's reply.
const run = await alice.callTool("run_task", { task: "ECHO=ext-tasks-ok please" });
const { outcome, lastTask } = await run.settle();
const result = resultFromTaskOutcome(outcome);
out.run = {
  kind: run.kind,
  taskId: run.handle?.taskId,
  status: outcome.status,
  lastStatus: lastTask?.status,
  pollIntervalMs: lastTask?.suggestedPollIntervalMs,
  text: result.content?.[0]?.text,
  isError: result.isError ?? false,
  jobStatus: result.structuredContent?.status,
};

// A task that hangs: another token can neither read nor cancel it, and
// gets what an unknown id gets.
const hang = await alice.callTool("run_task", { task: "HANG until cancelled" });
const hangId = hang.handle.taskId;
await hang.detach(); // this script observes it through controllers from here on
for (let i = 0; i < 30; i++) {
  // Wait until the gateway acknowledged the run (it has a run id), as a
  // client of the plain tools would before cancelling.
  const r = await post(aliceToken, "tools/call", { name: "check_task", arguments: { jobId: hangId, mode: "poll", waitMs: 2000 } });
  const s = r.result.structuredContent;
  if (s.parentRunId || s.isTerminal) break;
}
const failure = async (f) => {
  try {
    await f();
    return null;
  } catch (e) {
    return { code: e.error?.code ?? e.code, message: e.error?.message ?? e.message };
  }
};
const ghost = "00000000-0000-4000-8000-000000000000";
out.isolation = {
  bobGet: await failure(() => bob.task(hangId).snapshot()),
  bobCancel: await failure(() => bob.task(hangId).cancel()),
  unknownGet: await failure(() => bob.task(ghost).snapshot()),
  unknownCancel: await failure(() => bob.task(ghost).cancel()),
  hangId,
  ghost,
  aliceAfterBob: (await alice.task(hangId).snapshot()).status,
};

// The owner cancels; the task ends cancelled.
await alice.task(hangId).cancel();
for (let i = 0; i < 10; i++) {
  const r = await post(aliceToken, "tools/call", { name: "check_task", arguments: { jobId: hangId, waitMs: 30000 } });
  if (r.result.structuredContent.isTerminal) break;
}
const cancelled = await alice.task(hangId).result();
out.cancel = { status: cancelled.status, snapshot: (await alice.task(hangId).snapshot()).status };

await alice.close();
await bob.close();
process.stdout.write(JSON.stringify(out) + "\n");
