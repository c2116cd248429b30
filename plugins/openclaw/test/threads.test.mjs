import { test } from "node:test";
import assert from "node:assert/strict";

import { specs, checkParams } from "../plugin/lib/tools.mjs";
import { threadSpecs } from "../plugin/lib/threads.mjs";

const T = "terminal:v2:tmux:claude:work:0.0:4242";
const U = "6f1c2d3e-0000-4000-8000-00000000abcd";
const by = Object.fromEntries(specs.map((s) => [s.name, s]));

test("the thread tools are registered with closed schemas", () => {
  for (const s of threadSpecs) {
    assert.equal(by[s.name], s, s.name);
    assert.equal(s.parameters.additionalProperties, false, s.name);
    assert.ok(s.parameters.required.includes("terminal_id"), s.name);
  }
  assert.deepEqual(threadSpecs.map((s) => s.name).sort(),
    ["clawconnect_terminal_clear_thread", "clawconnect_terminal_new_thread", "clawconnect_terminal_resume_thread", "clawconnect_terminal_threads"]);
});

test("thread tool argv", () => {
  const ctx = { sessionKey: "agent:main:s1" };
  assert.deepEqual(by.clawconnect_terminal_threads.argv(checkParams(by.clawconnect_terminal_threads, { terminal_id: T }), ctx), ["terminal", "threads", "--json", T]);
  assert.deepEqual(by.clawconnect_terminal_new_thread.argv(checkParams(by.clawconnect_terminal_new_thread, { terminal_id: T }), ctx), ["terminal", "new-thread", "--json", T]);
  assert.deepEqual(by.clawconnect_terminal_clear_thread.argv(checkParams(by.clawconnect_terminal_clear_thread, { terminal_id: T }), ctx), ["terminal", "clear-thread", "--json", T]);
  assert.deepEqual(by.clawconnect_terminal_resume_thread.argv(checkParams(by.clawconnect_terminal_resume_thread, { terminal_id: T, native_thread_id: U }), ctx),
    ["terminal", "resume-thread", "--json", T, U]);
});

test("thread tools refuse bad parameters", () => {
  const resume = by.clawconnect_terminal_resume_thread;
  assert.throws(() => checkParams(resume, { terminal_id: T }), /missing parameter native_thread_id/);
  assert.throws(() => checkParams(resume, { terminal_id: T, native_thread_id: "6f1c2d3e" }), /must be a string matching/, "a partial id");
  assert.throws(() => checkParams(resume, { terminal_id: T, native_thread_id: "--json" }), /must be a string matching/);
  assert.throws(() => checkParams(resume, { terminal_id: "--abort", native_thread_id: U }), /must be a string matching/);
  assert.throws(() => checkParams(by.clawconnect_terminal_new_thread, { terminal_id: T, session_id: "session-1" }), /unknown parameter session_id/);
  assert.throws(() => checkParams(by.clawconnect_terminal_new_thread, {}), /missing parameter terminal_id/);
});
