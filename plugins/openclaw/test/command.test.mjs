import { test } from "node:test";
import assert from "node:assert/strict";

import { parse, isSelector } from "../plugin/lib/command_parse.mjs";
import { Command, TurnMemory } from "../plugin/lib/command.mjs";
import { specs, checkParams, Offers } from "../plugin/lib/tools.mjs";

const T = "terminal:v2:tmux:codex:work:0.0:4242";
const T2 = "terminal:v2:tmux:codex:other:0.0:77";

test("parse: every form of /clawconnect", () => {
  const cases = [
    ["", { op: "help" }],
    ["help", { op: "help" }],
    ["run the tests", { op: "delegate", text: "run the tests", limits: {} }],
    ["fix: the parser", { op: "delegate", text: "fix: the parser", limits: {} }],
    ["--inactivity 30 --hard=120 run the tests", { op: "delegate", text: "run the tests", limits: { inactivity: 30, hard: 120 } }],
    ["codex: run the tests", { op: "send", target: "codex", text: "run the tests", limits: {} }],
    ["claude : explain main.go", { op: "send", target: "claude", text: "explain main.go", limits: {} }],
    ["only：跑测试", { op: "send", target: "only", text: "跑测试", limits: {} }],
    ["latest: and now the docs\nplease", { op: "send", target: "latest", text: "and now the docs\nplease", limits: {} }],
    ["@4242: hi", { op: "send", target: "@4242", text: "hi", limits: {} }],
    [`${T}: hi there`, { op: "send", target: T, text: "hi there", limits: {} }],
    [`--hard 5 ${T}: hi`, { op: "send", target: T, text: "hi", limits: { hard: 5 } }],
    ["list", { op: "list" }],
    ["ls", { op: "list" }],
    ["doctor", { op: "doctor" }],
    ["status", { op: "status", turn: "latest" }],
    ["status codex", { op: "status", turn: "codex" }],
    ["status watch-20260101-ab", { op: "watch-status", watch: "watch-20260101-ab" }],
    [`watch ${T}`, { op: "watch", terminal: T }],
    ["unwatch watch-1-a", { op: "unwatch", watch: "watch-1-a" }],
    ["threads", { op: "threads", target: "only" }],
    [`threads ${T}`, { op: "threads", target: T }],
    ["new-thread codex", { op: "new-thread", target: "codex" }],
    ["clear-thread", { op: "clear-thread", target: "only" }],
    [`resume-thread ${T}`, { op: "resume-thread", target: T, thread: "previous" }],
    [`resume-thread ${T} 2`, { op: "resume-thread", target: T, thread: "2" }],
    [`resume-thread ${T} 6f1c2d3e-0000-4000-8000-00000000abcd`, { op: "resume-thread", target: T, thread: "6f1c2d3e-0000-4000-8000-00000000abcd" }],
    ["respond latest: the second one", { op: "respond", turn: "latest", text: "the second one" }],
    ["respond turn-20260101T000000-ab: yes", { op: "respond", turn: "turn-20260101T000000-ab", text: "yes" }],
    ["approve", { op: "approve", turn: "latest" }],
    ["approve only", { op: "approve", turn: "only" }],
    ["cancel", { op: "cancel", turn: "latest" }],
    ["stop codex", { op: "cancel", turn: "codex" }],
    ["renew", { op: "renew", turn: "latest" }],
    ["renew 30", { op: "renew", turn: "latest", minutes: 30 }],
    ["renew @ab 90", { op: "renew", turn: "@ab", minutes: 90 }],
    ["retry", { op: "retry", turn: "latest" }],
    ["close", { op: "close", turn: "latest" }],
    ["close latest superseded by hand", { op: "close", turn: "latest", reason: "superseded by hand" }],
  ];
  for (const [input, want] of cases) assert.deepEqual(parse(input), want, input);
});

