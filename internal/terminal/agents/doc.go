// Package agents is the contract between the Turn service and the readers
// of one coding agent (Codex in agents/codex, Claude Code in
// agents/claude): the pane an agent runs in, the native evidence a reader
// reports (identity, acceptance, completion, a classified screen) and the
// Agent interface with its optional extensions (thread controls, watches of
// a human's task, resumable input checks, pending commands, the /status
// card). It also holds the few rules both readers follow the same way: the
// evidence record the service stores, what a replaced session file means,
// and how native threads are titled and ordered.
package agents
