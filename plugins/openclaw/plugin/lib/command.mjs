// /clawconnect: the chat command a person types (no model, no tool
// policy). It runs the clawconnect binary as the model tools do, scoped to
// the chat's session, and answers in a few short plain lines fit for a
// phone. A Turn it starts reports back into this chat as a callback.

import { slashSteps } from "./callback.mjs";
import { parse } from "./command_parse.mjs";
import { specs, limitArgs } from "./tools.mjs";

const by = Object.fromEntries(specs.map((s) => [s.name, s]));
const MAX_REPLY = 1500;
// Statuses in which a Turn still needs something from someone.
const OPEN = new Set(["running", "waiting_for_openclaw", "stalled", "cancelling"]);

export const HELP = [
  "/clawconnect <task>: hand it to the one idle Codex or Claude Code pane",
  "/clawconnect <only|latest|codex|claude|@ref|terminal id>: <message>",
  "  options before the task: --inactivity <minutes> --hard <minutes>",
  "list · doctor · status [turn|watch] · respond <turn>: <answer>",
  "approve · cancel · renew [minutes] · retry · close [turn] [reason]",
  "watch <pane> · unwatch <watch> · threads · new-thread · clear-thread",
  "resume-thread <pane> [id|previous|<number>]",
  "A turn is latest, only, codex, claude, @ref or its id (default latest).",
].join("\n");

/** TurnMemory remembers the Turns each chat started, newest last. */
export class TurnMemory {
  constructor(max = 50) {
    this.max = max;
    this.map = new Map();
  }
  add(sessionKey, turnId) {
    if (!sessionKey || !turnId) return;
    const list = (this.map.get(sessionKey) ?? []).filter((t) => t !== turnId);
    list.push(turnId);
    while (list.length > this.max) list.shift();
    this.map.set(sessionKey, list);
  }
  list(sessionKey) {
    return [...(this.map.get(sessionKey) ?? [])];
  }
}

const clip = (s, n = MAX_REPLY) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
const short = (id) => (typeof id === "string" ? id.split(":").pop() : "");

function paneLine(r) {
  const turn = r.current_turn ? ` · ${r.current_turn.turn_id ?? "turn"} ${r.current_turn.shown_status ?? r.current_turn.status}` : "";
  const why = r.available_actions?.length ? "" : ` · no send: ${r.reason}`;
  return `${r.agent} ${r.activity_state} ${r.cwd} @${short(r.id)}${turn}${why}\n  ${r.id}`;
}

function refusalText(err, json) {
  const c = json?.candidates;
  if (!Array.isArray(c)) return `Not sent: ${err}`;
  const head = String(json.error ?? err).split("\n")[0].replace(/^delegate: refused: /, "");
  return [`Not sent: ${head}`, ...c.map((x) => `- ${x.agent} ${x.cwd}${x.reason ? ` (${x.reason})` : ""}\n  ${x.terminal_id}`),
    c.length > 1 ? "Pick one: /clawconnect <terminal id>: <task>" : ""].filter(Boolean).join("\n");
}

function turnText(v) {
  const lines = [`${v.turn_id} (${v.agent}): ${v.status}`];
  if (v.approval) lines.push(`approval: ${v.approval.kind}${v.approval.command ? ` ${v.approval.command}` : ""}`);
  if (v.stalled_reason) lines.push(`stalled: ${v.stalled_reason}`);
  if (v.result?.text) lines.push("", v.result.text);
  // Next steps as the person types them (a prompt only a human can
  // answer in words).
  const typed = slashSteps(v.turn_id, v.next_steps);
  if (v.next_steps?.includes("answer_in_terminal")) typed.unshift("answer it in the terminal");
  if (typed.length) lines.push("", "next:", ...typed);
  return lines.join("\n");
}

/**
 * Command runs parsed /clawconnect operations for one chat session.
 * deps: run(args) → {ok, json, error} (the clawconnect binary),
 * sessionKey (the chat's), offers (approval offers), turns (TurnMemory).
 */
export class Command {
  constructor(deps) {
    this.d = deps;
  }

  async call(args) {
    const r = await this.d.run(args);
    return r;
  }

  // tool runs one model tool's argv for this chat.
  async tool(name, params) {
    const spec = by[name];
    let args;
    try {
      args = spec.argv(params, { sessionKey: this.d.sessionKey, offers: this.d.offers });
    } catch (e) {
      return { ok: false, error: e.message };
    }
    return this.call(args);
  }

  async panes() {
    const r = await this.call(["terminal", "list", "--json"]);
    if (!r.ok) throw new Error(r.error);
    return r.json.terminals ?? [];
  }

