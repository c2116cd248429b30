// Package terminal is the Turn service of terminal turns: it sends a request
// to a Codex or Claude Code TUI running in a terminal pane as a new Turn,
// follows that Turn from the agent's own session files to done, waiting for
// approval, stalled or failed, and keeps the records (Session, Turn, dispatch
// ledger, event log, completion claim) in the store.
//
// The Go API is named as the CLI: List, Send, Status, Respond, Approve,
// Cancel, Renew, Close (Service). A monitor host (package host) follows
// every open Turn of the store, one per Turn across processes by a lease in
// the store, and asks the Service to look at each (host.Service). Panes and processes come from a Terminals implementation
// (tmux and /proc, an interface defined here), native evidence from one
// agents.Agent per coding agent (package agents holds that contract;
// agents/codex reads Codex rollouts, agents/claude Claude Code transcripts).
package terminal