test("parse: refusals say what to type", () => {
  const cases = [
    ["list everything", "list takes no arguments"],
    ["close the leak in x.go", "names no Turn"],
    ["stop the server", "names no Turn"],
    ["codex:", "nothing to send to codex"],
    ["respond latest:", "the answer is empty"],
    ["respond yes", "usage: /clawconnect respond"],
    [`respond ${T}: yes`, "usage: /clawconnect respond"],
    ["--inactivity 0 x", "--inactivity takes minutes"],
    ["--hard 99999 x", "at most 10080"],
    ["--inactivity 60 --hard 30 x", "longer than --hard"],
    ["--inactivity 5 --inactivity 6 x", "given twice"],
    ["--idle 5 x", "unknown option --idle"],
    ["--hard 5", "the task is empty"],
    ["renew latest 0", "minutes must be more than 0"],
    ["turn-20260101-ab: yes", "to answer it write /clawconnect respond"],
    [`approve ${T}`, "name the Turn, not the pane"],
    ["watch", "usage: /clawconnect watch"],
    ["unwatch nope", "usage: /clawconnect unwatch"],
    [`resume-thread ${T} yesterday`, "is not a thread id"],
  ];
  for (const [input, want] of cases) {
    const got = parse(input);
    assert.equal(got.op, "error", input);
    assert.ok(got.error.includes(want), `${input}: ${got.error}`);
  }
});

