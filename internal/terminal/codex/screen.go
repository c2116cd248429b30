package codex

import (
	"regexp"
	"strconv"
	"strings"

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
	needsApproval = regexp.MustCompile(`^.+ needs your approval\.$`)
	optionRE      = regexp.MustCompile(`^\s*(?:[›»]\s*)?(\d+)\.\s+(.+?)\s+\(([^()\r\n]+)\)\s*$`)
	footerRE      = regexp.MustCompile(`^\s*Press enter to confirm or esc to cancel(?: or o to open thread)?\s*$`)
	afterPromptRE = regexp.MustCompile(`^\s*(?:✔ You approved|• (?:Working|Ran|Explored|Edited|Running|Read|Searched|Updated|Added|Deleted)\b|─+ Worked for)`)
	composerRE    = regexp.MustCompile(`^[›»](?:\s(.*))?$`)
	footerLineRE  = regexp.MustCompile(`^\s*(?:gpt-[\w.-]+(?:\s|$)|[-\w.]+ default ·|[-\w.]+ (?:low|medium|high|xhigh|minimal) ·)`)
	workingRE     = regexp.MustCompile(`^\s*[•◦·◦]\s+Working\b.*(?:esc to interrupt|$)`)
	backgroundRE  = regexp.MustCompile(`^\s*(?:• Waiting for background terminal|\d+ background terminals? running)`)
)

// Placeholders are the composer placeholders Codex shows when the composer
// is empty; a composer line holding exactly one of them is no draft.
var Placeholders = []string{
	"Ask Codex to do anything",
}

// ParseScreen reads a capture of a Codex pane (ANSI escapes allowed):
//   - an approval prompt (one of the "Would you like to …?" markers or
//     "… needs your approval.") makes it AwaitingApproval; the prompt is
//     approvable only when it is the only one, is not followed by activity
//     of an approved command, and its numbered options are exactly
//     "1. Yes… (y)" … "N. No…/Cancel…" with consecutive numbers, optionally
//     followed by the "Press enter to confirm or esc to cancel" footer and
//     nothing but decoration; the fingerprint covers marker to footer;
//   - "Working (… esc to interrupt)" or background-terminal lines in the
//     last 30 lines make it Working;
//   - a composer line ("› …") in the last 6 lines, followed only by footer
//     lines, makes it Idle, and its text (unless a placeholder) is the
//     Draft;
//   - anything else is Unknown.
func ParseScreen(text string) screen.Screen {
	lines := screen.Lines(text)
	if ap := parseApproval(lines); ap != nil {
		return screen.Screen{Activity: screen.AwaitingApproval, Approval: ap}
	}
	for i := max(0, len(lines)-30); i < len(lines); i++ {
		if workingRE.MatchString(lines[i]) || backgroundRE.MatchString(lines[i]) {
			s := screen.Screen{Activity: screen.Working}
			s.Draft, _ = composer(lines)
			return s
		}
	}
	if draft, ok := composer(lines); ok {
		return screen.Screen{Activity: screen.Idle, Draft: draft}
	}
	return screen.Screen{Activity: screen.Unknown}
}

// composer finds the composer in the last lines: a "›" line followed only
// by footer or blank lines. Its text, and any continuation lines of a
// multi-line draft, is the draft.
func composer(lines []string) (string, bool) {
	start := max(0, len(lines)-6)
	for i := len(lines) - 1; i >= start; i-- {
		m := composerRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) != "" && !footerLineRE.MatchString(l) {
				return "", false
			}
		}
		draft := strings.TrimSpace(m[1])
		for _, p := range Placeholders {
			if draft == p {
				return "", true
			}
		}
		return draft, true
	}
	return "", false
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
		} else if needsApproval.MatchString(t) {
			markers = append(markers, i)
			kind = screen.OtherApproval
		}
	}
	if len(markers) == 0 {
		return nil
	}
	start := markers[len(markers)-1]
	for _, l := range lines[start+1:] {
		if afterPromptRE.MatchString(l) {
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
		if footerRE.MatchString(l) {
			footer = i
			break
		}
		if m := optionRE.FindStringSubmatch(l); m != nil {
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
		m := optionRE.FindStringSubmatch(lastOption(lines, start, end))
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
		if optionRE.MatchString(lines[i]) {
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
		if t == "" || optionRE.MatchString(l) || footerRE.MatchString(l) {
			break
		}
		out = append(out, t)
	}
	return strings.Join(out, "\n")
}

// isDecoration reports a line of box drawing, blanks or a status footer.
func isDecoration(l string) bool {
	t := strings.TrimSpace(l)
	if t == "" || footerLineRE.MatchString(l) {
		return true
	}
	for _, r := range t {
		if !strings.ContainsRune("─━│┃┌┐└┘├┤┬┴┼╭╮╯╰▔▁ ", r) {
			return false
		}
	}
	return true
}
