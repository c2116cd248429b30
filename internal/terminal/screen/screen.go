// Package screen is the vocabulary of a parsed terminal-agent pane: what the
// agent is doing (activity), the approval prompt or question it shows, and
// the draft in its composer. The per-agent parsers (packages codex and claude) produce a
// Screen from the text of `tmux capture-pane`; this package also holds the
// text clean-up they share.
package screen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Activity is what a pane's agent is doing, as its screen shows it.
type Activity string

// The activities (the terminal row's activity_state).
const (
	// Idle: the composer is shown, nothing runs, no dialog.
	Idle Activity = "idle"
	// Working: a turn runs (spinner, "esc to interrupt").
	Working Activity = "working"
	// AwaitingApproval: an approval prompt blocks the turn.
	AwaitingApproval Activity = "awaiting_approval"
	// AwaitingAnswer: the agent's own question dialog (Claude Code's
	// AskUserQuestion, Codex's request_user_input) blocks the turn.
	AwaitingAnswer Activity = "awaiting_answer"
	// Unknown: none of the above could be recognised for sure.
	Unknown Activity = "unknown"
)

// ApprovalKind says what an approval prompt asks for.
type ApprovalKind string

// The approval kinds.
const (
	RunCommand       ApprovalKind = "run_command"
	FileEdit         ApprovalKind = "file_edit"
	GrantPermissions ApprovalKind = "grant_permissions"
	OtherApproval    ApprovalKind = "other"
)

// Approval is an approval prompt seen on the screen.
type Approval struct {
	// Kind says what is asked.
	Kind ApprovalKind `json:"kind"`
	// Profile names the prompt grammar that matched
	// ("codex-approval-prompt-v1", "claude-bash-permission-prompt-v1").
	Profile string `json:"profile"`
	// Fingerprint is the lowercase hex SHA-256 of the prompt region (ANSI
	// stripped, CRLF as LF, trailing spaces trimmed): approve only when the
	// prompt shown still has this fingerprint.
	Fingerprint string `json:"fingerprint"`
	// Command is the command to run, redacted; Codex only (Claude approval
	// details never carry the raw command).
	Command string `json:"command,omitempty"`
	// Approvable reports that the prompt matched its grammar exactly, so
	// the one-time "yes" key may be sent; when false the prompt blocks the
	// turn but ClawConnect must not answer it.
	Approvable bool `json:"approvable"`
	// Reason says why an approval is not approvable ("" when it is).
	Reason string `json:"reason,omitempty"`
}

// Option is one numbered choice of a question dialog.
type Option struct {
	// Number is the digit that picks it.
	Number int `json:"number"`
	// Label is the choice as the dialog shows it.
	Label string `json:"label"`
	// Description is the line the dialog shows with it, if any.
	Description string `json:"description,omitempty"`
}

// Question is a question dialog seen on the screen: the agent asks the
// user to pick one of its options (or type an answer).
type Question struct {
	// Profile names the dialog grammar that matched
	// ("claude-ask-user-question-v1", "codex-request-user-input-v1").
	Profile string `json:"profile"`
	// Fingerprint is the lowercase hex SHA-256 of the dialog region, as for
	// an approval: answer only while the dialog shown has it.
	Fingerprint string `json:"fingerprint"`
	// Header is the dialog's short header ("Choice"), if any.
	Header string `json:"header,omitempty"`
	// Text is the question, its wrapped lines joined with spaces.
	Text string `json:"text"`
	// Options are the choices the agent offered, in order; the dialog's
	// own extra rows (Claude Code's "Type something." and "Chat about
	// this", Codex's "None of the above") are not among them.
	Options []Option `json:"options"`
	// FreeText is the number of the row that takes a typed answer (Claude
	// Code's "Type something."); 0 when a typed answer cannot be given
	// from here.
	FreeText int `json:"free_text,omitempty"`
	// FreeTextKeys are the keys that put the cursor into the free-text
	// row for typing, from the dialog as shown (Claude Code: the row's
	// digit; Codex: arrows to "None of the above", then Tab for its note).
	FreeTextKeys []string `json:"free_text_keys,omitempty"`
	// Typing reports that the free-text row has the cursor and takes
	// typed text.
	Typing bool `json:"typing,omitempty"`
	// Position, Count and Unanswered place the question in a dialog that
	// asks several in turn ("Question 1/2 (2 unanswered)"); zero when the
	// dialog's grammar has no such line.
	Position   int `json:"position,omitempty"`
	Count      int `json:"count,omitempty"`
	Unanswered int `json:"unanswered,omitempty"`
	// Selected is the number of the highlighted row (the cursor's).
	Selected int `json:"selected,omitempty"`
	// Answerable reports that the dialog matched its grammar exactly (one
	// question, single choice, numbered rows, its footer last), so its
	// digit keys may be pressed; when false the dialog blocks the turn but
	// ClawConnect must not answer it.
	Answerable bool `json:"answerable"`
	// Reason says why a question is not answerable ("" when it is).
	Reason string `json:"reason,omitempty"`
}

