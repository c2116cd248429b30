package codex

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/clawconnect/clawconnect/internal/terminal/redact"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// ApprovalProfile names the Codex approval prompt grammar.
const ApprovalProfile = "codex-approval-prompt-v1"

// approvalMarkers are the first lines of Codex's approval prompts.
var approvalMarkers = map[string]screen.ApprovalKind{
	"Would you like to run the following command?": screen.RunCommand,
	"Would you like to make the following edits?":  screen.FileEdit,
	"Would you like to grant these permissions?":   screen.GrantPermissions,
}

var (
	needsApproval = lazyRE(`^.+ needs your approval\.$`)
	optionRE      = lazyRE(`^\s*(?:[›»]\s*)?(\d+)\.\s+(.+?)\s+\(([^()\r\n]+)\)\s*$`)
	footerRE      = lazyRE(`^\s*Press enter to confirm or esc to cancel(?: or o to open thread)?\s*$`)
	afterPromptRE = lazyRE(`^\s*(?:✔ You approved|✗ You (?:denied|canceled)|• (?:Working|Ran|Explored|Edited|Read|Searched|Updated|Added|Deleted)\b|─* ?Worked for)`)
	workingRE     = lazyRE(`^\s*[•◦·]\s+Working\b`)
	backgroundRE  = lazyRE(`^\s*(?:• Waiting for background terminal|\d+ background terminals? running)`)
	turnEndRE     = lazyRE(`^\s*(?:─+\s*)?Worked for\b|^\s*■ `)
)

// Placeholders are composer placeholders of Codex 0.171. They are told
// from a typed draft by their dim rendering when the capture carries ANSI
// attributes (capture-pane -e), and by this list when it does not.
var Placeholders = []string{
	"Ask Codex to do anything", "Find and fix a bug in @filename", "Explain this codebase",
	"Summarize recent commits", "Implement {feature}", "Write tests for @filename",
	"Improve documentation in @filename", "Run /review on my current changes",
	"Use /skills to list available skills",
}

// ParseScreen reads a capture of a Codex pane (plain, or with ANSI
// attributes from capture-pane -e, which tells the dim placeholder from a
// draft for sure):
//   - an approval prompt (one of the "Would you like to …?" markers or
//     "… needs your approval.") makes it AwaitingApproval; the prompt is
//     approvable only when it is the only one, is not followed by activity
//     of an answered prompt, and its numbered options are exactly
//     "1. Yes… (y)" … "N. No…/Cancel…" with consecutive numbers, followed by
//     the "Press enter to confirm or esc to cancel" footer and nothing but
//     decoration; the fingerprint covers marker to footer; the command
//     after "$ " is redacted;
//   - a user-input dialog (see parseQuestion) makes it AwaitingAnswer;
//   - otherwise the composer ("› …" near the bottom, followed only by
//     indented footer lines) must be visible, or the screen is Unknown;
//   - it is Working when a "• Working (… esc to interrupt)" or background
//     terminal line shows, or when the last prompt in the history above
//     the composer has no "Worked for" / "■ …" line after it (Codex 0.171
//     shows no working line while a reply streams);
//   - else Idle. The composer's text, unless it is the placeholder, is the
//     Draft in both cases.
func ParseScreen(text string) screen.Screen {
	lines := screen.Lines(text)
	if ap := parseApproval(lines); ap != nil {
		return screen.Screen{Activity: screen.AwaitingApproval, Approval: ap}
	}
	if q := parseQuestion(lines); q != nil {
		return screen.Screen{Activity: screen.AwaitingAnswer, Question: q}
	}
	at, draft := composer(lines, rawLines(text))
	if at < 0 {
		return screen.Screen{Activity: screen.Unknown}
	}
	s := screen.Screen{Activity: screen.Idle, Draft: draft}
	lastPrompt, lastEnd := -1, -1
	for i, l := range lines[:at] {
		switch {
		case workingRE().MatchString(l) || backgroundRE().MatchString(l):
			if i >= at-30 {
				s.Activity = screen.Working
			}
		case turnEndRE().MatchString(l):
			lastEnd = i
		case strings.HasPrefix(l, "› ") || strings.HasPrefix(l, "» "):
			lastPrompt = i
		}
	}
	if lastPrompt > lastEnd {
		s.Activity = screen.Working
	}
	return s
}

// rawLines splits text into lines without cleaning, when it carries ANSI
// escapes; nil otherwise.
func rawLines(text string) []string {
	if !strings.Contains(text, "\x1b[") {
		return nil
	}
	return strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
}

