package agentproc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadTerminalID reports a terminal_id that does not parse.
var ErrBadTerminalID = errors.New("agentproc: malformed terminal_id")

// TerminalIDPattern is the schema pattern every terminal_id matches.
const TerminalIDPattern = `^terminal:v[0-9]+:\S+$`

var (
	terminalIDRE = lazyRE(TerminalIDPattern)
	targetRE     = lazyRE(`^\S+:[0-9]+\.[0-9]+$`)
)

// ProviderTmux is the only terminal provider.
const ProviderTmux = "tmux"

// TerminalID is the public identity of an agent pane:
// "terminal:v2:tmux:<codex|claude>:<session:window.pane>:<pid>".
type TerminalID struct {
	// Version is the format version: 2, or 1 for the legacy
	// "terminal:tmux:<target>:<pid>" form.
	Version int
	// Provider is "tmux".
	Provider string
	// Agent is the coding agent in the pane.
	Agent Agent
	// Target is the pane's "session:window.pane".
	Target string
	// PID is the agent process.
	PID int
}

// FormatTerminalID returns "terminal:v2:tmux:<agent>:<target>:<pid>".
func FormatTerminalID(agent Agent, target string, pid int) string {
	return "terminal:v2:" + ProviderTmux + ":" + string(agent) + ":" + target + ":" + strconv.Itoa(pid)
}

// String formats id in the v2 form (a legacy id comes back as v2).
func (id TerminalID) String() string { return FormatTerminalID(id.Agent, id.Target, id.PID) }

// ParseTerminalID parses a terminal_id. The pid is split at the last ':'
// and the agent at the first ':' after "terminal:v2:tmux:", so a session
// name holding ':' survives. The legacy form "terminal:tmux:<target>:<pid>"
// parses as Codex with Version 1. Every id must match TerminalIDPattern
// (the legacy form aside), name the tmux provider, a known agent, a
// non-empty target and a positive pid.
func ParseTerminalID(s string) (TerminalID, error) {
	bad := func(why string) (TerminalID, error) {
		return TerminalID{}, fmt.Errorf("%w %q: %s; want terminal:v2:tmux:<codex|claude>:<session:window.pane>:<pid> as `clawconnect terminal list` prints it", ErrBadTerminalID, clipID(s), why)
	}
	if legacy, ok := strings.CutPrefix(s, "terminal:tmux:"); ok {
		target, pid, err := splitPID(legacy)
		if err != nil {
			return bad(err.Error())
		}
		return TerminalID{Version: 1, Provider: ProviderTmux, Agent: Codex, Target: target, PID: pid}, nil
	}
	if !terminalIDRE().MatchString(s) {
		return bad("it does not match " + TerminalIDPattern)
	}
	rest := strings.TrimPrefix(s, "terminal:v")
	ver, rest, _ := strings.Cut(rest, ":")
	v, err := strconv.Atoi(ver)
	if err != nil || v != 2 {
		return bad("only version 2 is known")
	}
	rest, ok := strings.CutPrefix(rest, ProviderTmux+":")
	if !ok {
		return bad("the provider must be tmux")
	}
	agent, rest, ok := strings.Cut(rest, ":")
	if !ok || !Agent(agent).Valid() {
		return bad("the agent must be codex or claude")
	}
	target, pid, err := splitPID(rest)
	if err != nil {
		return bad(err.Error())
	}
	return TerminalID{Version: v, Provider: ProviderTmux, Agent: Agent(agent), Target: target, PID: pid}, nil
}

func splitPID(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, errors.New("no pid")
	}
	target, p := s[:i], s[i+1:]
	if !targetRE().MatchString(target) {
		return "", 0, errors.New("the target is not session:window.pane")
	}
	if p == "" || len(p) > 9 || strings.Trim(p, "0123456789") != "" {
		return "", 0, errors.New("the pid is not a positive integer")
	}
	pid, _ := strconv.Atoi(p)
	if pid <= 0 {
		return "", 0, errors.New("the pid is not a positive integer")
	}
	return target, pid, nil
}

func clipID(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
