// ClawConnect's OpenClaw plugin: the clawconnect.callback gateway method
// (a Turn's result lands in the session that sent it), the
// clawconnect_terminal_* model tools, the /clawconnect chat command (alias
// /cc) for people, and a service that keeps
// `clawconnect terminal daemon` running while the gateway runs.
// Plain ESM, no dependencies. register() may run several times per start.
import { spawn } from "node:child_process";
import { handle, CallbackError, ERROR_CODE } from "./lib/callback.mjs";
import { specs, checkParams, Offers } from "./lib/tools.mjs";
import { Command, TurnMemory } from "./lib/command.mjs";

// The approval offers a session was shown. OpenClaw loads this module more
// than once per gateway (its gateway methods and the tools an agent run
// sees come from separate loads), so the offers live on globalThis: an
// offer the callback method remembers must reach the approve tool.
const offers = (globalThis[Symbol.for("clawconnect.plugin.offers")] ??= new Offers());
// The Turns each chat started, for /clawconnect's turn selectors (latest,
// only, ...); shared across loads for the same reason.
const turns = (globalThis[Symbol.for("clawconnect.plugin.turns")] ??= new TurnMemory());
const registered = new WeakSet();

function settings(api) {
  const c = api.pluginConfig ?? {};
  return {
    binary: typeof c.binary === "string" && c.binary ? c.binary : "clawconnect",
    home: typeof c.home === "string" ? c.home : "",
    daemon: c.daemon !== false,
    timeoutMs: typeof c.timeoutMs === "number" && c.timeoutMs > 0 ? c.timeoutMs : 120_000,
    ...ownGateway(api.config),
  };
}

function childEnv(s) {
  const env = { ...process.env };
  if (s.home) env.CLAWCONNECT_HOME = s.home;
  // Callbacks go to the gateway this plugin runs in, unless the
  // environment names one.
  if (!env.OPENCLAW_URL && s.gatewayUrl) env.OPENCLAW_URL = s.gatewayUrl;
  if (!env.OPENCLAW_GATEWAY_TOKEN && s.gatewayToken) env.OPENCLAW_GATEWAY_TOKEN = s.gatewayToken;
  return env;
}

// ownGateway is the loopback URL and token of the gateway from its config.
function ownGateway(cfg) {
  const g = cfg?.gateway;
  const out = {};
  if (Number.isInteger(g?.port)) out.gatewayUrl = `ws://127.0.0.1:${g.port}`;
  if (typeof g?.auth?.token === "string") out.gatewayToken = g.auth.token;
  return out;
}

/** run executes clawconnect with args and parses its JSON output. */
export function run(s, args) {
  return new Promise((resolve) => {
    const child = spawn(s.binary, args, { env: childEnv(s), stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), s.timeoutMs);
    child.stdout.on("data", (d) => { if (out.length < 10 << 20) out += d; });
    child.stderr.on("data", (d) => { if (err.length < 1 << 20) err += d; });
    child.on("error", (e) => { clearTimeout(timer); resolve({ ok: false, error: `run ${s.binary}: ${e.message}` }); });
    child.on("close", (code) => {
      clearTimeout(timer);
      let json;
      try { json = out.trim() ? JSON.parse(out) : undefined; } catch { json = undefined; }
      if (code === 0) resolve({ ok: true, json: json ?? {}, text: out });
      else resolve({ ok: false, json, text: out, error: (err.trim().replace(/^clawconnect: /, "") || `clawconnect exited with ${code}`) });
    });
  });
}

function toolResult(value, isError) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return { content: [{ type: "text", text }], details: typeof value === "string" ? { error: value } : value, ...(isError ? { isError: true } : {}) };
}

function makeTool(api, spec, ctx) {
  return {
    name: spec.name,
    label: spec.name.replace(/^clawconnect_terminal_/, "ClawConnect "),
    description: spec.description,
    parameters: spec.parameters,
    async execute(_toolCallId, params) {
      const s = settings(api);
      let args;
      try {
        args = spec.argv(checkParams(spec, params), { sessionKey: ctx?.sessionKey, offers });
      } catch (e) {
        return toolResult(`${spec.name}: ${e.message}`, true);
      }
      const r = await run(s, args);
      if (!r.ok) return toolResult(`${spec.name}: ${r.error}`, true);
      if (spec.name === "clawconnect_terminal_status" && r.json?.approval?.fingerprint) {
        offers.remember(ctx?.sessionKey, r.json.turn_id, r.json.approval.fingerprint);
      }
      if (spec.name === "clawconnect_terminal_send" || spec.name === "clawconnect_terminal_respond") turns.add(ctx?.sessionKey, r.json.turn_id);
      return toolResult(r.json, false);
    },
  };
}

