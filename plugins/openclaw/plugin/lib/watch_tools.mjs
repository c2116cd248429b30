// Model tools for native inspection and watches of work a human started:
// clawconnect_terminal_inspect, _watch and _unwatch. The watch notifies the
// calling session (its key is passed as --origin, never by the model);
// only that session can stop it.

import { forSession } from "./scope.mjs";

const TERMINAL_ID = { type: "string", pattern: "^terminal:", description: "A pane's terminal_id from clawconnect_terminal_list." };
const WATCH_ID = { type: "string", pattern: "^watch-[A-Za-z0-9-]+$", description: "The watch_id clawconnect_terminal_watch returned." };
const obj = (properties, required = []) => ({ type: "object", additionalProperties: false, properties, required });

/** watchSpecs lists the tools, in the shape of tools.mjs's specs. */
export const watchSpecs = [
  {
    name: "clawconnect_terminal_inspect",
    description: "Read a coding agent's own /status card in an idle pane: native session id, model, version, workspace. The pane is left idle with an empty composer.",
    parameters: obj({ terminal_id: TERMINAL_ID }, ["terminal_id"]),
    argv: (p) => ["terminal", "inspect", "--json", p.terminal_id],
  },
  {
    name: "clawconnect_terminal_watch",
    description: "Watch the task a human started (or is about to start) in a pane; this conversation is notified once when it completes, fails or times out, and once per approval prompt. Do not poll.",
    parameters: obj({
      terminal_id: TERMINAL_ID,
      timeout_minutes: { type: "number", exclusiveMinimum: 0, maximum: 10080, description: "Give the task this long (default 720)." },
    }, ["terminal_id"]),
    argv: (p, ctx) => {
      if (!ctx.sessionKey) throw new Error("a watch needs the calling OpenClaw session to notify; none is known for this call");
      const a = ["terminal", "watch", "--json", "--origin-session", ctx.sessionKey];
      if (p.timeout_minutes !== undefined) a.push("--hard-timeout", `${p.timeout_minutes}m`);
      return [...a, p.terminal_id];
    },
  },
  {
    name: "clawconnect_terminal_unwatch",
    description: "Stop a watch this conversation started (by watch_id or by the pane's terminal_id); nothing more is notified for it.",
    parameters: obj({ watch_id: WATCH_ID, terminal_id: TERMINAL_ID }),
    argv: (p, ctx) => {
      if ((p.watch_id === undefined) === (p.terminal_id === undefined)) throw new Error("give exactly one of watch_id and terminal_id");
      return ["terminal", "unwatch", "--json", ...forSession(ctx), p.watch_id ?? p.terminal_id];
    },
  },
];
