import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, readFileSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import plugin from "../plugin/index.mjs";

// A stand-in clawconnect binary: it records its arguments and answers a
// delegate as the real one does.
function fakeBinary() {
  const dir = mkdtempSync(join(tmpdir(), "cc-register-"));
  const bin = join(dir, "clawconnect");
  writeFileSync(bin, `#!/bin/sh\nprintf '%s\\n' "$@" > "${dir}/args"\n` +
    `echo '{"terminal_id":"terminal:v2:tmux:codex:w:0.0:1","agent":"codex","cwd":"/w","turn_id":"turn-1-abc","submission_outcome":"agent_accepted"}'\n`);
  chmodSync(bin, 0o755);
  return { bin, args: () => readFileSync(join(dir, "args"), "utf8").trimEnd().split("\n") };
}

test("the plugin registers /clawconnect and /cc; a command's Turn reports to the chat's session", async () => {
  const f = fakeBinary();
  const commands = [];
  const api = {
    pluginConfig: { binary: f.bin, daemon: false },
    registerGatewayMethod() {},
    registerTool() {},
    registerCommand(c) { commands.push(c); },
  };
  plugin.register(api);
  assert.deepEqual(commands.map((c) => c.name), ["clawconnect", "cc"]);
  for (const c of commands) {
    assert.equal(c.acceptsArgs, true);
    assert.equal(c.requireAuth, true);
    assert.ok(c.description.length > 0);
  }
  const reply = await commands[0].handler({ sessionKey: "agent:main:phone", args: "--hard 90 run the tests", channel: "chat", isAuthorizedSender: true, commandBody: "" });
  assert.equal(reply.text, "Sent to codex in /w as turn-1-abc. The reply comes back here; /clawconnect cancel stops it.");
  assert.deepEqual(f.args(), ["terminal", "delegate", "--json", "--origin-session", "agent:main:phone", "--hard-timeout", "90m", "--", "run the tests"]);
});

// A stand-in clawconnect binary for a chat whose Turn asks a question: it
// appends each call's arguments to a log and answers list, status and
// respond as the real one does.
function questionBinary(turn, key) {
  const dir = mkdtempSync(join(tmpdir(), "cc-question-"));
  const bin = join(dir, "clawconnect");
  const view = JSON.stringify({ turn_id: turn, agent: "claude", status: "waiting_for_openclaw", created_at: "2026-12-01T12:00:00Z",
    origin_session: key, question: { text: "Which color should the widget be?" }, next_steps: ["respond", "cancel", "close", "status"] });
  writeFileSync(bin, `#!/bin/sh\nprintf '%s ' "$@" >> "${dir}/log"\necho >> "${dir}/log"\ncase "$2" in\n` +
    `list) echo '{"terminals":[]}' ;;\n` +
    `status) echo '${view}' ;;\n` +
    `respond) echo '{"session_id":"session-1","turn_id":"${turn}","submission_outcome":"agent_accepted"}' ;;\n` +
    `*) echo "unexpected $*" >&2; exit 2 ;;\nesac\n`);
  chmodSync(bin, 0o755);
  return { bin, calls: () => readFileSync(join(dir, "log"), "utf8").trimEnd().split("\n").map((l) => l.trimEnd()) };
}

test("a question callback in a chat, then /clawconnect respond latest: Blue answers that Turn", async () => {
  const key = "agent:main:phone-q";
  const turn = "turn-20261201T120000-ab12cd34";
  const f = questionBinary(turn, key);
  const commands = [];
  let method;
  const injected = [];
  const api = {
    pluginConfig: { binary: f.bin, daemon: false },
    session: { workflow: { enqueueNextTurnInjection: async (req) => { injected.push(req); return { enqueued: true, id: req.idempotencyKey }; } } },
    registerGatewayMethod(name, fn) { if (name === "clawconnect.callback") method = fn; },
    registerTool() {},
    registerCommand(c) { commands.push(c); },
  };
  plugin.register(api);
  // The question callback arrives in the chat's session.
  const params = {
    sessionKey: key, session_id: "session-1", turn_id: turn,
    conversation: { conversation_id: turn, session_id: "session-1", turn_id: turn, gateway_session: key },
    message: {
      id: "msg-terminal-0123456789abcdef0123456789abcdef", type: "question", requires_response: true, round: 1,
      body: "The agent asks: Which color should the widget be?\n1. Red\n2. Blue\nRespond with an option's number or label.",
      session_id: "session-1", turn_id: turn, conversation_id: turn,
      metadata: { source: "terminal_bridge", gateway_session: key, kind: "question", reason: "question", next_steps: ["respond", "cancel", "close", "status"] },
    },
  };
  const answered = await new Promise((resolve) => method({ params, respond: (ok, result, err) => resolve({ ok, result, err }) }));
  assert.equal(answered.ok, true, JSON.stringify(answered.err));
  // The run that reports it tells the person what to type.
  assert.match(answered.result.chat_send.message, new RegExp(`A person in this chat can type: /clawconnect respond ${turn}: <answer> · /clawconnect cancel ${turn}`));
  const status = await commands[0].handler({ sessionKey: key, args: "status", channel: "chat", isAuthorizedSender: true, commandBody: "" });
  assert.ok(status.text.includes(`next:\n/clawconnect respond ${turn}: <answer>\n/clawconnect cancel ${turn}`), status.text);
  const reply = await commands[0].handler({ sessionKey: key, args: "respond latest: Blue", channel: "chat", isAuthorizedSender: true, commandBody: "" });
  assert.equal(reply.text, `Answered ${turn}; the reply comes back here.`);
  assert.equal(f.calls().at(-1), `terminal respond --json --for-session ${key} ${turn} -- Blue`);
});
