package claude

import (
	"regexp"
	"strings"
	"sync"

	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// ApprovalProfile names the Claude Code Bash permission dialog grammar.
const ApprovalProfile = "claude-bash-permission-prompt-v1"

// The screen grammar is compiled at its first use, not at start: every
// clawconnect command links this package, and an mcp process serving task
// tools never parses a pane.
var (
	promptLineRE = lazyRE(`^\s*❯(?:[\s\x{00a0}]+(.*))?$`)
	spinnerRE    = lazyRE(`^\s*[✻✽✢✣✤✥✦✧✶✳·*]\s+\S[^…]*(?:…|\.\.\.)(?:\s*\(.*\))?\s*$`)
	optionRE     = lazyRE(`^\s*(❯\s*)?(\d+)\.\s+(.+?)\s*$`)
	footerRE     = lazyRE(`^\s*Esc to cancel(?: · Tab to amend(?: · ctrl\+e to explain)?)?\s*$`)
	// footerStartRE is the dialog's footer in any of its variants.
	footerStartRE = lazyRE(`^\s*Esc to cancel\b`)
	// rowMarkRE is a numbered row with the highlight marker (group 1).
	rowMarkRE = lazyRE(`^\s*(❯)\s*\d+\.\s`)
	ruleRE    = lazyRE(`^\s*[─━╌]{3,}\s*$`)
	dashedRE  = lazyRE(`^\s*╌{3,}\s*$`)
	turnEndRE = lazyRE(`^\s*(?:[✻✽✢✣✤✥✦✧✶✳]\s+\S.* for \S+ · done\b|⎿\s+Interrupted\b|● API Error\b)`)
)

// lazyRE returns expr compiled once, at the first call.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// ParseScreen reads a capture of a Claude Code pane (ANSI escapes allowed),
// looking at its last 48 lines:
//   - a "Do you want to proceed?" line makes it AwaitingApproval when the
//     dialog is under it (option 1 right below, or the "Esc to cancel"
//     footer after it) and the composer is not (a reply saying it is no
//     dialog); the dialog
//     is approvable only as the exact Bash permission grammar of 2.1.332:
//     one "Bash command" header within 16 lines above with detail lines,
//     the question in the last 12 lines, options "1. Yes", "2. …", …,
//     "N. No" (three or more) with only blank lines between them, option 1
//     the one highlighted, the "Esc to cancel" footer and nothing but
//     decoration after it. The approval carries the fingerprint of the
//     dialog (from the rule above the header to the footer, the highlight
//     aside) and its kind, never the command;
//   - a question dialog (see parseQuestion) makes it AwaitingAnswer;
//   - otherwise the composer ("❯" right under a "────" rule) must be
//     visible, or the screen is Unknown (a spinner alone still means
//     Working);
//   - it is Working when the footer under the composer says "esc to
//     interrupt", or a spinner line ("· Nebulizing…", "✶ Simmering… (2s ·
//     ↓ 4 tokens)") follows the last prompt of the history with no
//     "… for Ns · done", "⎿ Interrupted" or "● API Error" line after it;
//   - else Idle. The composer's text is the Draft in both cases.
func ParseScreen(text string) screen.Screen {
	lines := screen.Lines(text)
	if len(lines) > 48 {
		lines = lines[len(lines)-48:]
	}
	if ap := parseApproval(lines); ap != nil {
		return screen.Screen{Activity: screen.AwaitingApproval, Approval: ap}
	}
	if q := parseQuestion(lines); q != nil {
		return screen.Screen{Activity: screen.AwaitingAnswer, Question: q}
	}
	c := -1
	for i := len(lines) - 1; i >= 1; i-- {
		if promptLineRE().MatchString(lines[i]) && ruleRE().MatchString(lines[i-1]) {
			c = i
			break
		}
	}
	lastSpin, lastPrompt, lastEnd := -1, -1, -1
	limit := len(lines)
	if c >= 0 {
		limit = c - 1
	}
	for i, l := range lines[:limit] {
		switch {
		case spinnerRE().MatchString(l):
			lastSpin = i
		case turnEndRE().MatchString(l):
			lastEnd = i
		case promptLineRE().MatchString(l):
			lastPrompt = i
		}
	}
	spinning := lastSpin > lastPrompt && lastSpin > lastEnd
	if c < 0 {
		if spinning {
			return screen.Screen{Activity: screen.Working}
		}
		return screen.Screen{Activity: screen.Unknown}
	}
	s := screen.Screen{Activity: screen.Idle}
	// The draft: the composer line and its continuation lines up to the
	// rule under it.
	var draft []string
	end := c + 1
	if m := promptLineRE().FindStringSubmatch(lines[c]); m != nil && strings.TrimSpace(m[1]) != "" {
		draft = append(draft, strings.TrimSpace(m[1]))
	}
	for ; end < len(lines) && !ruleRE().MatchString(lines[end]); end++ {
		if t := strings.TrimSpace(lines[end]); t != "" {
			draft = append(draft, t)
		}
	}
	s.Draft = strings.Join(draft, "\n")
	for _, l := range lines[min(end, len(lines)):] {
		if strings.Contains(l, "esc to interrupt") {
			spinning = true
		}
	}
	if spinning {
		s.Activity = screen.Working
	}
	return s
}

// parseApproval finds the permission dialog; nil when none is visible.
func parseApproval(lines []string) *screen.Approval {
	var markers []int
	for i, l := range lines {
		if strings.TrimSpace(l) == "Do you want to proceed?" {
			markers = append(markers, i)
		}
	}
	if len(markers) == 0 {
		return nil
	}
	m := markers[len(markers)-1]
	if !dialogUnder(lines, m) {
		return nil
	}
	ap := &screen.Approval{Kind: screen.OtherApproval, Profile: ApprovalProfile}
	if len(markers) > 1 {
		setReason(ap, "more than one \"Do you want to proceed?\" is visible")
	}
	if m < len(lines)-12 {
		setReason(ap, "the dialog is not at the bottom of the screen")
	}
	header := -1
	for i := m - 1; i >= max(0, m-16); i-- {
		if strings.TrimSpace(lines[i]) == "Bash command" {
			if header >= 0 {
				setReason(ap, "more than one \"Bash command\" header")
			}
			header = i
		}
	}
	start := m
	if header < 0 {
		setReason(ap, "no \"Bash command\" header above the question")
	} else {
		start = header
		ap.Kind = screen.RunCommand
		detail := false
		for _, l := range lines[header+1 : m] {
			if strings.TrimSpace(l) != "" {
				detail = true
			}
		}
		if !detail {
			setReason(ap, "the Bash command header has no detail lines")
		}
	}
	// Rounded/ruled box top above the header belongs to the region.
	if start > 0 && ruleRE().MatchString(lines[start-1]) {
		start--
	}
	n, highlighted, end := 0, 0, len(lines)
	lastLabel := ""
	footer := -1
	for i := m + 1; i < len(lines); i++ {
		l := lines[i]
		if footerRE().MatchString(l) {
			footer = i
			break
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		o := optionRE().FindStringSubmatch(l)
		if o == nil || o[2] != itoa(n+1) {
			setReason(ap, "the options are not 1., 2., … with blank lines only between them")
			end = i
			break
		}
		n++
		lastLabel = o[3]
		if o[1] != "" {
			highlighted++
			if n != 1 {
				setReason(ap, "an option other than 1. Yes is highlighted")
			}
		}
		if n == 1 && o[3] != "Yes" {
			setReason(ap, "option 1 is not \"Yes\"")
		}
	}
	switch {
	case n < 3:
		setReason(ap, "fewer than three options")
	case !strings.HasPrefix(lastLabel, "No"):
		setReason(ap, "the last option is not \"No\"")
	}
	if highlighted != 1 {
		setReason(ap, "not exactly one option is highlighted")
	}
	if footer < 0 {
		setReason(ap, "no \"Esc to cancel\" footer")
	} else {
		end = footer + 1
		for _, l := range lines[end:] {
			if t := strings.TrimSpace(l); t != "" && !ruleRE().MatchString(l) {
				setReason(ap, "text follows the dialog's footer")
				break
			}
		}
	}
	ap.Fingerprint = screen.FingerprintUnmarked(lines[start:end], rowMarkRE())
	ap.Approvable = ap.Reason == ""
	return ap
}

// dialogUnder reports that the "Do you want to proceed?" line m heads a
// dialog: option 1 is the next line drawn, or the footer follows, and the
// composer is not below it (in a reply, the line is text).
func dialogUnder(lines []string, m int) bool {
	for i := m + 1; i < len(lines); i++ {
		if promptLineRE().MatchString(lines[i]) && ruleRE().MatchString(lines[i-1]) {
			return false
		}
	}
	for i := m + 1; i < len(lines); i++ {
		if o := optionRE().FindStringSubmatch(lines[i]); o != nil && o[2] == "1" {
			return true
		}
		if strings.TrimSpace(lines[i]) != "" {
			break
		}
	}
	for _, l := range lines[m+1:] {
		if footerStartRE().MatchString(l) {
			return true
		}
	}
	return false
}

// DialogCommand returns the command an approvable Bash permission dialog
// on the screen shows: the lines between the two dashed rules under its
// "Bash command" header, trimmed and joined by single spaces (a command
// the dialog wraps at a space reads back whole). ok is false when no
// approvable dialog is visible or its command box is not exactly one box
// of text: what the screen shows cannot then be compared with anything.
// The text is what the screen shows, never proof of what will run; the
// transcript's tool call is (PendingApproval).
func DialogCommand(text string) (cmd string, ok bool) {
	lines := screen.Lines(text)
	if len(lines) > 48 {
		lines = lines[len(lines)-48:]
	}
	if ap := parseApproval(lines); ap == nil || !ap.Approvable {
		return "", false
	}
	header, marker := -1, -1
	for i := len(lines) - 1; i >= 0; i-- {
		switch t := strings.TrimSpace(lines[i]); {
		case marker < 0 && t == "Do you want to proceed?":
			marker = i
		case marker >= 0 && t == "Bash command":
			header = i
		}
		if header >= 0 {
			break
		}
	}
	var rules []int
	for i := header + 1; i < marker; i++ {
		if dashedRE().MatchString(lines[i]) {
			rules = append(rules, i)
		}
	}
	if len(rules) != 2 || rules[1] == rules[0]+1 {
		return "", false
	}
	var words []string
	for _, l := range lines[rules[0]+1 : rules[1]] {
		t := strings.TrimSpace(l)
		if t == "" {
			return "", false
		}
		words = append(words, t)
	}
	return strings.Join(words, " "), true
}

func setReason(ap *screen.Approval, reason string) {
	if ap.Reason == "" {
		ap.Reason = reason
	}
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// Keys of the Claude Code 2.1.332 TUI, as tmux send-keys names.
const (
	// ApproveKey answers an approvable Bash dialog with its highlighted
	// option 1 ("Yes"), once.
	ApproveKey = "Enter"
	// InterruptKey stops a running turn (the transcript gets a "[Request
	// interrupted by user]" record) and rejects a shown dialog.
	InterruptKey = "Escape"
)