  // turnsOfChat reads the Turns this chat started that can still be
  // found: the ones it remembers and the current Turn of every pane,
  // each checked with --for-session (another chat's are refused).
  async turnsOfChat() {
    const ids = new Set(this.d.turns.list(this.d.sessionKey));
    for (const r of await this.panes()) if (r.current_turn?.turn_id) ids.add(r.current_turn.turn_id);
    const views = await Promise.all([...ids].map((id) => this.call(["terminal", "status", "--json", "--for-session", this.d.sessionKey, id])));
    return views.filter((v) => v.ok && v.json?.turn_id).map((v) => v.json);
  }

  // resolveTurn picks the one Turn sel names, or throws saying why not.
  async resolveTurn(sel) {
    if (/^turn-/.test(sel)) return sel;
    const all = await this.turnsOfChat();
    let pool;
    if (sel === "latest") {
      pool = all.toSorted((a, b) => (a.created_at < b.created_at ? 1 : -1)).slice(0, 1);
    } else if (sel === "only") {
      pool = all.filter((v) => OPEN.has(v.status));
    } else if (sel === "codex" || sel === "claude") {
      pool = all.filter((v) => v.agent === sel && OPEN.has(v.status));
    } else {
      pool = all.filter((v) => v.turn_id.endsWith(sel.slice(1)));
    }
    if (pool.length === 1) return pool[0].turn_id;
    if (pool.length === 0) throw new Error(`no Turn of this chat is ${sel === "latest" ? "known" : `"${sel}"`}; /clawconnect list shows the panes`);
    throw new Error(`"${sel}" names ${pool.length} Turns: ${pool.map((v) => `${v.turn_id} (${v.agent}, ${v.status})`).join(", ")}; name one by its id`);
  }

  // resolvePane picks the one pane sel names (any state), or throws.
  async resolvePane(sel) {
    if (/^terminal:/.test(sel)) return sel;
    if (sel === "latest") {
      const v = (await this.call(["terminal", "status", "--json", "--for-session", this.d.sessionKey, await this.resolveTurn("latest")])).json;
      if (!v?.terminal_id) throw new Error("the latest Turn of this chat names no pane");
      return v.terminal_id;
    }
    const rows = await this.panes();
    const pool = rows.filter((r) => sel === "only" || r.agent === sel || (sel.startsWith("@") && (String(r.pid) === sel.slice(1) || r.id.endsWith(":" + sel.slice(1)) ||
      (r.session_id ?? "").endsWith(sel.slice(1)))));
    if (pool.length === 1) return pool[0].id;
    if (pool.length === 0) throw new Error(`no pane is "${sel}"; /clawconnect list shows them`);
    throw new Error(`"${sel}" names ${pool.length} panes:\n${pool.map((r) => `- ${r.agent} ${r.cwd}\n  ${r.id}`).join("\n")}\nName one by its terminal id`);
  }

