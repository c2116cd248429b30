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
// "terminal:v2:tmux:<codex|claude>:<session:window.pane>:<pid>" on the
// machine that runs the pane, or, naming that machine's host for every
// other one sharing the store,
// "terminal:v3:<host>:tmux:<codex|claude>:<session:window.pane>:<pid>".
type TerminalID struct {
	// Version is the format version: 3 (with Host), 2, or 1 for the
	// legacy "terminal:tmux:<target>:<pid>" form.
	Version int
	// Host is the terminal host that runs the pane (version 3 only).
	Host string
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

// FormatHostTerminalID returns
// "terminal:v3:<host>:tmux:<agent>:<target>:<pid>", the id of a pane that
// host runs as every machine sharing the store names it.
func FormatHostTerminalID(host string, agent Agent, target string, pid int) string {
	return "terminal:v3:" + host + ":" + strings.TrimPrefix(FormatTerminalID(agent, target, pid), "terminal:v2:")
}

// String formats id in the v3 form when it names a host, else in the v2
// form (a legacy id comes back as v2).
func (id TerminalID) String() string {
	if id.Host != "" {
		return FormatHostTerminalID(id.Host, id.Agent, id.Target, id.PID)
	}
	return id.Local()
}

// Local formats id in the v2 form, the one the pane's own host uses.
func (id TerminalID) Local() string { return FormatTerminalID(id.Agent, id.Target, id.PID) }

// maxHostName bounds a host name, as DNS bounds a full name.
const maxHostName = 253

// CheckHostName refuses a host name a terminal id cannot carry: empty,
// longer than 253 bytes, or holding anything but letters, digits, '.',
// '-' and '_' (it must start with a letter or digit).
func CheckHostName(h string) error {
	if h == "" || len(h) > maxHostName {
		return fmt.Errorf("host name %q must be 1 to %d characters", clipID(h), maxHostName)
	}
	for i, c := range h {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '-' && c != '_') {
			return fmt.Errorf("host name %q holds %q at byte %d: use letters, digits, '.', '-' and '_', starting with a letter or digit", clipID(h), c, i)
		}
	}
	return nil
}

// ParseTerminalID parses a terminal_id. A version 3 id names its host
// right after the version (a host name holds no ':'). The pid is split at the last ':'
// and the agent at the first ':' after "terminal:v2:tmux:", so a session
// name holding ':' survives. The legacy form "terminal:tmux:<target>:<pid>"
// parses as Codex with Version 1. Every id must match TerminalIDPattern
// (the legacy form aside), name the tmux provider, a known agent, a
// non-empty target and a positive pid.
func ParseTerminalID(s string) (TerminalID, error) {
	bad := func(why string) (TerminalID, error) {
		return TerminalID{}, fmt.Errorf("%w %q: %s; want terminal:v3:<host>:tmux:<codex|claude>:<session:window.pane>:<pid> (or, on the pane's own host, terminal:v2:tmux:…) as `clawconnect terminal list` prints it", ErrBadTerminalID, clipID(s), why)
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
	if err != nil || v != 2 && v != 3 {
		return bad("only versions 2 and 3 are known")
	}
	var host string
	if v == 3 {
		var ok bool
		if host, rest, ok = strings.Cut(rest, ":"); !ok {
			return bad("no host")
		}
		if err := CheckHostName(host); err != nil {
			return bad(err.Error())
		}
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
	return TerminalID{Version: v, Host: host, Provider: ProviderTmux, Agent: Agent(agent), Target: target, PID: pid}, nil
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
	if p == "" || len(p) > 9 || p[0] == '0' || strings.Trim(p, "0123456789") != "" {
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
