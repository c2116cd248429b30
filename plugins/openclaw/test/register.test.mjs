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
