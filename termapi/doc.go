// Package termapi is the public vocabulary of terminal Turns: what the
// terminal_* MCP tools and the codex-tmux / claude-code-tmux executor
// adapter ask of a Turn service (a request typed into a Codex or Claude
// Code pane, then followed to its reply) and what it answers: the pane
// list, a send's result, a Turn's view, its statuses and the errors
// callers branch on. It depends on the standard library only; the Turn
// service that implements it (tmux, the agents' session files, the store)
// is internal to ClawConnect, which uses these same types by alias.
package termapi
