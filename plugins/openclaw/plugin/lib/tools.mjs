// Model tools of the ClawConnect plugin. Each runs the clawconnect binary
// with --json. The model passes only semantic ids (session_id, terminal_id,
// turn_id); the approval fingerprint stays in the plugin (an offer the
// session saw through status or an approval callback).

import { watchSpecs } from "./watch_tools.mjs";
import { threadSpecs } from "./threads.mjs";
import { forSession } from "./scope.mjs";

const TURN_ID = { type: "string", pattern: "^turn-[A-Za-z0-9-]+$", description: "The Turn id a send returned." };
const obj = (properties, required = []) => ({ type: "object", additionalProperties: false, properties, required });

// A send's own timeouts, in minutes (the CLI's limit: a week).
const LIMITS = {
  inactivity_timeout_minutes: { type: "number", exclusiveMinimum: 0, maximum: 10080,
    description: "Stall the Turn after this many minutes without activity from the agent (default 60)." },
  hard_timeout_minutes: { type: "number", exclusiveMinimum: 0, maximum: 10080,
    description: "Stall the Turn this many minutes after it started, active or not (default 720); not less than inactivity_timeout_minutes." },
};

/** limitArgs turns a send's timeouts (minutes) into clawconnect flags. */
export function limitArgs(p) {
  const i = p.inactivity_timeout_minutes, h = p.hard_timeout_minutes;
  if (i !== undefined && h !== undefined && i > h) {
    throw new Error("inactivity_timeout_minutes is more than hard_timeout_minutes, which would always end the Turn first");
  }
  return [...(i !== undefined ? ["--inactivity-timeout", `${i}m`] : []), ...(h !== undefined ? ["--hard-timeout", `${h}m`] : [])];
}

const OFFER_TTL_MS = 10 * 60 * 1000;
const MAX_OFFERS = 512;

/** Offers remembers the approval fingerprints a session was shown. */
export class Offers {
  constructor(now = () => Date.now()) {
    this.now = now;
    this.map = new Map();
  }
  remember(sessionKey, turnId, fingerprint) {
    if (!sessionKey || !turnId || !fingerprint) return;
    const k = `${sessionKey}\u0000${turnId}`;
    this.map.delete(k);
    this.map.set(k, { fingerprint, at: this.now() });
    while (this.map.size > MAX_OFFERS) this.map.delete(this.map.keys().next().value);
  }
  take(sessionKey, turnId) {
    const k = `${sessionKey}\u0000${turnId}`;
    const o = this.map.get(k);
    this.map.delete(k);
    return o && this.now() - o.at <= OFFER_TTL_MS ? o.fingerprint : undefined;
  }
}

/**
 * specs lists the tools: name, description, JSON schema, and argv(params,
 * ctx) building the clawconnect arguments (ctx.sessionKey is the calling
 * OpenClaw session).
 */
