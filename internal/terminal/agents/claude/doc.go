// Package claude reads the native evidence of a Claude Code TUI (2.1.332):
// its live-session registry file ($CLAUDE_CONFIG_DIR/sessions/<pid>.json,
// which names the session, cwd and status of a running TUI), the session's
// transcript (projects/<encoded cwd>/<sessionId>.jsonl: whether a request
// was accepted as a prompt record, and whether that turn completed, failed
// or waits on a Bash approval), and the pane's screen (idle, working, the
// Bash permission dialog).
//
// Everything here reads; nothing writes to Claude Code's files or the pane.
// The config directory (default ~/.claude, or $CLAUDE_CONFIG_DIR) is passed
// in by the caller.
package claude
