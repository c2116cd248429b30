// The parser of /clawconnect's arguments: the one place that turns what a
// person typed into an operation. It never throws; bad input becomes
// { op: "error", error } with a line that says what to type instead.

export const MAX_MINUTES = 10080; // a week, as the CLI's limit

/** The words that pick a pane to send to, besides a terminal id and @ref. */
const TARGET_WORDS = new Set(["only", "latest", "codex", "claude"]);

/** isSelector reports whether s names a pane or Turn (without the colon). */
export function isSelector(s) {
  return TARGET_WORDS.has(s) || /^terminal:v[0-9]+:\S+$/.test(s) || /^turn-[A-Za-z0-9-]+$/.test(s) || /^@[A-Za-z0-9._:-]{1,64}$/.test(s);
}

// splitSelector splits "<selector>: <text>" (ASCII or full-width colon)
// when the text starts with a selector; else it returns undefined. A
// terminal id holds colons itself, so only a colon that ends the first
// word, or a full-width one, separates.
function splitSelector(s) {
  const m = /^(\S+)(\s+([\s\S]*))?$/.exec(s);
  if (!m) return undefined;
  let [, head, , rest = ""] = m;
  const wide = head.indexOf("\uff1a");
  if (wide > 0 && wide < head.length - 1) {
    rest = head.slice(wide + 1) + (m[2] ?? "");
    head = head.slice(0, wide + 1);
  }
  if (!head.endsWith(":") && !head.endsWith("\uff1a")) {
    // "codex : text"
    const sp = /^:\s*([\s\S]*)$/.exec(rest);
    if (!isSelector(head) || !sp) return undefined;
    return { selector: head, text: sp[1].trim() };
  }
  const sel = head.slice(0, -1);
  if (!isSelector(sel)) return undefined;
  return { selector: sel, text: rest.trim() };
}

// takeLimits reads leading --inactivity N / --hard N (minutes).
function takeLimits(s) {
  const limits = {};
  for (;;) {
    const m = /^--(inactivity|hard)(?:=|\s+)(\S+)\s*([\s\S]*)$/.exec(s);
    if (!m) {
      if (/^--\S/.test(s)) return { error: `unknown option ${s.split(/\s/)[0]}: the options are --inactivity <minutes> and --hard <minutes>, before the task` };
      return { limits, rest: s };
    }
    const [, name, v, rest] = m;
    const n = Number(v);
    if (!/^[0-9]+(\.[0-9]+)?$/.test(v) || !(n > 0) || n > MAX_MINUTES) {
      return { error: `--${name} takes minutes, more than 0 and at most ${MAX_MINUTES}; got ${JSON.stringify(v)}` };
    }
    if (limits[name] !== undefined) return { error: `--${name} is given twice` };
    limits[name] = n;
    s = rest;
  }
}

const NO_ARGS = { list: "list", ls: "list", tasks: "list", doctor: "doctor", check: "doctor", threads: "threads", "new-thread": "new-thread",
  "clear-thread": "clear-thread", help: "help" };
const TURN_OPS = { approve: "approve", cancel: "cancel", stop: "cancel", retry: "retry", "retry-callback": "retry", close: "close", done: "close",
  renew: "renew", status: "status", show: "status" };

/**
 * parse turns the arguments of /clawconnect into one operation:
 *   { op: "delegate", text, limits }            /clawconnect <task>
 *   { op: "send", target, text, limits }        /clawconnect <selector>: <message>
 *   { op: "list" | "doctor" | "help" }
 *   { op: "status", turn } | { op: "watch-status", watch }
 *   { op: "watch", terminal } | { op: "unwatch", watch }
 *   { op: "threads" | "new-thread" | "clear-thread", target }
 *   { op: "resume-thread", target, thread }     thread: uuid, "previous" or a 1-based number
 *   { op: "respond", turn, text }
 *   { op: "approve" | "cancel" | "retry", turn }
 *   { op: "renew", turn, minutes? } | { op: "close", turn, reason? }
 *   { op: "error", error }
 * Turn and pane selectors default to "latest" and "only".
 */