export const specs = [
  {
    name: "clawconnect_terminal_list",
    description: "List the Codex and Claude Code panes in tmux: terminal_id, agent, state, managed session_id and the actions each takes.",
    parameters: obj({}),
    argv: () => ["terminal", "list", "--json"],
  },
  {
    name: "clawconnect_terminal_send",
    description: "Hand a request to a coding agent in tmux as a new Turn. Give session_id (that exact context), terminal_id (whatever the pane shows), or neither to hand it to the one idle pane (with agent: the one idle pane of that agent); with none or several idle panes nothing is sent and the refusal lists them. Returns at once with turn_id; the result comes back into this conversation as a ClawConnect callback, so do not poll.",
    parameters: obj({
      request: { type: "string", minLength: 1, description: "What the coding agent should do." },
      session_id: { type: "string", pattern: "^session-[A-Za-z0-9-]+$", description: "A managed Session (from list or an earlier send)." },
      terminal_id: { type: "string", pattern: "^terminal:", description: "A pane's terminal_id from list." },
      agent: { type: "string", enum: ["codex", "claude"], description: "Without session_id and terminal_id: only idle panes of this agent count." },
      ...LIMITS,
    }, ["request"]),
    argv: (p, ctx) => {
      if (p.session_id !== undefined && p.terminal_id !== undefined) throw new Error("give at most one of session_id and terminal_id");
      if (p.agent !== undefined && (p.session_id !== undefined || p.terminal_id !== undefined)) {
        throw new Error("agent picks among idle panes; leave it out when you give session_id or terminal_id");
      }
      const a = p.session_id !== undefined ? ["terminal", "send", "--json", "--session", p.session_id]
        : p.terminal_id !== undefined ? ["terminal", "send", "--json", "--terminal", p.terminal_id]
          : ["terminal", "delegate", "--json", ...(p.agent ? ["--agent", p.agent] : [])];
      if (ctx.sessionKey) a.push("--origin-session", ctx.sessionKey);
      return [...a, ...limitArgs(p), "--", p.request];
    },
  },
  {
    name: "clawconnect_terminal_respond",
    description: "Answer a Turn that waits for OpenClaw (a question or blocked callback), in the same Turn.",
    parameters: obj({ turn_id: TURN_ID, request: { type: "string", minLength: 1, description: "The answer." } }, ["turn_id", "request"]),
    argv: (p, ctx) => ["terminal", "respond", "--json", ...forSession(ctx), p.turn_id, "--", p.request],
  },
  {
    name: "clawconnect_terminal_status",
    description: "Show a Turn: status, result, the approval it waits for, and callback_delivery.",
    parameters: obj({ turn_id: TURN_ID }, ["turn_id"]),
    argv: (p, ctx) => ["terminal", "status", "--json", ...forSession(ctx), p.turn_id],
  },
  {
    name: "clawconnect_terminal_approve",
    description: "Approve the approval prompt this conversation was shown for the Turn (by status or an approval callback).",
    parameters: obj({ turn_id: TURN_ID }, ["turn_id"]),
    argv: (p, ctx) => {
      const scope = forSession(ctx);
      const fp = ctx.offers.take(ctx.sessionKey, p.turn_id);
      if (!fp) throw new Error(`no approval of ${p.turn_id} was shown in this conversation in the last 10 minutes; call clawconnect_terminal_status first`);
      return ["terminal", "approve", "--json", ...scope, "--fingerprint", fp, p.turn_id];
    },
  },
  {
    name: "clawconnect_terminal_cancel",
    description: "Interrupt the coding agent and cancel a Turn this conversation sent.",
    parameters: obj({ turn_id: TURN_ID }, ["turn_id"]),
    argv: (p, ctx) => ["terminal", "cancel", "--json", ...forSession(ctx), p.turn_id],
  },
  {
    name: "clawconnect_terminal_renew",
    description: "Resume following a stalled Turn, optionally with a new inactivity timeout.",
    parameters: obj({ turn_id: TURN_ID, minutes: { type: "number", exclusiveMinimum: 0, maximum: 10080 } }, ["turn_id"]),
    argv: (p, ctx) => ["terminal", "renew", "--json", ...forSession(ctx), ...(p.minutes !== undefined ? ["--inactivity-timeout", `${p.minutes}m`] : []), p.turn_id],
  },
  {
    name: "clawconnect_terminal_retry_callback",
    description: "Deliver a Turn's failed callback again (same message, never twice).",
    parameters: obj({ turn_id: TURN_ID }, ["turn_id"]),
    argv: (p, ctx) => ["terminal", "retry-callback", "--json", ...forSession(ctx), p.turn_id],
  },
  {
    name: "clawconnect_terminal_close",
    description: "Close a Turn that is no longer with the agent.",
    parameters: obj({ turn_id: TURN_ID, reason: { type: "string", maxLength: 500 } }, ["turn_id"]),
    argv: (p, ctx) => ["terminal", "close", "--json", ...forSession(ctx), ...(p.reason ? ["--reason", p.reason] : []), p.turn_id],
  },
  ...watchSpecs,
  ...threadSpecs,
];

/** checkParams enforces the schema's closed shape, types and bounds. */
export function checkParams(spec, params) {
  const p = params ?? {};
  if (typeof p !== "object" || Array.isArray(p)) throw new Error("parameters must be an object");
  const props = spec.parameters.properties;
  for (const k of Object.keys(p)) if (!Object.hasOwn(props, k)) throw new Error(`unknown parameter ${k}`);
  for (const k of spec.parameters.required) if (p[k] === undefined) throw new Error(`missing parameter ${k}`);
  for (const [k, v] of Object.entries(p)) {
    const s = props[k];
    if (s.type === "string") {
      if (typeof v !== "string" || (s.pattern && !new RegExp(s.pattern).test(v)) || (s.minLength && v.length < s.minLength)) {
        throw new Error(`parameter ${k} must be a string${s.pattern ? ` matching ${s.pattern}` : ""}`);
      }
      if (s.maxLength !== undefined && v.length > s.maxLength) throw new Error(`parameter ${k} must be at most ${s.maxLength} characters`);
      if (s.enum && !s.enum.includes(v)) throw new Error(`parameter ${k} must be one of ${s.enum.join(", ")}`);
    }
    if (s.type === "number") {
      if (typeof v !== "number" || !Number.isFinite(v)) throw new Error(`parameter ${k} must be a number`);
      if (s.exclusiveMinimum !== undefined && !(v > s.exclusiveMinimum)) throw new Error(`parameter ${k} must be greater than ${s.exclusiveMinimum}`);
      if (s.maximum !== undefined && v > s.maximum) throw new Error(`parameter ${k} must be at most ${s.maximum}`);
    }
  }
  return p;
}