// composer finds the composer: the last "›" line among the last lines
// whose draft (that line and the indented lines right under it, up to a
// blank line) is followed by at most four non-blank lines, all indented
// (the footer). It returns the line's index (-1 when there is none) and
// the draft, its lines joined with "\n".
func composer(lines, raw []string) (int, string) {
	for i := len(lines) - 1; i >= max(0, len(lines)-12); i-- {
		l := lines[i]
		if !strings.HasPrefix(l, "›") && !strings.HasPrefix(l, "»") {
			if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, " ") {
				return -1, ""
			}
			continue
		}
		draft := []string{strings.TrimSpace(strings.TrimLeft(l, "›»"))}
		j := i + 1
		for ; j < len(lines) && strings.HasPrefix(lines[j], "  ") && strings.TrimSpace(lines[j]) != ""; j++ {
			draft = append(draft, strings.TrimPrefix(lines[j], "  "))
		}
		footer := 0
		for _, f := range lines[j:] {
			if strings.TrimSpace(f) == "" {
				continue
			}
			if !strings.HasPrefix(f, " ") {
				return -1, ""
			}
			footer++
		}
		if footer > 4 {
			return -1, ""
		}
		text := strings.Join(draft, "\n")
		if raw != nil {
			if i < len(raw) && strings.Contains(raw[i], "\x1b[2m") {
				text = "" // the placeholder is drawn dim
			}
			return i, text
		}
		for _, p := range Placeholders {
			if text == p {
				return i, ""
			}
		}
		return i, text
	}
	return -1, ""
}

// parseApproval finds an approval prompt; nil when none is visible.
func parseApproval(lines []string) *screen.Approval {
	var markers []int
	kind := screen.OtherApproval
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if k, ok := approvalMarkers[t]; ok {
			markers = append(markers, i)
			kind = k
		} else if needsApproval().MatchString(t) {
			markers = append(markers, i)
			kind = screen.OtherApproval
		}
	}
	if len(markers) == 0 {
		return nil
	}
	start := markers[len(markers)-1]
	for _, l := range lines[start+1:] {
		if afterPromptRE().MatchString(l) {
			return nil // the prompt was answered; what remains is history
		}
	}
	ap := &screen.Approval{Kind: kind, Profile: ApprovalProfile}
	if len(markers) > 1 {
		ap.Reason = "more than one approval prompt is visible"
	}
	// Options and footer.
	end := len(lines)
	var opts []int
	firstOpt, footer := -1, -1
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if footerRE().MatchString(l) {
			footer = i
			break
		}
		if m := optionRE().FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			if firstOpt < 0 {
				firstOpt = i
			}
			opts = append(opts, n)
			label, key := strings.TrimSpace(m[2]), strings.TrimSpace(m[3])
			switch {
			case n == 1 && !(strings.HasPrefix(label, "Yes") && key == "y"):
				setReason(ap, "option 1 is not \"Yes … (y)\"")
			case n != len(opts):
				setReason(ap, "the options are not numbered 1, 2, …")
			}
			continue
		}
		if firstOpt >= 0 && strings.TrimSpace(l) != "" {
			// A line that is neither option nor footer after the options.
			end = i
			break
		}
	}
	if footer >= 0 {
		end = footer + 1
		for _, l := range lines[end:] {
			if !isDecoration(l) {
				setReason(ap, "text follows the approval prompt's footer")
				break
			}
		}
	}
	if len(opts) < 2 {
		setReason(ap, "fewer than two options")
	} else {
		m := optionRE().FindStringSubmatch(lastOption(lines, start, end))
		if m == nil || !(strings.HasPrefix(strings.TrimSpace(m[2]), "No") || strings.HasPrefix(strings.TrimSpace(m[2]), "Cancel")) || strings.TrimSpace(m[3]) == "y" {
			setReason(ap, "the last option is not \"No …\" or \"Cancel …\"")
		}
	}
	region := lines[start:end]
	ap.Fingerprint = screen.Fingerprint(region)
	if kind == screen.RunCommand {
		ap.Command = redact.Redact(command(lines[start+1 : end]))
	}
	ap.Approvable = ap.Reason == ""
	return ap
}

func setReason(ap *screen.Approval, reason string) {
	if ap.Reason == "" {
		ap.Reason = reason
	}
}

func lastOption(lines []string, start, end int) string {
	for i := end - 1; i > start; i-- {
		if optionRE().MatchString(lines[i]) {
			return lines[i]
		}
	}
	return ""
}

// command is the text after "$ " up to a blank line, an option or the
// footer.
func command(lines []string) string {
	var out []string
	in := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if !in {
			if c, ok := strings.CutPrefix(t, "$ "); ok {
				out, in = append(out, c), true
			}
			continue
		}
		if t == "" || optionRE().MatchString(l) || footerRE().MatchString(l) {
			break
		}
		out = append(out, t)
	}
	return strings.Join(out, "\n")
}

// isDecoration reports a line of box drawing, blanks or a status footer.
func isDecoration(l string) bool {
	t := strings.TrimSpace(l)
	if t == "" {
		return true
	}
	for _, r := range t {
		if !strings.ContainsRune("─━│┃┌┐└┘├┤┬┴┼╭╮╯╰▔▁ ", r) {
			return false
		}
	}
	return true
}

// Keys of the Codex 0.171 TUI, as tmux send-keys names.
const (
	// ApproveKey answers an approvable prompt with its option 1 ("Yes,
	// proceed (y)"), once.
	ApproveKey = "y"
	// InterruptKey stops a running turn (the rollout gets a turn_aborted
	// with reason "interrupted") and denies a shown approval prompt; on an
	// idle composer it does nothing. Never use C-c: a single C-c on an idle
	// composer exits Codex, so a C-c that arrives just after the turn ended
	// kills the agent.
	InterruptKey = "Escape"
)

// lazyRE returns expr compiled once, at the first call: a package's
// expressions are not compiled when a process that never uses them starts.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
