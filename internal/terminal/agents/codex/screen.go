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
	// footerStartRE is the footer as a narrow pane cuts it.
	footerStartRE = lazyRE(`^\s*Press enter to confirm\b`)
	firstOptionRE = lazyRE(`^\s*(?:[›»]\s*)?1\.\s+\S`)
	// elidedRE is the line Codex draws for details it leaves out.
	elidedRE = lazyRE(`^\[…\s*\d+ lines?\]`)
	// rowMarkRE is a numbered row with the highlight marker (group 1).
	rowMarkRE     = lazyRE(`^\s*([›»])\s*\d+\.\s`)
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
//   - an approval prompt makes it AwaitingApproval: one of the "Would you
//     like to …?" markers or "… needs your approval.", with a block of
//     options starting at "1." and the "Press enter to confirm" footer
//     under it, no composer below and no activity of an answered prompt
//     (a reply that quotes a title is not a prompt; a title with only part
//     of the rest blocks, not approvable; a title alone is Unknown). It is
//     approvable only when it is the only one, its options are exactly
//     "1. Yes… (y)" … "N. No…/Cancel…" numbered without gaps, the footer
//     is whole and only decoration follows it, and, asking to run a
//     command, the command reads exactly (see command); the fingerprint
//     covers marker to footer, the highlight aside; the command is
//     redacted;
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
	ap, drawn := parseApproval(lines)
	if ap != nil {
		return screen.Screen{Activity: screen.AwaitingApproval, Approval: ap}
	}
	if q := parseQuestion(lines); q != nil {
		return screen.Screen{Activity: screen.AwaitingAnswer, Question: q}
	}
	if drawn {
		// A prompt's title with no composer under it, but not the rest of
		// the prompt: a frame half drawn, or a shape not known.
		return screen.Screen{Activity: screen.Unknown}
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
			if !strings.HasPrefix(f, " ") || footerStartRE().MatchString(f) {
				// Not the composer's footer; under the approval prompt's,
				// its highlighted option.
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

// parseApproval finds an approval prompt; nil when none is visible. The
// prompt is Codex's bottom pane in place of the composer: its title, the
// title's details, a block of numbered options and the footer. A title
// with the composer under it is text (a reply quoting it), not a prompt.
// drawn reports a title without the composer under it: with options or
// the footer under it, but not both as the prompt draws them, it is a
// prompt not approvable; with neither, no prompt is read (nil).
func parseApproval(lines []string) (ap *screen.Approval, drawn bool) {
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
		return nil, false
	}
	start := markers[len(markers)-1]
	footer, option := -1, false
	for i := start + 1; i < len(lines); i++ {
		if afterPromptRE().MatchString(lines[i]) {
			return nil, false // the prompt was answered; what remains is history
		}
		if footer < 0 && footerStartRE().MatchString(lines[i]) {
			footer = i
		}
		option = option || firstOptionRE().MatchString(lines[i])
	}
	if at, _ := composer(lines, nil); at > start && !rowMarkRE().MatchString(lines[at]) {
		// A composer under it (not the prompt's highlighted option, which
		// reads like one while the footer is not drawn yet): the title is
		// history or quoted text.
		return nil, false
	}
	if footer < 0 && !option {
		return nil, true // the title alone: nothing says it is a prompt
	}
	ap = &screen.Approval{Kind: kind, Profile: ApprovalProfile}
	// The options: the block of non-blank lines right above the footer,
	// the first of them option 1.
	optEnd := footer
	for optEnd > start+1 && strings.TrimSpace(lines[optEnd-1]) == "" {
		optEnd--
	}
	optStart := optEnd
	for optStart > start+1 && strings.TrimSpace(lines[optStart-1]) != "" {
		optStart--
	}
	if footer < 0 || optStart == optEnd || !firstOptionRE().MatchString(lines[optStart]) {
		// Part of a prompt under its title, not its whole structure (a
		// frame half drawn, a shape not known): it blocks, unanswered,
		// and names no command.
		ap.Reason = "the prompt is not drawn whole: no block of options right above its footer"
		ap.Fingerprint = screen.FingerprintUnmarked(lines[start:], rowMarkRE())
		return ap, true
	}
	if len(markers) > 1 {
		ap.Reason = "more than one approval prompt is visible"
	}
	var last []string
	for i, l := range lines[optStart:optEnd] {
		m := optionRE().FindStringSubmatch(l)
		if m == nil {
			setReason(ap, "a line among the options is not an option")
			continue
		}
		n, _ := strconv.Atoi(m[1])
		label, key := strings.TrimSpace(m[2]), strings.TrimSpace(m[3])
		switch {
		case n != i+1:
			setReason(ap, "the options are not numbered 1, 2, …")
		case n == 1 && !(strings.HasPrefix(label, "Yes") && key == "y"):
			setReason(ap, "option 1 is not \"Yes … (y)\"")
		}
		last = m
	}
	switch {
	case optEnd-optStart < 2:
		setReason(ap, "fewer than two options")
	case last == nil || !(strings.HasPrefix(strings.TrimSpace(last[2]), "No") || strings.HasPrefix(strings.TrimSpace(last[2]), "Cancel")) || strings.TrimSpace(last[3]) == "y":
		setReason(ap, "the last option is not \"No …\" or \"Cancel …\"")
	}
	if !footerRE().MatchString(lines[footer]) {
		setReason(ap, "the footer is not \"Press enter to confirm or esc to cancel\"")
	}
	for _, l := range lines[footer+1:] {
		if !isDecoration(l) {
			setReason(ap, "text follows the approval prompt's footer")
			break
		}
	}
	ap.Fingerprint = screen.FingerprintUnmarked(lines[start:footer+1], rowMarkRE())
	if kind == screen.RunCommand {
		cmd, why := command(lines[start], lines[start+1:optStart])
		if why != "" {
			// What was read may be a part of the command, or not the
			// command at all: show none, and answer none.
			setReason(ap, "the command cannot be read exactly: "+why)
		}
		ap.Command = redact.Redact(cmd)
	}
	ap.Approvable = ap.Reason == ""
	return ap, true
}

func setReason(ap *screen.Approval, reason string) {
	if ap.Reason == "" {
		ap.Reason = reason
	}
}

// command reads the command of a "run the following command?" prompt from
// its details, the lines between its title and its options. Codex draws
// them as paragraphs: "Environment: …" and "Reason: …" (wrapped, and
// written by the model, so any text), then "$ " and the command, the
// last of them, up to the options (its own blank lines included). It
// returns "" and why when the details are not exactly that: no "$ " line
// or more than one (the reason can hold one), text above it that is not
// one of those paragraphs, a "$ " line that continues a paragraph, or a
// command Codex shortened ("[… N lines]").
func command(title string, details []string) (string, string) {
	indent := title[:len(title)-len(strings.TrimLeft(title, " "))]
	at := -1
	for i, l := range details {
		t := strings.TrimSpace(l)
		if elidedRE().MatchString(t) {
			return "", "the prompt shortens its details"
		}
		if t == "$" || strings.HasPrefix(t, "$ ") {
			if at >= 0 {
				return "", "more than one line starts with \"$ \""
			}
			at = i
		}
	}
	if at < 0 {
		return "", "no line starts with \"$ \""
	}
	para := ""
	for _, l := range details[:at] {
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			para = ""
		case para == "" && (strings.HasPrefix(t, "Environment: ") || strings.HasPrefix(t, "Reason: ")):
			para = t[:strings.IndexByte(t, ':')]
		case para == "Reason":
			// The reason's next wrapped line.
		default:
			return "", "a line above the command is neither its environment nor its reason"
		}
	}
	if para != "" {
		return "", "the \"$ \" line continues the " + strings.ToLower(para) + " above it"
	}
	block := details[at:]
	for len(block) > 0 && strings.TrimSpace(block[len(block)-1]) == "" {
		block = block[:len(block)-1]
	}
	out := make([]string, len(block))
	for i, l := range block {
		if i == 0 {
			l = strings.TrimPrefix(strings.TrimSpace(l), "$")
			out[i] = strings.TrimPrefix(l, " ")
			continue
		}
		if !strings.HasPrefix(l, indent) && strings.TrimSpace(l) != "" {
			return "", "a line of the command is not indented as the prompt"
		}
		out[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(out, "\n"), ""
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
