// Package claude reads the native evidence of a Claude Code TUI (2.1.332):
// its live-session registry file ($CLAUDE_CONFIG_DIR/sessions/<pid>.json,
// which names the session, cwd and status of a running TUI), the session's
// transcript (projects/<encoded cwd>/<sessionId>.jsonl: whether a request
// was accepted as a prompt record, and whether that turn completed, failed
// or waits on a Bash approval), and the pane's screen (idle, working, the
// Bash permission dialog).
//
// Agent is the Turn service's adapter over those readers (the
// agents.Agent contract and its extensions: thread plans and listings,
// watches of a human's task, the pending Bash command, the /status card).
// It finds the config directory (the process's $CLAUDE_CONFIG_DIR, default
// ~/.claude of its HOME) from /proc; the readers under it take it as a
// parameter. Everything here reads; nothing writes to Claude Code's files
// or the pane.
package claude
