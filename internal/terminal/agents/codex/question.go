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
// its answer carries a note typed after Tab ("user_note: <text>" in the
// tool's result), which is how a typed answer is given.
const noneOfTheAbove = "None of the above"

var (
	// questionFooterRE matches the footer of a question being chosen
	// ("enter to submit all" on the last of several, which also shows
	// "←/→ to navigate questions") and of one whose note is being typed
	// (group 1).
	questionFooterRE = lazyRE(`^\s*(?:tab to add notes \| enter to submit (?:answer|all)(?: \| ←/→ to navigate questions)? \| esc to interrupt|(tab or esc to clear notes) \| enter to submit (?:answer|all)(?: \| ←/→ to navigate questions)?)\s*$`)
	questionHeaderRE = lazyRE(`^\s*Question (\d+)/(\d+) \((\d+) unanswered\)\s*$`)
	questionRowRE    = lazyRE(`^\s*([›»]\s*)?(\d+)\.\s+(.+?)(?:\s{2,}(\S.*?))?\s*$`)
	// questionNoteRE is the note line under the rows while it is typed:
	// "› Add notes" (the placeholder) or "› <text>".
	questionNoteRE = lazyRE(`^\s*›\s+(\S.*?)\s*$`)
)

// parseQuestion finds the request_user_input dialog of Codex 0.171.0; nil
// when none is visible. Its grammar: a footer (questionFooterRE) is the
// last line; above it "Question k/n (u unanswered)", the question's lines,
// then rows "1. <label>  <description>" numbered from 1 without gaps,
// "None of the above" last, exactly one highlighted with "›"; while a note
// is typed, one line "› <note>" follows the rows. A dialog of several
// questions shows one at a time; a digit answers the one shown and moves
// on to the next (the last submits them all).
func parseQuestion(lines []string) *screen.Question {
	last := len(lines) - 1
	for last >= 0 && strings.TrimSpace(lines[last]) == "" {
		last--
	}
	if last < 0 {
		return nil
	}
	foot := questionFooterRE().FindStringSubmatch(lines[last])
	if foot == nil {
		return nil
	}
	noting := foot[1] != ""
	q := &screen.Question{Profile: QuestionProfile}
	header := -1
	for i := last - 1; i >= max(0, last-40); i-- {
		if m := questionHeaderRE().FindStringSubmatch(lines[i]); m != nil {
			header = i
			q.Position, _ = strconv.Atoi(m[1])
			q.Count, _ = strconv.Atoi(m[2])
			q.Unanswered, _ = strconv.Atoi(m[3])
			if q.Position < 1 || q.Position > q.Count || q.Unanswered > q.Count {
				q.Refuse("the \"Question k/n (u unanswered)\" line does not add up")
			}
			break
		}
	}
	if header < 0 {
		q.Refuse("no \"Question k/n\" line above the rows")
		header = last - 1
	}
	var text []string
	n, highlighted, other, notes := 0, 0, 0, 0
	for _, l := range lines[header+1 : last] {
		t := strings.TrimSpace(l)
		o := questionRowRE().FindStringSubmatch(l)
		switch {
		case t == "":
		case o != nil && notes == 0:
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
		case noting && notes == 0 && questionNoteRE().MatchString(l):
			notes++
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
	case noting && notes != 1:
		q.Refuse("no note line above the notes footer")
	case noting:
		// A note is being typed: its keys belong to whoever types it.
		q.Typing = q.Selected == other
		q.Refuse("a note is being typed in the dialog")
	}
	if q.Reason == "" || noting {
		q.FreeText = other
		q.FreeTextKeys = freeTextKeys(q.Selected, other)
	}
	// The fingerprint leaves the highlight out: moving it with the arrow
	// keys is the same question, which a respond may still answer.
	q.Fingerprint = screen.FingerprintUnmarked(lines[max(header, 0):last+1], rowMarkRE())
	q.Answerable = q.Reason == ""
	return q
}

// freeTextKeys move the highlight from row from to row to (a digit would
// answer at once) and open its note with Tab.
func freeTextKeys(from, to int) []string {
	var keys []string
	for ; from < to; from++ {
		keys = append(keys, "Down")
	}
	for ; from > to; from-- {
		keys = append(keys, "Up")
	}
	return append(keys, "Tab")
}
