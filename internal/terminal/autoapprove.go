package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/clawconnect/clawconnect/internal/store"
)

// AutoApproveRule lets the monitor answer an approval prompt itself: only
// a prompt of Agent, in a Turn whose workspace is exactly Workspace, to run
// exactly Argv (word by word, nothing more, nothing less).
type AutoApproveRule struct {
	// Name is an optional label shown where a use is recorded.
	Name string `json:"name,omitempty"`
	// Agent is the agent kind; only "codex" (Codex shows the command in
	// its prompt; Claude Code's permission dialog is not read for it).
	Agent string `json:"agent"`
	// Workspace is the absolute, clean workspace root the Turn must have.
	Workspace string `json:"workspace"`
	// Argv is the command, one word per element.
	Argv []string `json:"argv"`
}

// autoApproveFile is the rules file's shape.
type autoApproveFile struct {
	Rules []AutoApproveRule `json:"rules"`
}

// ParseAutoApprove reads auto-approve rules from a JSON document
// {"rules": [{"agent": "codex", "workspace": "/abs/root", "argv":
// ["make", "test"]}, …]}. Unknown fields, a rule without an agent,
// workspace or argv, a relative or unclean workspace, an empty word, or a
// word holding white space, a control character or a shell metacharacter
// are errors that name the rule and say what to fix: a rule that could
// never match exactly is not accepted silently.
func ParseAutoApprove(data []byte) ([]AutoApproveRule, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f autoApproveFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: auto-approve rules: %v; write {\"rules\": [{\"agent\": \"codex\", \"workspace\": \"/abs/root\", \"argv\": [\"make\", \"test\"]}]}", ErrBadInput, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: auto-approve rules: more than one JSON value; write one object with a \"rules\" list", ErrBadInput)
	}
	for i, r := range f.Rules {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: auto-approve rule %d: %s", ErrBadInput, i+1, fmt.Sprintf(format, args...))
		}
		switch {
		case r.Agent == AgentClaude:
			return nil, bad("agent %q: Claude Code's permission dialog does not show its command in a form that can be matched exactly; only \"codex\" rules are supported", r.Agent)
		case r.Agent != AgentCodex:
			return nil, bad("agent %q is unknown; use \"codex\"", r.Agent)
		case r.Workspace == "" || !filepath.IsAbs(r.Workspace) || filepath.Clean(r.Workspace) != r.Workspace:
			return nil, bad("workspace %q must be an absolute, clean path (the Turn's workspace must equal it)", r.Workspace)
		case len(r.Argv) == 0:
			return nil, bad("argv is empty; list the command's words, e.g. [\"make\", \"test\"]")
		}
		for _, w := range r.Argv {
			if !plainWord(w) {
				return nil, bad("argv word %q is empty or holds white space, a control character or a shell metacharacter; a prompt's command is matched word by word and such a command is never approved automatically", w)
			}
		}
	}
	return f.Rules, nil
}

// LoadAutoApprove reads the rules file at path (ParseAutoApprove); ""
// means no rules.
func LoadAutoApprove(path string) ([]AutoApproveRule, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auto-approve rules: %w", err)
	}
	rules, err := ParseAutoApprove(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rules, nil
}

// shellMeta are the characters that make a command more than its words.
const shellMeta = "'\"`\\$;&|<>(){}[]*?~#!=%^"

// plainWord reports a non-empty word without white space, control
// characters or shell metacharacters.
func plainWord(w string) bool {
	return w != "" && !strings.ContainsAny(w, shellMeta) && !strings.ContainsFunc(w, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	})
}

// commandArgv splits a command as a prompt shows it into its words; false
// when it is anything but plain words separated by single spaces (quotes,
// expansions, redirections, several lines, a redacted secret), which no
// rule can match exactly.
func commandArgv(cmd string) ([]string, bool) {
	words := strings.Split(cmd, " ")
	for _, w := range words {
		if !plainWord(w) {
			return nil, false
		}
	}
	return words, true
}

// autoApproveRule returns the rule that answers approval ap of t, if one
// matches exactly: t's agent, t's workspace, and the command's words.
func (s *Service) autoApproveRule(t *store.Turn, ap *ScreenApproval) (int, *AutoApproveRule) {
	if len(s.o.AutoApprove) == 0 || !ap.Approvable {
		return 0, nil
	}
	argv, ok := commandArgv(ap.Command)
	if !ok {
		return 0, nil
	}
	for i := range s.o.AutoApprove {
		r := &s.o.AutoApprove[i]
		if r.Agent == t.Agent && r.Workspace == t.Workspace && slices.Equal(r.Argv, argv) {
			return i + 1, r
		}
	}
	return 0, nil
}

// autoApprove answers an approval prompt that a rule matches exactly: it
// lets the prompt settle, checks that the pane still shows it, presses the
// approve key and records the use on the Turn (its event log and
// AutoApprovals), with no callback. It reports handled when it pressed
// the key or failed to record; otherwise the prompt is reported as usual.
func (m *monitor) autoApprove(ctx context.Context, t *store.Turn, ap *ScreenApproval, now time.Time) (handled bool, err error) {
	n, rule := m.s.autoApproveRule(t, ap)
	if rule == nil {
		return false, nil
	}
	select {
	case <-ctx.Done():
		return true, ctx.Err()
	case <-time.After(approvalSettle):
	}
	text, err := m.s.o.Terminals.Capture(ctx, m.pane)
	if err != nil {
		return false, nil
	}
	if shown := m.agent.Screen(text).Approval; shown == nil || shown.Fingerprint != ap.Fingerprint || !shown.Approvable {
		return false, nil // changed meanwhile: the next look reads it afresh
	}
	keys, _ := m.agent.Keys()
	if err := m.s.o.Terminals.SendKeys(ctx, m.pane, keys...); err != nil {
		return false, nil // not pressed: report the prompt instead
	}
	label := strconv.Itoa(n)
	if rule.Name != "" {
		label += " (" + rule.Name + ")"
	}
	at := time.Now().UnixMilli()
	use := store.AutoApproval{Rule: label, Argv: slices.Clone(rule.Argv), Fingerprint: ap.Fingerprint, At: at}
	t.AutoApprovals = append(t.AutoApprovals, use)
	t.Takeover.LastApprovalFingerprint, t.Takeover.ApprovalResolvedAt = ap.Fingerprint, at
	t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = at, "auto_approved"
	return true, m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
		event(at, "terminal_bridge_auto_approved", use)}})
}