  /** handle answers one /clawconnect invocation with plain text. */
  async handle(raw) {
    const p = parse(raw);
    try {
      return clip(await this.exec(p));
    } catch (e) {
      return clip(`Not done: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  async exec(p) {
    const key = this.d.sessionKey;
    switch (p.op) {
      case "error":
        return `${p.error}\n\n${HELP}`;
      case "help":
        return HELP;
      case "list": {
        const rows = await this.panes();
        return rows.length ? rows.map(paneLine).join("\n") : "No Codex or Claude Code pane found in tmux.";
      }
      case "doctor": {
        const r = await this.call(["doctor"]);
        return (r.ok ? "" : "doctor found problems:\n") + (r.text ?? r.error ?? "").trim();
      }
      case "delegate":
      case "send":
        return this.send(p);
      case "status": {
        const r = await this.tool("clawconnect_terminal_status", { turn_id: await this.resolveTurn(p.turn) });
        if (!r.ok) return `Not done: ${r.error}`;
        if (r.json?.approval?.fingerprint) this.d.offers.remember(key, r.json.turn_id, r.json.approval.fingerprint);
        return turnText(r.json);
      }
      case "watch-status": {
        const r = await this.call(["terminal", "watch-status", "--json", "--for-session", key, p.watch]);
        return r.ok ? `${r.json.watch_id}: ${r.json.status}` : `Not done: ${r.error}`;
      }
      case "watch": {
        const r = await this.tool("clawconnect_terminal_watch", { terminal_id: await this.resolvePane(p.terminal) });
        return r.ok ? `Watching ${r.json.terminal_id ?? p.terminal} as ${r.json.watch_id}; you hear here when its task ends.` : `Not done: ${r.error}`;
      }
      case "unwatch": {
        const r = await this.tool("clawconnect_terminal_unwatch", p.watch.startsWith("watch-") ? { watch_id: p.watch } : { terminal_id: p.watch });
        return r.ok ? `Stopped ${r.json.watch_id ?? p.watch}.` : `Not done: ${r.error}`;
      }
      case "threads": {
        const r = await this.tool("clawconnect_terminal_threads", { terminal_id: await this.resolvePane(p.target) });
        if (!r.ok) return `Not done: ${r.error}`;
        const t = r.json.threads ?? [];
        if (!t.length) return "No resumable thread.";
        return t.map((x, i) => `${i + 1}. ${x.current ? "(current) " : ""}${clip(x.title || "(untitled)", 80)}\n   ${x.native_thread_id}`).join("\n");
      }
      case "new-thread":
      case "clear-thread": {
        const name = p.op === "new-thread" ? "clawconnect_terminal_new_thread" : "clawconnect_terminal_clear_thread";
        const r = await this.tool(name, { terminal_id: await this.resolvePane(p.target) });
        return r.ok ? `${p.op === "new-thread" ? "New" : "Cleared into a new"} thread; the next send goes to session ${r.json.session_id ?? "?"}.` : `Not done: ${r.error}`;
      }
      case "resume-thread":
        return this.resume(p);
      case "respond": {
        const turn = await this.resolveTurn(p.turn);
        const r = await this.tool("clawconnect_terminal_respond", { turn_id: turn, request: p.text });
        if (!r.ok) return `Not sent: ${r.error}`;
        this.d.turns.add(key, r.json.turn_id);
        return `Answered ${r.json.turn_id}; the reply comes back here.`;
      }
      case "approve": {
        const turn = await this.resolveTurn(p.turn);
        const r = await this.tool("clawconnect_terminal_approve", { turn_id: turn });
        return r.ok ? `Approved; ${turn} is ${r.json.status}.` : `Not approved: ${r.error}`;
      }
      case "cancel":
      case "retry":
      case "renew":
      case "close": {
        const turn = await this.resolveTurn(p.turn);
        const name = { cancel: "clawconnect_terminal_cancel", retry: "clawconnect_terminal_retry_callback", renew: "clawconnect_terminal_renew",
          close: "clawconnect_terminal_close" }[p.op];
        const params = { turn_id: turn, ...(p.minutes !== undefined ? { minutes: p.minutes } : {}), ...(p.reason ? { reason: p.reason } : {}) };
        const r = await this.tool(name, params);
        return r.ok ? `${turn}: ${r.json.status ?? "done"}.` : `Not done: ${r.error}`;
      }
    }
    return HELP;
  }

  async send(p) {
    const key = this.d.sessionKey;
    if (!key) throw new Error("this chat's session is not known, so its reply could not come back; use the chat of an agent session");
    const lim = limitArgs({ inactivity_timeout_minutes: p.limits.inactivity, hard_timeout_minutes: p.limits.hard });
    let args;
    const target = p.op === "send" ? p.target : "only";
    if (target === "only" || target === "codex" || target === "claude") {
      args = ["terminal", "delegate", "--json", "--origin-session", key, ...lim, ...(target !== "only" ? ["--agent", target] : []), "--", p.text];
    } else {
      args = ["terminal", "send", "--json", "--terminal", await this.resolvePane(target), "--origin-session", key, ...lim, "--", p.text];
    }
    const r = await this.call(args);
    if (!r.ok) return r.json?.candidates ? refusalText(r.error, r.json) : `Not sent: ${r.error}`;
    this.d.turns.add(key, r.json.turn_id);
    const where = r.json.agent ? `${r.json.agent} in ${r.json.cwd}` : short(args[4]);
    return `Sent to ${where} as ${r.json.turn_id}. The reply comes back here; /clawconnect cancel stops it.`;
  }

  async resume(p) {
    const terminal = await this.resolvePane(p.target);
    const list = await this.tool("clawconnect_terminal_threads", { terminal_id: terminal });
    if (!list.ok) return `Not done: ${list.error}`;
    const threads = list.json.threads ?? [];
    let pick;
    if (p.thread === "previous") pick = threads.find((t) => !t.current);
    else if (/^[0-9]{1,4}$/.test(p.thread)) pick = threads[Number(p.thread) - 1];
    else {
      const m = threads.filter((t) => t.native_thread_id.toLowerCase().startsWith(p.thread.toLowerCase()));
      if (m.length > 1) return `Not done: ${p.thread} matches ${m.length} threads; give more of the id.`;
      pick = m[0];
    }
    if (!pick) return `Not done: no thread "${p.thread}"; /clawconnect threads lists them.`;
    const r = await this.tool("clawconnect_terminal_resume_thread", { terminal_id: terminal, native_thread_id: pick.native_thread_id });
    return r.ok ? `Resumed ${clip(pick.title || pick.native_thread_id, 80)}; the next send goes to session ${r.json.session_id ?? "?"}.` : `Not done: ${r.error}`;
  }
}