export function parse(raw) {
  const s = typeof raw === "string" ? raw.trim() : "";
  if (!s) return { op: "help" };
  const [word0, ...more] = s.split(/\s+/);
  const word = word0.toLowerCase();
  const rest = s.slice(word0.length).trim();
  const args = more;
  const fail = (error) => ({ op: "error", error });
  if (NO_ARGS[word] !== undefined && !(word === "threads" || word === "new-thread" || word === "clear-thread")) {
    if (args.length) return fail(`${word} takes no arguments. To hand over a task that starts with "${word}", write: /clawconnect only: ${s}`);
    return { op: NO_ARGS[word] };
  }
  if (word === "threads" || word === "new-thread" || word === "clear-thread") {
    if (args.length > 1 || (args.length === 1 && !isSelector(args[0]))) return fail(`usage: /clawconnect ${word} [terminal id | only | codex | claude | @ref]`);
    return { op: word, target: args[0] ?? "only" };
  }
  if (word === "resume-thread") {
    if (args.length < 1 || args.length > 2 || !isSelector(args[0])) return fail("usage: /clawconnect resume-thread <terminal id | only | codex | claude | @ref> [thread id | previous | <number>]");
    const thread = args[1] ?? "previous";
    if (!/^(previous|[1-9][0-9]{0,3}|[0-9A-Fa-f]{8}-[0-9A-Fa-f-]{4,}|[0-9A-Fa-f]{4,})$/.test(thread)) {
      return fail(`resume-thread: ${JSON.stringify(thread)} is not a thread id, "previous" or a number from /clawconnect threads`);
    }
    return { op: "resume-thread", target: args[0], thread };
  }
  if (word === "watch") {
    if (args.length !== 1 || !isSelector(args[0]) || /^turn-/.test(args[0])) return fail("usage: /clawconnect watch <terminal id | only | codex | claude | @ref>");
    return { op: "watch", terminal: args[0] };
  }
  if (word === "unwatch") {
    if (args.length !== 1 || !/^(watch-[A-Za-z0-9-]+|terminal:v[0-9]+:\S+)$/.test(args[0])) return fail("usage: /clawconnect unwatch <watch id | terminal id>");
    return { op: "unwatch", watch: args[0] };
  }
  if (word === "respond") {
    const sp = splitSelector(rest);
    if (!sp || /^terminal:/.test(sp.selector)) return fail("usage: /clawconnect respond <latest | only | codex | claude | turn id | @ref>: <answer>");
    if (!sp.text) return fail("respond: the answer is empty; write it after the colon");
    return { op: "respond", turn: sp.selector, text: sp.text };
  }
  if (TURN_OPS[word] !== undefined) {
    const op = TURN_OPS[word];
    if (op === "status" && args.length === 1 && /^watch-[A-Za-z0-9-]+$/.test(args[0])) return { op: "watch-status", watch: args[0] };
    let [sel, ...tail] = args;
    if (sel !== undefined && !isSelector(sel)) {
      if (op === "renew" && /^[0-9.]+$/.test(sel)) [sel, tail] = [undefined, args];
      else {
        // "close the leak in x.go" is a task, not a close with a reason:
        // a reason comes after an explicit Turn.
        return fail(`${word}: ${JSON.stringify(sel)} names no Turn; use latest, only, codex, claude, a turn id or @ref. ` +
          `To hand over a task that starts with "${word}", write: /clawconnect only: ${s}`);
      }
    }
    if (sel !== undefined && /^terminal:/.test(sel)) return fail(`${word}: name the Turn, not the pane: latest, only, codex, claude, a turn id or @ref`);
    const out = { op, turn: sel ?? "latest" };
    if (op === "renew") {
      if (tail.length > 1) return fail("usage: /clawconnect renew [turn] [minutes]");
      if (tail.length === 1) {
        const n = Number(tail[0]);
        if (!/^[0-9]+(\.[0-9]+)?$/.test(tail[0]) || !(n > 0) || n > MAX_MINUTES) return fail(`renew: minutes must be more than 0 and at most ${MAX_MINUTES}; got ${JSON.stringify(tail[0])}`);
        out.minutes = n;
      }
    } else if (op === "close") {
      const reason = tail.join(" ");
      if (reason.length > 500) return fail("close: the reason is longer than 500 characters");
      if (reason) out.reason = reason;
    } else if (tail.length) {
      return fail(`usage: /clawconnect ${word} [latest | only | codex | claude | turn id | @ref]`);
    }
    return out;
  }
  const lim = takeLimits(s);
  if (lim.error) return fail(lim.error);
  const body = lim.rest;
  if (lim.limits.inactivity !== undefined && lim.limits.hard !== undefined && lim.limits.inactivity > lim.limits.hard) {
    return fail("--inactivity is longer than --hard, which would always end the Turn first");
  }
  const sp = splitSelector(body);
  if (sp) {
    if (/^turn-/.test(sp.selector)) return fail(`${sp.selector} is a Turn: to answer it write /clawconnect respond ${sp.selector}: <answer>`);
    if (!sp.text) return fail(`nothing to send to ${sp.selector}: write the message after the colon`);
    return { op: "send", target: sp.selector, text: sp.text, limits: lim.limits };
  }
  if (!body) return fail("the task is empty: write it after the options");
  return { op: "delegate", text: body, limits: lim.limits };
}