// Refuse makes q not answerable for reason, unless an earlier reason
// already did (the first deviation found is the one reported).
func (q *Question) Refuse(reason string) {
	if q.Reason == "" {
		q.Reason = reason
	}
}

// Screen is one parsed capture of a pane.
type Screen struct {
	// Activity is what the agent is doing.
	Activity Activity `json:"activity_state"`
	// Approval is set when Activity is AwaitingApproval.
	Approval *Approval `json:"approval,omitempty"`
	// Question is set when Activity is AwaitingAnswer.
	Question *Question `json:"question,omitempty"`
	// Draft is the text in the composer when the composer is shown and
	// holds typed text (not the placeholder); "" otherwise. Lines of a
	// multi-line draft are joined with "\n", trailing spaces trimmed.
	Draft string `json:"draft,omitempty"`
}

var ansiRE = lazyRE(`\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])`)

// Lines cleans captured pane text for parsing: ANSI escapes stripped, CRLF
// and CR as LF, trailing spaces of every line trimmed, trailing empty lines
// dropped.
func Lines(text string) []string {
	if strings.IndexByte(text, 0x1b) >= 0 {
		text = ansiRE().ReplaceAllString(text, "")
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\u00a0")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Fingerprint is the lowercase hex SHA-256 of lines joined with "\n".
func Fingerprint(lines []string) string {
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

// FingerprintUnmarked is Fingerprint of lines with the highlight marker of
// each numbered row (group 1 of mark) drawn as a blank: a fingerprint names
// a dialog, not where its cursor is, so moving the highlight does not make
// it another dialog (whether a highlighted row may be pressed is the
// parser's to say).
func FingerprintUnmarked(lines []string, mark *regexp.Regexp) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if m := mark.FindStringSubmatchIndex(l); m != nil {
			l = l[:m[2]] + " " + l[m[3]:]
		}
		out[i] = l
	}
	return Fingerprint(out)
}

// DraftShows reports whether a composer draft read from the screen shows
// payload: equal once all white space is removed, since a pane wraps long
// lines and a parser cannot tell a wrap from a newline; or the placeholder
// an agent draws for a large paste of exactly this payload: Codex 0.171's
// "[Pasted Content <characters> chars]", Claude Code 2.1.332's "[Pasted
// text #<n> +<newlines> lines]". An empty payload never shows.
func DraftShows(draft, payload string) bool {
	p := strings.Join(strings.Fields(payload), "")
	if p == "" {
		return false
	}
	if strings.Join(strings.Fields(draft), "") == p {
		return true
	}
	draft = strings.TrimSpace(draft)
	if draft == fmt.Sprintf("[Pasted Content %d chars]", utf8.RuneCountInString(payload)) {
		return true
	}
	var n, lines int
	if !strings.HasPrefix(draft, "[Pasted text #") || !strings.HasSuffix(draft, " lines]") || strings.Count(draft, "]") != 1 {
		return false
	}
	k, err := fmt.Sscanf(draft, "[Pasted text #%d +%d lines]", &n, &lines)
	return err == nil && k == 2 && lines == strings.Count(payload, "\n")
}

// lazyRE returns expr compiled once, at the first call: a package's
// expressions are not compiled when a process that never uses them starts.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
