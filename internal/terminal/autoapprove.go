package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/termapi"
)

// AutoApproveRule lets the monitor answer an approval prompt itself: only
// a prompt of Agent, in a Turn whose workspace is exactly Workspace, to run
// exactly Argv (word by word, nothing more, nothing less).
type AutoApproveRule struct {
	// Name is an optional label shown where a use is recorded.
	Name string `json:"name,omitempty"`
	// Agent is the agent kind, "codex" or "claude". A Codex prompt is
	// matched on the command its prompt shows; a Claude Code prompt on the
	// exact input of the Bash call its transcript holds, which the dialog
	// on the screen must show too (agents.CommandReader).
	Agent string `json:"agent"`
	// Workspace is the absolute, clean workspace root the Turn must have.
	Workspace string `json:"workspace"`
	// Argv is the command, one word per element.
	Argv []string `json:"argv"`
}

// ruleFields are a rule's field names, spelled exactly.
var ruleFields = []string{"name", "agent", "workspace", "argv"}

// ruleExample is a good rules file, for the errors about its shape.
const ruleExample = `{"rules": [{"agent": "codex", "workspace": "/abs/root", "argv": ["make", "test"]}]}`

// ParseAutoApprove reads auto-approve rules from a JSON document
// {"rules": [{"agent": "codex", "workspace": "/abs/root", "argv":
// ["make", "test"]}, …]}. Anything but that shape is an error that names
// the line (and the rule) and says what to fix: invalid JSON, an unknown
// field or one spelled in another case, a field given twice, a rule
// without an agent, workspace or argv, an agent other than "codex" or
// "claude", a relative or unclean workspace, an empty word, or a word
// holding white space, a control character or a shell metacharacter. A
// rule that could never match exactly, or that reads two ways, is not
// accepted silently.
func ParseAutoApprove(data []byte) ([]AutoApproveRule, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	fail := func(off int64, format string, args ...any) error {
		return fmt.Errorf("%w: auto-approve rules, line %d: %s", termapi.ErrBadInput, lineAt(data, off), fmt.Sprintf(format, args...))
	}
	syntax := func(err error, off int64) error {
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			off = se.Offset
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			off = int64(len(data))
			err = errors.New("the document ends early")
		}
		return fail(off, "%v; write %s", err, ruleExample)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		if err != nil {
			return nil, syntax(err, 0)
		}
		return nil, fail(0, "the document is not a JSON object; write %s", ruleExample)
	}
	var rules []AutoApproveRule
	seen := false
	for dec.More() {
		at := valueStart(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err, at)
		}
		switch name, _ := tok.(string); {
		case name != "rules":
			return nil, fail(at, "unknown field %q; the document has only \"rules\"", name)
		case seen:
			return nil, fail(at, "\"rules\" is given twice; list every rule in one \"rules\" list")
		}
		seen = true
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			if err != nil {
				return nil, syntax(err, at)
			}
			return nil, fail(at, "\"rules\" is not a list; write %s", ruleExample)
		}
		for dec.More() {
			n, start := len(rules)+1, valueStart(data, dec.InputOffset())
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, syntax(err, start)
			}
			r, err := parseRule(raw)
			if err != nil {
				return nil, fail(start, "rule %d: %v", n, err)
			}
			rules = append(rules, r)
		}
		if _, err := dec.Token(); err != nil {
			return nil, syntax(err, dec.InputOffset())
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntax(err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(valueStart(data, dec.InputOffset()), "more than one JSON value; write one object with a \"rules\" list")
	}
	return rules, nil
}