/** keepDaemon runs `clawconnect terminal daemon`, restarting it when it exits. */
function keepDaemon(api, log) {
  let child, stopped = false, timer, delay = 1000;
  const start = () => {
    if (stopped) return;
    const s = settings(api);
    const began = Date.now();
    child = spawn(s.binary, ["terminal", "daemon"], { env: childEnv(s), stdio: ["ignore", "ignore", "pipe"] });
    child.stderr.on("data", (d) => log?.debug?.(`clawconnect daemon: ${String(d).trim()}`));
    child.on("error", (e) => log?.warn?.(`clawconnect daemon: ${e.message}`));
    child.on("exit", (code, sig) => {
      child = undefined;
      if (stopped) return;
      delay = Date.now() - began > 60_000 ? 1000 : Math.min(delay * 2, 30_000);
      log?.warn?.(`clawconnect terminal daemon exited (${sig ?? code}); restarting in ${delay} ms`);
      timer = setTimeout(start, delay);
    });
  };
  return {
    start,
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (child) child.kill("SIGTERM");
    },
  };
}

let daemon;

export default {
  id: "clawconnect",
  name: "ClawConnect",
  description: "Hand work to Codex or Claude Code in tmux; the result comes back into the same session.",
  register(api) {
    if (registered.has(api)) return;
    registered.add(api);
    api.registerGatewayMethod("clawconnect.callback", async ({ params, respond }) => {
      try {
        const enqueue = api.session?.workflow?.enqueueNextTurnInjection ?? api.enqueueNextTurnInjection;
        if (typeof enqueue !== "function") throw new CallbackError("this OpenClaw has no enqueueNextTurnInjection");
        const { callback, result } = await handle(params, (req) => enqueue.call(api.session?.workflow ?? api, req));
        // A prompt ClawConnect says it cannot answer safely is no offer.
        if (callback.metadata.reason === "approval_required" && typeof callback.metadata.approval_fingerprint === "string" &&
          callback.metadata.approvable !== false) {
          offers.remember(callback.sessionKey, callback.turnId, callback.metadata.approval_fingerprint);
        }
        turns.add(callback.sessionKey, callback.turnId);
        respond(true, result);
      } catch (e) {
        const reason = e instanceof Error ? e.message : String(e);
        respond(false, undefined, { code: ERROR_CODE, message: reason });
      }
    }, { scope: "operator.write" });
    if (typeof api.registerCommand === "function") {
      // /clawconnect for people: no model and no tool policy. Auth is
      // required (OpenClaw's default), so only the chat's authorised
      // senders can hand work to a pane.
      const command = {
        description: "Hand work to Codex or Claude Code in tmux; the reply comes back into this chat.",
        acceptsArgs: true,
        requireAuth: true,
        async handler(ctx) {
          const c = new Command({ run: (args) => run(settings(api), args), sessionKey: ctx.sessionKey, offers, turns });
          return { text: await c.handle(ctx.args ?? "") };
        },
      };
      for (const name of ["clawconnect", "cc"]) {
        try {
          api.registerCommand({ name, ...command });
        } catch (e) {
          api.logger?.warn?.(`clawconnect: register /${name}: ${e instanceof Error ? e.message : e}`);
        }
      }
    }
    for (const spec of specs) {
      api.registerTool((ctx) => makeTool(api, spec, ctx), { name: spec.name, optional: true });
    }
    if (typeof api.registerService === "function") {
      api.registerService({
        id: "clawconnect-terminal-daemon",
        start() {
          if (!settings(api).daemon || daemon) return;
          daemon = keepDaemon(api, api.logger);
          daemon.start();
        },
        stop() {
          daemon?.stop();
          daemon = undefined;
        },
      });
    }
  },
};
