package claude

import (
	"strconv"
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// QuestionProfile names the grammar of Claude Code's question dialog (the
// AskUserQuestion tool).
const QuestionProfile = "claude-ask-user-question-v1"

// The rows Claude Code 2.1.332 adds under the agent's own options.
const (
	typeSomethingRow = "Type something."
	chatAboutThisRow = "Chat about this"
)

var (
	questionFooterRE = lazyRE(`^\s*Enter to select · .*Esc to cancel\s*$`)
	questionHeaderRE = lazyRE(`^\s*☐ (\S.*)$`)
)

// parseQuestion finds the AskUserQuestion dialog of Claude Code 2.1.332;
// nil when none is visible. Its grammar: the footer "Enter to select · …
// · Esc to cancel" is the last line; above it, one "☐ <header>" line
// under a rule, the question's lines, then rows "1. <label>" (each
// optionally followed by an indented description line) numbered from 1
// with no gaps, "Type something." and, below a rule, "Chat about this"
// last; exactly one row highlighted with "❯". A dialog of several
// questions (a tab row of headers), a multiple-choice one (checkbox rows)
// or any other line in it makes the question not answerable.
func parseQuestion(lines []string) *screen.Question {
	last := len(lines) - 1
	for last >= 0 && strings.TrimSpace(lines[last]) == "" {
		last--
	}
	if last < 0 || !questionFooterRE().MatchString(lines[last]) {
		return nil
	}
	q := &screen.Question{Profile: QuestionProfile}
	header := -1
	for i := last - 1; i >= max(0, last-40); i-- {
		if m := questionHeaderRE().FindStringSubmatch(lines[i]); m != nil {
			header, q.Header = i, strings.TrimSpace(m[1])
			break
		}
	}
	if header < 0 {
		// Some other select menu of Claude Code: not a question.
		return nil
	}
	if strings.ContainsAny(q.Header, "☐☒✔←→") {
		q.Refuse("the dialog asks more than one question")
	}
	start := header
	if start > 0 && ruleRE().MatchString(lines[start-1]) {
		start--
	}
	var text []string
	n, highlighted, chat := 0, 0, 0
	for _, l := range lines[header+1 : last] {
		t := strings.TrimSpace(l)
		o := optionRE().FindStringSubmatch(l)
		switch {
		case t == "" || ruleRE().MatchString(l):
		case o != nil:
			if o[2] != strconv.Itoa(n+1) {
				q.Refuse("the rows are not numbered 1., 2., … without gaps")
			}
			n++
			if o[1] != "" {
				highlighted++
				q.Selected = n
			}
			label := o[3]
			switch {
			case chat > 0:
				q.Refuse("a row follows \"Chat about this\"")
			case label == chatAboutThisRow:
				chat = n
			case label == typeSomethingRow:
				q.FreeText = n
			case q.FreeText > 0:
				q.Refuse("an option follows \"Type something.\"")
			case strings.HasPrefix(label, "[ ]") || strings.HasPrefix(label, "[✔]") || strings.HasPrefix(label, "[x]"):
				q.Refuse("the question takes several choices")
				q.Options = append(q.Options, screen.Option{Number: n, Label: label})
			default:
				q.Options = append(q.Options, screen.Option{Number: n, Label: label})
			}
		case n == 0:
			text = append(text, t)
		case len(q.Options) > 0 && q.Options[len(q.Options)-1].Number == n && q.Options[len(q.Options)-1].Description == "":
			q.Options[len(q.Options)-1].Description = t
		default:
			q.Refuse("a line in the dialog is neither an option nor its description")
		}
	}
	q.Text = strings.Join(text, " ")
	switch {
	case q.Text == "":
		q.Refuse("no question text under the header")
	case len(q.Options) < 2:
		q.Refuse("fewer than two options")
	case q.FreeText == 0 || chat == 0:
		q.Refuse("the \"Type something.\" and \"Chat about this\" rows are missing")
	case highlighted != 1:
		q.Refuse("not exactly one row is highlighted")
	}
	// The fingerprint leaves the highlight out: moving it with the arrow
	// keys is the same question, which a respond may still answer.
	q.Fingerprint = screen.FingerprintUnmarked(lines[start:last+1], rowMarkRE())
	q.Answerable = q.Reason == ""
	if q.FreeText > 0 {
		q.FreeTextKeys = []string{strconv.Itoa(q.FreeText)}
		q.Typing = q.Selected == q.FreeText
	}
	return q
}
