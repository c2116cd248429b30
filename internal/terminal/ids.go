package terminal

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newSessionID returns "session-YYYYMMDDHHMMSS-<8 hex>" (UTC), AKK's form.
func newSessionID(now time.Time) string {
	return "session-" + now.UTC().Format("20060102150405") + "-" + randHex(4)
}

// newTurnID returns "turn-YYYYMMDDTHHMMSS-<8 hex>" (UTC).
func newTurnID(now time.Time) string {
	return "turn-" + now.UTC().Format("20060102T150405") + "-" + randHex(4)
}

func newBindingID() string { return "binding-" + uuid() }
func newMessageID() string { return "msg-" + uuid() }

// checkID refuses an id that is empty, lacks prefix, or holds characters no
// generated id has, so a typo is reported as malformed rather than unknown.
func checkID(kind, prefix, id string) error {
	if !strings.HasPrefix(id, prefix) || len(id) == len(prefix) || len(id) > 100 {
		return fmt.Errorf("%w: %s %q is malformed: it must start with %q (copy it from `clawconnect terminal list` or a send result)",
			ErrBadInput, kind, id, prefix)
	}
	for _, c := range id[len(prefix):] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %s %q is malformed: unexpected character %q", ErrBadInput, kind, id, c)
		}
	}
	return nil
}

// TerminalRef is a parsed public terminal_id:
// terminal:v2:tmux:<codex|claude>:<session:window.pane>:<pid>.
type TerminalRef struct {
	Provider string
	Agent    string
	Target   string
	PID      int
}

// ParseTerminalID parses a public terminal_id. The pid is split at the last
// ':' and the agent at the first ':' after the provider, as AKK does.
func ParseTerminalID(id string) (TerminalRef, error) {
	bad := func(why string) (TerminalRef, error) {
		return TerminalRef{}, fmt.Errorf("%w: terminal id %q is malformed (%s); copy it from `clawconnect terminal list`", ErrBadInput, id, why)
	}
	rest, ok := strings.CutPrefix(id, "terminal:v2:")
	if !ok {
		return bad("it must start with terminal:v2:")
	}
	provider, rest, ok := strings.Cut(rest, ":")
	if !ok || provider == "" {
		return bad("no provider")
	}
	agent, rest, ok := strings.Cut(rest, ":")
	if !ok || (agent != "codex" && agent != "claude") {
		return bad("the agent must be codex or claude")
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return bad("no target or pid")
	}
	pid, err := strconv.Atoi(rest[i+1:])
	if err != nil || pid <= 0 {
		return bad("the pid is not a positive number")
	}
	if strings.ContainsAny(rest[:i], " \t\r\n") {
		return bad("the target holds whitespace")
	}
	return TerminalRef{Provider: provider, Agent: agent, Target: rest[:i], PID: pid}, nil
}

// FormatTerminalID is the inverse of ParseTerminalID.
func FormatTerminalID(r TerminalRef) string {
	return "terminal:v2:" + r.Provider + ":" + r.Agent + ":" + r.Target + ":" + strconv.Itoa(r.PID)
}
