// Native thread tools of the ClawConnect plugin: list a pane's resumable
// threads, start a new or cleared thread, resume one. The model passes the
// exact terminal_id (and, for resume, one complete native thread id from
// the threads list); ClawConnect derives the binding and revalidates it
// before touching the pane. None of them creates a Turn: the next send does.

const obj = (properties, required = []) => ({ type: "object", additionalProperties: false, properties, required });
const TERMINAL_ID = { type: "string", pattern: "^terminal:v[0-9]+:\\S+$", description: "The pane's terminal_id from clawconnect_terminal_list." };
const THREAD_ID = {
  type: "string",
  pattern: "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$",
  description: "A complete native_thread_id from clawconnect_terminal_threads.",
};

/** threadSpecs lists the native thread tools (same shape as tools.mjs specs). */
export const threadSpecs = [
  {
    name: "clawconnect_terminal_threads",
    description: "List the native threads the pane's coding agent could resume in its workspace, newest first: native_thread_id, title or first prompt, times, whether it is current, and its session_id.",
    parameters: obj({ terminal_id: TERMINAL_ID }, ["terminal_id"]),
    argv: (p) => ["terminal", "threads", "--json", p.terminal_id],
  },
  {
    name: "clawconnect_terminal_new_thread",
    description: "Start a new native thread in the pane's coding agent. Refused while a Turn runs, an approval or callback is pending, or on an agent version the step is not proven on. Creates no Turn: send the next request to the returned session_id or the terminal_id.",
    parameters: obj({ terminal_id: TERMINAL_ID }, ["terminal_id"]),
    argv: (p) => ["terminal", "new-thread", "--json", p.terminal_id],
  },
  {
    name: "clawconnect_terminal_clear_thread",
    description: "Clear the pane's coding agent's context into a new native thread (same checks as new_thread). Creates no Turn.",
    parameters: obj({ terminal_id: TERMINAL_ID }, ["terminal_id"]),
    argv: (p) => ["terminal", "clear-thread", "--json", p.terminal_id],
  },
  {
    name: "clawconnect_terminal_resume_thread",
    description: "Resume an earlier native thread (one clawconnect_terminal_threads listed) in the pane's coding agent; its Session becomes the pane's again. Creates no Turn.",
    parameters: obj({ terminal_id: TERMINAL_ID, native_thread_id: THREAD_ID }, ["terminal_id", "native_thread_id"]),
    argv: (p) => ["terminal", "resume-thread", "--json", p.terminal_id, p.native_thread_id],
  },
];
