package codex

import (
	"strconv"
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// QuestionProfile names the grammar of Codex's user-input dialog (the
// request_user_input tool).
const QuestionProfile = "codex-request-user-input-v1"

// QuestionFeature is the Codex 0.171.0 feature that offers the
// request_user_input tool outside Plan mode (`--enable
// default_mode_request_user_input`, or `[features]
// default_mode_request_user_input = true` in config.toml). Without it the
// tool answers the model "request_user_input is unavailable in Default
// mode" and the TUI shows no dialog, so only a pane in Plan mode asks.
const QuestionFeature = "default_mode_request_user_input"

// noneOfTheAbove is the row Codex 0.171.0 adds under the agent's options;
// its answer is a note typed after Tab, which this grammar does not give.
const noneOfTheAbove = "None of the above"

var (
	questionFooterRE = lazyRE(`^\s*tab to add notes \| enter to submit answer \| esc to interrupt\s*$`)
	questionHeaderRE = lazyRE(`^\s*Question (\d+)/(\d+) \((\d+) unanswered\)\s*$`)
	questionRowRE    = lazyRE(`^\s*([›»]\s*)?(\d+)\.\s+(.+?)(?:\s{2,}(\S.*?))?\s*$`)
)

// parseQuestion finds the request_user_input dialog of Codex 0.171.0; nil
// when none is visible. Its grammar: the footer "tab to add notes | enter
// to submit answer | esc to interrupt" is the last line; above it
// "Question 1/1 (1 unanswered)", the question's lines, then rows
// "1. <label>  <description>" numbered from 1 without gaps, "None of the
// above" last, exactly one highlighted with "›". Several questions
// ("Question 1/2") or any other line make it not answerable.
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
			header = i
			if m[2] != "1" {
				q.Refuse("the dialog asks more than one question")
			}
			break
		}
	}
	if header < 0 {
		q.Refuse("no \"Question 1/1\" line above the rows")
		header = last - 1
	}
	var text []string
	n, highlighted, other := 0, 0, 0
	for _, l := range lines[header+1 : last] {
		t := strings.TrimSpace(l)
		o := questionRowRE().FindStringSubmatch(l)
		switch {
		case t == "":
		case o != nil:
			if o[2] != strconv.Itoa(n+1) {
				q.Refuse("the rows are not numbered 1., 2., … without gaps")
			}
			n++
			if o[1] != "" {
				highlighted++
				q.Selected = n
			}
			switch {
			case other > 0:
				q.Refuse("a row follows \"None of the above\"")
			case o[3] == noneOfTheAbove:
				other = n
			default:
				q.Options = append(q.Options, screen.Option{Number: n, Label: o[3], Description: o[4]})
			}
		case n == 0:
			text = append(text, t)
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
	case other == 0:
		q.Refuse("the \"None of the above\" row is missing")
	case highlighted != 1:
		q.Refuse("not exactly one row is highlighted")
	}
	q.Fingerprint = screen.Fingerprint(lines[max(header, 0) : last+1])
	q.Answerable = q.Reason == ""
	return q
}