// parseRule reads and checks one rule: its fields spelled exactly, each
// at most once, then the checks of ParseAutoApprove.
func parseRule(raw json.RawMessage) (AutoApproveRule, error) {
	var r AutoApproveRule
	names, err := objectNames(raw)
	if err != nil {
		return r, err
	}
	for _, name := range names {
		if !slices.Contains(ruleFields, name) {
			return r, fmt.Errorf("unknown field %q; a rule has only %s", name, strings.Join(ruleFields, ", "))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%v; name and agent and workspace are strings, argv a list of strings", err)
	}
	switch {
	case r.Agent != termapi.AgentCodex && r.Agent != termapi.AgentClaude:
		return r, fmt.Errorf("agent %q is unknown; use \"codex\" or \"claude\"", r.Agent)
	case r.Workspace == "" || !filepath.IsAbs(r.Workspace) || filepath.Clean(r.Workspace) != r.Workspace:
		return r, fmt.Errorf("workspace %q must be an absolute, clean path (the Turn's workspace must equal it)", r.Workspace)
	case len(r.Argv) == 0:
		return r, errors.New("argv is empty; list the command's words, e.g. [\"make\", \"test\"]")
	}
	for _, w := range r.Argv {
		if !plainWord(w) {
			return r, fmt.Errorf("argv word %q is empty or holds white space, a control character or a shell metacharacter; a command is matched word by word and such a command is never approved automatically", w)
		}
	}
	return r, nil
}

// objectNames lists the member names of the JSON object raw, in order; a
// name given twice is an error (decoders disagree on which one counts).
func objectNames(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("a rule is an object like %s", strings.TrimSuffix(strings.TrimPrefix(ruleExample, `{"rules": [`), `]}`))
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		if slices.Contains(names, name) {
			return nil, fmt.Errorf("field %q is given twice; give it once", name)
		}
		names = append(names, name)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// valueStart is the offset of the next value at or after off: past white
// space and the separators a decoder's offset may stop before.
func valueStart(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return 1 + bytes.Count(data[:off], []byte("\n"))
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

// commandArgv splits a command into its words; false when it is anything
// but plain words separated by single spaces (quotes, expansions,
// redirections, several lines, a redacted secret), which no rule can
// match exactly.
func commandArgv(cmd string) ([]string, bool) {
	words := strings.Split(cmd, " ")
	for _, w := range words {
		if !plainWord(w) {
			return nil, false
		}
	}
	return words, true
}

// hasRulesFor reports a rule for t's agent and workspace.
func (s *Service) hasRulesFor(t *store.Turn) bool {
	return slices.ContainsFunc(s.o.AutoApprove, func(r AutoApproveRule) bool { return r.Agent == t.Agent && r.Workspace == t.Workspace })
}

// autoApproveRule returns the rule (and its position, from 1) that lets
// t's agent run argv, if one matches exactly: t's agent, t's workspace,
// and the command's words.
func (s *Service) autoApproveRule(t *store.Turn, argv []string) (int, *AutoApproveRule) {
	for i := range s.o.AutoApprove {
		r := &s.o.AutoApprove[i]
		if r.Agent == t.Agent && r.Workspace == t.Workspace && slices.Equal(r.Argv, argv) {
			return i + 1, r
		}
	}
	return 0, nil
}

// Why a prompt that a rule of its Turn's agent and workspace might have
// answered went to a person.
const (
	declinedNotPlain = "the command is not plain words separated by single spaces"
	declinedNoRule   = "no rule's argv is exactly the command's words"
	declinedCwd      = "the agent made the call in a directory other than the Turn's workspace"
	declinedNoTurn   = "the agent's acceptance of the request is not recorded yet"
)

// evidenceWait bounds how long a prompt that a rule may answer waits for
// the session file to record its call before it goes to a person.
const evidenceWait = 10 * time.Second

// awaitEvidence holds back the report of prompt ap while the session file
// has not recorded its call and evidenceWait has not passed since the
// prompt was first seen waiting (the file's next write, or the re-check,
// brings the next look); after that the prompt goes to a person, declined
// for why.
func (m *monitor) awaitEvidence(ap *agents.ScreenApproval, why string) (handled bool, declined string, err error) {
	w := &m.evidenceWait
	if w.fingerprint != ap.Fingerprint {
		w.fingerprint, w.since = ap.Fingerprint, time.Now()
	}
	if time.Since(w.since) < evidenceWait {
		return true, "", nil
	}
	return false, why, nil
}

// autoApprovedEvent is the event of one auto-approval: the use as the Turn
// records it, and the session-file evidence it was matched on, if any.
type autoApprovedEvent struct {
	termapi.AutoApproval
	Agent         string `json:"agent"`
	Tool          string `json:"tool,omitempty"`
	RequestID     string `json:"request_id,omitempty"`
	CommandSHA256 string `json:"command_sha256,omitempty"`
	Evidence      string `json:"evidence_fingerprint,omitempty"`
}

// autoApprove answers an approval prompt that a rule matches exactly: it
// lets the prompt settle, checks that the pane still shows it, reads the
// exact command (from the prompt for Codex, from the session file for an
// agent that is an agents.CommandReader), presses the approve key and records the
// use on the Turn (its event log and AutoApprovals), with no callback. It
// reports handled when it pressed the key or failed to record; otherwise
// the prompt is reported as usual, and declined says why a Turn with rules
// for its agent and workspace was not answered by one.
func (m *monitor) autoApprove(ctx context.Context, t *store.Turn, ap *agents.ScreenApproval) (handled bool, declined string, err error) {
	if !ap.Approvable || !m.s.hasRulesFor(t) {
		return false, "", nil
	}
	reader, fromFile := m.agent.(agents.CommandReader)
	if !fromFile {
		// The prompt shows the command: no rule, no wait.
		argv, ok := commandArgv(ap.Command)
		if !ok {
			return false, declinedNotPlain, nil
		}
		if _, rule := m.s.autoApproveRule(t, argv); rule == nil {
			return false, declinedNoRule, nil
		}
	}
	sub := t.Takeover.Submission
	if fromFile && sub.NativeTurnID == "" {
		return m.awaitEvidence(ap, declinedNoTurn)
	}
	select {
	case <-ctx.Done():
		return true, "", ctx.Err()
	case <-time.After(approvalSettle):
	}
	text, err := m.s.o.Terminals.Capture(ctx, m.pane)
	if err != nil {
		return false, "", nil
	}
	shown := m.agent.Screen(text).Approval
	if shown == nil || shown.Fingerprint != ap.Fingerprint || !shown.Approvable {
		return false, "", nil // changed meanwhile: the next look reads it afresh
	}
	ev := autoApprovedEvent{Agent: t.Agent}
	command := shown.Command
	if fromFile {
		pc, err := reader.PendingCommand(ctx, m.pane, sub.Anchor, agents.Acceptance{NativeTurnID: sub.NativeTurnID, ThreadID: t.NativeThreadID, Evidence: sub.AcceptanceEvidence}, text)
		if errors.Is(err, agents.ErrEvidenceNotYet) {
			return m.awaitEvidence(ap, err.Error())
		}
		if err != nil {
			return false, err.Error(), nil
		}
		if pc.Cwd != t.Workspace {
			return false, declinedCwd, nil
		}
		command = pc.Command
		ev.Tool, ev.RequestID, ev.CommandSHA256, ev.Evidence = pc.Tool, pc.RequestID, pc.CommandSHA256, pc.Evidence
	}
	argv, ok := commandArgv(command)
	if !ok {
		return false, declinedNotPlain, nil
	}
	n, rule := m.s.autoApproveRule(t, argv)
	if rule == nil {
		return false, declinedNoRule, nil
	}
	keys, _ := m.agent.Keys()
	if err := m.s.o.Terminals.SendKeys(ctx, m.pane, keys...); err != nil {
		return false, "", nil // not pressed: report the prompt instead
	}
	label := strconv.Itoa(n)
	if rule.Name != "" {
		label += " (" + rule.Name + ")"
	}
	at := time.Now().UnixMilli()
	ev.AutoApproval = termapi.AutoApproval{Rule: label, Argv: slices.Clone(rule.Argv), Fingerprint: ap.Fingerprint, At: at}
	t.AutoApprovals = append(t.AutoApprovals, ev.AutoApproval)
	t.Takeover.LastApprovalFingerprint, t.Takeover.ApprovalResolvedAt = ap.Fingerprint, at
	t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = at, "auto_approved"
	return true, "", m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
		event(at, "terminal_bridge_auto_approved", ev)}})
}
