// Package codex reads the native evidence of a Codex TUI (0.171): the
// rollout file the running process keeps open under $CODEX_HOME/sessions
// (which thread the pane shows, whether a request was accepted as a native
// turn, and when that exact turn completed or was aborted) and the pane's
// screen (idle, working, approval prompt, composer draft).
//
// Agent is the Turn service's adapter over those readers (the
// agents.Agent contract and its extensions: thread plans and listings,
// watches of a human's task, the /status card). It gathers the process's
// facts (cwd, open files, environment, version) from /proc; the readers
// under it take them as plain values, so they do not depend on how /proc
// is read. Everything here reads; nothing writes to Codex's files or the
// pane.
package codex
