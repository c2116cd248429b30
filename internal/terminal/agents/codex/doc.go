// Package codex reads the native evidence of a Codex TUI (0.171): the
// rollout file the running process keeps open under $CODEX_HOME/sessions
// (which thread the pane shows, whether a request was accepted as a native
// turn, and when that exact turn completed or was aborted) and the pane's
// screen (idle, working, approval prompt, composer draft).
//
// Everything here reads; nothing writes to Codex's files or the pane. Facts
// about the process (its cwd and open files) come in as plain values, so
// this package does not depend on how /proc is read.
package codex