// A small deterministic generator (no dependency) for the property test.
function rng(seed) {
  let x = seed >>> 0;
  return () => ((x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}
const PIECES = ["codex", "claude", "only", "latest", "@42", T, "turn-1-a", "watch-1", ":", "：", " ", "  ", "\n", "\t", "--hard", "--inactivity", "=", "5",
  "0", "-1", "1e9", "list", "status", "respond", "close", "renew", "approve", "threads", "resume-thread", "previous", "run", "tests", "é", "\u0000", "'", '"'];

test("parse: never throws, always one known operation, and a send keeps the message exactly", () => {
  const ops = new Set(["help", "delegate", "send", "list", "doctor", "status", "watch-status", "watch", "unwatch", "threads", "new-thread",
    "clear-thread", "resume-thread", "respond", "approve", "cancel", "retry", "renew", "close", "error"]);
  const r = rng(26);
  for (let i = 0; i < 20000; i++) {
    let s = "";
    const n = Math.floor(r() * 8);
    for (let j = 0; j < n; j++) s += PIECES[Math.floor(r() * PIECES.length)] + (r() < 0.5 ? " " : "");
    const got = parse(s);
    assert.ok(ops.has(got.op), `${JSON.stringify(s)} → ${JSON.stringify(got)}`);
    if (got.op === "error") assert.ok(got.error.length > 0);
    if (got.op === "send" || got.op === "delegate") {
      assert.ok(got.text.length > 0 && s.includes(got.text), JSON.stringify(s));
      for (const v of Object.values(got.limits)) assert.ok(v > 0 && v <= 10080);
    }
    if (got.op === "send") assert.ok(isSelector(got.target));
  }
  // Any message after an explicit selector comes through unchanged.
  for (let i = 0; i < 2000; i++) {
    let msg = "";
    const n = 1 + Math.floor(r() * 6);
    for (let j = 0; j < n; j++) msg += PIECES[Math.floor(r() * PIECES.length)] + " ";
    msg = msg.trim();
    if (!msg) continue;
    assert.deepEqual(parse(`${T}: ${msg}`), { op: "send", target: T, text: msg, limits: {} }, msg);
    assert.deepEqual(parse(`respond latest: ${msg}`), { op: "respond", turn: "latest", text: msg }, msg);
  }
});

const send = Object.fromEntries(specs.map((s) => [s.name, s])).clawconnect_terminal_send;

test("the model tool's send delegates without a target and carries its timeouts", () => {
  const ctx = { sessionKey: "agent:main:s" };
  assert.deepEqual(send.argv(checkParams(send, { request: "go" }), ctx),
    ["terminal", "delegate", "--json", "--origin-session", "agent:main:s", "--", "go"]);
  assert.deepEqual(send.argv(checkParams(send, { request: "go", agent: "claude", inactivity_timeout_minutes: 30, hard_timeout_minutes: 90 }), ctx),
    ["terminal", "delegate", "--json", "--agent", "claude", "--origin-session", "agent:main:s", "--inactivity-timeout", "30m", "--hard-timeout", "90m", "--", "go"]);
  assert.deepEqual(send.argv(checkParams(send, { request: "go", terminal_id: T, hard_timeout_minutes: 1.5 }), ctx),
    ["terminal", "send", "--json", "--terminal", T, "--origin-session", "agent:main:s", "--hard-timeout", "1.5m", "--", "go"]);
  for (const [p, want] of [
    [{ request: "go", terminal_id: T, session_id: "session-1" }, "at most one of session_id and terminal_id"],
    [{ request: "go", terminal_id: T, agent: "codex" }, "leave it out"],
    [{ request: "go", agent: "gemini" }, "must be one of codex, claude"],
    [{ request: "go", inactivity_timeout_minutes: 0 }, "greater than 0"],
    [{ request: "go", hard_timeout_minutes: 20000 }, "at most 10080"],
    [{ request: "go", inactivity_timeout_minutes: 60, hard_timeout_minutes: 30 }, "would always end the Turn first"],
  ]) {
    assert.throws(() => send.argv(checkParams(send, p), ctx), (e) => e.message.includes(want), JSON.stringify(p));
  }
});

// fakeBinary answers the clawconnect calls a Command makes.
function fakeBinary({ panes = [], turns = {}, delegate } = {}) {
  const calls = [];
  const run = async (args) => {
    calls.push(args);
    const [, op] = args;
    if (op === "list") return { ok: true, json: { terminals: panes } };
    if (op === "status") {
      const id = args.at(-1), key = args[args.indexOf("--for-session") + 1];
      const v = turns[id];
      if (!v) return { ok: false, error: `status: not found: no turn ${id}` };
      if (v.origin_session !== key) return { ok: false, error: `${id}: refused: it was not started from this OpenClaw session` };
      return { ok: true, json: v };
    }
    if (op === "delegate") return delegate(args);
    if (op === "cancel") return { ok: true, json: { ...turns[args.at(-1)], status: "cancelled" } };
    return { ok: false, error: `unexpected ${args.join(" ")}` };
  };
  return { run, calls };
}

const row = (id, agent, extra = {}) => ({ id, agent, pid: Number(id.split(":").pop()), cwd: `/w/${agent}`, activity_state: "idle",
  available_actions: [{ action: "send" }], ...extra });

test("/clawconnect <task> delegates for the chat and remembers the Turn", async () => {
  const f = fakeBinary({ delegate: async () => ({ ok: true, json: { terminal_id: T, agent: "codex", cwd: "/w/codex", turn_id: "turn-1-a" } }) });
  const turns = new TurnMemory();
  const c = new Command({ run: f.run, sessionKey: "agent:main:s", offers: new Offers(), turns });
  const reply = await c.handle("--inactivity 30 run the tests");
  assert.equal(reply, "Sent to codex in /w/codex as turn-1-a. The reply comes back here; /clawconnect cancel stops it.");
  assert.deepEqual(f.calls[0], ["terminal", "delegate", "--json", "--origin-session", "agent:main:s", "--inactivity-timeout", "30m", "--", "run the tests"]);
  assert.deepEqual(turns.list("agent:main:s"), ["turn-1-a"]);
});

test("/clawconnect codex: with two Codex panes is refused, listing both", async () => {
  const f = fakeBinary({
    delegate: async () => ({ ok: false, error: "delegate: refused: 2 idle codex panes could take it", json: {
      error: "delegate: refused: 2 idle codex panes could take it; name one by its terminal id:",
      candidates: [{ terminal_id: T, agent: "codex", cwd: "/w/a" }, { terminal_id: T2, agent: "codex", cwd: "/w/b" }] } }),
  });
  const c = new Command({ run: f.run, sessionKey: "agent:main:s", offers: new Offers(), turns: new TurnMemory() });
  const reply = await c.handle("codex: run the tests");
  assert.ok(reply.startsWith("Not sent: 2 idle codex panes could take it"), reply);
  assert.ok(reply.includes(T) && reply.includes(T2) && reply.includes("/w/a") && reply.includes("Pick one"), reply);
  assert.deepEqual(f.calls[0].slice(0, 6), ["terminal", "delegate", "--json", "--origin-session", "agent:main:s", "--agent"]);
});

test("turn selectors resolve among this chat's Turns only, failing closed", async () => {
  const key = "agent:main:s";
  const turns = {
    "turn-20260101T100000-aaaa": { turn_id: "turn-20260101T100000-aaaa", agent: "codex", status: "running", created_at: "2026-01-01T10:00:00Z", origin_session: key },
    "turn-20260101T110000-bbbb": { turn_id: "turn-20260101T110000-bbbb", agent: "claude", status: "stalled", created_at: "2026-01-01T11:00:00Z", origin_session: key },
    "turn-20260101T120000-cccc": { turn_id: "turn-20260101T120000-cccc", agent: "codex", status: "running", created_at: "2026-01-01T12:00:00Z", origin_session: "agent:main:other" },
  };
  const panes = [row(T, "codex", { current_turn: { turn_id: "turn-20260101T100000-aaaa", status: "running" } }),
    row(T2, "codex", { current_turn: { turn_id: "turn-20260101T120000-cccc", status: "running" } })];
  const f = fakeBinary({ panes, turns });
  const mem = new TurnMemory();
  mem.add(key, "turn-20260101T110000-bbbb");
  const c = new Command({ run: f.run, sessionKey: key, offers: new Offers(), turns: mem });
  assert.equal(await c.resolveTurn("latest"), "turn-20260101T110000-bbbb");
  assert.equal(await c.resolveTurn("codex"), "turn-20260101T100000-aaaa"); // the other chat's codex Turn does not count
  assert.equal(await c.resolveTurn("@bbbb"), "turn-20260101T110000-bbbb");
  await assert.rejects(c.resolveTurn("only"), /names 2 Turns/);
  await assert.rejects(c.resolveTurn("@cccc"), /no Turn of this chat/);
  const reply = await c.handle("cancel codex");
  assert.equal(reply, "turn-20260101T100000-aaaa: cancelled.");
  assert.deepEqual(f.calls.at(-1), ["terminal", "cancel", "--json", "--for-session", key, "turn-20260101T100000-aaaa"]);
});

test("a pane selector naming several panes is refused with them listed", async () => {
  const f = fakeBinary({ panes: [row(T, "codex"), row(T2, "codex")] });
  const c = new Command({ run: f.run, sessionKey: "agent:main:s", offers: new Offers(), turns: new TurnMemory() });
  const reply = await c.handle("threads codex");
  assert.ok(reply.startsWith('Not done: "codex" names 2 panes') && reply.includes(T) && reply.includes(T2), reply);
});

test("/clawconnect list names a pane's Turn as a person reads it", async () => {
  const f = fakeBinary({ panes: [row(T, "codex", { current_turn: { turn_id: "turn-1-a", status: "waiting_for_openclaw", shown_status: "waiting_for_approval" } }),
    row(T2, "codex", { current_turn: { turn_id: "turn-2-b", status: "running" } })] });
  const c = new Command({ run: f.run, sessionKey: "agent:main:s", offers: new Offers(), turns: new TurnMemory() });
  const reply = await c.handle("list");
  assert.ok(reply.includes("turn-1-a waiting_for_approval") && !reply.includes("waiting_for_openclaw"), reply);
  assert.ok(reply.includes("turn-2-b running"), reply); // from a ClawConnect that does not fill shown_status
});
